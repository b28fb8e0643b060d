"""Run events as types: one pydantic class per event type, a discriminated union on `type`.

Readers (the viewer, OpenTelemetry, the exports, the live view) read an event's fields by name
and type instead of digging keys out of a dict, and an emitter that misspells a field gets a
type error from mypy and a validation error at run time instead of a silent new key in every
trace (`extra="forbid"`, strict types).

The wire format is the one traces always had: `{"type", "run_id", "ts", "node_id",
"iteration", "attempt", "data": {...}}`, where `data` holds the event's own fields, those the
emitter gave (no defaults filled in), so traces written before and after the types read the
same.
`parse_event` reads a line strictly. Older and odd traces are read by `verimap.observe.trace_files`,
which makes a line whose payload does not validate a generic `Event`. Nested documents a
reader shows whole (a plan, a failure context, a config) stay JSON objects: a plan that
validated when it ran may not validate against today's `Plan`, and its trace must still open.
"""

from __future__ import annotations

import json
import time
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    model_serializer,
    model_validator,
)
from typing_extensions import TypedDict  # pydantic needs it on Python < 3.12

from verimap.base import accounting
from verimap.base.usage import UsageByRole

__all__ = [
    "AGREEMENT",
    "ATTEMPT",
    "ATTEMPT_RESULT",
    "BUDGET",
    "CROSS_CHECK",
    "ERROR",
    "EVENT_TYPES",
    "FINISH",
    "MODEL_CALL",
    "NODE_FINISH",
    "NODE_REUSED",
    "NODE_START",
    "PLAN",
    "PLAN_FALLBACK",
    "PLAN_INVALID",
    "PLAN_KEPT",
    "PLAN_RULE",
    "REPLAN",
    "REPLIES",
    "RETRIES_STOPPED",
    "RETRY",
    "RUN_START",
    "TOOL_CALL",
    "VF_VACUOUS",
    "VF_VERDICT",
    "VOTE",
    "Agreement",
    "AnyEvent",
    "Attempt",
    "AttemptResult",
    "BudgetExhausted",
    "CrossCheck",
    "Error",
    "Event",
    "Finish",
    "ModelCall",
    "NodeFinish",
    "NodeReused",
    "NodeStart",
    "Plan",
    "PlanFallback",
    "PlanInvalid",
    "PlanKept",
    "PlanRule",
    "Replan",
    "Replies",
    "RetriesStopped",
    "Retry",
    "RunStart",
    "ToolCall",
    "TypedEvent",
    "VfVacuous",
    "VfVerdict",
    "Vote",
    "VoteGroup",
    "parse_event",
]

ENVELOPE = ("run_id", "ts", "node_id", "iteration", "attempt")
JSON = dict[str, Any]


class _Envelope(BaseModel):
    """Where and when an event happened. `RunContext.emit` fills in the run, node and attempt."""

    type: str
    run_id: str = ""
    # None only for a line of a foreign or hand-written trace that had no time.
    ts: float | None = Field(default_factory=time.time)
    node_id: str | None = None
    iteration: int | None = None
    attempt: int | None = None

    def wire(self) -> JSON:
        """The event as a trace line holds it (its JSON, as `model_dump(mode="json")`)."""
        return self.model_dump(mode="json")


class Event(_Envelope):
    """A generic event: a type this version does not know (another tool's, a component's own),
    or a line of an older trace whose payload does not validate as its type."""

    data: JSON = Field(default_factory=dict)


