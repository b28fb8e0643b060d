import io
import json

from click.testing import CliRunner

from verimap.cli import main
from verimap.evals.report import REPORT_MARK
from verimap.evals.run_dir import CONFIG
from verimap.evals.runner import RESULTS

from .conftest import API_KEY, SAMPLES

FACTORY = [
    "--models-factory",
    "verimap.testing:oracle_factory",
    "--sandbox",
    "process",
    "--quiet",
]


def invoke(*args):
    return CliRunner().invoke(main, ["eval", *args], catch_exceptions=False)


def test_needs_a_benchmark():
    r = invoke()
    assert r.exit_code == 2 and "choose a benchmark" in r.output


def test_run_prints_the_report_and_report_reprints_it(tmp_path):
    out = tmp_path / "run"
    r = invoke(
        "-b",
        "gsm8k",
        "-m",
        "react",
        "-n",
        "3",
        "-o",
        str(out),
        "--data-dir",
        str(SAMPLES),
        *FACTORY,
    )
    assert r.exit_code == 0, r.output
    assert "| react | 100.0 ± 0.0 (n=3, runs=1) |" in r.output
    assert len((out / RESULTS).read_text().splitlines()) == 3
    again = invoke("report", str(out), "--out-file", str(tmp_path / "report.md"))
    assert again.exit_code == 0 and "| react | 100.0 ± 0.0 (n=3, runs=1) |" in again.output
    written = (tmp_path / "report.md").read_text()
    assert written.strip() == f"{REPORT_MARK}\n{again.output.strip()}"


def test_a_cross_check_on_a_method_without_plan_vfs_is_named(tmp_path):
    args = ["-b", "gsm8k", "-n", "1", "--data-dir", str(SAMPLES), "--cross-check", *FACTORY]
    r = invoke(*args, "-m", "react", "-o", str(tmp_path / "react"))
    assert r.exit_code == 0, r.output
    assert "note: --cross-check does nothing with method react" in r.stderr
    r = invoke(*args, "-m", "verimap", "-o", str(tmp_path / "verimap"))
    assert r.exit_code == 0 and "does nothing" not in r.stderr


def test_the_ballot_reaches_the_run_config_and_an_idle_one_is_named(tmp_path):
    args = ["-b", "gsm8k", "-n", "1", "--data-dir", str(SAMPLES), "--ballot", "sampled", *FACTORY]
    r = invoke(*args, "-m", "verimap", "--cross-check", "-o", str(tmp_path / "on"))
    assert r.exit_code == 0 and "does nothing" not in r.stderr, r.output
    assert (
        json.loads((tmp_path / "on" / CONFIG).read_text())["run_config"]["verify"]["ballot"]
        == "sampled"
    )
    r = invoke(*args, "-m", "verimap", "--no-cross-check", "-o", str(tmp_path / "off"))
    assert r.exit_code == 0 and "note: --ballot does nothing here" in r.stderr
    assert invoke("-b", "gsm8k", "--ballot", "lenient").exit_code == 2


def test_runs_on_committed_data_without_data_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = invoke("-b", "humaneval", "-m", "verimap", "-n", "2", *FACTORY)
    assert r.exit_code == 0, r.output
    assert "| verimap | 100.0 ± 0.0 (n=2, runs=1) |" in r.output
    assert (tmp_path / "runs" / "humaneval-verimap" / RESULTS).is_file()


def test_config_file_and_flag_override(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        f"benchmark: gsm8k\nmethod: map\nlimit: 4\nepochs: 2\nout: {tmp_path / 'o'}\ndata_dir: {SAMPLES}\n"
        "sandbox: process\nquiet: true\nrun_config:\n  verify:\n    vf_timeout_s: 7\n"
    )
    r = invoke("--config", str(cfg), "--limit", "2", *FACTORY[:2])
    assert r.exit_code == 0, r.output
    config = json.loads((tmp_path / "o" / "config.json").read_text())
    assert config["method"] == "map" and config["limit"] == 2 and config["runs"] == 2
    assert (
        config["run_config"]["verify"]["vf_timeout_s"] == 7
        and config["run_config"]["execution"]["context_generations"] == 2
    )
    assert len((tmp_path / "o" / RESULTS).read_text().splitlines()) == 4


