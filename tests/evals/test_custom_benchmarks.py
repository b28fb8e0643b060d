"""Any benchmark: files, `datasets` directories and `file.py@task` through a field map, each
scorer, `--sample-id` and `--limit A:B`, the errors, and the documented example, end to end
on the oracle model doubles and the process sandbox."""

from __future__ import annotations

import csv
import json
import re
import shlex
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from verimap.base.model import ModelError
from verimap.base.purpose import JudgeCall
from verimap.cli import main
from verimap.evals.any_benchmark import open_benchmark
from verimap.evals.custom import FieldMap
from verimap.evals.data import DataError
from verimap.evals.runner import ERRORS, RESULTS, RunDirError, run_eval
from verimap.evals.sampling import SelectionError, select_tasks
from verimap.testing import ScriptedModel, oracle_models

from .conftest import REPO

FACTORY = ["--models-factory", "verimap.testing:oracle_factory", "--sandbox", "process", "--quiet"]
# The documented example (docs/eval.md#your-own-benchmark), run as written.
EXAMPLE = (
    "verimap eval -b eval/examples/capitals.jsonl --id id --input question --target answer "
    "--scorer exact"
)
CAPITALS = REPO / "eval" / "examples" / "capitals.jsonl"

ROWS = [
    {"qid": "q-fr", "question": "Capital of France?", "gold": "Paris", "extra": 1},
    {"qid": "q-jp", "question": "Capital of Japan?", "gold": "Tokyo", "extra": 2},
    {"qid": "q-ke", "question": "Capital of Kenya?", "gold": "Nairobi", "extra": 3},
    {"qid": "q-ca", "question": "Capital of Canada?", "gold": "Ottawa", "extra": 4},
]
SUMS = [
    {"problem": f"What is {a} plus {b}?", "result": str(a + b)}
    for a, b in ((2, 3), (10, 32), (7, 8), (100, 1), (6, 6), (40, 2))
]


def invoke(*args: str):
    return CliRunner().invoke(main, ["eval", *args], catch_exceptions=False)


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def write_csv(path: Path, rows: list[dict]) -> Path:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


async def evaluate(bench, sandbox, out, method="react", models=None, **kw):
    models = models or oracle_models(bench.tasks())
    return await run_eval(bench, method, models, sandbox, out, progress=False, **kw)


# ---- files and a field map, end to end -----------------------------------------------------------


async def test_jsonl_with_a_field_map_runs_end_to_end(tmp_path, process_sandbox):
    path = jsonl(tmp_path / "geo.jsonl", ROWS)
    bench = open_benchmark(str(path), fm=FieldMap(input="question", target="gold", id="qid"))
    assert (bench.name, bench.domain) == ("geo", "qa")
    tasks = bench.tasks()
    assert [t.id for t in tasks] == ["q-fr", "q-jp", "q-ke", "q-ca"]
    assert tasks[0].prompt.startswith("Capital of France?\n\nGive only the final answer")
    models = oracle_models(tasks, wrong_every=2)  # every second answer is wrong
    out = await evaluate(bench, process_sandbox, tmp_path / "run", method="verimap", models=models)
    recs = {r["task_id"]: r for r in lines(tmp_path / "run" / RESULTS)}
    assert {k: r["correct"] for k, r in recs.items()} == {
        "q-fr": True,
        "q-jp": False,
        "q-ke": True,
        "q-ca": False,
    }
    assert recs["q-fr"]["benchmark"] == "geo" and recs["q-fr"]["gold"] == "Paris"
    assert out.tally.done == 4
    cfg = json.loads((tmp_path / "run" / "config.json").read_text())
    assert cfg["benchmark"] == "geo"
    assert cfg["benchmark_source"] == {
        "kind": "jsonl",
        "path": str(path.resolve()),
        "scorer": "exact",
        "domain": "qa",
        "fields": {"input": "question", "target": "gold", "id": "qid"},
    }


async def test_csv_with_a_numeric_scorer_runs_end_to_end(tmp_path, process_sandbox):
    path = write_csv(tmp_path / "sums.csv", SUMS)
    fm = FieldMap(input="problem", target="result", scorer="numeric")
    bench = open_benchmark(str(path), fm=fm)
    assert bench.domain == "math" and [t.id for t in bench.tasks()] == list("012345")
    assert bench.tasks()[1].prompt.endswith("The final answer is a single number.")
    await evaluate(bench, process_sandbox, tmp_path / "run", method="verimap")
    recs = lines(tmp_path / "run" / RESULTS)
    assert len(recs) == 6 and all(r["correct"] for r in recs)
    assert sorted(r["predicted"] for r in recs) == sorted(r["result"] for r in SUMS)


