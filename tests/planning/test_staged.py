"""The staged planner on scripted doubles: the outline, then each node under its own grammar;
the validator's messages back once; a replan that keeps what worked and rewrites the rest."""

import json

import pytest

import verimap
from verimap.base.events import PLAN_INVALID, Event
from verimap.base.failure import FailureContext
from verimap.base.messages import UserMessage
from verimap.base.plan import LLMVF, CheckVF, PlanningError
from verimap.base.purpose import PlanCall
from verimap.base.run_context import RunContext
from verimap.base.verdicts import VFVerdict
from verimap.config import Loop, RunConfig
from verimap.planning.demos import Demo, DemoFileError, DemoPool
from verimap.planning.plan import parse_plan
from verimap.planning.planner import LLMPlanner, PlannerOptions
from verimap.planning.staged import StagedPlanner
from verimap.testing import InProcessSandboxDouble, ScriptedModel, ScriptedWorld

TASK = (
    "Who is the person that both The Verge and TechCrunch reported as accused of fraud?\n\n"
    "Answer from the news corpus, using the search tool."
)


def node(instruction, inputs, checks=(), criteria=()):
    return {
        "instruction": instruction,
        "inputs": list(inputs),
        "checks": list(checks),
        "criteria": list(criteria),
    }


def chk(check, **args):
    return {"check": check, "args": args}


OUTLINE = {
    "steps": [
        {
            "id": "verge",
            "outputs": [{"name": "person", "type": "string"}, {"name": "fact", "type": "string"}],
        },
        {"id": "techcrunch", "outputs": [{"name": "person", "type": "string"}]},
    ]
}
NODES = {
    "verge": node(
        "Search The Verge for the person accused of fraud.",
        ["USER_TASK"],
        [chk("entity", output="person"), chk("fact_in_source", output="fact", source="The Verge")],
    ),
    "techcrunch": node(
        "Search TechCrunch for the person accused of fraud.",
        ["USER_TASK"],
        [chk("entity", output="person")],
    ),
    "final": node(
        "Answer with the person both reports name.",
        ["USER_TASK", "verge.person", "techcrunch.person"],
        [chk("entity", output="answer")],
        ["The answer is the person named in both inputs."],
    ),
}


def staged_model(outline=OUTLINE, nodes=NODES, *, repairs=None):
    """A planner double that answers the outline and each node by the stage its request names;
    `repairs`: replies to a repair of a node, by node id."""

    def answer(req):
        name = req.schema_name
        if name == "outline":
            return outline
        nid = name.removeprefix("node ")
        if req.purpose.kind == "repair":
            return (repairs or {})[nid]
        return nodes[nid]

    return ScriptedModel(answer)


async def test_the_outline_then_each_node_makes_a_valid_plan_with_its_vfs():
    model = staged_model()
    plan = await StagedPlanner(model, domain="qa").plan(TASK, ctx=RunContext())
    assert [n.id for n in plan.nodes] == ["verge", "techcrunch", "final"]
    assert plan.final_node().id == "final" and plan.node("final").outputs == {"answer": "string"}
    verge = plan.node("verge").verification
    assert [(v.name, v.check, v.args) for v in verge if isinstance(v, CheckVF)] == [
        ("entity", "entity", {"output": "person"}),
        ("fact_in_source", "fact_in_source", {"output": "fact", "source": "The Verge"}),
    ]
    judged = [v for v in plan.node("final").verification if isinstance(v, LLMVF)]
    assert [(v.name, v.content) for v in judged] == [
        ("criterion_1", "The answer is the person named in both inputs.")
    ]
    # one request a stage, each under its own grammar
    assert [r.schema_name for r in model.requests] == [
        "outline",
        "node verge",
        "node techcrunch",
        "node final",
    ]
    assert all(r.role == "planner" and isinstance(r.purpose, PlanCall) for r in model.requests)
    enums = [r.response_schema["properties"]["inputs"]["items"]["enum"] for r in model.requests[1:]]
    assert enums == [
        ["USER_TASK"],
        ["USER_TASK", "verge.person", "verge.fact"],
        ["USER_TASK", "verge.person", "verge.fact", "techcrunch.person"],
    ]
    # a node's checks may name only its own outputs; the final node must write a criterion
    final_schema = model.requests[-1].response_schema["properties"]
    assert final_schema["criteria"]["minItems"] == 1
    entity = next(
        s
        for s in final_schema["checks"]["items"]["anyOf"]
        if s["properties"]["check"]["const"] == "entity"
    )
    assert entity["properties"]["args"]["properties"]["output"] == {"enum": ["answer"]}
    # each prompt is the one before it with a reply and a question added (a prompt cache
    # serves the prefix), and the nearest demonstrations come first
    for before, after in zip(model.requests, model.requests[1:], strict=False):
        assert after.messages[: len(before.messages)] == before.messages
    first = model.requests[0].messages[1].content
    assert "Example task:" in first and first.index("Example task:") < first.index(TASK)
    assert "fact_in_source(output, source)" in model.requests[0].messages[0].content


