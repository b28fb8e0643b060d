import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import verimap
from verimap.base.failure import FailureContext
from verimap.base.messages import AssistantMessage, ToolCall, ToolMessage, UserMessage
from verimap.base.run_context import RunContext
from verimap.base.verdicts import VerificationReport, VFVerdict
from verimap.base.verification import CheckTools, Submission
from verimap.checks import arithmetic, shown_work
from verimap.config import RunConfig, Verify
from verimap.planning.plan import parse_plan
from verimap.testing import InProcessSandboxDouble, ScriptedWorld


def claims(text: str) -> list[tuple[str, str]]:
    return [(s.expression, s.claimed) for s in arithmetic.slips(text)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Together: 20 + 80 + 160 = 360 sheep.", [("20 + 80 + 160", "360")]),
        (r"\[ 4 \times 20 = 90 \]", [("4 * 20", "90")]),
        ("So 17 × 23 = 390.", [("17 * 23", "390")]),
        ("That is 12 x 3 = 38 eggs", [("12 * 3", "38")]),
        ("Total = $1,200 - $300 = $800", [("1200 - 300", "800")]),
        (r"$\frac{3}{4} \cdot 20 = 16$", [("((3)/(4)) * 20", "16")]),
        ("(20 + 10) * 2 = 50", [("(20 + 10) * 2", "50")]),
        ("The cost is **17 * 23 = 381**.", [("17 * 23", "381")]),
        ("- 20 + 80 = 90", [("20 + 80", "90")]),
        ("Twice 9, plus 3: 2 * 9 + 3 = 22 books", [("2 * 9 + 3", "22")]),
        ("Sally has S books. 21 - 3 = 17, so 2S = 17", [("21 - 3", "17")]),
        ("so **17 * 23 = 381** dollars", [("17 * 23", "381")]),
        # a name in parentheses labels its number
        ("6 (Tony) + 5 (Bobby) + 10 (Kathy) + 8 (Ricky) = 39 quarts", [("6 + 5 + 10 + 8", "39")]),
        (r"\[ 6 \text{ (Tony)} + 5 \text{ (Bobby)} = 12 \]", [("6 + 5", "12")]),
        ("20 (Mary Ann) - 5 (Tom) = 13", [("20 - 5", "13")]),
    ],
)
def test_wrong_calculations_are_found(text, expected):
    assert claims(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "20 + 80 + 160 = 260",
        r"\text{Sheep in Charleston} = 4 \times 20 = 80",
        "1. 4 * 20 = 80\n2. 80 + 20 = 100",
        "- 2 * 80 = 160",
        "Step 2: 3 * 4 = 12",
        "10 / 3 = 3.33 and 2 / 3 = 0.67 and 2 / 3 = 0.66",
        "20 / 3 = 6 full bags",
        "20 * 50% = 10",
        "20 / 40 * 100 = 50%",
        "20 + 80 = 100 + 160 = 260",
        "Total cost = 17 * 23 = 391 dollars",
        "60 cups + 60 cups = 120 cups",
        "2 hours * 60 = 120 minutes",
        "3/4 of 20 = 15",
        "x = 11 - 3 = 8 and 2x + 3 = 11",
        "assert 3 * 4 == 13 and 2 + 2 <= 5",
        "```python\nprint(2 + 2 = 5)\n```",
        "Use `1 + 1 = 3` as a bad example",
        "0.1 + 0.2 = 0.3",
        "1,000,000 * 3 = 3,000,000",
        "2^10 = 1024",
        "The answer is 42.",
        "(4 * 20 = 80)",
        "a = 3 + 4 = 7; b = 7 * 2 = 14",
        "10 - 25 = -15",
        "7 ≈ 6 + 2 = 8",
        r"\[ 20\% \times 20 = 0.20 \times 20 = 4 \]",
        # equations with an unknown are not calculations (D25)
        r"\[ 21 - 3 = 2 \times \text{Sally's books} \]",
        r"\[ 2S + 3 - 3 = 21 - 3 \]",
        "21 - 3 = 2S",
        "so 4 + 4 = 9 + x",
        "3 * 6 = 17cm",
        # a unit in parentheses is no label: the sum may convert
        "1 (hour) + 30 (minutes) = 90 minutes",
        "6 (Tony) + 5 (Bobby) = 11",
    ],
)
def test_right_or_unreadable_calculations_pass(text):
    assert arithmetic.slips(text) == []


