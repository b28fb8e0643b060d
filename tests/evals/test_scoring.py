import pytest

from verimap.evals import data as d
from verimap.evals.scoring import (
    build_candidate,
    extract_gsm8k,
    official_multihop_match,
    score_gsm8k,
    score_humaneval,
    score_multihoprag,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The answer is 1,234.", "1234"),
        ("$18", "18"),
        ("18.0", "18"),
        ("She makes $18 every day.\n#### 18", "18"),
        ("First 3 eggs, then 4 more, so \\boxed{7} is it; check: 7 > 3", "7"),
        ("\\boxed{1,000}", "1000"),
        ("Final answer: -5", "-5"),
        ("The final answer is $ 1,000,000.00.", "1000000"),
        ("I had 3 apples and ate 1, leaving 2", "2"),
        ("It costs $.50", "0.5"),
        ("The answer is 12. (We used 3 steps.)", "12"),
        ("no number here", None),
        ({"answer": 18.0}, "18"),
        ({"answer": "$70,000"}, "70000"),
    ],
)
def test_gsm8k_extraction(text, expected):
    assert extract_gsm8k(text) == expected


@pytest.mark.parametrize(
    ("answer", "gold", "correct"),
    [
        ("The answer is 1,234.", "1234", True),
        ("18.00", "18", True),
        ("18.5", "18", False),
        ("\\boxed{\\frac{1}{2}}", "0.5", True),
        ("\\boxed{\\frac{1}{3}}", "0.5", False),
        ("", "3", False),
    ],
)
def test_gsm8k_equivalence(answer, gold, correct):
    assert score_gsm8k(answer, gold).correct is correct


def test_gsm8k_scores_the_dataset_solutions_correct(samples):
    for item in d.load_gsm8k(d.resolve("gsm8k", samples)):
        assert score_gsm8k(item.answer, item.gold).correct, item.answer


@pytest.mark.parametrize(
    ("pred", "gold", "correct"),
    [
        ("Yes, both reported it.", "Yes", True),
        ("No.", "Yes", False),
        ("yes", "No", False),
        ('The answer to the question is "Northwind Robotics".', "Northwind Robotics", True),
        ("It was the Valley Stars.", "Valley Stars", True),
        ("Harbor City Hawks", "Valley Stars", False),
        ("Insufficient information.", "Insufficient information.", True),
        ("Henrik Dahl", "Insufficient information.", False),
    ],
)
def test_multihoprag_matching(pred, gold, correct):
    assert score_multihoprag(pred, gold).correct is correct


def test_multihoprag_reports_upstream_verdict_too():
    s = score_multihoprag("Harbor City Hawks", "Harbor Stars")
    assert not s.correct and "upstream_match=True" in s.detail


@pytest.mark.parametrize(
    ("pred", "gold", "strict", "official"),
    [
        ("Sam Altman", "Sam Bankman-Fried", False, True),  # any shared word is right upstream
        ("Googled it", "Google", False, False),  # whole words only
        ("It was Google.", "Google", True, False),  # upstream keeps the period: "google."
        ("yes", "Yes", True, True),
        ("Yes.", "Yes", True, False),  # upstream splits on spaces only: "yes." is not "yes"
        ("There is not enough information.", "Insufficient information.", True, True),
        ("Insufficient Information", "Insufficient information.", True, True),
        ("I do not know", "Insufficient information.", False, False),
        ('The answer to the question is "no" because...', "no", True, True),
        ('the answer to the question is "no".', "Yes", False, False),
    ],
)
def test_multihoprag_strict_and_official_verdicts(pred, gold, strict, official):
    s = score_multihoprag(pred, gold)
    assert s.correct is strict
    assert official_multihop_match(pred, gold) is official
    assert s.detail == f"upstream_match={official}"


HE = d.load_humaneval(d.resolve("humaneval", d.samples_dir()))


def test_candidate_from_fenced_function_gets_prompt_imports():
    item = HE[0]
    reply = f"Here you go:\n```python\ndef {item.entry_point}(numbers: List[float], threshold: float) -> bool:\n    return False\n```"
    cand = build_candidate(reply, item.prompt, item.entry_point)
    assert cand.startswith("from typing import List") and "return False" in cand


def test_candidate_from_body_is_appended_to_prompt():
    item = HE[2]
    cand = build_candidate(item.canonical_solution, item.prompt, item.entry_point)
    assert cand == item.prompt + item.canonical_solution.strip("\n") + "\n"


async def test_humaneval_pass_at_1_in_the_sandbox(sandbox):
    item = HE[0]
    kw = dict(prompt=item.prompt, test=item.test, entry_point=item.entry_point, sandbox=sandbox)
    good = await score_humaneval(f"```python\n{item.prompt}{item.canonical_solution}```", **kw)
    bad = await score_humaneval(f"```python\n{item.prompt}    return True\n```", **kw)
    assert good.correct and good.detail.startswith("PASS")
    assert not bad.correct and bad.detail.startswith("FAIL")


HELPER_PROMPT = '''def encode_shift(s: str):
    """shifts every letter by 5"""
    return "".join(chr(((ord(ch) + 5 - ord("a")) % 26) + ord("a")) for ch in s)


def decode_shift(s: str):
    """takes as input string encoded with encode_shift function. Returns decoded string."""
'''
HELPER_TEST = """
def check(candidate):
    for word in ("hello", "xyz", ""):
        assert candidate(encode_shift(word)) == word
"""


async def test_a_whole_function_reply_keeps_the_helpers_the_prompt_defines(sandbox):
    """As the official harness runs prompt + completion: the tests call `encode_shift`, which
    only the prompt defines; a reply that writes the whole `decode_shift` must still see it."""
    reply = (
        "```python\ndef decode_shift(s: str):\n"
        '    return "".join(chr(((ord(ch) - 5 - ord("a")) % 26) + ord("a")) for ch in s)\n```'
    )
    cand = build_candidate(reply, HELPER_PROMPT, "decode_shift")
    assert "def encode_shift" in cand and cand.rstrip().endswith("for ch in s)")
    kw = dict(prompt=HELPER_PROMPT, test=HELPER_TEST, entry_point="decode_shift", sandbox=sandbox)
    assert (await score_humaneval(reply, **kw)).correct
    wrong = reply.replace("- 5", "- 4")
    assert not (await score_humaneval(wrong, **kw)).correct


async def test_humaneval_candidate_cannot_forge_a_pass_by_exiting(sandbox):
    item = HE[0]
    forged = f"```python\n{item.prompt}    return True\nimport sys\nsys.exit(0)\n```"
    s = await score_humaneval(
        forged, prompt=item.prompt, test=item.test, entry_point=item.entry_point, sandbox=sandbox
    )
    assert not s.correct


class NoSandboxDouble:
    """Test double: a sandbox that must not be called."""

    async def run_tests(self, *a, **kw):
        raise AssertionError("the sandbox was called for an empty answer")


@pytest.mark.parametrize("answer", [None, "", "```python\n```", {"code": "  "}])
async def test_humaneval_empty_answer_fails_without_running(answer):
    item = HE[0]
    s = await score_humaneval(
        answer,
        prompt=item.prompt,
        test=item.test,
        entry_point=item.entry_point,
        sandbox=NoSandboxDouble(),
    )
    assert not s.correct and s.detail == "no code in the answer"