class _Typed(_Envelope):
    """The base of every typed event: its fields other than the envelope's are its payload."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    TYPE: ClassVar[str]
    # Payload fields whose key in `data` is taken by the envelope (the verdict's VF `type`).
    _renamed: ClassVar[dict[str, str]] = {}
    # The payload's fields in order, each with its key in `data` (its name, or its new name).
    DATA_KEYS: ClassVar[tuple[tuple[str, str], ...]]
    _from_data: ClassVar[dict[str, str]]

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls.TYPE = cls.model_fields["type"].default
        cls.DATA_KEYS = tuple(
            (name, cls._renamed.get(name, name))
            for name in cls.model_fields
            if name not in ("type", *ENVELOPE)
        )
        cls._from_data = {key: name for name, key in cls.DATA_KEYS if key != name}

    @model_validator(mode="before")
    @classmethod
    def _flatten(cls, value: Any) -> Any:
        """A trace line's shape read as the model's: the envelope and `data`'s fields side by
        side. Keyword construction (`NodeStart(instruction=...)`) passes through."""
        if not isinstance(value, dict) or "data" not in value:
            return value
        data = value["data"]
        if not isinstance(data, dict):
            raise ValueError("`data` is not an object")
        if data.keys() & cls._from_data.values():
            raise ValueError("`data` names a field by its attribute, not by its key")
        fields = {cls._from_data.get(k, k): v for k, v in data.items()}
        if clash := fields.keys() & {"type", "data", *ENVELOPE}:
            raise ValueError(f"`data` holds {len(clash)} field(s) of the envelope")
        return {**{k: v for k, v in value.items() if k != "data"}, **fields}

    @model_serializer(mode="wrap")
    def _as_line(self, handler: SerializerFunctionWrapHandler) -> JSON:
        """A typed event serialises as its trace line: the envelope, and in `data` the payload
        fields the emitter gave (`exclude_unset` would also drop what nested models hold by
        default), so `model_dump_json()` writes a line any reader of traces reads."""
        flat, given = handler(self), self.model_fields_set
        line = {k: flat.get(k) for k in ("type", *ENVELOPE)}
        line["data"] = {key: flat.get(name) for name, key in self.DATA_KEYS if name in given}
        return line

    @property
    def data(self) -> JSON:
        """The payload as the trace line's `data` holds it, in Python's types (`wire()` is the
        JSON). Read off the fields, not serialised: the bus redacts every event's payload, and
        serialising each one nearly doubled what reporting a step costs the coordinator."""
        given = self.model_fields_set
        return {key: _plain(getattr(self, name)) for name, key in self.DATA_KEYS if name in given}

    @classmethod
    def from_data(cls, data: JSON, **envelope: Any) -> Self:
        """The event whose trace line has this `data` (checked as strictly as a line is)."""
        return cls.model_validate({**envelope, "type": cls.TYPE, "data": data})


def _plain(value: Any) -> Any:
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


# -- the run -------------------------------------------------------------------------------------


class RunStart(_Typed):
    """A run began. Every method's run starts with one (`verimap.core.run_scope`)."""

    type: Literal["run_start"] = "run_start"
    task: str
    # The `RunConfig` as JSON.
    config: JSON = Field(default_factory=dict)
    # A baseline's name and parameters (`verimap.methods`); the coordinator sends none.
    method: str | None = None
    parameters: JSON | None = None
    # The policies the run follows, each with its parameters (`verimap.policies`).
    policies: list[JSON] | None = None


class BudgetExhausted(_Typed):
    """A budget (calls, tokens, cost, time) stopped the run; its `finish` follows."""

    type: Literal["budget_exhausted"] = "budget_exhausted"
    error: str | None = None


class Error(_Typed):
    """A bug in a component ended the run (an exception no failure kind covers)."""

    type: Literal["error"] = "error"
    error: str
    traceback: str = ""


class Finish(_Typed):
    """The run ended. Only `status` is certain: a span exporter closing a run that never
    finished (`OtelSpans.close`) knows nothing else."""

    type: Literal["finish"] = "finish"
    # A `RunStatus` ("success", "failed", "partial", "budget_exhausted"), or "interrupted".
    status: str
    final_output: JSON | None = None
    error: str | None = None
    # "infrastructure" when the run failed for the endpoint or the sandbox, not the method.
    error_kind: str | None = None
    iterations: int | None = None
    retries: int | None = None
    usage: UsageByRole | None = Field(default=None, strict=False)
    wall_time_s: float | None = None


# -- plans ---------------------------------------------------------------------------------------


class Plan(_Typed):
    """The plan an iteration runs (after the vacuity check), as `Plan.model_dump(by_alias=True)`."""

    type: Literal["plan"] = "plan"
    plan: JSON


class PlanInvalid(_Typed):
    """The planner rejected a reply of its model (or its own check rejected a plan)."""

    type: Literal["plan_invalid"] = "plan_invalid"
    problems: list[str]
    # The model's reply, cut to a few KB.
    reply: str = ""


class PlanFallback(_Typed):
    """No valid plan: the iteration runs the planner's one-node fallback plan."""

    type: Literal["plan_fallback"] = "plan_fallback"
    reason: str


class PlanRule(_Typed):
    """The iteration runs a plan a rule made without a planner call (the small-model policy's
    one-node plan), named so that nobody reads it as a fallback."""

    type: Literal["plan_rule"] = "plan_rule"
    rule: str


