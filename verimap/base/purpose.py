"""Why a model request is made: to plan, to execute a node, to judge a node's criteria, or to
solve the task independently of the plan.

A request carries its purpose so that whoever hears it can tell calls apart without reading
the prompt: a run's `model_call` events name it in a short label (`execute:a:final`), and the
test doubles of `verimap.testing` answer by it (which node, which criteria, which kind of
independent solution). It describes the call and is never part of it: backends build what
they send from the messages, tools, schema and settings alone, and `ModelRequest` leaves the
purpose out of its serialisation.

Some purposes also hold what the call is about (a node's inputs, the outputs under judgement,
the task solved). The prompt renders them as text; a test double that plays the model needs
them as values, and reading them back out of the prompt would tie every double to the wording
of every prompt.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Purpose(BaseModel):
    model_config = ConfigDict(frozen=True)


class PlanCall(_Purpose):
    """A planner call. `kind`: the first ask for a plan, a replan after a failure, a repair (a
    rejected plan sent back with its problems, by the planner itself or from outside), or the
    free-text reasoning the planner does before it writes a plan."""

    type: Literal["plan"] = "plan"
    kind: Literal["plan", "replan", "repair", "think"] = "plan"
    task: str = Field(default="", repr=False)

    @property
    def label(self) -> str:
        return "plan" if self.kind == "plan" else f"plan:{self.kind}"


class ExecuteCall(_Purpose):
    """A call of the executor working on node `node_id`: a step of its agent loop, or with
    `final_call` the call that asks for its outputs once the loop has ended. `outputs` are the
    declared outputs by name, each with its type; none when the executor's reply as written is
    its output (text hand-offs)."""

    type: Literal["execute"] = "execute"
    node_id: str
    attempt: int | None = None
    final_call: bool = False
    inputs: dict[str, Any] = Field(default_factory=dict, repr=False)
    outputs: dict[str, Any] = Field(default_factory=dict, repr=False)

    @property
    def label(self) -> str:
        return f"execute:{self.node_id}" + (":final" if self.final_call else "")


class JudgeCall(_Purpose):
    """A judge call on node `node_id`'s `outputs` against natural-language criteria (VF name to
    criterion, in the order asked; several: one verdict for each, in one reply): its free-text
    reasoning, or with `final_call` the call for its verdict."""

    type: Literal["judge"] = "judge"
    node_id: str
    criteria: dict[str, str]
    final_call: bool = False
    outputs: dict[str, Any] = Field(default_factory=dict, repr=False)

    @property
    def vf_names(self) -> tuple[str, ...]:
        return tuple(self.criteria)

    @property
    def label(self) -> str:
        names = ",".join(self.criteria)
        return f"judge:{self.node_id}:{names}" + (":final" if self.final_call else "")


class SolveCall(_Purpose):
    """A solution of the whole task made apart from the plan: a program whose result is a vote
    (or the `program` baseline's answer), a reference function for the code-agreement check, or
    a sample of the bare model (the `bare` and `sc` baselines). `framing`: which wording of the
    prompt asked for it, where there are several."""

    type: Literal["solve"] = "solve"
    kind: Literal["program", "reference", "sample"]
    framing: int | None = None
    task: str = Field(default="", repr=False)

    @property
    def label(self) -> str:
        return f"solve:{self.kind}" + (f":{self.framing}" if self.framing is not None else "")


Purpose = Annotated[PlanCall | ExecuteCall | JudgeCall | SolveCall, Field(discriminator="type")]


def label(purpose: PlanCall | ExecuteCall | JudgeCall | SolveCall | None) -> str | None:
    """The short label of a purpose, as `model_call` events record it (None: none was given)."""
    return None if purpose is None else purpose.label
