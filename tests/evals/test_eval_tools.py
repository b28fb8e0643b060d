import json

import pytest

from verimap.base.messages import ToolMessage, UserMessage
from verimap.checks.evidence import passages
from verimap.core.agent import flatten_tool_messages
from verimap.evals import data as d
from verimap.evals.retrieval import CorpusIndex
from verimap.evals.tools import (
    QA_GUIDANCE,
    QA_INSTRUCTION,
    SearchLimits,
    math_tools,
    named_sources,
    programming_tools,
    qa_tools,
    question_of,
    source_names,
    sympy_tool,
)
from verimap.tools.registry import ToolsExhausted, transcript_scope

from .test_retrieval import HashingEmbedderDouble


async def test_math_tools(sandbox):
    reg = math_tools(sandbox)
    assert set(reg.names()) == {"python", "calculator", "sympy"}
    assert (await reg.call("calculator", {"expression": "1,234 * 2"})).strip() == "2468"
    assert (await reg.call("python", {"code": "print(sum(range(10)))"})).strip() == "45"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"expression": "2*x + 3 = 11", "operation": "solve", "variable": "x"}, "[4]"),
        ({"expression": "x**2 - 1", "operation": "factor"}, "(x - 1)*(x + 1)"),
        ({"expression": "x**3", "operation": "diff", "variable": "x"}, "3*x**2"),
        ({"expression": "Rational(1, 3) + Rational(1, 6)"}, "1/2"),
    ],
)
async def test_sympy_tool_in_the_sandbox(sandbox, args, expected):
    assert (await sympy_tool(sandbox).run(**args)).strip() == expected


async def test_sympy_rejects_unknown_operation(sandbox):
    assert "error" in await sympy_tool(sandbox).run(expression="x", operation="launch")


async def test_workspace_create_edit_run_pytest_delete(sandbox):
    reg = programming_tools(sandbox)
    await reg.call("write_file", {"path": "sol.py", "content": "def inc(x):\n    return x + 2\n"})
    await reg.call(
        "write_file",
        {
            "path": "tests/test_sol.py",
            "content": "from sol import inc\n\ndef test_inc():\n    assert inc(1) == 2\n",
        },
    )
    failing = await reg.call("run_pytest", {})
    assert "1 failed" in failing
    assert "edited" in await reg.call(
        "edit_file", {"path": "sol.py", "old": "x + 2", "new": "x + 1"}
    )
    assert "1 passed" in await reg.call("run_pytest", {})
    await reg.call(
        "write_file",
        {
            "path": "main.py",
            "content": "import sys\nfrom sol import inc\nprint(inc(int(sys.argv[1])))\n",
        },
    )
    assert (await reg.call("run_script", {"path": "main.py", "args": ["41"]})).strip() == "42"
    assert "deleted" in await reg.call("delete_file", {"path": "main.py"})
    assert "main.py" not in await reg.call("list_files", {})


@pytest.mark.parametrize("path", ["../escape.py", "/etc/passwd", "", "a/../../b.py"])
async def test_workspace_rejects_paths_outside(sandbox, path):
    reg = programming_tools(sandbox)
    assert (await reg.call("write_file", {"path": path, "content": "x"})).startswith(
        "error: bad path"
    )


async def test_workspace_edit_needs_a_unique_match(sandbox):
    reg = programming_tools(sandbox)
    await reg.call("write_file", {"path": "a.py", "content": "x = 1\nx = 1\n"})
    assert "occurs 2 times" in await reg.call(
        "edit_file", {"path": "a.py", "old": "x = 1", "new": "y"}
    )


@pytest.fixture
def fixture_index(samples, tmp_path):
    _, corpus = d.load_multihoprag(d.resolve("multihoprag", samples))
    return CorpusIndex.build(corpus, embedder=HashingEmbedderDouble(), cache_dir=tmp_path)


def _bodies(text):
    return [e.split("\n", 1)[1] for e in text.split("\n\n")]