@given(
    a=st.integers(0, 10_000),
    b=st.integers(1, 10_000),
    op=st.sampled_from(["+", "-", "*", "/"]),
)
def test_a_true_claim_is_never_a_slip_and_an_off_by_one_is(a, b, op):
    exact = {"+": a + b, "-": a - b, "*": a * b, "/": a / b}[op]
    shown = f"{exact:.2f}" if op == "/" else str(exact)
    assert arithmetic.slips(f"We get {a} {op} {b} = {shown} in all.") == []
    if op != "/":
        wrong = exact + 1
        assert claims(f"We get {a} {op} {b} = {wrong} in all.") == [(f"{a} {op} {b}", str(wrong))]


# Claims whose left side is too big to compute, or too big to compare: before they were sized,
# the first hung the check and the others raised out of it.
HOSTILE_CLAIMS = [
    "So ((10**1000)**1000)**1000 = 1.",
    "3 * 10**400 = 7",
    "9**9**9 = 1",
    "2**2**2**2**2 = 4",
    "factorial(10**8) = 7",
    "comb(10**9, 5*10**8) = 3",
    "10 / 3 = " + "9" * 300 + ".12345",
    " + ".join(["12"] * 2000) + " = 5",
]


def _check_all(texts: list[str]) -> list[tuple[str | None, float]]:
    """In a child process: the check's outcome on each reply and the seconds it took."""
    out = []
    for text in texts:
        start = time.perf_counter()
        verdict = arithmetic.check([AssistantMessage(content=text)])
        out.append((None if verdict is None else verdict.outcome, time.perf_counter() - start))
    return out


def test_a_claim_too_big_to_compute_is_unverifiable_not_a_crash(bounded):
    found = bounded(120, _check_all, HOSTILE_CLAIMS)
    assert [outcome for outcome, _ in found] == ["PASS"] * 6 + ["FAIL", "PASS"]
    assert all(seconds < 2 for _, seconds in found), found