def test_fields_are_found_by_their_usual_names_and_the_scorer_reads_numbers(tmp_path):
    path = jsonl(tmp_path / "t.jsonl", [{"question": "Two and two?", "answer": 4}])
    (task,) = open_benchmark(str(path), fm=FieldMap(scorer="numeric")).tasks()
    assert (task.id, task.gold) == ("0", "4")
    listed = jsonl(
        tmp_path / "l.jsonl", [{"input": "Colour of the sky?", "target": ["blue", "azure"]}]
    )
    (task,) = open_benchmark(str(listed)).tasks()
    assert task.meta["targets"] == ["blue", "azure"]


async def test_exact_and_numeric_scorers(tmp_path):
    path = jsonl(tmp_path / "t.jsonl", [{"input": "Sky?", "target": ["Blue", "azure"]}])
    bench = open_benchmark(str(path))
    (task,) = bench.tasks()
    for answer, ok in (("blue.", True), ("The azure", True), ("It is blue", False), ("", False)):
        assert (await bench.score(task, answer, None)).correct is ok, answer
    nums = open_benchmark(
        str(jsonl(tmp_path / "n.jsonl", [{"input": "x", "target": "1,200"}])),
        fm=FieldMap(scorer="numeric"),
    )
    (task,) = nums.tasks()
    assert (await nums.score(task, "so the answer is $1,200.", None)).correct
    assert not (await nums.score(task, "1201", None)).correct


CODE_ROWS = [
    {
        "name": "add",
        "prompt": "Write a function add(a, b) that returns the sum of a and b.",
        "tests": ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"],
        "solution": "def add(a, b):\n    return a + b\n",
    },
    {
        "name": "double",
        "prompt": 'def double(x):\n    """Twice x."""\n',
        "tests": "def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(0) == 0\n",
        "solution": "    return 2 * x\n",
    },
]


def test_the_entry_point_is_the_function_the_tests_call(tmp_path):
    rows = [
        {
            "input": "Area of a circle of radius r.",
            "test_list": ["assert abs(area(2) - 12.56) < 0.1"],
        },
        {
            "input": "def f(x):\n    pass\n",
            "test_list": "def check(candidate):\n    assert candidate(1)\n",
        },
    ]
    bench = open_benchmark(str(jsonl(tmp_path / "c.jsonl", rows)), fm=FieldMap(scorer="code-tests"))
    assert [t.meta["entry_point"] for t in bench.tasks()] == ["area", "f"]
    assert bench.tasks()[0].meta["test"].startswith("def check(candidate):\n    assert abs(")
    bare = jsonl(
        tmp_path / "b.jsonl", [{"input": "Do it.", "test": "def check(candidate):\n    pass"}]
    )
    with pytest.raises(DataError, match="which function do the tests call"):
        open_benchmark(str(bare), fm=FieldMap(scorer="code-tests"))


async def test_code_tests_run_in_the_sandbox(tmp_path, process_sandbox):
    path = jsonl(tmp_path / "code.jsonl", CODE_ROWS)
    fm = FieldMap(id="name", test="tests", target="solution")
    bench = open_benchmark(str(path), fm=fm)
    assert bench.domain == "programming" and bench.identity()["scorer"] == "code-tests"
    add, double = bench.tasks()
    assert (add.gold, double.gold) == ("add", "double")  # the asserted call, the stub's def
    assert add.meta["prompt"] == "" and double.meta["prompt"].startswith("def double(x):")
    assert "complete Python code of the function `add`" in add.prompt
    await evaluate(bench, process_sandbox, tmp_path / "right", method="verimap")
    assert all(r["correct"] for r in lines(tmp_path / "right" / RESULTS))
    wrong = oracle_models(bench.tasks(), wrong_every=1)
    await evaluate(bench, process_sandbox, tmp_path / "wrong", models=wrong)
    recs = lines(tmp_path / "wrong" / RESULTS)
    assert len(recs) == 2 and not any(r["correct"] for r in recs)