def test_sample_and_seed_flags(tmp_path):
    out = tmp_path / "o"
    base = ["-b", "gsm8k", "-m", "react", "-o", str(out), "--data-dir", str(SAMPLES), *FACTORY]
    r = invoke(*base, "--sample", "3", "--seed", "5")
    assert r.exit_code == 0, r.output
    config = json.loads((out / "config.json").read_text())
    assert (config["sample"], config["seed"], config["limit"]) == (3, 5, None)
    assert len((out / RESULTS).read_text().splitlines()) == 3
    r = invoke(*base, "--sample", "3", "--seed", "6", "--resume")
    assert r.exit_code == 1 and "holds a run of seed 5, not 6" in r.output
    r = invoke(*base, "--sample", "3", "--limit", "2")
    assert r.exit_code == 2 and "exclude each other" in r.output
    r = invoke(*base, "--seed", "5")
    assert r.exit_code == 2 and "--seed chooses a --sample" in r.output
    r = invoke(*base, "--sample", "some")
    assert r.exit_code == 2 and "neither a positive number of tasks nor 'paper'" in r.output


def test_a_limit_flag_overrides_the_configs_paper_sample(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        f"benchmark: gsm8k\nmethod: react\nsample: paper\nseed: 0\nout: {tmp_path / 'o'}\n"
        f"data_dir: {SAMPLES}\nsandbox: process\nquiet: true\n"
    )
    r = invoke("--config", str(cfg), "--limit", "2", *FACTORY[:2])
    assert r.exit_code == 0, r.output
    assert "note: --limit overrides the config's sample" in r.output
    config = json.loads((tmp_path / "o" / "config.json").read_text())
    assert config["limit"] == 2 and "sample" not in config
    r = invoke("--config", str(cfg), "--out", str(tmp_path / "p"), *FACTORY[:2])
    assert r.exit_code == 0, r.output
    config = json.loads((tmp_path / "p" / "config.json").read_text())
    assert (config["sample"], config["seed"], config["sample_rule"]) == (10, 0, "paper")


def test_unknown_config_key_is_rejected(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('benchmark = "gsm8k"\nmax_concurency = 3\n')
    r = CliRunner().invoke(main, ["eval", "--config", str(cfg)])
    assert r.exit_code == 2 and "max_concurency" in r.output


def test_missing_data_names_the_file(tmp_path):
    r = invoke("-b", "gsm8k", "--data-dir", str(tmp_path), *FACTORY)
    assert r.exit_code == 1
    assert str(tmp_path / "gsm8k" / "test.jsonl") in r.output


def test_shipped_configs_parse():
    from pathlib import Path

    from verimap.cli.eval import eval_
    from verimap.cli.eval_config import load_config_file
    from verimap.methods.presets import METHODS

    shipped = (Path(__file__).resolve().parents[2] / "eval").glob("*/*.yaml")
    files = sorted(f for f in shipped if f.parent.name != "examples")  # custom-benchmark examples
    assert len(files) == 18
    for f in files:
        c = load_config_file(f, known=[p.name for p in eval_.params if p.name])
        assert c["benchmark"] == f.parent.name and c["method"] == f.stem and c["method"] in METHODS
        assert (c["sample"], c["seed"], c["epochs"]) == ("paper", 0, 3)  # the paper's protocol


def test_retrieval_command_on_the_fixture(tmp_path, minilm):
    r = invoke("retrieval", "--data-dir", str(SAMPLES), "--cache-dir", str(tmp_path), "--json")
    assert r.exit_code == 0, r.output
    m = json.loads(r.output.strip().splitlines()[-1])
    assert m["fixture"] and m["queries"] == 5 and m["hits_at_10"] == 1.0
    assert m["excluded"] == {"null_query": 1} and m["by_type"]["comparison_query"]["queries"] == 2
    assert m["index_built"] and m["index_disk_bytes"] > 0 and m["peak_rss_mb"] > 0
    text = invoke("retrieval", "--data-dir", str(SAMPLES), "--cache-dir", str(tmp_path))
    assert text.exit_code == 0, text.output
    assert "5 queries with evidence (left out: 1 null_query)" in text.output
    assert "| comparison | 2 | 1.0000 | 1.0000 |" in text.output
    assert "Index loaded from the cache" in text.output


def test_config_models_need_an_endpoint_else_the_local_model_is_used(tmp_path, monkeypatch):
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        f"benchmark: gsm8k\nmethod: react\nlimit: 1\nout: {tmp_path / 'o'}\ndata_dir: {SAMPLES}\n"
        "sandbox: process\nquiet: true\nmodels:\n  planner: gpt-4.1\n  executor: gpt-4o-mini\n"
    )
    r = invoke("--config", str(cfg), *FACTORY[:2])
    assert r.exit_code == 0, r.output
    assert "ignoring the config's models (planner=gpt-4.1, executor=gpt-4o-mini)" in r.output


