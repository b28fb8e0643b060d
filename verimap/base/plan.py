"""The plan: a DAG of subtasks, each carrying its own verification functions.

The data model every floor above speaks: `Node`, `Edge`, `Plan` and the VF kinds
(`verimap.base.plan_vfs`), with what can be read off a plan without judging it. A plan comes
from a model, so it is untrusted input: build one with `verimap.planning.plan.parse_plan`,
which raises `PlanError` listing every problem at once. A planner that writes no valid plan
raises `PlanningError`.
"""

from __future__ import annotations

import contextlib
import copy
import graphlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from verimap.base import iotypes
from verimap.base.errors import VerimapError
from verimap.base.iotypes import TypeSpec
from verimap.base.messages import ModelResponse
from verimap.base.plan_vfs import LLMVF as LLMVF
from verimap.base.plan_vfs import VF as VF
from verimap.base.plan_vfs import CheckVF as CheckVF
from verimap.base.plan_vfs import PythonVF as PythonVF

USER_TASK = "USER_TASK"


def normalize_ref(ref: str) -> str:
    """Accept the paper's `<node.var>` spelling beside `node.var`."""
    ref = ref.strip()
    if ref.startswith("<") and ref.endswith(">"):
        ref = ref[1:-1].strip()
    return ref


# Patterns only for the JSON Schema: a grammar-constrained model then cannot write a literal
# value as an input, while hand-written plans still get `check_plan`'s precise messages.
_ID_PATTERN = r"^[A-Za-z_][A-Za-z0-9_-]*$"
_VAR_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
# `[.]`, not `\.`: llama.cpp's grammar parser rejects the escape and its server dies on it.
# A bare name stays allowed: a model that meant "paren_groups" and may not close the string
# writes identifier characters until the length limit; the validator names the fix instead.
_INPUT_PATTERN = r"^(USER_TASK|[A-Za-z_][A-Za-z0-9_-]*([.][A-Za-z_][A-Za-z0-9_]*)?)$"


def _strings(pattern: str) -> dict[str, Any]:
    return {"items": {"type": "string", "pattern": pattern}}


_OUTPUTS_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {
            "type": "object",
            "minProperties": 1,
            "propertyNames": {"pattern": _VAR_PATTERN},
            "additionalProperties": {
                "anyOf": [{"enum": list(iotypes.TYPE_NAMES)}, {"type": "object"}]
            },
            "description": "output name -> type: a short type name or a JSON Schema object",
        },
        {
            "type": "array",
            "minItems": 1,
            "items": {"type": "string", "pattern": _VAR_PATTERN},
            "description": "bare output names (type any), as older plans write them",
        },
    ]
}


def _outputs_schema(schema: dict[str, Any]) -> None:
    title = schema.get("title")
    schema.clear()
    schema.update(copy.deepcopy(_OUTPUTS_SCHEMA), **({"title": title} if title else {}))


def _typed_outputs(v: Any) -> Any:
    """Every accepted spelling as `{name: type}`: a list of bare names (type any: old plans and
    traces keep loading), `"name: type"` strings, `{"name", "type"}` objects, or the mapping."""
    if not isinstance(v, list | tuple):
        return v
    out: dict[str, Any] = {}
    for item in v:
        if isinstance(item, str):
            name, _, spec = item.partition(":")
            name, spec = name.strip(), spec.strip() or iotypes.ANY
        elif isinstance(item, Mapping) and isinstance(item.get("name"), str):
            name, spec = item["name"], item.get("type", iotypes.ANY)
        else:
            raise ValueError(f"an output is a name or {{'name', 'type'}}, got {item!r}")
        if name in out:
            raise ValueError(f"duplicate output {name!r}")
        out[name] = spec
    return out


class Node(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, json_schema_extra={"pattern": _ID_PATTERN})
    name: str = ""
    instruction: str = Field(min_length=1)
    inputs: list[str] = Field(default_factory=list, json_schema_extra=_strings(_INPUT_PATTERN))
    outputs: dict[str, TypeSpec] = Field(min_length=1, json_schema_extra=_outputs_schema)
    verification: list[VF] = Field(default_factory=list)
    final: bool = False

    @field_validator("inputs")
    @classmethod
    def _normalize_inputs(cls, v: list[str]) -> list[str]:
        return [normalize_ref(r) for r in v]

    @field_validator("outputs", mode="before")
    @classmethod
    def _outputs(cls, v: Any) -> Any:
        return _typed_outputs(v)

    @field_validator("outputs")
    @classmethod
    def _canonical_types(cls, v: dict[str, TypeSpec]) -> dict[str, TypeSpec]:
        return {k: iotypes.canonical(t) for k, t in v.items()}

    def output_type(self, name: str) -> TypeSpec:
        return self.outputs.get(name, iotypes.ANY)

    def input_refs(self) -> list[tuple[str, str]]:
        """(node_id, var) for every input that names another node."""
        refs = []
        for r in self.inputs:
            if r != USER_TASK and "." in r:
                node, var = r.split(".", 1)
                refs.append((node, var))
        return refs

    def parent_ids(self) -> list[str]:
        seen: dict[str, None] = {}
        for node, _ in self.input_refs():
            seen.setdefault(node, None)
        return list(seen)


