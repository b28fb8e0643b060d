import json

import pytest

from verimap.evals import data as d
from verimap.evals.retrieval import CorpusIndex
from verimap.evals.tools import math_tools, programming_tools, qa_tools, sympy_tool

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


async def test_search_tool_pages_and_filters(samples, tmp_path):
    _, corpus = d.load_multihoprag(d.resolve("multihoprag", samples))
    idx = CorpusIndex.build(corpus, embedder=HashingEmbedderDouble(), cache_dir=tmp_path)
    reg = qa_tools(idx)
    p1 = await reg.call("search", json.dumps({"query": "Greenleaf Bank"}))
    p2 = await reg.call("search", {"query": "Greenleaf Bank", "page": 2})
    assert p1.startswith("[1]") and p2.startswith("[5]")
    only = await reg.call("search", {"query": "bank", "source": "Money Wire"})
    assert "Money Wire" in only and "The Ledger" not in only
    assert "error" in await reg.call("search", {"query": "x", "page": 0})