def test_config_values_are_type_checked(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("benchmark: gsm8k\nlimit: many\n")
    r = CliRunner().invoke(main, ["eval", "--config", str(cfg)])
    assert r.exit_code == 2 and "limit" in r.output and "many" in r.output


def test_a_local_model_name_in_a_config_is_kept(monkeypatch):
    from verimap.cli.eval import _drop_config_models_without_endpoint

    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    endpoint = {"model": "qwen2.5-coder-0.5b", "planner_model": "gpt-4.1"}
    _drop_config_models_without_endpoint(endpoint, {"model", "planner_model"})
    assert endpoint == {"model": "qwen2.5-coder-0.5b"}
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-000000")
    endpoint = {"planner_model": "gpt-4.1"}
    _drop_config_models_without_endpoint(endpoint, {"planner_model"})
    assert endpoint == {"planner_model": "gpt-4.1"}


def test_a_model_that_cannot_be_served_is_a_clear_error_not_a_traceback(tmp_path, monkeypatch):
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    missing = tmp_path / "absent.gguf"
    r = CliRunner().invoke(
        main,
        [
            "eval",
            "-b",
            "gsm8k",
            "-m",
            "react",
            "-n",
            "1",
            "--data-dir",
            str(SAMPLES),
            "--sandbox",
            "process",
            "--quiet",
            "--model-file",
            str(missing),
            "--out",
            str(tmp_path / "o"),
        ],
    )
    assert r.exit_code == 1, r.output
    assert f"Error: model file not found: {missing}" in r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)


def test_an_endpoint_outage_is_errored_not_scored_and_a_resume_scores_it(
    tmp_path, monkeypatch, dead_url, chat_endpoint
):
    from functools import partial

    from verimap.evals.tasksets import get_benchmark
    from verimap.local import endpoint as ep

    monkeypatch.setattr(
        ep,
        "OpenAIModel",
        partial(ep.OpenAIModel, max_retries=1, backoff_base=0.01, backoff_max=0.02),
    )
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    out = tmp_path / "run"
    args = [
        "-b",
        "gsm8k",
        "-m",
        "react",
        "-n",
        "3",
        "-o",
        str(out),
        "--data-dir",
        str(SAMPLES),
        "--sandbox",
        "process",
        "--quiet",
        "--model",
        "m",
    ]
    r = invoke(*args, "--base-url", dead_url)
    assert r.exit_code == 1, r.output
    assert "0/3 tasks finished (0 from before), 3 errored, not scored" in r.stderr
    assert "task r0/gsm8k/0 errored, not scored: model error: the model endpoint" in r.stderr
    assert "## Errored, not scored" in r.stdout and "3 task(s) errored" in r.stdout
    assert not (out / RESULTS).exists() and API_KEY not in r.output
    report = invoke("report", str(out))
    assert report.exit_code == 0 and "3 task(s) errored, not scored" in report.output

    endpoint = chat_endpoint(get_benchmark("gsm8k", SAMPLES).tasks()[:3])
    endpoint.down = lambda task_id: False
    again = invoke(*args, "--base-url", endpoint.url, "--resume")
    assert again.exit_code == 0, again.output
    assert "3/3 tasks finished (0 from before), 0 errored, not scored" in again.stderr
    assert "| react | 100.0 ± 0.0 (n=3, runs=1) |" in again.stdout
    assert "Errored" not in again.stdout
    assert len((out / RESULTS).read_text().splitlines()) == 3