async def test_the_planner_chooses_the_granularity_a_one_node_plan_is_its_own():
    model = staged_model(
        {"steps": []},
        {
            "final": node(
                "Search and answer.",
                ["USER_TASK"],
                [chk("entity", output="answer")],
                ["Named in both."],
            )
        },
    )
    plan = await StagedPlanner(model, domain="qa").plan(TASK, ctx=RunContext())
    assert (
        [n.id for n in plan.nodes] == ["final"]
        and plan.rule is None
        and plan.fallback_reason is None
    )
    assert {v.type for v in plan.nodes[0].verification} == {"check", "llm"}


async def test_a_step_no_node_reads_is_given_to_the_final_node():
    nodes = {
        **NODES,
        "final": node(
            "Answer.", ["USER_TASK", "verge.person"], [chk("entity", output="answer")], ["x" * 12]
        ),
    }
    plan = await StagedPlanner(staged_model(nodes=nodes), domain="qa").plan(TASK, ctx=RunContext())
    assert plan.node("final").inputs == ["USER_TASK", "verge.person", "techcrunch.person"]


async def test_the_validators_messages_go_back_once_for_the_node_they_name():
    bad = {
        **NODES,
        "techcrunch": node("Search TechCrunch.", ["USER_TASK"], [chk("entity", output="name")]),
    }
    events: list[Event] = []
    model = staged_model(nodes=bad, repairs={"techcrunch": NODES["techcrunch"]})
    plan = await StagedPlanner(model, domain="qa").plan(TASK, ctx=RunContext(sink=events.append))
    assert plan.node("techcrunch").verification[0].args == {"output": "person"}
    repair = model.requests[-1]
    assert repair.purpose.kind == "repair" and repair.schema_name == "node techcrunch"
    assert "argument 'output' names 'name'" in repair.messages[-1].content
    assert [e.type for e in events if e.type != "model_call"] == [PLAN_INVALID]
    # still wrong after the one round: refused, and `LLMPlanner` falls back to its one-node plan
    stubborn = staged_model(nodes=bad, repairs={"techcrunch": bad["techcrunch"]})
    with pytest.raises(PlanningError, match="names 'name'"):
        await StagedPlanner(stubborn, domain="qa").plan(TASK, ctx=RunContext())
    fallback = await LLMPlanner(
        stubborn, None, PlannerOptions(decoding="staged", domain="qa", max_repairs=1)
    ).plan(TASK, ctx=RunContext())
    assert fallback.fallback_reason is not None and [n.id for n in fallback.nodes] == ["solve"]


async def test_the_outline_is_held_to_the_plan_size():
    model = staged_model()
    await StagedPlanner(model, domain="qa", max_nodes=3, min_nodes=2).plan(TASK, ctx=RunContext())
    steps = model.requests[0].response_schema["properties"]["steps"]
    assert (steps["minItems"], steps["maxItems"]) == (1, 2)
    with pytest.raises(ValueError, match="below min_nodes"):
        StagedPlanner(model, max_nodes=1, min_nodes=2)


async def test_without_vfs_the_nodes_carry_none_and_the_grammar_asks_for_none():
    model = staged_model()
    plan = await StagedPlanner(model, domain="qa", with_vfs=False).plan(TASK, ctx=RunContext())
    assert all(not n.verification for n in plan.nodes)
    assert set(model.requests[1].response_schema["properties"]) == {"instruction", "inputs"}


async def test_a_domain_left_open_is_inferred_from_the_task():
    model = staged_model(
        {"steps": []}, {"final": node("Work it out.", ["USER_TASK"], [chk("arithmetic")])}
    )
    plan = await StagedPlanner(model).plan(
        "Tom has 3 boxes of 12 pencils. How many pencils?", ctx=RunContext()
    )
    assert plan.node("final").outputs == {"answer": "number"}
    assert "bakery" not in json.dumps([m.content for m in model.requests[0].messages])
    assert (
        "Natalia" in model.requests[0].messages[1].content
        or "Julie" in model.requests[0].messages[1].content
    )


# ---- replans: a changed plan, the accepted nodes kept ---------------------------------------------

