"""The baselines bare, sc and program: what they ask, the answer they read, their votes, and that
they run, meter and trace like a coordinator while vouching for nothing."""

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from verimap.base.accounting import Budget
from verimap.base.events import FINISH, MODEL_CALL, REPLIES, RUN_START, VOTE, EventBus, read_trace
from verimap.base.messages import ModelRequest
from verimap.base.model import ModelError
from verimap.base.usage import EXECUTOR
from verimap.config import RunConfig, Sampling
from verimap.evals.attempt import attempt_task
from verimap.evals.tasksets import get_benchmark
from verimap.methods.answers import BARE_PROMPTS, bare_prompt, qa_prompt, read_answer
from verimap.methods.baselines import (
    RAG_PASSAGES,
    UNVERIFIED,
    Bare,
    Program,
    Rag,
    SelfConsistency,
    baseline,
)
from verimap.methods.votes import by_text, by_value
from verimap.testing import EngineGoneSandboxDouble, ScriptedModel

PENS = "A shop sells pens at 17 dollars each. How much do 23 pens cost? Give the number."
STUB = '''from typing import List


def total(xs: List[int]) -> int:
    """The sum of xs.
    >>> total([1, 2, 3])
    6
    >>> total([])
    0
    """
'''
CODE_TASK = f"Complete the following Python function.\n\n```python\n{STUB}```"


def fenced(code: str) -> str:
    return f"Here it is.\n```python\n{code}\n```"


def replies(*texts: str) -> ScriptedModel:
    return ScriptedModel(list(texts))


def events() -> tuple[EventBus, list[Any]]:
    bus = EventBus()
    seen: list[Any] = []
    bus.subscribe(seen.append)
    return bus, seen


def of(seen: list, type_: str) -> list:
    return [e for e in seen if e.type == type_]


# ---- answers ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "kind", "answer"),
    [
        ("17 * 23 = 391.\nThe answer is 391.", "number", 391),
        ("Half of 5 is 2.5, so the answer is $2.50.", "number", 2.5),
        ("So the total is 1,200 dollars.", "number", 1200),
        ("I cannot tell.", "number", None),
        (fenced("def f(x):\n    return x"), "code", "def f(x):\n    return x\n"),
        ("def f(x):\n    return x", "code", "def f(x):\n    return x\n"),  # no fence
        (fenced("def f(x):\n    pass"), "code", None),  # a stub is no answer
        ("No code here.", "code", None),
        ("It was written in 1851.\n\n**Answer:** Herman Melville", "text", "Herman Melville"),
        ("Paris", "text", "Paris"),
        ("  \n", "text", None),
    ],
)
def test_the_answer_of_a_reply_per_kind(reply, kind, answer):
    assert read_answer(reply, kind) == answer


def test_the_prompt_is_the_plain_one_a_user_would_write():
    assert bare_prompt("Q?", "number") == BARE_PROMPTS["number"].format(task="Q?")
    assert "The answer is N." in bare_prompt("Q?", "number")
    # A function stub is shown as code; a task in words that shows one is asked as written.
    assert bare_prompt(STUB, "code").startswith("Complete this Python function.")
    assert f"```python\n{STUB}```" in bare_prompt(STUB, "code")
    assert bare_prompt(CODE_TASK, "code").startswith(CODE_TASK + "\n\nReply with the complete")
    assert "in one line" in bare_prompt("Who?", "text")


# ---- bare ---------------------------------------------------------------------------------------


async def test_bare_makes_one_metered_call_and_traces_it_but_verifies_nothing(tmp_path):
    model = replies("17 * 23 = 391.\nThe answer is 391.")
    bus, seen = events()
    runner = Bare(
        model, None, kind="number", config=RunConfig(sampling=Sampling(temperature=0.0)), events=bus
    )
    r = await runner.run(PENS, trace_path=tmp_path / "bare.jsonl")
    assert r.status == "success" and r.answer == 391 and r.final_node == "bare"
    assert r.verified is False and r.unverified_reason == UNVERIFIED
    assert r.confidence is None and r.error is None
    [req] = model.requests
    assert req.role == EXECUTOR and req.settings.temperature == 0.0
    assert req.messages[0].content == bare_prompt(PENS, "number")
    usage = r.usage.roles[EXECUTOR]
    assert usage.calls == 1 and usage.prompt_tokens > 0 and usage.completion_tokens > 0
    trace = read_trace(r.trace_path)
    assert [e.type for e in trace] == [RUN_START, MODEL_CALL, REPLIES, FINISH]
    assert trace[0].data["method"] == "bare" and trace[0].data["parameters"]["kind"] == "number"
    assert trace[2].data["replies"] == [model.responses[0].content]
    assert trace[2].data["answers"] == [391]
    assert [e.type for e in seen] == [e.type for e in trace]