class Edge(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    source: str = Field(alias="from")
    target: str = Field(alias="to")

    def as_tuple(self) -> tuple[str, str]:
        return (self.source, self.target)


def _coerce_edge(e: Any) -> Any:
    if isinstance(e, list | tuple) and len(e) == 2:
        return {"from": e[0], "to": e[1]}
    if isinstance(e, Mapping):
        d = dict(e)
        if "source" in d:
            d["from"] = d.pop("source")
        if "target" in d:
            d["to"] = d.pop("target")
        return d
    return e


class Plan(BaseModel):
    """A validated DAG. Build it with `parse_plan`; direct construction skips the checks."""

    model_config = ConfigDict(extra="forbid")
    nodes: list[Node] = Field(min_length=1)
    edges: list[Edge] = Field(default_factory=list)
    # Why the planner fell back to a one-node plan (None: a planned plan); not part of its JSON.
    _fallback_reason: str | None = PrivateAttr(default=None)
    # VFs the planner dropped from this plan ("node.vf (why)"); not part of its JSON.
    _dropped_vfs: list[str] = PrivateAttr(default_factory=list)
    # The rule that made this plan without a planner call ("one-node plan (small-model
    # policy)"); None: the planner's (or a fallback's). Not part of its JSON.
    _rule: str | None = PrivateAttr(default=None)

    @property
    def rule(self) -> str | None:
        return self._rule

    @rule.setter
    def rule(self, rule: str | None) -> None:
        self._rule = rule

    @property
    def dropped_vfs(self) -> list[str]:
        return self._dropped_vfs

    @property
    def fallback_reason(self) -> str | None:
        return self._fallback_reason

    @fallback_reason.setter
    def fallback_reason(self, reason: str | None) -> None:
        self._fallback_reason = reason

    @field_validator("edges", mode="before")
    @classmethod
    def _edges(cls, v: Any) -> Any:
        return [_coerce_edge(e) for e in v] if isinstance(v, list) else v

    def node(self, node_id: str) -> Node:
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(node_id)

    @property
    def by_id(self) -> dict[str, Node]:
        return {n.id: n for n in self.nodes}

    def edge_set(self) -> set[tuple[str, str]]:
        """Explicit edges plus those implied by inputs."""
        edges = {e.as_tuple() for e in self.edges}
        for n in self.nodes:
            edges.update((p, n.id) for p in n.parent_ids())
        return edges

    def parents(self, node_id: str) -> list[str]:
        return sorted({s for s, t in self.edge_set() if t == node_id})

    def children(self, node_id: str) -> list[str]:
        return sorted({t for s, t in self.edge_set() if s == node_id})

    def ancestors(self, node_id: str, generations: int | None = None) -> list[str]:
        """Ancestors up to `generations` levels back (all when None), nearest first."""
        lineage = _lineage(_parents(self.edge_set()), node_id)
        return [a for a, g in lineage.items() if generations is None or g <= generations]

    def final_node(self) -> Node:
        flagged = [n for n in self.nodes if n.final]
        if len(flagged) == 1:
            return flagged[0]
        sinks = self.sinks()
        if not flagged and len(sinks) == 1:
            return self.node(sinks[0])
        raise PlanError(["plan has no unique final node"])

    def sinks(self) -> list[str]:
        with_children = {s for s, _ in self.edge_set()}
        return [n.id for n in self.nodes if n.id not in with_children]

    def topological_order(self) -> list[str]:
        deps: dict[str, set[str]] = {n.id: set() for n in self.nodes}
        for s, t in self.edge_set():
            deps.setdefault(t, set()).add(s)
        return list(graphlib.TopologicalSorter(deps).static_order())

    def shape(self) -> PlanShape:
        """What the plan's graph says, read once (`PlanShape`); `PlanError` when it has no
        unique final node."""
        by_id = self.by_id
        edges = self.edge_set()
        parents = _parents(edges)
        final = self.final_node().id
        lineage = {nid: _lineage(parents, nid) for nid in by_id}
        return PlanShape(
            plan=self,
            nodes=by_id,
            order=tuple(self.topological_order()),
            parents={nid: tuple(parents.get(nid, ())) for nid in by_id},
            children={nid: tuple(sorted(t for s, t in edges if s == nid)) for nid in by_id},
            sources={nid: tuple(n.parent_ids()) for nid, n in by_id.items()},
            final=final,
            lineage=lineage,
            input_types={
                nid: {
                    f"{src}.{var}": by_id[src].output_type(var)
                    for src, var in n.input_refs()
                    if src in by_id
                }
                for nid, n in by_id.items()
            },
            work={nid: _work(by_id, {nid, *lineage[nid]}) for nid in by_id},
        )

    def to_json(self, **kw: Any) -> str:
        return self.model_dump_json(by_alias=True, **kw)


@dataclass(frozen=True)
class PlanShape:
    """A plan and what its graph says, read once (`Plan.shape`), for the steps that run it.
    Every mapping is keyed by node id, in the plan's order."""

    plan: Plan
    nodes: Mapping[str, Node]
    # A topological order (`Plan.topological_order`).
    order: tuple[str, ...]
    # The nodes with an edge into / out of each node, sorted (`Plan.parents`, `Plan.children`).
    parents: Mapping[str, tuple[str, ...]]
    children: Mapping[str, tuple[str, ...]]
    # The nodes whose outputs each node reads (`Node.parent_ids`): its parents bar bare edges.
    sources: Mapping[str, tuple[str, ...]]
    final: str
    # Each node's ancestors nearest first, with their generation (1: a parent), as
    # `Plan.ancestors` lists them.
    lineage: Mapping[str, Mapping[str, int]]
    # The declared type of each input that names a node of the plan, by reference (`n1.total`).
    input_types: Mapping[str, Mapping[str, TypeSpec]]
    # What running each node does (`node_work`).
    work: Mapping[str, str]


def _parents(edges: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """Each edge target's sources, sorted."""
    parents: dict[str, set[str]] = {}
    for s, t in edges:
        parents.setdefault(t, set()).add(s)
    return {t: sorted(ss) for t, ss in parents.items()}


def _lineage(parents: Mapping[str, list[str]], node_id: str) -> dict[str, int]:
    """`node_id`'s ancestors breadth-first, nearest first, each with its generation."""
    lineage: dict[str, int] = {}
    frontier, generation = [node_id], 0
    while frontier:
        generation += 1
        nxt: list[str] = []
        for f in frontier:
            for p in parents.get(f, ()):
                if p not in lineage and p != node_id:
                    lineage[p] = generation
                    nxt.append(p)
        frontier = nxt
    return lineage


class PlanError(VerimapError, ValueError):
    """Every problem found in a plan, one precise message each."""

    def __init__(self, problems: Iterable[str]):
        self.problems = list(problems)
        super().__init__(
            "invalid plan:\n" + "\n".join(f"- {p}" for p in self.problems)
            if self.problems
            else "invalid plan"
        )


def plan_json_schema() -> dict[str, Any]:
    """The schema planners answer in; also what `verimap plan schema` prints."""
    return Plan.model_json_schema(by_alias=True)


def to_mermaid(plan: Plan) -> str:
    lines = ["flowchart TD"]
    final = None
    with contextlib.suppress(PlanError):
        final = plan.final_node().id
    for n in plan.nodes:
        label = (n.name or n.id).replace('"', "'")
        shape = f'{n.id}(["{label}"])' if n.id == final else f'{n.id}["{label}"]'
        lines.append(f"    {shape}")
    if any(USER_TASK in n.inputs for n in plan.nodes):
        lines.append(f"    {USER_TASK}[/USER_TASK/]")
        for n in plan.nodes:
            if USER_TASK in n.inputs:
                lines.append(f"    {USER_TASK} --> {n.id}")
    for s, t in sorted(plan.edge_set()):
        vars_ = [v for src, v in plan.node(t).input_refs() if src == s]
        lbl = f"|{', '.join(vars_)}|" if vars_ else ""
        lines.append(f"    {s} -->{lbl} {t}")
    return "\n".join(lines)


def output_type(node: Node, name: str) -> TypeSpec:
    """The type an output is asked for and checked in: its declared type, except that an output
    of type "any" (a plan from before types) whose name says "source code" is a string, since
    small models otherwise describe the function as an object."""
    spec = node.output_type(name)
    if spec == iotypes.ANY and iotypes.SOURCE_NAMES.search(name):
        return iotypes.CODE
    return spec


def node_work(plan: Plan, node_id: str) -> str | None:
    """What running `node_id` does in `plan`: the node and every node it depends on, as JSON
    without display names. Two plans with the same work for a node run it the same way."""
    by_id = plan.by_id
    if node_id not in by_id:
        return None
    return _work(by_id, {node_id, *plan.ancestors(node_id)})


def _work(by_id: Mapping[str, Node], ids: Iterable[str]) -> str:
    """The nodes `ids` as JSON without display names, in id order."""
    work = [by_id[i].model_dump(mode="json", exclude={"name"}) for i in sorted(ids)]
    return json.dumps(work, sort_keys=True)


def single_code_output(node: Node) -> bool:
    """Whether the node's one output is code (a program written whole)."""
    return len(node.outputs) == 1 and output_type(node, next(iter(node.outputs))) == iotypes.CODE


class PlanningError(VerimapError, RuntimeError):
    """The planner gave no valid plan within its repair attempts."""

    def __init__(
        self, message: str, problems: list[str], responses: list[ModelResponse] | None = None
    ):
        super().__init__(
            message + ("\n" + "\n".join(f"- {p}" for p in problems) if problems else "")
        )
        self.problems = problems
        self.responses = responses or []