class VfVacuous(_Typed):
    """A Python VF of node `node_id` passed on null and absurd outputs and was dropped."""

    type: Literal["vf_vacuous"] = "vf_vacuous"
    vf: str


class PlanKept(_Typed):
    """The same plan runs again: node `failed_node` gave no answer of its declared shape, which
    is no fault of the plan."""

    type: Literal["plan_kept"] = "plan_kept"
    failed_node: str
    error: str | None = None


class Replan(_Typed):
    """The planner is asked again, with the failed node's `FailureContext` (as JSON)."""

    type: Literal["replan"] = "replan"
    failed_node: str
    failure: JSON


# -- nodes and attempts --------------------------------------------------------------------------


class NodeStart(_Typed):
    """Node `node_id` started, with the values of its inputs."""

    type: Literal["node_start"] = "node_start"
    instruction: str = ""
    inputs: JSON = Field(default_factory=dict)


class NodeReused(_Typed):
    """Node `node_id` was verified in an earlier iteration with the same content: its outputs
    are taken as they were."""

    type: Literal["node_reused"] = "node_reused"
    outputs: JSON | None = None


class Attempt(_Typed):
    """Attempt `attempt` of node `node_id` started."""

    type: Literal["attempt"] = "attempt"


class Retry(_Typed):
    """Attempt `attempt` is a retry; `feedback` is the `Feedback` it is given (as JSON), None
    when it is an independent sample for agreement."""

    type: Literal["retry"] = "retry"
    feedback: JSON | None = None


class RetriesStopped(_Typed):
    """A node's retries end early: a check found that no further attempt could be confirmed
    (`reason`), so the node ends unconfirmed on the answers it has."""

    type: Literal["retries_stopped"] = "retries_stopped"
    reason: str


class ToolCall(_Typed):
    """One tool call of an attempt, reported when it ended; texts cut to 2,000 characters."""

    type: Literal["tool_call"] = "tool_call"
    tool: str
    arguments: str = ""
    result: str = ""
    duration_s: float = 0.0


class ModelCall(_Typed, accounting.ModelCall):
    """One model call of any role (planner, executor, judge): what it cost and how it ended,
    never what was said. Reported when the call ended, inside the attempt that made it, if any.
    Its fields are `accounting.ModelCall`'s: the ledger's record is the event's payload."""

    type: Literal["model_call"] = "model_call"


class VfVerdict(_Typed):
    """One verification function's verdict on an attempt: a `result.VFVerdict`, whose `type`
    is `vf_type` here, and the time the attempt's VFs took together."""

    _renamed: ClassVar[dict[str, str]] = {"vf_type": "type"}

    type: Literal["vf_verdict"] = "vf_verdict"
    name: str
    vf_type: Literal["python", "llm", "check"]
    outcome: str
    message: str = ""
    traceback: str = ""
    explanation: str = ""
    weight: float = 1.0
    strength: Literal["weak", "strong"] | None = None
    verify_s: float | None = None

    @classmethod
    def of(cls, verdict: BaseModel, verify_s: float) -> VfVerdict:
        """The event of a `result.VFVerdict`."""
        return cls.from_data({**verdict.model_dump(mode="json"), "verify_s": verify_s})


class AttemptResult(_Typed):
    """How an attempt ended: verified or not (`score`: the weighted share of VFs passed), or the
    executor's `error` when no answer of the declared shape reached the VFs."""

    type: Literal["attempt_result"] = "attempt_result"
    passed: bool
    score: float | None = None
    error: str | None = None
    outputs: JSON | None = None
    # What the executor wrote, cut to a few KB.
    reply: str = ""


class Agreement(_Typed):
    """A final answer passed its VFs but needs `needed` passing attempts to agree: the next
    attempt is an independent sample."""

    type: Literal["agreement"] = "agreement"
    answers: list[JSON]
    needed: int


class CrossCheck(_Typed):
    """One independent solution a check compares an answer with, for the trace only (the
    executor's retry is never shown it). `kind="program"` (the answer-agreement check): a
    program's number, its reply and what running it printed or why it failed. `kind="code"`
    (the code-agreement check): a reference function written (`valid`, `reason`) or compared
    with the answer (`agreed` on `compared` inputs, the first `input` they differ on). `slip`:
    a sample's first wrong written calculation; such a sample does not vote."""

    type: Literal["cross_check"] = "cross_check"
    kind: Literal["program", "sample", "code"]
    program: int | None = None
    sample: int | None = None
    answer: float | None = None
    reply: str | None = None
    tries: int | None = None
    printed: str | None = None
    error: str | None = None
    sandbox_fault: bool | None = None
    reference: int | None = None
    valid: bool | None = None
    reason: str | None = None
    agreed: bool | None = None
    compared: int | None = None
    input: str | None = None
    slip: str | None = None