async def test_bare_fails_with_a_clear_error_when_the_reply_has_no_answer():
    r = await Bare(replies("I am not sure."), None, kind="code").run(STUB)
    assert r.status == "failed" and r.answer is None
    assert r.error == "no ```python code block with a function in the reply"
    assert r.verified is False and r.unverified_reason == UNVERIFIED


async def test_a_reply_is_cut_to_a_few_kb_in_the_trace(tmp_path):
    r = await Bare(replies("x" * 50_000 + "\nThe answer is 3."), kind="number").run(
        "Q", trace_path=tmp_path / "t.jsonl"
    )
    [event] = [e for e in read_trace(r.trace_path) if e.type == REPLIES]
    assert r.answer == 3 and len(event.data["replies"][0]) < 4000


async def test_a_dead_endpoint_is_infrastructure_not_a_wrong_answer():
    r = await Bare(replies(ModelError("server went away")), kind="number").run("Q")
    assert r.status == "failed" and r.error_kind == "infrastructure"
    assert "server went away" in (r.error or "") and r.usage.roles[EXECUTOR].calls == 1


# ---- self-consistency ----------------------------------------------------------------------------


async def test_sc_draws_k_samples_at_temperature_0_7_and_the_majority_value_wins(tmp_path):
    model = replies(*(f"The answer is {n}." for n in ("20", "18", "18.0", "7", "18.0000001")))
    bus, seen = events()
    sc = SelfConsistency(model, None, kind="number", samples=5, events=bus)
    r = await sc.run("Q", trace_path=tmp_path / "sc.jsonl")
    assert [q.settings.temperature for q in model.requests] == [0.7] * 5
    assert r.status == "success" and r.answer == 18 and r.confidence == pytest.approx(3 / 5)
    assert r.verified is False and r.unverified_reason == UNVERIFIED
    assert r.usage.roles[EXECUTOR].calls == 5
    [vote] = of(seen, VOTE)
    assert vote.data["by"] == "value" and vote.data["winner"] == 18 and vote.data["share"] == 0.6
    assert [(g["answer"], g["count"], g["samples"]) for g in vote.data["groups"]] == [
        (18, 3, [1, 2, 4]),
        (20, 1, [0]),
        (7, 1, [3]),
    ]
    assert len(of(seen, REPLIES)[0].data["replies"]) == 5
    assert of(read_trace(r.trace_path), RUN_START)[0].data["parameters"]["samples"] == 5


async def test_sc_breaks_a_tie_for_the_earliest_answer_and_samples_without_one_count_against():
    model = replies(
        "The answer is 5.", "no idea", "The answer is 6.", "The answer is 6.", "The answer is 5."
    )
    r = await SelfConsistency(model, kind="number", samples=5).run("Q")
    assert r.answer == 5 and r.confidence == pytest.approx(2 / 5)


async def test_sc_defaults_to_four_samples_and_fails_when_none_has_an_answer():
    model = ScriptedModel(lambda req: "I do not know.")
    r = await SelfConsistency(model, kind="number").run("Q")
    assert model.calls == 4 and r.status == "failed" and r.confidence is None
    assert r.error == "none of the 4 samples gave an answer (no final number)"


MADE_UP = "```python\nprint(17 * 23)\n```\n```output\n400\n```\nThe answer is 400."


