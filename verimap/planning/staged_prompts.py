"""The staged planner's prompts: the catalog of checks it may name, its demonstrations in the
form of its own replies, and what each stage asks.

The conversation grows by one exchange a stage (outline, then each node), so every request's
prompt is the previous one with the last reply and a short question added, and a server's
prompt cache serves all but the new part.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from verimap.base.check_names import BUILTIN_CHECKS, CATALOG, DOMAIN_CHECKS
from verimap.planning.demos import Demo
from verimap.planning.staged_schema import ANSWER, FINAL

SYSTEM = """\
You are the planner of a team of agents. You split a task into a few steps (nodes) that executor \
agents do one after another. The last node, "{final}", gives the answer. An executor sees only \
the inputs its node lists: "USER_TASK" (the task text) or "<node>.<output>" (an output of an \
earlier node).{tools}
Every node is verified before its outputs are used. Name checks from this list, with their \
arguments:
{catalog}
{criteria}Use as few nodes as the task needs.{domain_rule}
You write the plan in stages: first the outline (the steps before "{final}", each with an id and \
typed outputs; none when "{final}" can do the whole task), then each node in turn."""

CRITERIA_RULE = (
    "and write criteria: short yes/no statements a judge model checks against the node's inputs "
    "and outputs, for what no check can see.\n"
)
DOMAIN_RULES = {
    "qa": " For a question about several sources, one node searches each source (or each date) "
    "and a final node combines their facts. If a source holds nothing on the question, the "
    "answer is Insufficient information.",
    "math": " One node may do several steps of the work: split only where a step's result is "
    "worth checking on its own.",
    "programming": " Usually one node writes the whole function.",
}
TOOLS = " Executors can use these tools:\n{tools}"

ASK_OUTLINE = """\
{demos}Task:
{task}

Write the outline: {{"steps": [...]}}, each step an id and its outputs (name and type), before \
the final node, which gives "answer" ({answer_type})."""

ASK_NODE = """\
Write node {nid} (outputs: {outputs}): its instruction, its inputs (from: {available}){vfs}."""
ASK_NODE_VFS = ", its checks and its criteria"

ASK_REPLAN = """\
{demos}Task:
{task}

The plan for this task failed at node {failed}. These nodes worked and are kept as they are, \
their results reused:
{kept}

What failed:
{failure}

Rewrite the rest of the plan: outline the steps that replace node {failed} and the nodes after it \
(before the final node, which gives "answer" ({answer_type})). You may split the failed step into \
smaller ones, search other sources, or name other checks. Give new steps new ids."""

REPAIR = """\
The plan has problems:
{problems}
Write node {nid} again, fixing them."""

REPAIR_AFRESH = """\
An earlier answer for node {nid} had problems:
{problems}
Avoid them: write it for this task alone."""


def catalog_lines(domain: str) -> str:
    """The checks a plan of `domain` may name, one a line, with their arguments."""
    lines = []
    for name in DOMAIN_CHECKS[domain]:
        spec = CATALOG.get(name)
        if spec is None:
            lines.append(f"- {name}: {BUILTIN_CHECKS[name]}")
        else:
            lines.append(f"- {name}({', '.join(spec.args)}): {spec.description}")
    return "\n".join(lines)


def system(domain: str, tools: str = "", *, with_vfs: bool = True) -> str:
    return SYSTEM.format(
        final=FINAL,
        tools=TOOLS.format(tools=tools) if tools else "",
        catalog=catalog_lines(domain) if with_vfs else "(none: this plan is not verified)",
        criteria=CRITERIA_RULE if with_vfs else "",
        domain_rule=DOMAIN_RULES.get(domain, ""),
    )


def _node_reply(reply: dict, with_vfs: bool) -> str:
    keys = (
        ("instruction", "inputs", "checks", "criteria") if with_vfs else ("instruction", "inputs")
    )
    return json.dumps({k: reply[k] for k in keys if k in reply}, ensure_ascii=False)


def render_demos(demos: Sequence[Demo], *, with_vfs: bool = True) -> str:
    """The demonstrations as the planner's own replies would write them, stage by stage."""
    if not demos:
        return ""
    parts = []
    for d in demos:
        lines = [f"Example task: {d.task}", f"Outline: {json.dumps({'steps': d.steps})}"]
        for s in [*d.steps, {"id": FINAL}]:
            reply = d.nodes.get(s["id"])
            if reply is not None:
                lines.append(f"Node {s['id']}: {_node_reply(reply, with_vfs)}")
        parts.append("\n".join(lines))
    return "Examples of good plans for other tasks:\n\n" + "\n\n".join(parts) + "\n\n"


def describe_outputs(outputs: dict[str, str]) -> str:
    return ", ".join(f"{o} ({t})" for o, t in outputs.items())


def ask_node(nid: str, outputs: dict[str, str], available: list[str], *, with_vfs: bool) -> str:
    return ASK_NODE.format(
        nid=nid,
        outputs=describe_outputs(outputs),
        available=", ".join(["USER_TASK", *available]),
        vfs=ASK_NODE_VFS if with_vfs else "",
    )


def answer_outputs(answer_type: str) -> dict[str, str]:
    return {ANSWER: answer_type}