def test_progress_on_a_terminal_draws_the_tasks_in_flight_under_the_bar(tmp_path, monkeypatch):
    from rich.console import Console

    from verimap.observe import live_view

    screen = Console(file=io.StringIO(), force_terminal=True, color_system="standard", width=120)
    monkeypatch.setattr(live_view, "stderr_console", lambda: screen)
    monkeypatch.setattr(live_view.BoardView, "repaint_s", 0.0)  # a frame per event
    out = tmp_path / "run"
    progress = [a for a in FACTORY if a != "--quiet"]
    r = invoke(
        "-b",
        "gsm8k",
        "-m",
        "verimap",
        "-n",
        "3",
        "-c",
        "2",
        "-o",
        str(out),
        "--data-dir",
        str(SAMPLES),
        *progress,
    )
    assert r.exit_code == 0, r.output
    assert "| verimap | 100.0 ± 0.0 (n=3, runs=1) |" in r.stdout
    assert len((out / RESULTS).read_text().splitlines()) == 3
    drawn = screen.file.getvalue()
    assert "gsm8k/verimap" in drawn and "3/3" in drawn  # the bar, as before
    keys = [json.loads(line)["key"] for line in (out / RESULTS).read_text().splitlines()]
    assert all(k in drawn for k in keys) and "solve" in drawn
    assert "running" in drawn and "#1 nonempty PASS" in drawn
    last_frame = drawn.rsplit("gsm8k/verimap", 1)[1]
    assert not any(k in last_frame for k in keys)  # finished tasks leave the board
    assert "[1/3]" not in r.stderr  # no line log beside the display


def test_progress_off_a_terminal_is_one_plain_line_per_task(tmp_path):
    progress = [a for a in FACTORY if a != "--quiet"]
    r = invoke(
        "-b",
        "gsm8k",
        "-m",
        "verimap",
        "-n",
        "2",
        "-o",
        str(tmp_path / "run"),
        "--data-dir",
        str(SAMPLES),
        *progress,
    )
    assert r.exit_code == 0, r.output
    assert "[1/2] r0/" in r.stderr and "[2/2] r0/" in r.stderr and "correct (success)" in r.stderr
    assert "\x1b" not in r.output


def test_the_endpoints_policy_fills_only_what_the_user_left_unset(monkeypatch, capsys):
    from verimap.cli.eval import _apply_policies

    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    cfg: dict = {}
    assert _apply_policies("verimap", {}, cfg, None, None) == ["small-model"]
    assert (
        cfg["loop"]["max_iterations"],
        cfg["planning"]["plan_repairs"],
        cfg["sampling"]["temperature"],
    ) == (2, 0, 0.0)
    assert cfg["planning"]["max_nodes"] == 1 and cfg["policies"] == ["small-model"]
    assert "answer_agreement" in cfg["verify"]["checks"]
    said = capsys.readouterr().err
    assert "the small-model policy applies" in said and "--policy none" in said
    mine = {
        "loop": {"max_iterations": 5},
        "sampling": {"temperature": 1.0},
        "planning": {"max_nodes": None},
    }
    _apply_policies("map-v", {}, mine, None, None)
    assert mine == {
        "loop": {"max_iterations": 5},
        "sampling": {"temperature": 1.0},
        "planning": {"plan_repairs": 0, "max_nodes": None},
        "verify": {"checks": ["arithmetic", "answer_agreement", "code_agreement"]},
        "execution": {"fresh_code_retries": True},
        "policies": ["small-model"],
    }
    no_cross = {"sampling": {"temperature": 1.0}}
    _apply_policies("verimap", {}, no_cross, None, False)
    assert no_cross["verify"]["checks"] == ["arithmetic"]
    assert "retry_temperature" not in no_cross["sampling"]
    off: dict = {}
    assert _apply_policies("verimap", {}, off, "none", None) == [] and off == {"policies": []}
    paper: dict = {}
    assert _apply_policies("verimap", {}, paper, "paper", None) == ["paper"]
    assert paper["loop"]["sequential"] is True and paper["verify"]["checks"] == []
    remote: dict = {}
    assert (
        _apply_policies("verimap", {"base_url": "http://127.0.0.1:9/v1"}, remote, None, None) == []
    )
    assert remote == {"policies": []}


EVIL = """
from pathlib import Path


def boom(*args):
    Path(__file__).with_name("RAN").write_text("the config file ran code")
    raise SystemExit(0)
"""