def score_judge(verdicts: list[str]):
    """A judge double: a VF's criteria pass; the scoring criterion passes when the answer is
    quoted in it (the reference), and records what it was asked."""

    def answer(req):
        p = req.purpose
        if not isinstance(p, JudgeCall):
            raise AssertionError(f"not a judge request: {p}")
        if not p.final_call:
            return "Let me compare the answer with the reference."
        if p.node_id != "score":
            return {"passed": True, "explanation": "fine"}
        (criterion,) = p.criteria.values()
        verdicts.append(criterion)
        ok = repr(p.outputs["answer"]) in criterion
        return {"passed": ok, "explanation": "same city" if ok else "another city"}

    return ScriptedModel(answer, name="judge-double")


async def test_the_judge_scorer_asks_the_runs_judge(tmp_path, process_sandbox):
    path = jsonl(tmp_path / "geo.jsonl", ROWS)
    bench = open_benchmark(str(path), fm=FieldMap(target="gold", scorer="judge"))
    models = oracle_models(bench.tasks(), wrong_every=2)
    asked: list[str] = []
    models["judge"] = score_judge(asked)
    await evaluate(bench, process_sandbox, tmp_path / "run", models=models)
    recs = sorted(lines(tmp_path / "run" / RESULTS), key=lambda r: r["task_id"])
    assert [r["correct"] for r in recs] == [True, False, True, False]
    assert recs[0]["score_detail"] == "judge: same city"
    assert len(asked) == 4 and "'Paris'" in asked[0]


async def test_a_judge_that_fails_errors_the_task_instead_of_scoring_it(tmp_path, process_sandbox):
    bench = open_benchmark(
        str(jsonl(tmp_path / "g.jsonl", ROWS[:1])), fm=FieldMap(target="gold", scorer="judge")
    )
    models = oracle_models(bench.tasks())
    models["judge"] = ScriptedModel(lambda req: ModelError("judge endpoint down"))
    out = await evaluate(bench, process_sandbox, tmp_path / "run", models=models)
    assert out.tally.errors == 1 and not (tmp_path / "run" / RESULTS).exists()
    assert "the judge could not score" in lines(tmp_path / "run" / ERRORS)[0]["error"]


# ---- a Hugging Face datasets directory ---------------------------------------------------------


def saved(path: Path, rows: list[dict], splits: tuple[str, ...] = ()) -> Path:
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_list(rows)
    if splits:
        datasets.DatasetDict({s: ds for s in splits}).save_to_disk(str(path))
    else:
        ds.save_to_disk(str(path))
    return path


async def test_a_datasets_directory_runs_end_to_end(tmp_path, process_sandbox):
    path = saved(tmp_path / "geo_ds", ROWS)
    bench = open_benchmark(str(path), fm=FieldMap(target="gold", id="qid"))
    assert bench.name == "geo_ds" and bench.identity()["kind"] == "datasets"
    await evaluate(bench, process_sandbox, tmp_path / "run")
    assert sorted(r["task_id"] for r in lines(tmp_path / "run" / RESULTS)) == sorted(
        r["qid"] for r in ROWS
    )


def test_a_saved_dataset_dict_gives_its_test_split_or_the_one_named(tmp_path):
    both = saved(tmp_path / "both", ROWS, ("train", "test"))
    assert len(open_benchmark(str(both), fm=FieldMap(target="gold")).tasks()) == 4
    other = saved(tmp_path / "other", ROWS[:2], ("train", "validation"))
    with pytest.raises(DataError, match="splits train, validation and none is 'test'"):
        open_benchmark(str(other))
    assert len(open_benchmark(str(other / "train"), fm=FieldMap(target="gold")).tasks()) == 2


def test_without_the_datasets_package_the_error_says_what_to_install(tmp_path, monkeypatch):
    path = saved(tmp_path / "ds", ROWS)
    monkeypatch.setitem(sys.modules, "datasets", None)  # import datasets -> ImportError
    with pytest.raises(DataError, match="needs the `datasets` package: pip install datasets"):
        open_benchmark(str(path))


# ---- file.py@task ----------------------------------------------------------------------------------

PY_TASKS = """
from verimap.evals.custom import TaskSet
from verimap.evals.scoring import Score
from verimap.evals.tasksets import EvalTask


def numbers():
    return TaskSet(tasks=[{"id": "a", "input": "One plus one?", "target": 2},
                          {"id": "b", "input": "Two times three?", "target": 6}], scorer="numeric")


def pair():
    def starts_right(task, answer):
        return answer.strip().lower().startswith(task.gold.lower())
    return [EvalTask("x", "ignored", "Say hello.", "hello")], starts_right


class Mine:
    name = "mine"
    domain = "qa"

    def tasks(self):
        return [EvalTask("m1", "mine", "Name a colour.", "red")]

    def tools(self, sandbox):
        from verimap.tools.registry import ToolRegistry
        return ToolRegistry()

    async def score(self, task, answer, sandbox):
        return Score(correct="red" in str(answer), predicted=str(answer), gold=task.gold)


def benchmark():
    return Mine()


def broken():
    return {"not": "a benchmark"}


def raises():
    raise RuntimeError("no tasks today")
"""


