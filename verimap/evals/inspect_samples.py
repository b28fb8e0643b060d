"""One task's run as an Inspect AI sample (for `inspect_export`).

A finished task is a sample scored C or I by the benchmark's own scorer, with verimap's
accounting (verified, status, iterations, tokens, time) as its metadata. A task that errored
and was never scored is a sample with an error and no score, so Inspect leaves it out of its
metrics as verimap's tables do, instead of counting it a wrong answer. The run's trace becomes
the sample's transcript, one info event per trace event: Inspect's model and tool events need
the model messages, which traces do not record.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from inspect_ai.event import Event, InfoEvent
from inspect_ai.log import EvalError, EvalSample
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageUser,
    ModelOutput,
    ModelUsage,
)
from inspect_ai.scorer import CORRECT, INCORRECT, Score

from verimap.base import events as ev
from verimap.observe.trace_files import read_typed_events, trace_path

# The name of the one score per sample, as Inspect's viewer labels its column.
SCORER = "correct"
NO_TRACE = "(task text unavailable: the run's trace is missing)"


def iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).isoformat()


def role_usage(roles: dict[str, Any]) -> dict[str, ModelUsage]:
    """verimap's usage per role (results.jsonl) in Inspect's terms."""
    out: dict[str, ModelUsage] = {}
    for role, u in roles.items():
        if not isinstance(u, dict):
            continue
        prompt, completion = int(u.get("prompt_tokens", 0)), int(u.get("completion_tokens", 0))
        out[role] = ModelUsage(
            input_tokens=prompt,
            output_tokens=completion,
            total_tokens=prompt + completion,
            input_tokens_cache_read=int(u.get("cached_tokens", 0)) or None,
            total_cost=float(u.get("cost", 0.0)) or None,
        )
    return out


def add_usage(into: dict[str, ModelUsage], more: dict[str, ModelUsage]) -> None:
    for key, u in more.items():
        into[key] = into[key] + u if key in into else u


def usage_by_model(roles: dict[str, ModelUsage], models: dict[str, str]) -> dict[str, ModelUsage]:
    """Inspect keeps usage per model as well as per role; roles sharing a model add up."""
    out: dict[str, ModelUsage] = {}
    for role, u in roles.items():
        add_usage(out, {models.get(role, role): u})
    return out


def _title(e: ev.AnyEvent) -> str:
    """The label the viewer shows on an info event: what happened, and where in the run."""
    parts = [e.type]
    for value, label in ((e.node_id, "node"), (e.iteration, "iteration"), (e.attempt, "attempt")):
        if value is not None:
            parts.append(f"{label} {value}")
    return " · ".join(parts)


def transcript(run_dir: Path, rel: Any) -> tuple[list[Event], str | None]:
    """The trace's events as info events, and the task text from its run_start. A missing or
    torn trace gives what is there: the record is still worth a sample."""
    path = trace_path(run_dir, rel)
    if path is None or not path.is_file():
        return [], None
    read, _problems = read_typed_events(path)
    times = [e.ts for e in read if e.ts is not None]
    start = min(times) if times else 0.0
    task: str | None = None
    events: list[Event] = []
    for e in read:
        if isinstance(e, ev.RunStart) and task is None:
            task = e.task
        ts = e.ts if e.ts is not None else start
        events.append(
            InfoEvent(
                source=_title(e),
                data=e.data,
                timestamp=dt.datetime.fromtimestamp(ts, dt.UTC),
                working_start=max(0.0, ts - start),
                metadata={"verimap_event": e.type, "run_id": e.run_id},
            )
        )
    return events, task


def scored_sample(
    rec: dict[str, Any], run_dir: Path, models: dict[str, str], model: str
) -> EvalSample:
    """A results.jsonl record: input is the task text, target the gold, output the answer the
    scorer read."""
    events, task = transcript(run_dir, rec.get("trace"))
    text = task or NO_TRACE
    predicted = str(rec.get("predicted") or "")
    usage = role_usage(rec.get("usage") or {})
    wall = float(rec.get("wall_time_s", 0.0))
    finished = float(rec.get("finished_at", 0.0))
    verified = bool(rec.get("verified"))
    messages: list[ChatMessage] = [
        ChatMessageUser(content=text, source="input"),
        ChatMessageAssistant(content=predicted, model=model, source="generate"),
    ]
    score = Score(
        value=CORRECT if rec.get("correct") else INCORRECT,
        answer=predicted,
        explanation=rec.get("score_detail") or None,
        metadata={"verified": verified, "status": rec.get("status")},
    )
    return EvalSample(
        id=str(rec["task_id"]),
        epoch=int(rec.get("run", 0)) + 1,
        input=text,
        target=str(rec.get("gold") or ""),
        messages=messages,
        output=ModelOutput.from_content(model, predicted),
        scores={SCORER: score},
        metadata={
            "key": rec.get("key"),
            "status": rec.get("status"),
            "verified": verified,
            "iterations": rec.get("iterations", 0),
            "retries": rec.get("retries", 0),
            "fallbacks": rec.get("fallbacks", 0),
            "dropped_vfs": rec.get("dropped_vfs", 0),
            "tokens": rec.get("tokens", 0),
            "cost": rec.get("cost", 0.0),
            "wall_time_s": wall,
            "vf_calls": rec.get("vf_calls") or {},
            "run_error": rec.get("error"),
            "trace": rec.get("trace"),
            **(rec.get("meta") or {}),
        },
        events=events,
        role_usage=usage,
        model_usage=usage_by_model(usage, models),
        started_at=iso(finished - wall) if finished else None,
        completed_at=iso(finished) if finished else None,
        total_time=wall,
        working_time=wall,
    )


def errored_sample(err: dict[str, Any], run_dir: Path, gold: dict[str, str]) -> EvalSample:
    """An errors.jsonl line of a task no run scored. Its gold comes from another run of the same
    task when one was scored: errors.jsonl does not keep it."""
    events, task = transcript(run_dir, err.get("trace"))
    text = task or NO_TRACE
    message = f"{err.get('kind', 'error')}: {err.get('error', '')}"
    tb = str(err.get("traceback") or "") or message
    at = err.get("at")
    return EvalSample(
        id=str(err["task_id"]),
        epoch=int(err.get("run", 0)) + 1,
        input=text,
        target=gold.get(str(err["task_id"]), ""),
        messages=[ChatMessageUser(content=text, source="input")],
        metadata={
            "key": err.get("key"),
            "status": "errored, not scored",
            "error_kind": err.get("kind"),
            "trace": err.get("trace"),
        },
        events=events,
        error=EvalError(message=message, traceback=tb, traceback_ansi=tb),
        completed_at=iso(float(at)) if isinstance(at, int | float) else None,
    )