PREVIOUS = {
    "nodes": [
        {
            "id": "verge",
            "instruction": "Search The Verge.",
            "inputs": ["USER_TASK"],
            "outputs": {"person": "string"},
            "verification": [
                {"name": "entity", "type": "check", "check": "entity", "args": {"output": "person"}}
            ],
        },
        {
            "id": "techcrunch",
            "instruction": "Search TechCrunch.",
            "inputs": ["USER_TASK"],
            "outputs": {"person": "string"},
            "verification": [
                {"name": "entity", "type": "check", "check": "entity", "args": {"output": "person"}}
            ],
        },
        {
            "id": "final",
            "instruction": "Answer.",
            "inputs": ["USER_TASK", "verge.person", "techcrunch.person"],
            "outputs": {"answer": "string"},
            "verification": [{"name": "criterion_1", "type": "llm", "content": "Named in both."}],
        },
    ]
}
SPLIT = {
    "steps": [
        {"id": "tc_fraud", "outputs": [{"name": "fact", "type": "string"}]},
        {"id": "tc_person", "outputs": [{"name": "person", "type": "string"}]},
    ]
}
SPLIT_NODES = {
    "tc_fraud": node(
        "Search TechCrunch for the fraud trial and copy the sentence.",
        ["USER_TASK"],
        [chk("fact_in_source", output="fact", source="TechCrunch")],
    ),
    "tc_person": node(
        "Name the person the sentence accuses.", ["tc_fraud.fact"], [chk("entity", output="person")]
    ),
    "final": node(
        "Answer with the person both name.",
        ["USER_TASK", "verge.person", "tc_person.person"],
        [chk("entity", output="answer")],
        ["The answer is named by both verge.person and tc_person.person."],
    ),
}


def failed_at(nid: str) -> FailureContext:
    return FailureContext(
        node_id=nid,
        attempts=2,
        instruction="Search TechCrunch.",
        verdicts=[
            VFVerdict(
                name="entity",
                type="check",
                outcome="FAIL",
                message="person: expected a short name, got 12 words",
            )
        ],
    )


async def test_a_replan_rewrites_the_failed_node_and_what_follows_and_keeps_the_rest():
    previous = parse_plan(PREVIOUS)
    model = staged_model(SPLIT, SPLIT_NODES)
    plan = await StagedPlanner(model, domain="qa").replan(
        TASK, previous, failed_at("techcrunch"), ctx=RunContext()
    )
    assert [n.id for n in plan.nodes] == ["verge", "tc_fraud", "tc_person", "final"]
    assert plan.node("verge") == previous.node("verge")  # kept exactly, so its result is reused
    assert "techcrunch" not in plan.by_id and plan.node("final") != previous.node("final")
    ask = model.requests[0]
    assert ask.purpose.kind == "replan"
    text = ask.messages[1].content
    assert "failed at node techcrunch" in text and "- verge: Search The Verge." in text
    assert "expected a short name, got 12 words" in text
    # the kept node's outputs are inputs the new nodes may read
    assert (
        "verge.person" in model.requests[1].response_schema["properties"]["inputs"]["items"]["enum"]
    )


async def test_a_replan_that_gives_the_failed_node_its_old_work_is_asked_once_more_sampled():
    previous = parse_plan(PREVIOUS)
    same_outline = {
        "steps": [{"id": "techcrunch", "outputs": [{"name": "person", "type": "string"}]}]
    }
    same = {
        "techcrunch": node("Search TechCrunch.", ["USER_TASK"], [chk("entity", output="person")]),
        "final": node(
            "Answer.", ["USER_TASK", "verge.person", "techcrunch.person"], [], ["Named in both."]
        ),
    }
    model = staged_model(same_outline, same)
    await StagedPlanner(model, domain="qa").replan(
        TASK, previous, failed_at("techcrunch"), ctx=RunContext()
    )
    outlines = [r for r in model.requests if r.schema_name == "outline"]
    assert len(outlines) == 2 and outlines[1].settings.temperature == 0.7


async def test_in_a_run_the_replanned_plan_reuses_the_node_that_was_verified():
    """The coordinator with the staged planner: the TechCrunch node's answer is no name, so it
    fails and the run replans; the new plan splits it in two, and The Verge's node, kept as it
    was, is reused rather than run again."""
    planner_model = ScriptedModel(lambda req: _two_plans(req, planner_model))

    def outputs(nid, k, inputs, prompt):
        return {
            "verge": {"person": "Sam Bankman-Fried"},
            "techcrunch": {
                "person": "a person whom the prosecutors accused of fraud in their long case"
            },
            "tc_fraud": {"fact": "Prosecutors said Sam Bankman-Fried committed fraud."},
            "tc_person": {"person": "Sam Bankman-Fried"},
            "final": {"answer": "Sam Bankman-Fried"},
        }[nid]

    world = ScriptedWorld([PREVIOUS], outputs)
    planner = LLMPlanner(
        planner_model, None, PlannerOptions(decoding="staged", domain="qa", max_nodes=4)
    )
    config = RunConfig(loop=Loop(max_retries=1, max_iterations=2), policies=[])
    r = await verimap.build(
        world.models(), InProcessSandboxDouble(), config=config, planner=planner
    ).run(TASK)
    assert r.status == "success" and r.answer == "Sam Bankman-Fried", r.error
    assert len(r.plans) == 2 and [n.id for n in r.plans[1].nodes] == [
        "verge",
        "tc_fraud",
        "tc_person",
        "final",
    ]
    assert r.nodes["verge"].status == "reused" and world.executor_calls["verge"] == 1