def test_a_config_file_cannot_name_code_to_run(tmp_path, monkeypatch):
    """`models_factory` imports and calls any function (`runpy:run_path` runs any file): a
    config file holding it, at the top or under `models`, is an error naming the key, and
    nothing is imported or run. The flag on the command line still works."""
    (tmp_path / "evil_factory.py").write_text(EVIL)
    monkeypatch.syspath_prepend(str(tmp_path))
    base = f"benchmark: gsm8k\nmethod: react\nlimit: 1\ndata_dir: {SAMPLES}\nsandbox: process\n"
    cases = {
        "'models_factory'": "models_factory: evil_factory:boom\n",
        "'models.models_factory'": "models:\n  models_factory: evil_factory:boom\n",
        "'models-factory'": "models-factory: runpy:run_path\n",
    }
    for i, (named, where) in enumerate(cases.items()):
        cfg = tmp_path / f"c{i}.yaml"
        cfg.write_text(base + f"out: {tmp_path / 'o'}\nquiet: true\n" + where)
        r = CliRunner().invoke(main, ["eval", "--config", str(cfg)])
        said = " ".join(r.output.split())
        assert r.exit_code == 2, r.output
        assert f"{named} is not allowed in a config file" in said and "--models-factory" in said
        assert not (tmp_path / "RAN").exists() and not (tmp_path / "o").exists()
    cfg = tmp_path / "ok.yaml"
    cfg.write_text(base + f"out: {tmp_path / 'o'}\nquiet: true\n")
    r = invoke("--config", str(cfg), *FACTORY[:2])
    assert r.exit_code == 0, r.output


def test_every_unknown_config_key_is_named_with_a_close_match(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "benchmark: gsm8k\nmax_task: 3\nsandbox: process\nflavour: x\n"
        "models:\n  planer: gpt-4.1\n"
        "run_config:\n  vf_timout_s: 7\n  budget:\n    max_cots: 1.0\n"
        "  loop:\n    max_retry: 2\n"
    )
    r = CliRunner().invoke(main, ["eval", "--config", str(cfg), "-o", str(tmp_path / "o")])
    assert r.exit_code == 2, r.output
    said = " ".join(r.output.split())
    assert "'max_task' (did you mean 'max_tasks'?)" in said
    assert "'flavour'" in said and "'models.planer'" in said
    assert "'run_config.vf_timout_s' (did you mean 'verify.vf_timeout_s'?)" in said
    assert "'run_config.budget.max_cots' (did you mean 'max_cost'?)" in said
    assert "'run_config.loop.max_retry' (did you mean 'max_retries'?)" in said
    assert "'sandbox'" not in said.split("unknown settings", 1)[1]
    assert not (tmp_path / "o").exists()


def test_a_config_knob_outside_its_part_is_refused_with_where_it_belongs(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "benchmark: gsm8k\nsandbox: process\n"
        "run_config:\n  max_retries: 2\n  loop:\n    temperature: 0.5\n"
    )
    r = CliRunner().invoke(main, ["eval", "--config", str(cfg), "-o", str(tmp_path / "o")])
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    said = " ".join(r.output.split())
    assert "'run_config.max_retries' (it is now run_config.loop.max_retries)" in said
    assert "'run_config.loop.temperature' (it is run_config.sampling.temperature)" in said
    assert not (tmp_path / "o").exists()


def test_a_config_part_that_is_no_mapping_is_refused(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("benchmark: gsm8k\nsandbox: process\nrun_config:\n  loop: 3\n")
    r = CliRunner().invoke(main, ["eval", "--config", str(cfg), "-o", str(tmp_path / "o")])
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    assert "'loop' must be a mapping of its settings, not 3" in " ".join(r.output.split())


def test_config_sections_must_be_mappings(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("benchmark: gsm8k\nmodels: [gpt-4.1]\n")
    r = CliRunner().invoke(main, ["eval", "--config", str(cfg)])
    assert r.exit_code == 2 and "models must be a mapping, not list" in r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)


def test_rag_needs_a_question_over_a_corpus(tmp_path):
    r = invoke("-b", "gsm8k", "-m", "rag", "--data-dir", str(SAMPLES), "--out", str(tmp_path / "o"))
    assert r.exit_code == 2
    assert "rag answers questions over a corpus; gsm8k is a math benchmark" in r.output
    assert not (tmp_path / "o").exists()
    run = CliRunner().invoke(main, ["run", "-m", "rag", "What is 2 + 2?"])
    assert run.exit_code != 0 and "rag answers questions over a corpus" in run.output
