"""Rewrites of a model's raw plan JSON that only have one meaning.

Small models make the same few slips in every plan and keep making them through every
repair round, each of which costs minutes (design/decisions.md, D01). Each rewrite here fixes
a slip whose intent is unambiguous and leaves everything else to the validator, which
reports it to the model.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Callable
from typing import Any

from verimap.base.iotypes import ANY, CODE, may_hold_code
from verimap.base.plan import USER_TASK

_OUTPUT_KEY = re.compile(r"""\boutputs(\[\s*|\.get\(\s*)(['"])([A-Za-z_]\w*)\2""")


def fix_raw_plan(raw: Any, answer_types: tuple[str, ...] = ()) -> Any:
    """Every rewrite below, in the order in which each can rely on the ones before."""
    raw = number_repeated_node_ids(raw)
    raw = resolve_bare_inputs(raw)
    raw = resolve_misattributed_outputs(raw)
    raw = resolve_near_miss_outputs(raw)
    raw = join_extra_sinks(raw)
    raw = drop_checker_tail(raw, answer_types)
    raw = type_code_answer(raw, answer_types)
    raw = resolve_vf_keys(raw)
    raw = give_vfs_the_task(raw)
    return number_repeated_vf_names(raw)


def _nodes(raw: Any) -> list[dict[str, Any]]:
    if not isinstance(raw, dict) or not isinstance(raw.get("nodes"), list):
        return []
    return [n for n in raw["nodes"] if isinstance(n, dict) and isinstance(n.get("id"), str)]


def _output_types(node: dict[str, Any]) -> dict[str, str]:
    outs = node.get("outputs")
    if isinstance(outs, dict):
        return {str(k): str(v) for k, v in outs.items()}
    if isinstance(outs, list):
        pairs = [str(o).partition(":") for o in outs if isinstance(o, str)]
        return {k.strip(): (t.strip() or ANY) for k, _, t in pairs}
    return {}


def _unread(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    read = {
        r.partition(".")[0]
        for n in nodes
        for r in n.get("inputs") or []
        if isinstance(r, str) and "." in r
    }
    return [n for n in nodes if n["id"] not in read]


def final_node(raw: Any) -> dict[str, Any] | None:
    """The raw plan's one node whose outputs no node reads, if there is exactly one."""
    nodes = _nodes(raw)
    sinks = _unread(nodes) if nodes and not raw.get("edges") else []
    return sinks[0] if len(sinks) == 1 else None


def _output_names(node: dict[str, Any]) -> list[str]:
    return list(_output_types(node))


def _owners(nodes: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Output name -> the ids of the nodes that output it."""
    owners: dict[str, list[str]] = {}
    for n in nodes:
        for o in _output_names(n):
            owners.setdefault(o, []).append(n["id"])
    return owners


def _rewrite_inputs(raw: Any, resolve: Callable[[Any, str], Any]) -> Any:
    """Each node's inputs through `resolve(ref, node_id)`."""
    for n in _nodes(raw):
        if isinstance(n.get("inputs"), list):
            n["inputs"] = [resolve(r, n["id"]) for r in n["inputs"]]
    return raw


def numbered(name: str, taken: set[str]) -> str:
    """`name_2` (or the first free `name_k`), now taken."""
    k = 2
    while f"{name}_{k}" in taken:
        k += 1
    taken.add(f"{name}_{k}")
    return f"{name}_{k}"


def number_repeated_node_ids(raw: Any) -> Any:
    """Rename a second node `calculate` to `calculate_2`, and point each input `calculate.x` at
    the one of them that outputs `x` (other than the reader): small models name every step after
    its verb. Ambiguous inputs stay as written."""
    nodes = _nodes(raw)
    taken = {n["id"] for n in nodes}
    seen: dict[str, list[str]] = {}
    for n in nodes:
        nid = n["id"]
        if nid in seen:
            n["id"] = numbered(nid, taken)
        seen.setdefault(nid, []).append(n["id"])
    renamed = {nid: ids for nid, ids in seen.items() if len(ids) > 1}
    if not renamed:
        return raw
    outputs = {n["id"]: _output_names(n) for n in nodes}

    def resolve(ref: Any, me: str) -> Any:
        if not isinstance(ref, str) or "." not in ref:
            return ref
        nid, _, name = ref.partition(".")
        ids = [i for i in renamed.get(nid, ()) if i != me and name in outputs[i]]
        return f"{ids[0]}.{name}" if len(ids) == 1 else ref

    return _rewrite_inputs(raw, resolve)


def resolve_bare_inputs(raw: Any) -> Any:
    """Rewrite an input naming a bare output (`"total"`) to `"<node>.total"` when exactly one
    other node outputs it, and an input naming another node (`"add"`) to `"add.<output>"` when
    that node has exactly one output."""
    nodes = _nodes(raw)
    owners = _owners(nodes)
    single = {n["id"]: outs[0] for n in nodes if len(outs := _output_names(n)) == 1}

    def resolve(ref: Any, me: str) -> Any:
        if not isinstance(ref, str) or ref == USER_TASK or "." in ref:
            return ref
        ids = [i for i in owners.get(ref, []) if i != me]
        if len(ids) == 1:
            return f"{ids[0]}.{ref}"
        if not ids and ref != me and ref in single:
            return f"{ref}.{single[ref]}"
        return ref

    return _rewrite_inputs(raw, resolve)


def resolve_misattributed_outputs(raw: Any) -> Any:
    """Rewrite `"extract.total_time"` to `"sum_times.total_time"` when node `extract` (or no
    node of that id) outputs no `total_time` and exactly one other node does: small models
    prefix every input with the first node's id, outputs of later nodes included. Runs before
    the near-miss rewrite, which would otherwise map `extract.run_distance` to
    `extract.run_speed`."""
    nodes = _nodes(raw)
    outputs = {n["id"]: _output_names(n) for n in nodes}
    owners = _owners(nodes)

    def resolve(ref: Any, me: str) -> Any:
        if not isinstance(ref, str) or "." not in ref:
            return ref
        nid, _, name = ref.partition(".")
        if name in outputs.get(nid, ()):
            return ref
        ids = [i for i in owners.get(name, []) if i != me]
        return f"{ids[0]}.{name}" if len(ids) == 1 else ref

    return _rewrite_inputs(raw, resolve)


def resolve_near_miss_outputs(raw: Any) -> Any:
    """Rewrite `"calc.total_meters"` to `"calc.total_distance"` when node `calc` has no output
    `total_meters` but exactly one output, or one output whose name is clearly the closest:
    small models rename an output between the node that writes it and the one that reads it."""
    nodes = _nodes(raw)
    outputs = {n["id"]: _output_names(n) for n in nodes}

    def resolve(ref: Any, _me: str) -> Any:
        if not isinstance(ref, str) or "." not in ref:
            return ref
        nid, _, name = ref.partition(".")
        outs = outputs.get(nid)
        if not outs or name in outs:
            return ref
        if len(outs) == 1:
            return f"{nid}.{outs[0]}"
        score = {o: difflib.SequenceMatcher(None, name, o).ratio() for o in outs}
        best, runner_up = sorted(outs, key=score.__getitem__, reverse=True)[:2]
        if score[best] >= 0.6 and score[best] - score[runner_up] >= 0.15:
            return f"{nid}.{best}"
        return ref

    return _rewrite_inputs(raw, resolve)


def join_extra_sinks(raw: Any) -> Any:
    """Make the last node whose outputs nobody reads the final node, and give it the outputs of
    the other such nodes as inputs. Small models often compute parts of the answer in sibling
    nodes and forget to pass them on; the final node then lacks what they found, and the plan
    has no unique final node. Wiring a sink into another sink cannot make a cycle. Plans that
    flag a final node, or have explicit edges, are left as written."""
    nodes = _nodes(raw)
    if not nodes or raw.get("edges") or any(n.get("final") for n in nodes):
        return raw
    sinks = _unread(nodes)
    if len(sinks) < 2 or not isinstance(sinks[-1].get("inputs"), list):
        return raw
    final = sinks[-1]
    for s in sinks[:-1]:
        for o in _output_names(s):
            if f"{s['id']}.{o}" not in final["inputs"]:
                final["inputs"].append(f"{s['id']}.{o}")
    return raw


def drop_checker_tail(raw: Any, answer_types: tuple[str, ...]) -> Any:
    """Drop a final node that outputs no answer of `answer_types` when, without it, the plan
    has one final node and that node does: small models end a plan with a "verify" node whose
    output is a boolean (reading the result and the quantities it came from), so the run's
    answer would be `True` instead of the code or number. Checking is what VFs are for."""
    nodes = _nodes(raw)
    while answer_types and len(nodes) > 1 and not raw.get("edges"):
        sinks = _unread(nodes)
        if len(sinks) != 1 or set(_output_types(sinks[0]).values()) & {*answer_types, ANY}:
            break
        final = sinks[0]
        rest = [n for n in nodes if n is not final]
        reads = {r.partition(".")[0] for r in final.get("inputs") or [] if isinstance(r, str)}
        below = _unread(rest)
        if len(below) != 1 or below[0]["id"] not in reads:
            break
        if not set(_output_types(below[0]).values()) & set(answer_types):
            break
        raw["nodes"] = [n for n in raw["nodes"] if n is not final]
        nodes = _nodes(raw)
    return raw


def type_code_answer(raw: Any, answer_types: tuple[str, ...]) -> Any:
    """Type the final node's one output named like source code (`code`, `final_code`) `code`
    when a code task's answer is due and the model typed it `string`: the answer must be code,
    and typed so, code that does not parse fails its attempt."""
    final = final_node(raw)
    if not answer_types or answer_types[0] != CODE or final is None:
        return raw
    outs = final.get("outputs")
    if not isinstance(outs, dict) or CODE in outs.values():
        return raw
    named = [k for k, t in outs.items() if may_hold_code(str(t), str(k))]
    if len(named) == 1:
        outs[named[0]] = CODE
    return raw


def _as_input(
    names: set[str], refs: dict[str, list[str]], only: str | None, m: re.Match[str]
) -> str:
    key = m.group(3)
    if key in names:
        return m.group(0)
    if len(refs.get(key, [])) == 1:
        return f"inputs{m.group(1)}{m.group(2)}{refs[key][0]}{m.group(2)}"
    if only is not None and key not in refs:
        return f"outputs{m.group(1)}{m.group(2)}{only}{m.group(2)}"
    return m.group(0)


def resolve_vf_keys(raw: Any) -> Any:
    """Rewrite `outputs["x"]` in a node's Python VF when `x` is not an output of the node: to
    `inputs["<node>.x"]` when `x` is exactly one of its inputs (small models check a node's
    inputs as if they were its outputs), else to `outputs["<y>"]` when `y` is the node's only
    output (they name the answer after the task, e.g. `total_pay` for the output `answer`)."""
    for n in _nodes(raw):
        if not isinstance(n.get("verification"), list):
            continue
        names = set(_output_names(n))
        only = next(iter(names)) if len(names) == 1 else None
        refs: dict[str, list[str]] = {}
        for r in n.get("inputs") or []:
            if isinstance(r, str) and "." in r:
                refs.setdefault(r.split(".", 1)[1], []).append(r)
        sub = functools.partial(_as_input, names, refs, only)
        for vf in n["verification"]:
            if isinstance(vf, dict) and isinstance(vf.get("code"), str):
                vf["code"] = _OUTPUT_KEY.sub(sub, vf["code"])
    return raw


_READS_TASK = re.compile(r"""\binputs(\[\s*|\.get\(\s*)(['"])USER_TASK\2""")


def give_vfs_the_task(raw: Any) -> Any:
    """Add `USER_TASK` to the inputs of a node whose VF reads `inputs["USER_TASK"]`: small
    models check code against the task's examples on a node that only reads the code."""
    for n in _nodes(raw):
        vfs, inputs = n.get("verification"), n.get("inputs")
        if not isinstance(vfs, list) or not isinstance(inputs, list) or USER_TASK in inputs:
            continue
        if any(isinstance(v, dict) and _READS_TASK.search(str(v.get("code", ""))) for v in vfs):
            inputs.append(USER_TASK)
    return raw


def number_repeated_vf_names(raw: Any) -> Any:
    """Rename a node's second `positive` VF to `positive_2`: small models reuse a name for
    different checks and keep doing so through every repair; names only label verdicts."""
    for n in _nodes(raw):
        vfs = n.get("verification")
        if not isinstance(vfs, list):
            continue
        taken = {
            vf["name"] for vf in vfs if isinstance(vf, dict) and isinstance(vf.get("name"), str)
        }
        seen: set[str] = set()
        for vf in vfs:
            name = vf.get("name") if isinstance(vf, dict) else None
            if not isinstance(name, str):
                continue
            if name in seen:
                vf["name"] = numbered(name, taken)
            seen.add(vf["name"])
    return raw