def test_file_py_at_task_runs_through_the_cli(tmp_path):
    py = tmp_path / "mytasks.py"
    py.write_text(PY_TASKS)
    for fn, name, n in (("numbers", "numbers", 2), ("pair", "pair", 1), ("benchmark", "mine", 1)):
        out = tmp_path / fn
        r = invoke("-b", f"{py}@{fn}", "-m", "react", "-o", str(out), *FACTORY)
        assert r.exit_code == 0, r.output
        recs = lines(out / RESULTS)
        assert len(recs) == n and all(rec["correct"] for rec in recs), recs
        cfg = json.loads((out / "config.json").read_text())
        assert cfg["benchmark"] == name
        assert cfg["benchmark_source"]["function"] == fn
    assert "numbers" in invoke("report", str(tmp_path / "numbers")).output


def test_file_py_at_task_errors(tmp_path):
    py = tmp_path / "mytasks.py"
    py.write_text(PY_TASKS)
    with pytest.raises(DataError, match=r"defines no function 'nope'; its functions: numbers"):
        open_benchmark(f"{py}@nope")
    with pytest.raises(DataError, match="returned a dict; return a Benchmark"):
        open_benchmark(f"{py}@broken")
    with pytest.raises(DataError, match=r"RuntimeError: no tasks today at .*mytasks.py:\d+"):
        open_benchmark(f"{py}@raises")
    with pytest.raises(DataError, match="no such file"):
        open_benchmark(f"{tmp_path / 'missing.py'}@numbers")
    with pytest.raises(DataError, match="drop --scorer"):
        open_benchmark(f"{py}@numbers", fm=FieldMap(scorer="exact"))
    bad = tmp_path / "bad.py"
    bad.write_text("x = 1 / 0\n")
    with pytest.raises(DataError, match=r"importing it raised ZeroDivisionError.*bad.py:1"):
        open_benchmark(f"{bad}@x")
    with pytest.raises(DataError, match="a config file may not"):
        open_benchmark(f"{py}@numbers", run_code=False)


def test_a_config_file_cannot_name_python_to_run(tmp_path):
    py = tmp_path / "mytasks.py"
    py.write_text(
        "import pathlib\npathlib.Path(__file__).with_name('ran').touch()\n"
        "def numbers():\n    return [], 'exact'\n"
    )
    for text in (f"benchmark: {py}@numbers\n", f"benchmark:\n  path: {py}@numbers\n"):
        cfg = tmp_path / "c.yaml"
        cfg.write_text(text)
        r = invoke("--config", str(cfg), *FACTORY)
        assert r.exit_code == 2 and "is not allowed in a config file" in r.output
    assert not (tmp_path / "ran").exists()


# ---- choosing tasks: --sample-id, --limit A:B ------------------------------------------------------


def test_sample_id_runs_just_those_ids(tmp_path):
    out = tmp_path / "run"
    r = invoke(
        "-b",
        str(CAPITALS),
        "--id",
        "id",
        "--sample-id",
        "kenya,japan",
        "--sample-id",
        "australia",
        "-m",
        "react",
        "-o",
        str(out),
        *FACTORY,
    )
    assert r.exit_code == 0, r.output
    assert [x["task_id"] for x in lines(out / RESULTS)] == ["japan", "kenya", "australia"]
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["selection"] == {"ids": ["australia", "japan", "kenya"]} and cfg["sample_of"] == 5
    again = invoke(
        "-b",
        str(CAPITALS),
        "--id",
        "id",
        "--sample-id",
        "france",
        "-m",
        "react",
        "-o",
        str(out),
        "--resume",
        *FACTORY,
    )
    assert again.exit_code == 1 and "holds a run of selection" in again.output


def test_sample_id_takes_a_built_in_benchmarks_bare_index(tmp_path, samples):
    out = tmp_path / "run"
    r = invoke(
        "-b",
        "gsm8k",
        "--data-dir",
        str(samples),
        "--sample-id",
        "3,gsm8k/5",
        "-m",
        "react",
        "-o",
        str(out),
        *FACTORY,
    )
    assert r.exit_code == 0, r.output
    assert [x["task_id"] for x in lines(out / RESULTS)] == ["gsm8k/3", "gsm8k/5"]


