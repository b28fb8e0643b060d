"""Secrets stay in the process at every boundary where text leaves it.

The attack: an endpoint (a proxy) that echoes the `Authorization` header, and the bare key, in
its 401 body, and a base URL holding a password. The endpoint is a small HTTP server on the
loopback interface that answers every request at once, so each run ends on its first call.
Then every place the run's text goes is searched for the secrets: console output, the trace,
OpenTelemetry spans, errors.jsonl, config.json, the Inspect export, the HTML report and the
preference export.
"""

import base64
import io
import json
import logging
import threading
import warnings
import zipfile
from collections.abc import Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner

from verimap.cli import main
from verimap.cli import run as run_mod
from verimap.llm.openai_model import OpenAIModel

SAMPLES = Path(__file__).resolve().parents[1] / "datasets"
# Shaped like no known key: only the secret set can catch them. One per scenario, so a secret
# one test made known cannot hide a leak in another.
ENV_KEY = "vmkey-env-7Qf3Zp91Lx"
GIVEN_KEY = "vmkey-given-Hs82Kd0Wq4"
USER, PASSWORD = "alice", "pw-Rb47Nc2Xe9"
BASIC = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


class EchoingProxy(BaseHTTPRequestHandler):
    """A 401 that quotes the credentials it was sent, as some proxies do."""

    def _refuse(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        auth = self.headers.get("Authorization", "")
        token = auth.split()[-1] if auth.split() else ""
        message = f"invalid credentials (Authorization: {auth}); key {token} rejected"
        body = json.dumps({"error": {"message": message, "type": "invalid_request_error"}})
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    do_POST = do_GET = _refuse

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def proxy() -> Iterator[str]:
    """The host:port of an echoing proxy on the loopback interface."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), EchoingProxy)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@dataclass
class Scenario:
    """How the secret reaches the endpoint, and what must never be seen again."""

    name: str
    secrets: list[str]
    env: dict[str, str] = field(default_factory=dict)
    userinfo: str = ""
    given_key: str | None = None

    def url(self, hostport: str) -> str:
        return f"http://{self.userinfo}{hostport}/v1"


SCENARIOS = [
    Scenario("key in OPENAI_API_KEY", [ENV_KEY], env={"OPENAI_API_KEY": ENV_KEY}),
    # httpx sends a URL's userinfo as basic credentials, which the proxy echoes as well.
    Scenario("password in --base-url", [PASSWORD, BASIC], userinfo=f"{USER}:{PASSWORD}@"),
    Scenario("key given in code", [GIVEN_KEY], given_key=GIVEN_KEY),
]


@pytest.fixture(params=SCENARIOS, ids=lambda s: s.name)
def scenario(request, monkeypatch, proxy) -> tuple[Scenario, str]:
    s: Scenario = request.param
    for k in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ):
        monkeypatch.delenv(k, raising=False)
    for k, v in s.env.items():
        monkeypatch.setenv(k, v)
    url = s.url(proxy)
    if s.given_key is not None:
        models = _given_models(url, s.given_key)
        monkeypatch.setattr(run_mod, "_connect", models)
        monkeypatch.setattr("verimap.local.endpoint.connect", models)
    return s, url


def _given_models(url: str, key: str):
    @asynccontextmanager
    async def connect(**endpoint):
        model = OpenAIModel("gpt-4o-mini", base_url=url, api_key=key, max_retries=0)
        try:
            yield {"planner": model, "executor": model, "judge": model}
        finally:
            await model.aclose()

    return connect


@pytest.fixture
def spans(monkeypatch):
    """What `--otel` exports, kept in memory."""
    otel = pytest.importorskip("verimap.observe.otel")
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    monkeypatch.setattr(otel, "otlp_exporter", lambda: exporter)
    return exporter


def span_text(exporter) -> str:
    parts: list[str] = []
    for s in exporter.get_finished_spans():
        parts += [s.name, s.status.description or "", json.dumps(dict(s.attributes), default=str)]
        for e in s.events:
            parts += [e.name, json.dumps(dict(e.attributes or {}), default=str)]
    return "\n".join(parts)


def files_text(root: Path) -> str:
    return "\n".join(
        p.read_text(encoding="utf-8", errors="replace")
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.suffix in (".jsonl", ".json", ".html")
    )


def leaks(where: dict[str, str], secrets: list[str]) -> dict[str, list[str]]:
    found = {name: [s for s in secrets if s in text] for name, text in where.items()}
    return {name: hit for name, hit in found.items() if hit}


def cli(*args: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_verimap_run_leaks_no_secret(scenario, spans, tmp_path):
    s, url = scenario
    traces = tmp_path / "traces"
    common = ("--base-url", url, "--sandbox", "process", "--trace-dir", str(traces))
    shown = cli("run", "Double 21", *common, "--otel")
    as_json = cli("run", "Double 21", *common, "--json", "-q")
    assert shown.exit_code == as_json.exit_code == run_mod.EXIT_INFRA, shown.output
    (trace, *_) = sorted(traces.glob("*.jsonl"))
    page = tmp_path / "page.html"
    if _can_view():
        assert cli("view", str(trace), "--out-file", str(page)).exit_code == 0
    where = {
        "stdout": shown.stdout,
        "stderr": shown.stderr,
        "--json": as_json.stdout,
        "traces": files_text(traces),
        "spans": span_text(spans),
        "html": page.read_text(encoding="utf-8") if page.exists() else "",
    }
    assert leaks(where, s.secrets) == {}
    # The proxy was reached and its reply reported, the host named without path or userinfo.
    host = url.rsplit("@", 1)[-1].removeprefix("http://").removesuffix("/v1")
    error = json.loads(as_json.stdout)["error"]
    assert f"{host} answered HTTP 401: invalid credentials" in error and "[REDACTED]" in error


def test_verimap_eval_and_its_exports_leak_no_secret(scenario, spans, tmp_path):
    s, url = scenario
    out = tmp_path / "eval"
    r = cli(
        "eval",
        "-b",
        "gsm8k",
        "-n",
        "1",
        "--data-dir",
        str(SAMPLES),
        "-o",
        str(out),
        "--base-url",
        url,
        "--sandbox",
        "process",
        "--quiet",
        "--otel",
    )
    assert r.exit_code == 1, r.output
    where = {
        "stdout": r.stdout,
        "stderr": r.stderr,
        "eval directory": files_text(out),
        "spans": span_text(spans),
    }
    if _has("inspect_ai"):
        logs = tmp_path / "logs"
        exported = cli("eval", "export", "--format", "inspect", str(out), "-o", str(logs))
        assert exported.exit_code == 0, exported.output
        where["inspect"] = _eval_logs_text(logs)
    if _can_view():
        page = tmp_path / "page.html"
        assert cli("view", str(out), "--out-file", str(page)).exit_code == 0
        where["html"] = page.read_text(encoding="utf-8")
    assert leaks(where, s.secrets) == {}
    errors = (out / "errors.jsonl").read_text()
    assert "answered HTTP 401: invalid credentials" in errors and "[REDACTED]" in errors
    # Every boundary but the tally on stdout and the report (no task scored) tells why.
    silent = [k for k in where if "answered HTTP 401" not in where[k]]
    assert silent in (["stdout", "html"], ["stdout"])


def _written_by_someone_else(root: Path, secret: str) -> Path:
    """An eval directory with `secret` in the clear, as an older verimap or another tool left it."""
    out = root / "theirs"
    (out / "traces" / "run0").mkdir(parents=True)
    config = {
        "benchmark": "gsm8k",
        "method": "react",
        "runs": 1,
        "run_config": {},
        "note": f"via {secret}",
    }
    (out / "config.json").write_text(json.dumps(config))
    trace = [
        {"type": "run_start", "run_id": "r", "ts": 1.0, "data": {"task": f"use {secret}"}},
        {"type": "error", "run_id": "r", "ts": 2.0, "data": {"error": f"401: {secret}"}},
        {
            "type": "finish",
            "run_id": "r",
            "ts": 3.0,
            "data": {"status": "failed", "error": f"HTTP 401: key {secret}"},
        },
    ]
    (out / "traces" / "run0" / "1.jsonl").write_text("".join(json.dumps(e) + "\n" for e in trace))
    record = {
        "key": "r0/1",
        "run": 0,
        "task_id": "1",
        "benchmark": "gsm8k",
        "method": "react",
        "status": "failed",
        "correct": False,
        "verified": False,
        "predicted": secret,
        "gold": "42",
        "trace": "traces/run0/1.jsonl",
        "error": f"key {secret}",
    }
    (out / "results.jsonl").write_text(json.dumps(record) + "\n")
    return out


def test_the_report_and_the_inspect_export_mask_files_written_before(monkeypatch, tmp_path):
    """The exports are boundaries of their own: a secret in the clear in old files stays home."""
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://{USER}:{PASSWORD}@127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    where: dict[str, str] = {}
    for n, secret in enumerate((ENV_KEY, PASSWORD)):
        theirs = _written_by_someone_else(tmp_path / f"case{n}", secret)
        if _can_view():
            page = tmp_path / f"case{n}" / "page.html"
            r = cli("view", str(theirs), "--out-file", str(page))
            assert r.exit_code == 0, r.output
            where[f"html {n}"] = page.read_text(encoding="utf-8")
            assert "[REDACTED]" in where[f"html {n}"]
        if _has("inspect_ai"):
            logs = tmp_path / f"case{n}" / "logs"
            r = cli("eval", "export", "--format", "inspect", str(theirs), "-o", str(logs))
            assert r.exit_code == 0, r.output
            where[f"inspect {n}"] = _eval_logs_text(logs)
            assert "[REDACTED]" in where[f"inspect {n}"]
    if not where:
        pytest.skip("neither the view extra nor inspect_ai is installed")
    assert leaks(where, [ENV_KEY, PASSWORD]) == {}


def test_preference_pairs_mask_secrets(monkeypatch, tmp_path):
    from verimap.evals.preferences import write_pairs

    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    row = {
        "prompt": [{"role": "user", "content": f"task with {ENV_KEY}"}],
        "chosen": [{"role": "assistant", "content": "{}"}],
        "rejected": [{"role": "assistant", "content": f"http://{USER}:{PASSWORD}@h/v1"}],
    }
    write_pairs([row], tmp_path / "pairs.jsonl")
    text = (tmp_path / "pairs.jsonl").read_text()
    assert ENV_KEY not in text and PASSWORD not in text and "task with [REDACTED]" in text


def test_mined_demonstrations_mask_secrets(monkeypatch, tmp_path):
    from verimap.evals.mined_demos import write_demos
    from verimap.planning.demos import Demo, DemoPool

    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    demo = Demo(index=1, task=f"task with {ENV_KEY}", nodes={"final": {"instruction": PASSWORD}})
    write_demos(DemoPool(domain="qa", pool="mined", demos=[demo]), tmp_path / "demos.json")
    text = (tmp_path / "demos.json").read_text()
    assert ENV_KEY not in text and "task with [REDACTED]" in text


def test_log_notes_are_masked(monkeypatch):
    from verimap.cli import _StderrNotes

    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    stream = io.StringIO()
    handler = _StderrNotes(stream)
    handler.setFormatter(logging.Formatter("verimap: %(message)s"))
    logger = logging.getLogger("verimap.test_secret_boundaries")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        logger.info("endpoint said: %s \x1b]0;title\x07", ENV_KEY)
    finally:
        logger.removeHandler(handler)
    assert stream.getvalue() == "verimap: endpoint said: [REDACTED] \n"


def test_command_errors_are_masked(monkeypatch):
    """click prints a command's error itself: the message may quote an endpoint's reply."""
    import click

    from verimap import cli as cli_package

    @click.command()
    def boom() -> None:
        raise click.ClickException(f"the endpoint said {ENV_KEY} \x1b]0;title\x07")

    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    monkeypatch.setattr(cli_package.LazyGroup, "get_command", lambda self, ctx, name: boom)
    r = CliRunner().invoke(main, ["boom"])
    assert r.exit_code == 1 and "Error: the endpoint said [REDACTED] \n" in r.output


def _eval_logs_text(logs: Path) -> str:
    """Every member of every Inspect log (.eval files are zip archives of JSON)."""
    parts = []
    for log in sorted(logs.glob("*.eval")):
        with zipfile.ZipFile(log) as z:
            parts += [z.read(n).decode("utf-8", "replace") for n in z.namelist()]
    assert parts, f"no Inspect log in {logs}"
    return "\n".join(parts)


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _can_view() -> bool:
    import shutil

    return _has("jinja2") and _has("matplotlib") and shutil.which("dot") is not None