def _two_plans(req, model):
    """The first plan (PREVIOUS, written in stages), then the split of the failed node."""
    replanning = any(r.purpose.kind == "replan" for r in model.requests)
    if not replanning and not any(
        isinstance(m, UserMessage) and "failed at node" in m.content for m in req.messages
    ):
        outline = {
            "steps": [
                {"id": "verge", "outputs": [{"name": "person", "type": "string"}]},
                {"id": "techcrunch", "outputs": [{"name": "person", "type": "string"}]},
            ]
        }
        nodes = {
            "verge": node("Search The Verge.", ["USER_TASK"], [chk("entity", output="person")]),
            "techcrunch": node(
                "Search TechCrunch.", ["USER_TASK"], [chk("entity", output="person")]
            ),
            "final": node(
                "Answer.",
                ["USER_TASK", "verge.person", "techcrunch.person"],
                [chk("entity", output="answer")],
                ["Named in both."],
            ),
        }
    else:
        # no search runs here, so the new first node's fact goes to the judge instead
        judged = node(
            "Search TechCrunch for the fraud trial.",
            ["USER_TASK"],
            [],
            ["The fact names who was accused."],
        )
        outline, nodes = SPLIT, {**SPLIT_NODES, "tc_fraud": judged}
    if req.schema_name == "outline":
        return outline
    return nodes[req.schema_name.removeprefix("node ")]


async def test_a_code_tasks_final_node_is_checked_against_the_tasks_examples():
    task = 'def inc(x):\n    """Add one.\n    >>> inc(1)\n    2\n    """\n'
    model = staged_model(
        {"steps": []}, {"final": node("Write inc.", ["USER_TASK"], [{"check": "code_agreement"}])}
    )
    plan = await StagedPlanner(model).plan(task, ctx=RunContext())
    final = plan.node("final")
    assert final.outputs == {"answer": "code"}
    assert [(v.name, v.check) for v in final.verification if isinstance(v, CheckVF)] == [
        ("code_agreement", "code_agreement"),
        ("task_examples", "run_examples"),
    ]


async def test_a_node_that_names_an_output_of_the_example_plan_goes_back():
    copied = {
        **NODES,
        "final": node(
            "Answer.",
            ["USER_TASK", "verge.person", "techcrunch.person"],
            [chk("entity", output="answer")],
            ["Named by verge_person.person."],
        ),
    }
    model = staged_model(nodes=copied, repairs={"final": NODES["final"]})
    plan = await StagedPlanner(model, domain="qa").plan(TASK, ctx=RunContext())
    first, repair = model.requests[0].messages, model.requests[-1].messages
    assert "copies the example plan ('verge_person.person'" in repair[-2].content
    assert repair[-1].content.startswith("Write node final")
    # Asked afresh: neither the demonstrations nor the copying reply are in view.
    assert "Named by verge_person.person." not in "".join(str(m.content) for m in repair)
    assert len(repair[1].content) < len(first[1].content)
    assert (
        plan.node("final").verification[-1].content
        == "The answer is the person named in both inputs."
    )


async def test_a_pool_the_run_names_is_shown_beside_the_shipped_one():
    mined = Demo(
        index=7,
        task="Who is the person that both The Verge and TechCrunch reported as accused of fraud?",
        nodes={
            "final": node("Search both sources.", ["USER_TASK"], [chk("entity", output="answer")])
        },
    )
    extra = DemoPool(domain="qa", pool="mined", demos=[mined])
    shown = f"Example task: {mined.task}\nOutline: "

    async def first_prompt(demos=None):
        model = staged_model()
        planner = LLMPlanner(model, None, PlannerOptions(decoding="staged", domain="qa"), demos)
        await planner.plan(TASK, ctx=RunContext())
        return model.requests[0].messages[1].content

    with_pool = await first_prompt(extra)
    assert with_pool.index(shown) == with_pool.index("Example task:")  # the nearest, first
    assert shown not in await first_prompt()
    with pytest.raises(DemoFileError, match="only the staged planner shows a pool"):
        LLMPlanner(staged_model(), None, PlannerOptions(domain="qa"), extra)
    with pytest.raises(DemoFileError, match="holds qa demonstrations; this run plans math"):
        LLMPlanner(staged_model(), None, PlannerOptions(decoding="staged", domain="math"), extra)