def _labels(text):
    return [ln.split("]")[0] + "]" for ln in text.splitlines() if ln.startswith("[")]


async def test_search_tool_pages_and_filters(fixture_index):
    reg = qa_tools(fixture_index)
    p1 = await reg.call("search", json.dumps({"query": "Greenleaf Bank"}))
    p2 = await reg.call("search", {"query": "Greenleaf Bank", "page": 2})
    assert p1.startswith("[1]") and p2 and p2 != p1
    assert not set(_bodies(p1)) & set(_bodies(p2))  # pages do not overlap
    only = await reg.call("search", {"query": "bank", "source": "Money Wire"})
    assert "Money Wire" in only and "The Ledger" not in only
    assert "error" in await reg.call("search", {"query": "x", "page": 0})


async def test_results_are_short_passages_near_the_query(fixture_index):
    limits = SearchLimits(results=3, words=12)
    out = await qa_tools(fixture_index, limits=limits).call("search", {"query": "Greenleaf Bank"})
    entries = out.split("\n\n")
    assert len(entries) == 3
    for e in entries:
        _title, meta, body = e.split("\n", 2)
        assert meta.startswith("Source: ") and "; date: " in meta
        assert len(body.replace("…", "").split()) <= 12 + 1
    # What the evidence checks read back is what the tool wrote, flattened or not.
    found = passages(
        [UserMessage(content="task"), ToolMessage(tool_call_id="c", name="search", content=out)]
    )
    hits = fixture_index.search("Greenleaf Bank", k=3)
    assert [p.source for p in found] == [h.chunk.source for h in hits]
    assert [p.date for p in found] == [h.chunk.published_at[:10] for h in hits]
    flat = flatten_tool_messages(
        [UserMessage(content="task"), ToolMessage(tool_call_id="c", name="search", content=out)]
    )
    assert passages(flat) == found


async def test_a_conversation_is_not_shown_a_search_or_a_passage_twice(fixture_index):
    reg = qa_tools(fixture_index)
    with transcript_scope():
        first = await reg.call("search", {"query": "Greenleaf Bank"})
        again = await reg.call("search", {"query": "greenleaf bank!", "page": 2})
        other = await reg.call("search", {"query": "Greenleaf Bank profits"})
    assert _labels(first) == ["[1]", "[2]", "[3]", "[4]"]
    assert again.startswith("Already searched for this")
    shown = [ln for ln in other.splitlines() if "(shown above)" in ln]
    assert shown and all(ln.split("]")[0] + "]" in _labels(first) for ln in shown)
    fresh = [lb for lb in _labels(other) if lb not in _labels(first)]
    assert fresh == [f"[{i}]" for i in range(5, 5 + len(fresh))]
    with transcript_scope():  # another conversation has seen nothing
        assert await reg.call("search", {"query": "Greenleaf Bank"}) == first


async def test_a_conversation_gets_a_bounded_number_of_searches(fixture_index):
    reg = qa_tools(fixture_index, limits=SearchLimits(searches=2))
    with transcript_scope():
        await reg.call("search", {"query": "bank"})
        await reg.call("search", {"query": "bank"})  # a repeat counts too
        with pytest.raises(ToolsExhausted, match="No searches left"):
            await reg.call("search", {"query": "robot"})
    with transcript_scope():
        assert (await reg.call("search", {"query": "robot"})).startswith("[1]")


async def test_a_conversation_gets_a_bounded_amount_of_results(fixture_index):
    reg = qa_tools(fixture_index, limits=SearchLimits(chars=500))
    with transcript_scope():
        first = await reg.call("search", {"query": "Greenleaf Bank"})
        assert len(first) <= 500 + 40 and "left out: no room" in first
        with pytest.raises(ToolsExhausted, match="filled the space"):
            await reg.call("search", {"query": "football"})


