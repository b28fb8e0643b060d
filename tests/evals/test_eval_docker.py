"""Domain tools and HumanEval scoring inside the Docker sandbox (marker `docker`)."""

import pytest

from verimap.evals import data as d
from verimap.evals.scoring import score_humaneval
from verimap.evals.tools import programming_tools, sympy_tool

from .conftest import SAMPLES


@pytest.mark.docker
async def test_sympy_and_workspace_tools_in_docker(docker_sandbox):
    cas = sympy_tool(docker_sandbox)
    assert (
        await cas.run(expression="2*x + 3 = 11", operation="solve", variable="x")
    ).strip() == "[4]"
    reg = programming_tools(docker_sandbox)
    await reg.call("write_file", {"path": "sol.py", "content": "def f(x):\n    return x + 1\n"})
    await reg.call(
        "write_file",
        {
            "path": "test_sol.py",
            "content": "from sol import f\n\ndef test_f():\n    assert f(1) == 3\n",
        },
    )
    assert "1 failed" in await reg.call("run_pytest", {})
    await reg.call("edit_file", {"path": "test_sol.py", "old": "== 3", "new": "== 2"})
    assert "1 passed" in await reg.call("run_pytest", {})
    await reg.call(
        "write_file",
        {
            "path": "main.py",
            "content": "import sys\nfrom sol import f\nprint(f(int(sys.argv[1])))\n",
        },
    )
    assert (await reg.call("run_script", {"path": "main.py", "args": ["41"]})).strip() == "42"


@pytest.mark.docker
async def test_humaneval_scoring_in_docker(docker_sandbox):
    item = d.load_humaneval(d.resolve("humaneval", SAMPLES))[0]
    kw = dict(
        prompt=item.prompt, test=item.test, entry_point=item.entry_point, sandbox=docker_sandbox
    )
    assert (await score_humaneval(item.prompt + item.canonical_solution, **kw)).correct
    assert not (await score_humaneval(item.prompt + "    return True\n", **kw)).correct