def test_an_unverifiable_claim_leaves_the_rest_of_the_reply_checked():
    assert claims("3 * 10**400 = 7, and 2 * 3 = 7") == [("2 * 3", "7")]
    long_sum = " + ".join(["12"] * (arithmetic.MAX_CLAIM // 5 + 1))
    assert claims(f"{long_sum} = 5") == [] and claims("12 + 12 = 5") == [("12 + 12", "5")]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789+-*/^().=% x", max_size=40))
def test_no_text_makes_the_check_raise(text):
    verdict = arithmetic.check([AssistantMessage(content=text)])
    assert verdict is None or verdict.outcome in ("PASS", "FAIL")


def test_check_reads_only_the_executors_replies():
    messages = [
        UserMessage(content="Earlier you wrote 2 + 2 = 5."),
        AssistantMessage(content="Right: 2 + 2 = 4."),
        ToolMessage(tool_call_id="c1", content="2 + 2 = 5"),
    ]
    verdict = arithmetic.check(messages)
    assert verdict is not None and verdict.passed and verdict.type == "check"
    messages.append(AssistantMessage(content="So 4 * 3 = 13."))
    verdict = arithmetic.check(messages)
    assert verdict is not None and not verdict.passed
    assert "4 * 3 = 13 is wrong: 4 * 3 = 12" in verdict.message
    assert arithmetic.check([AssistantMessage(content="The answer is 4.")]) is None


async def test_a_failed_check_fails_the_report_and_blames_the_executor():
    node = parse_plan(PLAN).nodes[0]
    sub = Submission("sheep", node, {}, {"total": 10}, [AssistantMessage(content="3 * 3 = 10")])
    found = await arithmetic.Arithmetic().check(sub, CheckTools(), RunContext())
    assert found is not None and found.strength == "weak"
    ok = VFVerdict(name="pos", type="python", outcome="PASS")
    report = VerificationReport(passed=False, verdicts=[ok, found])
    assert not found.passed and [v.name for v in report.failures] == ["arithmetic"]
    assert FailureContext(node_id="n", verdicts=report.verdicts).kind == "executor"
    assert "[check 'arithmetic': FAIL]" in report.failures[0].feedback()


PLAN = {
    "nodes": [
        {
            "id": "total",
            "instruction": "add the sheep",
            "inputs": ["USER_TASK"],
            "outputs": {"total": "number"},
            "verification": [
                {"name": "pos", "type": "python", "code": "assert outputs['total'] > 0"}
            ],
        }
    ]
}


def sheep(nid, k, inp, prompt):
    total = 360 if k == 0 else 260
    return f"20 + 80 + 160 = {total}\n" + json.dumps({"total": total})


async def test_a_slipped_sum_is_retried_with_the_correction():
    world = ScriptedWorld([PLAN], sheep)
    r = await verimap.build(world.models(), InProcessSandboxDouble()).run("sheep")
    assert r.status == "success" and r.answer == 260 and r.retries == 1
    first = r.nodes["total"].attempts[0]
    assert not first.passed and [v.name for v in first.verdicts if not v.passed] == ["arithmetic"]
    assert "20 + 80 + 160 = 360 is wrong: 20 + 80 + 160 = 260" in world.executor_prompts["total"][1]


async def test_the_check_can_be_turned_off():
    world = ScriptedWorld([PLAN], sheep)
    config = RunConfig(verify=Verify(checks=[]))
    r = await verimap.build(world.models(), InProcessSandboxDouble(), config=config).run("sheep")
    assert r.status == "success" and r.answer == 360 and r.retries == 0


ROBE = {
    "USER_TASK": "A robe takes 2 bolts of blue fiber and half that much white fiber. "
    "How many bolts in total does it take?",
    "extract.blue_bolts": 2,
}


@pytest.mark.parametrize(
    ("reply", "outputs", "outcome"),
    [
        ('```json\n{"total": 5}\n```', {"total": 5}, "FAIL"),  # worked out, nothing shown
        ("2 + 1 = 3, so 3 bolts.", {"total": 3}, "PASS"),
        (r"\(80 \text{ miles} + 150 \text{ miles} = 230\)", {"total": 230}, "PASS"),
        ("Half of it: \\(\\frac{2}{2}\\) bolts", {"white": 1}, "PASS"),  # LaTeX counts
        ('{"blue": 2}', {"blue": 2}, "PASS"),  # given by the inputs: nothing to show
        ("It says half.", {"share": 0.5}, "PASS"),  # given as a word
        ("Three robes.", {"robes": 3}, "FAIL"),
        ("Yes.", {"ok": True}, None),  # no number output: no verdict
    ],
)
def test_a_worked_out_number_needs_its_calculation_shown(reply, outputs, outcome):
    verdict = shown_work.working_check([AssistantMessage(content=reply)], outputs, ROBE)
    assert (verdict.outcome if verdict else None) == outcome
    if outcome == "FAIL":
        assert "shows no calculation with its result" in verdict.message and verdict.type == "check"


def test_a_tool_call_counts_as_shown_work():
    messages = [
        AssistantMessage(
            content="", tool_calls=[ToolCall(id="c", name="calculator", arguments="{}")]
        ),
        ToolMessage(tool_call_id="c", content="3"),
        AssistantMessage(content='{"total": 3}'),
    ]
    assert shown_work.working_check(messages, {"total": 3}, ROBE).outcome == "PASS"


async def test_with_require_working_a_bare_answer_is_retried_and_off_it_passes():
    def bare_then_shown(nid, k, inp, prompt):
        return (
            json.dumps({"total": 260})
            if k == 0
            else "20 + 80 + 160 = 260\n" + json.dumps({"total": 260})
        )

    world = ScriptedWorld([PLAN], bare_then_shown)
    config = RunConfig(verify=Verify(checks=["arithmetic", "shown_work"]))
    r = await verimap.build(world.models(), InProcessSandboxDouble(), config=config).run("sheep")
    assert r.status == "success" and r.retries == 1
    assert "shows no calculation with its result" in world.executor_prompts["total"][1]
    world = ScriptedWorld([PLAN], bare_then_shown)
    r = await verimap.build(world.models(), InProcessSandboxDouble()).run("sheep")
    assert r.status == "success" and r.retries == 0