class NodeFinish(_Typed):
    """Node `node_id` ended: "verified", "unconfirmed" (passed its VFs, but the answers did not
    agree or a check disputed them: `answers` holds them), "failed" or "fail-accepted"."""

    type: Literal["node_finish"] = "node_finish"
    status: str
    outputs: JSON | None = None
    answers: list[JSON] | None = None


# -- baselines -----------------------------------------------------------------------------------


class Replies(_Typed):
    """A baseline's replies, each cut to a few KB, with the answer read from each (and, for the
    program baseline, how its program ran; for replies that computed their number with a
    program of their own, `ran` says how each ran, None for the others)."""

    type: Literal["replies"] = "replies"
    replies: list[str]
    answers: list[Any]
    program: JSON | None = None
    ran: list[JSON | None] | None = None


class VoteGroup(TypedDict):
    """Samples that gave the same answer (by their indices)."""

    answer: Any
    count: int
    samples: list[int]


class Vote(_Typed):
    """Self-consistency's vote: each answer, the samples that gave it, and the winner's share of
    all samples (None: no sample answered)."""

    type: Literal["vote"] = "vote"
    by: str
    samples: int
    groups: list[VoteGroup]
    winner: Any = None
    share: float | None = None


TypedEvent = (
    RunStart
    | Plan
    | PlanInvalid
    | PlanFallback
    | PlanRule
    | VfVacuous
    | PlanKept
    | NodeStart
    | NodeReused
    | Attempt
    | ToolCall
    | ModelCall
    | Agreement
    | CrossCheck
    | VfVerdict
    | AttemptResult
    | Retry
    | RetriesStopped
    | NodeFinish
    | Replan
    | BudgetExhausted
    | Error
    | Finish
    | Replies
    | Vote
)
# What a subscriber is given and a reader reads: a typed event, or a generic one.
AnyEvent = TypedEvent | Event

_ADAPTER: TypeAdapter[TypedEvent] = TypeAdapter(Annotated[TypedEvent, Field(discriminator="type")])
# Each type's class by its name on the wire.
EVENT_TYPES: dict[str, type[_Typed]] = {cls.TYPE: cls for cls in _Typed.__subclasses__()}

RUN_START = RunStart.TYPE
PLAN = Plan.TYPE
PLAN_INVALID = PlanInvalid.TYPE
PLAN_FALLBACK = PlanFallback.TYPE
PLAN_RULE = PlanRule.TYPE
VF_VACUOUS = VfVacuous.TYPE
PLAN_KEPT = PlanKept.TYPE
NODE_START = NodeStart.TYPE
NODE_REUSED = NodeReused.TYPE
ATTEMPT = Attempt.TYPE
TOOL_CALL = ToolCall.TYPE
MODEL_CALL = ModelCall.TYPE
AGREEMENT = Agreement.TYPE
CROSS_CHECK = CrossCheck.TYPE
REPLIES = Replies.TYPE
VOTE = Vote.TYPE
VF_VERDICT = VfVerdict.TYPE
ATTEMPT_RESULT = AttemptResult.TYPE
RETRY = Retry.TYPE
RETRIES_STOPPED = RetriesStopped.TYPE
NODE_FINISH = NodeFinish.TYPE
REPLAN = Replan.TYPE
BUDGET = BudgetExhausted.TYPE
ERROR = Error.TYPE
FINISH = Finish.TYPE


def parse_event(line: str | bytes | dict[str, Any]) -> TypedEvent:
    """The typed event a trace line (its text, or its parsed JSON object) holds, validated
    strictly: a known type, the envelope's and the payload's types, no field the type does not
    have. Raises `pydantic.ValidationError` (a `ValueError`) otherwise, or `ValueError` for text
    that is no JSON."""
    obj = json.loads(line) if isinstance(line, str | bytes) else line
    if isinstance(obj, dict):
        # A line with no time has none: it must not get the time it is read at.
        obj = {"ts": None, "data": {}, **obj}
    return _ADAPTER.validate_python(obj)