async def test_a_number_a_reply_computes_with_code_is_read_by_running_the_code(process_sandbox):
    """The output a model writes under its own code is made up; sc and bare run the code."""
    bus, seen = events()
    model = replies(MADE_UP, "The answer is 400.", MADE_UP)
    r = await SelfConsistency(model, process_sandbox, kind="number", samples=3, events=bus).run("Q")
    assert r.answer == 391 and r.confidence == pytest.approx(2 / 3)
    [rep] = of(seen, REPLIES)
    assert rep.data["answers"] == [391, 400, 391]
    assert [x and x["printed"] for x in rep.data["ran"]] == ["391", None, "391"]
    bare = await Bare(replies(MADE_UP), process_sandbox, kind="number").run("Q")
    assert bare.answer == 391
    # without a sandbox, as written
    assert (await Bare(replies(MADE_UP), None, kind="number").run("Q")).answer == 400
    failing = "```python\nprint(total)\n```\n```output\n400\n```\nThe answer is 400."
    r = await Bare(replies(failing), process_sandbox, kind="number").run("Q")
    assert r.status == "failed" and r.answer is None
    assert (
        r.error
        and r.error.startswith("the reply's program gave no number")
        and "NameError" in r.error
    )


async def test_a_sandbox_that_cannot_run_a_replys_code_is_infrastructure(tmp_path):
    gone = EngineGoneSandboxDouble()
    sc = SelfConsistency(replies(MADE_UP, MADE_UP), gone, kind="number", samples=2)
    r = await sc.run("Q", trace_path=tmp_path / "sc.jsonl")
    assert r.status == "failed" and r.error_kind == "infrastructure"
    assert "could not run a reply's program" in (r.error or "")
    [rep] = of(read_trace(r.trace_path), REPLIES)
    assert rep.data["replies"] == [MADE_UP] and rep.data["answers"] == [None]


def test_votes_on_numbers_and_texts():
    assert by_value([0.1 + 0.2, 0.3, 1]).winner.members == [0, 1]
    assert by_value([None, None]).winner is None
    vote = by_text(["The Eiffel Tower.", "Big Ben", "the eiffel tower", "Big Ben"])
    assert vote.winner.answer == "The Eiffel Tower." and vote.share == 0.5  # tie: the earliest


async def test_sc_on_text_votes_by_normalised_answer():
    model = replies("Think...\nParis.", "It is\nLyon", "So it is\nparis")
    r = await SelfConsistency(model, kind="text", samples=3).run("Capital of France?")
    assert r.answer == "Paris." and r.confidence == pytest.approx(2 / 3)


WRONG = "def total(xs):\n    return len(xs)"
RIGHT = "def total(xs: List[int]) -> int:\n    return sum(xs)"  # needs the task's import
ALSO_RIGHT = (
    "def total(xs):\n    # add them up\n    s = 0\n    for x in xs:\n        s += x\n    return s"
)


async def test_sc_on_code_votes_by_behaviour_in_the_sandbox(process_sandbox):
    model = replies(fenced(WRONG), fenced(RIGHT), "no code", fenced(ALSO_RIGHT))
    bus, seen = events()
    sc = SelfConsistency(model, process_sandbox, kind="code", samples=4, events=bus)
    r = await sc.run(CODE_TASK)
    assert r.status == "success" and r.answer == RIGHT + "\n"
    assert r.confidence == pytest.approx(2 / 4)
    [vote] = of(seen, VOTE)
    assert vote.data["by"] == "behaviour"
    assert [g["samples"] for g in vote.data["groups"]] == [[1, 3], [0]]


async def test_sc_on_code_breaks_a_behaviour_tie_for_the_earliest_sample(process_sandbox):
    model = replies(fenced(WRONG), fenced(RIGHT))
    r = await SelfConsistency(model, process_sandbox, kind="code", samples=2).run(CODE_TASK)
    assert r.answer == WRONG + "\n" and r.confidence == 0.5


async def test_sc_on_code_with_no_inputs_takes_the_most_frequent_code_text(process_sandbox):
    # The task names no function, so nothing can be run: samples equal up to layout and
    # comments are the same answer.
    model = replies(
        fenced(WRONG),
        fenced(RIGHT),
        fenced("def total(xs: List[int]) -> int:\n    return sum(xs)  # the sum"),
    )
    bus, seen = events()
    sc = SelfConsistency(model, process_sandbox, kind="code", samples=3, events=bus)
    r = await sc.run("Write a function that sums a list.")
    assert r.answer == RIGHT + "\n" and r.confidence == pytest.approx(2 / 3)
    assert of(seen, VOTE)[0].data["by"] == "code text"


