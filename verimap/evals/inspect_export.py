"""Eval run directories as Inspect AI eval logs, so `inspect view` browses verimap evals.

One log per run directory (one benchmark x method); verimap's runs of a task are Inspect's
epochs, and the method is the solver (and a task arg, which the viewer's log list shows).
Samples come from `inspect_samples`. The log is built from inspect_ai's own types and written by
its writer, so the file is whatever the installed Inspect reads. Logs get shared, so everything
in them passes `redaction.redact` first. Only this module and
`inspect_samples` import inspect_ai (the `inspect` extra); nothing else in verimap imports them.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import os
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, cast

from inspect_ai.log import (
    EvalConfig,
    EvalDataset,
    EvalLog,
    EvalMetric,
    EvalPlan,
    EvalPlanStep,
    EvalResults,
    EvalSample,
    EvalSampleReductions,
    EvalSampleScore,
    EvalScore,
    EvalSpec,
    EvalStats,
    HeadlineMetric,
    write_eval_log,
)
from inspect_ai.model import GenerateConfig, ModelConfig, ModelUsage
from inspect_ai.scorer import MetricProtocol, SampleScore, Score, accuracy, mean_score, stderr

from verimap.base.errors import VerimapError
from verimap.base.out_files import INSPECT_LOG, replace_with
from verimap.base.redaction import redact, secret_values
from verimap.evals.inspect_samples import (
    SCORER,
    add_usage,
    errored_sample,
    iso,
    scored_sample,
    usage_by_model,
)
from verimap.evals.report import accuracy_by_run
from verimap.evals.run_dir import RunDirError, read_config
from verimap.evals.run_dir import run_dirs as find_run_dirs
from verimap.evals.runner import CONFIG, RESULTS, unscored_errors
from verimap.observe.trace_files import read_results


class ExportError(VerimapError, ValueError):
    """A path given to the export is not an eval run directory, or cannot be read as one."""


@dataclass
class Exported:
    """One log written, with the counts the command reports."""

    path: Path
    benchmark: str
    method: str
    scored: int
    errored: int
    accuracy: float | None
    # Lines of results.jsonl and errors.jsonl skipped as unreadable (`file:line: reason`).
    problems: list[str] = field(default_factory=list)


def run_dirs(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """`run_dir.run_dirs`, a path that is no run directory an `ExportError`."""
    try:
        return find_run_dirs(paths)
    except RunDirError as e:
        raise ExportError(str(e)) from None


def _natural(text: str) -> list[Any]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def _metric(fn: Any, scores: list[SampleScore]) -> float:
    value = cast(MetricProtocol, fn())(scores)
    if not isinstance(value, int | float):
        raise TypeError(f"{fn.__name__} gave {value!r}, not a number")
    return float(value)


def _results(
    samples: list[EvalSample], records: list[dict[str, Any]]
) -> tuple[EvalResults | None, list[EvalSampleReductions] | None]:
    """Accuracy and its standard error as Inspect computes them: each task's runs are reduced
    to their mean first, then Inspect's own metrics run over the tasks. Errored samples count
    in the total only, as in a log Inspect writes itself."""
    by_task: dict[str | int, list[Score]] = defaultdict(list)
    for s in samples:
        if s.scores and s.error is None:
            by_task[s.id].append(s.scores[SCORER])
    if not by_task:
        return None, None
    reduce = mean_score()
    reduced = {sid: reduce(scores) for sid, scores in by_task.items()}
    sample_scores = [SampleScore(score=sc, sample_id=sid) for sid, sc in reduced.items()]
    metrics = {
        name: EvalMetric(name=name, value=_metric(fn, sample_scores))
        for name, fn in (("accuracy", accuracy), ("stderr", stderr))
    }
    scored = sum(len(v) for v in by_task.values())
    score = EvalScore(
        name=SCORER, scorer=SCORER, scored_samples=len(reduced), unscored_samples=0, metrics=metrics
    )
    results = EvalResults(
        total_samples=len(samples),
        completed_samples=scored,
        scores=[score],
        headline=HeadlineMetric(scorer=SCORER, score=SCORER, metric="accuracy"),
        metadata={
            # verimap's own summary (paper Table 1): accuracy (%) of each run over its tasks.
            "accuracy_by_run": accuracy_by_run(records),
            "verified": sum(bool(r.get("verified")) for r in records),
            "errored_not_scored": len(samples) - scored,
        },
    )
    reductions = [
        EvalSampleReductions(
            scorer=SCORER,
            samples=[
                EvalSampleScore(value=sc.value, answer=sc.answer, sample_id=sid)
                for sid, sc in reduced.items()
            ],
        )
    ]
    return results, reductions


def _time_span(
    records: list[dict[str, Any]], errors: list[dict[str, Any]], fallback: float
) -> tuple[float, float]:
    """When the first task started and the last one ended (a resumed run spans its sessions)."""
    ends = [
        float(r["finished_at"]) for r in records if isinstance(r.get("finished_at"), int | float)
    ]
    starts = [
        float(r["finished_at"]) - float(r.get("wall_time_s", 0.0))
        for r in records
        if isinstance(r.get("finished_at"), int | float)
    ]
    ends += [float(e["at"]) for e in errors if isinstance(e.get("at"), int | float)]
    started = min(starts or ends or [fallback])
    return started, max(ends or [started])


def _package_versions() -> dict[str, str]:
    out: dict[str, str] = {}
    for name in ("verimap", "inspect_ai"):
        with contextlib.suppress(PackageNotFoundError):
            out[name] = version(name)
    return out


def _spec(
    d: Path,
    config: dict[str, Any],
    *,
    benchmark: str,
    method: str,
    model: str,
    task_ids: list[str],
    started: float,
) -> EvalSpec:
    models: dict[str, str] = {str(k): str(v) for k, v in (config.get("models") or {}).items()}
    roles: dict[str, ModelConfig | list[ModelConfig]] = {
        role: ModelConfig(model=name) for role, name in models.items()
    }
    sampling: dict[str, Any] = (config.get("run_config") or {}).get("sampling") or {}
    data = config.get("data")
    # Stable across exports of one directory, so a second export replaces the first.
    ident = hashlib.sha256(str(d.resolve()).encode()).hexdigest()[:22]
    return EvalSpec(
        eval_id=ident,
        run_id=ident,
        created=iso(started),
        task=benchmark,
        task_id=ident,
        task_display_name=f"{benchmark}-{method}",
        task_args={"method": method},
        task_args_passed={"method": method},
        solver=method,
        tags=["verimap", benchmark, method],
        dataset=EvalDataset(
            name=benchmark,
            location=data.get("dir") if isinstance(data, dict) else None,
            samples=len(task_ids),
            sample_ids=task_ids,
            shuffled=False,
        ),
        model=model,
        model_roles=roles or None,
        model_generate_config=GenerateConfig(
            temperature=sampling.get("temperature"), top_p=sampling.get("top_p")
        ),
        config=EvalConfig(
            epochs=int(config.get("runs") or 1), limit=config.get("limit"), fail_on_error=False
        ),
        packages=_package_versions(),
        metadata={"verimap_run_dir": str(d), "verimap_config": config},
    )


def _read_config(d: Path) -> dict[str, Any]:
    if not (d / CONFIG).is_file():
        return {}
    config, why = read_config(d / CONFIG)
    if why is not None:
        raise ExportError(why)
    return config or {}


def _records(d: Path, problems: list[str]) -> list[dict[str, Any]]:
    """The finished records, first of a key winning; a line that is none goes to `problems`."""
    got = read_results(d / RESULTS)
    problems += [str(p) for p in got.problems]
    first: dict[str, dict[str, Any]] = {}
    for r in got.records:
        first.setdefault(r["key"], r)
    return list(first.values())


def to_eval_log(run_dir: str | os.PathLike[str], problems: list[str] | None = None) -> EvalLog:
    """The Inspect log of one eval run directory (see the module docstring). Lines that are no
    record are left out, and noted in `problems` when given."""
    d = Path(run_dir)
    seen = problems if problems is not None else []
    secrets = secret_values()
    config = redact(_read_config(d), secrets)
    records = redact(_records(d, seen), secrets)
    errors = redact(list(unscored_errors(d, seen).values()), secrets)
    first = records[0] if records else {}
    benchmark = str(config.get("benchmark") or first.get("benchmark") or d.name)
    method = str(config.get("method") or first.get("method") or "unknown")
    models: dict[str, str] = {str(k): str(v) for k, v in (config.get("models") or {}).items()}
    model = models.get("executor") or next(iter(models.values()), "unknown")
    gold = {str(r["task_id"]): str(r.get("gold") or "") for r in records}

    samples = [scored_sample(r, d, models, model) for r in records]
    samples += [errored_sample(e, d, gold) for e in errors]
    # The transcripts come from the traces: masked here as well, whoever wrote them.
    samples = [EvalSample.model_validate(redact(s.model_dump(), secrets)) for s in samples]
    samples.sort(key=lambda s: (s.epoch, _natural(str(s.id))))
    results, reductions = _results(samples, records)
    role_usage: dict[str, ModelUsage] = {}
    for s in samples:
        add_usage(role_usage, s.role_usage)
    fallback = (d / CONFIG).stat().st_mtime if (d / CONFIG).is_file() else 0.0
    started, completed = _time_span(records, errors, fallback)

    task_ids = sorted({str(s.id) for s in samples}, key=_natural)
    spec = _spec(
        d,
        config,
        benchmark=benchmark,
        method=method,
        model=model,
        task_ids=task_ids,
        started=started,
    )
    log = EvalLog(
        status="success",
        eval=spec,
        plan=EvalPlan(
            name=method,
            steps=[EvalPlanStep(solver=method, params=config.get("run_config") or {})],
            config=spec.model_generate_config,
        ),
        results=results,
        stats=EvalStats(
            started_at=iso(started),
            completed_at=iso(completed),
            role_usage=role_usage,
            model_usage=usage_by_model(role_usage, models),
        ),
        samples=samples,
    )
    # Set after construction, as Inspect does: its validator mishandles both given at once.
    log.reductions = reductions
    return log


def log_name(log: EvalLog) -> str:
    """Inspect's own file naming (`{created}_{task}_{method}_{id}.eval`), so the viewer lists
    the log by task without opening it."""
    created = dt.datetime.fromisoformat(log.eval.created).astimezone(dt.UTC)
    names = [re.sub(r"[^A-Za-z0-9.-]", "-", p) for p in (log.eval.task, log.eval.solver or "")]
    stamp = created.strftime("%Y-%m-%dT%H-%M-%S-00-00")
    return "_".join([stamp, *names, log.eval.task_id]) + ".eval"


def export_dirs(
    paths: Sequence[str | os.PathLike[str]], out_dir: str | os.PathLike[str]
) -> list[Exported]:
    """Write one Inspect log per run directory among `paths` into `out_dir`; a log of that name
    already there is replaced only if it is an Inspect log (`verimap.base.out_files.INSPECT_LOG`)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Exported] = []
    for d in run_dirs(paths):
        problems: list[str] = []
        log = to_eval_log(d, problems)
        target = out / log_name(log)
        replace_with(target, INSPECT_LOG, named=False, write=partial(write_eval_log, log))
        samples = log.samples or []
        acc = log.results.scores[0].metrics["accuracy"].value if log.results else None
        written.append(
            Exported(
                path=target,
                benchmark=log.eval.task,
                method=log.eval.solver or "",
                scored=sum(1 for s in samples if s.error is None),
                errored=sum(1 for s in samples if s.error is not None),
                accuracy=acc,
                problems=problems,
            )
        )
    return written