def test_limit_takes_a_range_and_resume_checks_it(tmp_path):
    out = tmp_path / "run"
    args = ["-b", str(CAPITALS), "-m", "react", "-o", str(out), *FACTORY]
    r = invoke(*args, "--limit", "3:5")
    assert r.exit_code == 0, r.output
    assert [x["task_id"] for x in lines(out / RESULTS)] == ["3", "4"]
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["limit"] == "3:5" and cfg["selection"] == {"range": "3:5"}
    assert invoke(*args, "--limit", "3:5", "--resume").exit_code == 0
    again = invoke(*args, "--limit", "1:3", "--resume")
    assert again.exit_code == 1 and "holds a run of selection {'range': '3:5'}" in again.output


def test_ranges_follow_python_slices(tmp_path):
    tasks = open_benchmark(str(CAPITALS)).tasks()
    ids = lambda limit: [t.id for t in select_tasks(tasks, limit=limit)]  # noqa: E731
    assert ids("3:5") == ["3", "4"] and ids(":2") == ["0", "1"] and ids("-2:") == ["3", "4"]
    assert ids("3:99") == ["3", "4"] and ids(2) == ["0", "1"]


async def test_a_resume_with_another_field_map_is_refused(tmp_path, process_sandbox):
    path = jsonl(tmp_path / "geo.jsonl", ROWS)
    bench = open_benchmark(str(path), fm=FieldMap(target="gold"))
    await evaluate(bench, process_sandbox, tmp_path / "run")
    other = open_benchmark(str(path), fm=FieldMap(target="gold", scorer="judge"))
    with pytest.raises(RunDirError, match="benchmark_source"):
        await evaluate(other, process_sandbox, tmp_path / "run", resume=True)


# ---- errors --------------------------------------------------------------------------------------


def test_clear_errors(tmp_path):
    geo = jsonl(tmp_path / "geo.jsonl", ROWS)
    cases = [
        (str(tmp_path / "nope.jsonl"), FieldMap(), "nope.jsonl: no such file or directory"),
        ("nope", FieldMap(), "unknown benchmark 'nope'; choose one of gsm8k, humaneval"),
        (
            str(geo),
            FieldMap(input="q", target="gold"),
            "no field 'q' (for --input); its fields are: 'qid', 'question', 'gold', 'extra'",
        ),
        (str(geo), FieldMap(), "which field is the target (looked for target, answer, output"),
        (str(jsonl(tmp_path / "empty.jsonl", [])), FieldMap(), "the benchmark is empty"),
        (
            str(jsonl(tmp_path / "dup.jsonl", [{"input": "a", "target": "b", "k": 1}] * 2)),
            FieldMap(id="k"),
            "rows 0 and 1 have the same id '1'",
        ),
        (
            str(jsonl(tmp_path / "num.jsonl", [{"input": "a", "target": "many"}])),
            FieldMap(scorer="numeric"),
            "row 0: target 'many' is not a number",
        ),
        (
            str(jsonl(tmp_path / "hole.jsonl", [{"input": "a", "target": "b"}, {"input": "c"}])),
            FieldMap(),
            "row 1 has no value for field 'target'",
        ),
        (
            str(geo),
            FieldMap(target="gold", scorer="exact", test="extra"),
            "are for --scorer code-tests",
        ),
        ("gsm8k", FieldMap(input="q"), "gsm8k has its own fields and scorer: --input"),
        (str(tmp_path), FieldMap(), "not one written by `datasets`' save_to_disk"),
        (str(jsonl(tmp_path / "t.txt", ROWS)), FieldMap(), "cannot read a .txt file"),
    ]
    for spec, fm, message in cases:
        with pytest.raises(DataError) as err:
            open_benchmark(spec, fm=fm)
        assert message in str(err.value), (spec, str(err.value))
    header_only = tmp_path / "header.csv"
    header_only.write_text("input,target\n")
    with pytest.raises(DataError, match="the benchmark is empty"):
        open_benchmark(str(header_only))