async def test_sc_stops_at_the_call_budget_with_what_it_sampled_in_the_trace(tmp_path):
    model = ScriptedModel(lambda req: "The answer is 1.")
    config = RunConfig(budget=Budget(max_llm_calls=2))
    sc = SelfConsistency(model, kind="number", samples=4, config=config)
    r = await sc.run("Q", trace_path=tmp_path / "t.jsonl")
    assert r.status == "budget_exhausted" and model.calls == 2 and r.answer is None
    assert r.usage.roles[EXECUTOR].calls == 2 and "budget" in (r.error or "")
    types = [e.type for e in read_trace(r.trace_path)]
    assert types == [RUN_START, MODEL_CALL, MODEL_CALL, REPLIES, "budget_exhausted", FINISH]
    assert r.verified is False and r.unverified_reason == UNVERIFIED


# ---- program ------------------------------------------------------------------------------------


def program(*bodies: str) -> Callable[[ModelRequest], str]:
    """Replies with `def solution()` of each body in turn."""
    calls = iter(bodies)
    return lambda req: fenced(f"def solution():\n{next(calls)}")


async def test_program_answers_with_what_its_program_returns_in_the_sandbox(
    process_sandbox, tmp_path
):
    model = ScriptedModel(program("    price = 17\n    pens = 23\n    return price * pens"))
    bus, seen = events()
    runner = Program(model, process_sandbox, kind="number", events=bus)
    r = await runner.run(PENS, trace_path=tmp_path / "p.jsonl")
    assert r.status == "success" and r.answer == 391 and isinstance(r.answer, int)
    assert r.verified is False and r.unverified_reason == UNVERIFIED
    assert r.usage.roles[EXECUTOR].calls == 1 and model.requests[0].role == EXECUTOR
    [replies_] = of(seen, REPLIES)
    assert replies_.data["program"]["printed"] == "391" and replies_.data["answers"] == [391]
    assert [e.type for e in read_trace(r.trace_path)] == [RUN_START, MODEL_CALL, REPLIES, FINISH]


async def test_program_fixes_a_program_that_fails_once(process_sandbox):
    model = ScriptedModel(program("    return pens * 17", "    pens = 23\n    return pens * 17"))
    r = await Program(model, process_sandbox, kind="number").run(PENS)
    assert r.answer == 391 and r.usage.roles[EXECUTOR].calls == 2
    assert "NameError" in model.requests[1].messages[-1].content


async def test_program_fails_when_its_program_gives_no_number(process_sandbox):
    model = ScriptedModel(program("    return 'many'", "    return 'many'"))
    r = await Program(model, process_sandbox, kind="number").run(PENS)
    assert r.status == "failed" and r.answer is None
    assert r.error == (
        "the program gave no number: solution() returned 'many', not a number: it must return "
        "the answer"
    )


async def test_program_on_code_is_bare():
    model = replies(fenced(RIGHT))
    r = await Program(model, None, kind="code").run(STUB)
    assert r.answer == RIGHT + "\n" and r.final_node == "program"
    assert model.requests[0].messages[0].content == bare_prompt(STUB, "code")


# ---- the factory --------------------------------------------------------------------------------


def test_the_factory_maps_domains_to_kinds_and_passes_k_to_sc_only():
    models = {"executor": ScriptedModel([]), "planner": ScriptedModel([])}
    sc = baseline("sc", models, None, domain="programming", config=RunConfig(), samples=7)
    assert isinstance(sc, SelfConsistency) and sc.kind == "code" and sc.samples == 7
    assert sc.model is models["executor"]
    bare = baseline("bare", models, None, domain="qa", samples=7)
    assert isinstance(bare, Bare) and bare.kind == "text"
    assert baseline("program", models, None, domain=None).kind == "number"
    assert baseline("sc", models, None, domain="math").samples == 4
    with pytest.raises(ValueError, match="unknown baseline"):
        baseline("cot", models, None, domain="math")
    with pytest.raises(ValueError, match="domain 'chess'"):
        baseline("bare", models, None, domain="chess")


