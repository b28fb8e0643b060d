"""What a node sees: its input values, what it hears from ancestors, and, when it fails, what
the planner is told. Pure functions of the plan's shape (`PlanShape`, read once per plan) and
the values so far, so the coordinator's scheduling stays apart from what it hands each agent."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from verimap.base.check_names import CATALOG
from verimap.base.execution import TEXT_OUTPUT, Feedback
from verimap.base.failure import AncestorContext, FailureContext
from verimap.base.plan import USER_TASK, CheckVF, Node, PlanShape
from verimap.config import RunConfig
from verimap.core.result import NodeReport


@dataclass(frozen=True)
class NodeJob:
    """One node's run in one iteration: the node, its input values (keyed as
    `resolve_inputs` gives them), what it hears from ancestors, and what the run
    carries to it (`feedback` from its failed run of an earlier iteration, `earlier`: its
    report so far, whose attempts a fresh retry counts and whose other fields stand until this
    run decides them)."""

    node: Node
    task: str
    iteration: int
    inputs: dict[str, Any]
    context: dict[str, Any] | None = None
    input_types: dict[str, Any] | None = None
    votes: int = 1
    final: bool = False
    feedback: Feedback | None = None
    earlier: NodeReport | None = None


def resolve_inputs(
    node: Node, task: str, values: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """Input values keyed by their reference (`USER_TASK`, `n1.total`), plus the bare variable
    name (`total`) when exactly one input has it, for friendlier VF code."""
    out: dict[str, Any] = {}
    for ref in node.inputs:
        if ref == USER_TASK:
            out[ref] = task
        else:
            src, var = ref.split(".", 1)
            out[ref] = values.get(src, {}).get(var)
    counts = Counter(r.split(".", 1)[1] for r in node.inputs if r != USER_TASK)
    for ref in node.inputs:
        if ref != USER_TASK:
            var = ref.split(".", 1)[1]
            if counts[var] == 1 and var not in out:
                out[var] = out[ref]
    return out


def content_key(node: Node, inputs: Mapping[str, Any], context: Mapping[str, Any] | None) -> str:
    """Identity of a node's work: same key, same job (so a verified result can be reused)."""
    blob = json.dumps(
        {
            "instruction": node.instruction,
            "inputs": {r: inputs.get(r) for r in node.inputs},
            "outputs": node.outputs,
            "vfs": [v.model_dump() for v in node.verification],
            "context": context or {},
        },
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def node_job(
    shape: PlanShape,
    node_id: str,
    task: str,
    iteration: int,
    values: Mapping[str, Mapping[str, Any]],
    config: RunConfig,
) -> NodeJob:
    """`node_id`'s job once its parents are done: its input values and their types, what it
    hears from its ancestors (`context_generations` back: named values, or each one's
    instruction and reply for a text-only executor) and how many votes its answer needs."""
    node = shape.nodes[node_id]
    final = shape.final == node_id
    gens = config.execution.context_generations
    lineage = {aid: g for aid, g in shape.lineage[node_id].items() if g <= gens}
    if config.execution.structured_io:
        context = _structured_context(set(shape.sources[node_id]), lineage, values, gens)
    else:
        context = _text_context(lineage, shape.nodes, values)
    return NodeJob(
        node,
        task,
        iteration,
        resolve_inputs(node, task, values),
        context,
        dict(shape.input_types[node_id]),
        votes=votes_needed(node, final, config),
        final=final,
    )


def _structured_context(
    sources: set[str],
    lineage: Mapping[str, int],
    values: Mapping[str, Mapping[str, Any]],
    generations: int,
) -> dict[str, Any] | None:
    """Named outputs of the ancestors in `lineage` beyond the `sources` the node reads (none
    when `generations` is 1)."""
    if generations <= 1:
        return None
    ctx = {}
    for aid in lineage:
        if aid not in sources and aid in values:
            for var, val in values[aid].items():
                ctx[f"{aid}.{var}"] = val
    return ctx or None


def _text_context(
    lineage: Mapping[str, int],
    by_id: Mapping[str, Node],
    values: Mapping[str, Mapping[str, Any]],
) -> dict[str, Any] | None:
    """What a text-only executor hears from other agents: each ancestor's instruction and
    reply, parents included, nearest first; never a named value."""
    ctx = {
        aid: {
            "generation": generation,
            "instruction": by_id[aid].instruction,
            "text": values[aid].get(TEXT_OUTPUT),
        }
        for aid, generation in lineage.items()
        if aid in values
    }
    return ctx or None


def failure_context(
    shape: PlanShape,
    node: Node,
    inputs: dict[str, Any],
    report: NodeReport,
    iteration: int,
    reports: Mapping[str, NodeReport],
    status: Mapping[str, str],
) -> FailureContext:
    """The failed node's last attempt of this iteration, its last judged verdicts, and two
    generations of ancestors with their outputs."""
    cur = [a for a in report.attempts if a.iteration == iteration]
    last = cur[-1] if cur else None
    judged = [a for a in cur if a.verdicts]
    ancestors = [
        AncestorContext(
            node_id=aid,
            instruction=shape.nodes[aid].instruction,
            outputs=arep.outputs if (arep := reports.get(aid)) else None,
            status=status.get(aid, ""),
        )
        for aid, generation in shape.lineage[node.id].items()
        if generation <= 2
    ]
    return FailureContext(
        node_id=node.id,
        instruction=node.instruction,
        inputs=inputs,
        outputs=last.outputs if last else None,
        error=last.error if last else None,
        verdicts=judged[-1].verdicts if judged else [],
        attempts=len(cur),
        ancestors=ancestors,
        plan_checks=[
            v.name for v in node.verification if isinstance(v, CheckVF) and v.check in CATALOG
        ],
    )


# Node statuses whose outputs later nodes may use.
DONE = ("verified", "reused", "fail-accepted")


_VOTABLE = ("number", "integer", "boolean")


def votes_needed(node: Node, final: bool, cfg: RunConfig) -> int:
    """How many VF-passing attempts must give the same answer: `agreement` for a `final` node
    whose outputs can be compared for equality (numbers, integers, booleans), else 1."""
    if cfg.verify.agreement <= 1 or cfg.verify.verification == "none" or not final:
        return 1
    types = list(node.outputs.values())
    if not types or any(t not in _VOTABLE for t in types):
        return 1
    return cfg.verify.agreement