def test_selection_errors_name_what_exists():
    tasks = open_benchmark(str(CAPITALS), fm=FieldMap(id="id")).tasks()
    with pytest.raises(SelectionError) as err:
        select_tasks(tasks, ids=["paris", "japn"])
    assert "no task with id 'paris', 'japn' (5 tasks; ids look like 'france', 'japan'" in str(
        err.value
    )
    assert "close: 'japan'" in str(err.value)
    with pytest.raises(SelectionError, match=r"--limit 7:9 selects no task: the benchmark has 5"):
        select_tasks(tasks, limit="7:9")
    with pytest.raises(SelectionError, match="give a number of tasks N or a range A:B"):
        select_tasks(tasks, limit="1:2:3")
    with pytest.raises(SelectionError, match="exclude each other"):
        select_tasks(tasks, limit=2, ids=["japan"])


def test_cli_errors_exit_before_any_model_starts(tmp_path):
    base = ["-m", "react", "-o", str(tmp_path / "o"), *FACTORY]
    bad_range = invoke("-b", str(CAPITALS), "--limit", "3:x", *base)
    assert bad_range.exit_code == 2 and "'3:x' is neither a positive number" in bad_range.output
    missing = invoke("-b", "eval/examples/nope.jsonl", *base)
    assert missing.exit_code == 1 and "nope.jsonl: no such file or directory" in missing.output
    unknown = invoke("-b", str(CAPITALS), "--input", "q", *base)
    assert unknown.exit_code == 1 and "its fields are: 'id', 'question', 'answer'" in unknown.output
    ids = invoke("-b", str(CAPITALS), "--sample-id", "paris", *base)
    assert ids.exit_code == 1 and "ids look like '0', '1', '2', '3', '4'" in ids.output
    both = invoke("-b", str(CAPITALS), "--sample-id", "1", "--limit", "2", *base)
    assert both.exit_code == 2 and "exclude each other" in both.output
    assert not (tmp_path / "o").exists()


def test_a_config_benchmark_mapping_is_the_field_map(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        f"benchmark:\n  path: {CAPITALS}\n  id: id\n  input: question\n"
        f"  target: answer\n  scorer: exact\nlimit: 2\nmethod: react\n"
        f"out: {tmp_path / 'o'}\n"
    )
    r = invoke("--config", str(cfg), "--sample-id", "kenya", *FACTORY)
    assert r.exit_code == 0, r.output
    assert "note: --sample-id overrides the config's limit" in r.output
    assert [x["task_id"] for x in lines(tmp_path / "o" / RESULTS)] == ["kenya"]
    cfg.write_text(f"benchmark:\n  path: {CAPITALS}\n  inptu: question\n")
    r = invoke("--config", str(cfg), *FACTORY)
    assert r.exit_code == 2 and "unknown setting 'benchmark.inptu'" in r.output


# ---- the documented example ------------------------------------------------------------------------


def test_the_documented_example_runs(tmp_path, monkeypatch):
    docs = (REPO / "docs" / "eval.md").read_text()
    assert EXAMPLE in docs
    assert len(CAPITALS.read_text().splitlines()) == 5
    monkeypatch.chdir(REPO)  # the example's path is relative to the checkout
    out = tmp_path / "run"
    r = invoke(*shlex.split(EXAMPLE)[2:], "-o", str(out), *FACTORY)
    assert r.exit_code == 0, r.output
    recs = lines(out / RESULTS)
    assert sorted(x["task_id"] for x in recs) == ["australia", "canada", "france", "japan", "kenya"]
    assert all(x["correct"] for x in recs) and "| verimap | 100.0 ± 0.0 (n=5, runs=1) |" in r.output
    r = invoke("--config", "eval/examples/capitals.yaml", "-o", str(tmp_path / "cfg"), *FACTORY)
    assert r.exit_code == 0 and len(lines(tmp_path / "cfg" / RESULTS)) == 5


def test_the_python_examples_load():
    arithmetic = open_benchmark(f"{REPO}/eval/examples/tasks.py@arithmetic")
    assert arithmetic.domain == "math" and len(arithmetic.tasks()) == 5
    palindromes = open_benchmark(f"{REPO}/eval/examples/tasks.py@palindromes")
    assert [t.gold for t in palindromes.tasks()] == ["Yes", "No", "Yes", "No", "Yes"]


def test_an_id_with_a_control_character_is_refused_by_file_and_row(tmp_path):
    from verimap.evals.custom import load_file

    rows = [
        {"id": "a", "question": "q", "answer": "1"},
        {"id": "b\x1b]52;c;eA==\x07", "question": "q", "answer": "2"},
    ]
    path = jsonl(tmp_path / "b.jsonl", rows)
    with pytest.raises(DataError, match=f"{re.escape(str(path))}: row 1: the id .* unprintable"):
        load_file(path, FieldMap(id="id"))