async def test_passages_search_the_question_only(fixture_index):
    tool = qa_tools(fixture_index).get("search")
    task = f"Which bank raised its rates?\n\n{QA_INSTRUCTION}"
    assert question_of(task) == "Which bank raised its rates?"
    text = tool.passages(task, 3)
    hits = fixture_index.search("Which bank raised its rates?", k=3)
    assert _labels(text) == ["[1]", "[2]", "[3]"]
    assert all(h.chunk.text in text for h in hits)


async def test_filters_no_article_passes_are_ignored_and_named(fixture_index):
    reg = qa_tools(fixture_index)
    args = {"query": "Greenleaf Bank", "title": "Yes", "source": "Money Wire", "date_to": "soon"}
    out = await reg.call("search", args)
    assert out.startswith("(ignored filters that match no article: title='Yes', date_to='soon')")
    assert "Money Wire" in out and "The Ledger" not in out  # the filter that matches is kept
    blank = await reg.call("search", {"query": "Greenleaf Bank", "title": "", "author": ""})
    assert blank.startswith("[1]")


def test_qa_tools_tell_the_executor_to_look_facts_up(fixture_index):
    from verimap.core.executor import Executor
    from verimap.planning.fallback import whole_task_plan
    from verimap.testing import ScriptedModel

    node = whole_task_plan("Who won?", "qa", with_vfs=False).nodes[0]
    tools = qa_tools(fixture_index)
    prompt = Executor(ScriptedModel([]), tools).build_messages(node, {"USER_TASK": "Who won?"})
    text = prompt[-1].content
    assert text.rstrip().endswith(
        f"{QA_GUIDANCE} End by stating the final value of every required output."
    )
    assert "Think step by step" not in text
    plain = Executor(ScriptedModel([]), math_tools(None)).build_messages(node, {"USER_TASK": "1+1"})
    assert "Think step by step" in plain[-1].content


def test_source_names_are_the_names_before_a_tagline():
    sources = [
        "Cnbc | World Business News Leader",
        "BBC News - Technology",
        "BBC News - Entertainment & Arts",
        "Live Science: The Most Interesting Articles",
        "The Age",
    ]
    assert source_names(sources) == ["Live Science", "BBC News", "The Age", "Cnbc"]


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Did CNBC report it before The Age did?", ["Cnbc", "The Age"]),
        ("Did The Age report it before Cnbc?", ["The Age", "Cnbc"]),
        ("He made a fortune in The Agenda", []),
        ("What did Fortune say, and Fortune again?", ["Fortune"]),
    ],
)
def test_named_sources_are_found_on_word_boundaries_in_order(text, found):
    assert named_sources(text, ["Fortune", "The Age", "Cnbc"]) == found


async def test_the_opening_searches_the_sources_the_instruction_names_else_the_whole_corpus(
    fixture_index,
):
    reg = qa_tools(fixture_index)
    ask = "Find what Money Wire reported."
    question = f"Did Money Wire and The Ledger both report it?\n{QA_INSTRUCTION}"
    own = reg.opening_calls(ask, question)
    assert own == [("search", json.dumps({"query": ask, "source": "Money Wire"}))]
    generic = "Answer the question in the task."
    both = reg.opening_calls(generic, question)
    query = f"{generic}\nDid Money Wire and The Ledger both report it?"
    assert [json.loads(a) for _, a in both] == [
        {"query": query, "source": s} for s in ("Money Wire", "The Ledger")
    ]
    plain = reg.opening_calls("Who runs Greenleaf Bank?")
    assert plain == [("search", json.dumps({"query": "Who runs Greenleaf Bank?"}))]
    with transcript_scope():
        out = await reg.call(*own[0])
    assert "Money Wire" in out and "The Ledger" not in out
    assert qa_tools(None).opening_calls("Who runs Greenleaf Bank?") == []


def test_the_search_tool_knows_which_sources_the_corpus_holds(fixture_index):
    tool = qa_tools(fixture_index).get("search")
    assert tool.holds_source("Money Wire") and tool.holds_source("the ledger")
    assert not tool.holds_source("Variety") and not tool.holds_source(" ")
    assert qa_tools(None).get("search").holds_source("Money Wire") is None  # it cannot tell