async def test_an_eval_record_of_sc_carries_its_calls_tokens_and_vote_share(tmp_path):
    bench = get_benchmark("gsm8k", Path(__file__).resolve().parents[2] / "datasets")
    task = bench.tasks()[0]
    model = replies(*(f"The answer is {n}." for n in (task.gold, "1", task.gold)))
    sc = baseline("sc", {EXECUTOR: model}, None, domain=bench.domain, samples=3)

    async def solve(t, run, trace_path):
        return await sc.run(t.prompt, trace_path=trace_path)

    attempt = await attempt_task(bench, "sc", task, 0, tmp_path / "t.jsonl", None, solve)
    rec = attempt.record
    assert rec is not None and rec["correct"] and rec["verified"] is False
    assert rec["meta"]["confidence"] == pytest.approx(2 / 3)
    assert rec["usage"][EXECUTOR]["calls"] == 3 and rec["tokens"] > 0


# ---- questions over a corpus (MultiHopRAG) ------------------------------------------------------


@pytest.fixture
def qa_bench(samples, tmp_path, monkeypatch):
    from tests.evals.test_retrieval import HashingEmbedderDouble

    monkeypatch.setenv("VERIMAP_CACHE", str(tmp_path / "cache"))
    return get_benchmark("multihoprag", samples, embedder=HashingEmbedderDouble())


def _qa(bench, name, model, **kw):
    return baseline(
        name, {EXECUTOR: model}, None, domain=bench.domain, tools=bench.tools(None), **kw
    )


async def test_rag_reads_the_top_passages_and_the_question_in_one_call(qa_bench, tmp_path):
    task = qa_bench.tasks()[0]
    question = qa_bench.queries[0].query
    model = replies("Northwind Robotics")
    rag = _qa(qa_bench, "rag", model)
    assert isinstance(rag, Rag)
    attempt = await attempt_task(
        qa_bench,
        "rag",
        task,
        0,
        tmp_path / "t.jsonl",
        None,
        lambda t, run, path: rag.run(t.prompt, trace_path=path),
    )
    rec = attempt.record
    assert rec is not None and rec["correct"] and rec["usage"][EXECUTOR]["calls"] == 1
    prompt = model.requests[0].messages[0].content
    hits = qa_bench.index.search(question, k=RAG_PASSAGES)
    assert prompt == qa_prompt(
        question, qa_bench.tools(None).get("search").passages(task.prompt, RAG_PASSAGES)
    )
    assert all(h.chunk.text in prompt for h in hits) and f"[{RAG_PASSAGES}]" in prompt
    assert "search tool" not in prompt and prompt.endswith("Answer:")


async def test_bare_answers_a_question_over_a_corpus_closed_book(qa_bench):
    task = qa_bench.tasks()[1]
    model = replies("Yes")
    r = await _qa(qa_bench, "bare", model).run(task.prompt)
    assert r.answer == "Yes"
    assert model.requests[0].messages[0].content == qa_prompt(qa_bench.queries[1].query)


async def test_sc_votes_over_samples_that_read_the_same_passages(qa_bench):
    task = qa_bench.tasks()[2]
    model = replies("Yes.", "no", "yes")
    sc = _qa(qa_bench, "sc", model, samples=3)
    r = await sc.run(task.prompt)
    prompts = [req.messages[0].content for req in model.requests]
    assert len(prompts) == 3 and len(set(prompts)) == 1 and "Passages:" in prompts[0]
    assert r.answer == "Yes." and r.confidence == pytest.approx(2 / 3)


def test_rag_needs_a_question_over_a_corpus(qa_bench):
    models = {EXECUTOR: ScriptedModel([])}
    with pytest.raises(ValueError, match="rag baseline answers questions over a corpus"):
        baseline("rag", models, None, domain="qa")
    with pytest.raises(ValueError, match="rag baseline answers questions over a corpus"):
        baseline("rag", models, None, domain="math", tools=qa_bench.tools(None))


async def test_a_text_task_without_a_corpus_keeps_the_plain_prompt():
    model = replies("Paris")
    r = await baseline("bare", {EXECUTOR: model}, None, domain="qa").run("Capital of France?")
    assert r.answer == "Paris"
    assert model.requests[0].messages[0].content == bare_prompt("Capital of France?", "text")
