"""Outcome semantics shared by both backends (process always; Docker when available)."""

import asyncio
import re

import pytest

from verimap.sandbox import Outcome
from verimap.sandbox.policy import BYTECODE_MAGIC


async def test_vf_pass_fail_policy(any_sandbox):
    sb = any_sandbox
    ok = await sb.run_vf("assert outputs['y'] == inputs['x'] + 1", {"x": 1}, {"y": 2})
    bad = await sb.run_vf("assert outputs['y'] == 3, 'y must be 3'", {"x": 1}, {"y": 2})
    pol = await sb.run_vf("import os\nassert os.getcwd()", {}, {})
    assert ok.outcome is Outcome.PASS
    assert (
        bad.outcome is Outcome.FAIL and bad.message == "y must be 3" and "line 1" in bad.traceback
    )
    assert pol.outcome is Outcome.POLICY and "import of 'os' is not allowed" in pol.message


async def test_vfs_travel_as_bytecode_the_worker_can_load_else_as_ast(any_sandbox, monkeypatch):
    sb = any_sandbox
    await sb.run_vf("assert True", {}, {})
    magic = sb.pool.worker_magic
    assert isinstance(magic, str) and len(magic) == 8  # the worker said which bytecode it reads
    jobs = []
    run = sb.pool.run

    async def spy(job, timeout):
        jobs.append(job)
        return await run(job, timeout)

    monkeypatch.setattr(sb.pool, "run", spy)
    code = "a = 1\nassert outputs['y'] == inputs['x'] + a, 'off by one'"
    forms = {"bytecode": magic, "ast": "a-worker-on-another-python"}
    for form, worker_magic in forms.items():
        monkeypatch.setattr(sb.pool, "worker_magic", worker_magic)
        ok = await sb.run_vf(code, {"x": 1}, {"y": 2})
        bad = await sb.run_vf(code, {"x": 1}, {"y": 3})
        pol = await sb.run_vf("getattr(1, '__class__')", {}, {})
        sent = jobs[-1]
        if form == "ast" or magic != BYTECODE_MAGIC:
            assert "ast" in sent and "code" not in sent
        else:
            assert "code" in sent and "ast" not in sent and sent["magic"] == magic
        assert ok.outcome is Outcome.PASS, (form, ok)
        assert bad.outcome is Outcome.FAIL and bad.message == "off by one", (form, bad)
        assert 'File "<vf>", line 2' in bad.traceback
        assert pol.outcome is Outcome.POLICY and "__class__" in pol.message, (form, pol)


async def test_a_vf_sees_no_name_of_an_earlier_vf_or_of_the_warm_up(any_sandbox):
    # the VF namespace is built once in the spawner; each job process must get it pristine
    sb = any_sandbox
    for _ in range(3):  # both workers of the pool, and the same one again
        first = await sb.run_vf("leaked = 1\nassert leaked == 1", {}, {})
        assert first.outcome is Outcome.PASS, first
    for name in ("leaked", "x"):  # x: the name the warm-up assigns
        res = await sb.run_vf(f"{name}", {}, {})
        assert res.outcome is Outcome.ERROR and f"name '{name}' is not defined" in res.message
    again = await sb.run_vf("assert len([1, 2]) == 2 and isinstance(inputs, dict)", {}, {})
    assert again.outcome is Outcome.PASS, again


async def test_vf_sees_tuples_sets_and_bytes_as_sent(any_sandbox):
    out = {"t": (1, 2), "s": {3}, "b": b"\x00\xff", "c": 1 + 2j, "n": None}
    code = (
        "assert outputs['t'] == (1, 2) and isinstance(outputs['t'], tuple)\n"
        "assert outputs['s'] == {3} and outputs['b'] == b'\\x00\\xff' and outputs['c'] == 1 + 2j\n"
        "assert outputs['n'] is None"
    )
    assert (await any_sandbox.run_vf(code, {}, out)).outcome is Outcome.PASS


async def test_vf_with_unserialisable_outputs_is_an_error_not_a_crash(any_sandbox):
    res = await any_sandbox.run_vf("assert True", {}, {"obj": object()})
    assert res.outcome is Outcome.ERROR and "plain data" in res.message


async def test_vf_timeout(any_sandbox):
    res = await any_sandbox.run_vf("while True:\n    pass", {}, {}, timeout=1)
    assert res.outcome is Outcome.TIMEOUT and res.duration_s < 6


async def test_program_files_argv_stdin(any_sandbox):
    code = (
        "import sys, pathlib\n"
        "from helper import twice\n"
        "print(twice(int(sys.argv[1])), pathlib.Path('data/in.txt').read_text(), sys.stdin.read())\n"
    )
    res = await any_sandbox.run_program(
        code,
        files={"helper.py": "def twice(x):\n    return 2 * x\n", "data/in.txt": "file"},
        argv=["21"],
        stdin="piped",
    )
    assert res.outcome is Outcome.PASS, res
    assert res.stdout == "42 file piped\n"


async def test_program_exit_codes(any_sandbox):
    assert (await any_sandbox.run_program("import sys; sys.exit(0)")).outcome is Outcome.PASS
    res = await any_sandbox.run_program("import sys; sys.exit(3)")
    assert res.outcome is Outcome.ERROR and "exit status 3" in res.message
    res = await any_sandbox.run_program("assert 1 == 2, 'boom'")
    assert res.outcome is Outcome.FAIL and "boom" in res.message and "AssertionError" in res.stderr


async def test_program_rejects_paths_outside_scratch(any_sandbox):
    with pytest.raises(ValueError, match="relative and inside the scratch"):
        await any_sandbox.run_program("pass", files={"../evil.py": "x"})
    with pytest.raises(ValueError, match="relative and inside the scratch"):
        await any_sandbox.run_program("pass", files={"/etc/evil": "x"})


async def test_pytest_runs_inside_the_sandbox(any_sandbox):
    files = {
        "solution.py": "def add(a, b):\n    return a + b\n",
        "test_solution.py": "from solution import add\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    }
    code = "import sys, pytest\nsys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', 'test_solution.py']))"
    ok = await any_sandbox.run_program(code, files=files, timeout=30)
    assert ok.outcome is Outcome.PASS, ok.stdout + ok.stderr
    assert "1 passed" in ok.stdout
    files["solution.py"] = "def add(a, b):\n    return a - b\n"
    bad = await any_sandbox.run_program(code, files=files, timeout=30)
    assert bad.outcome is Outcome.ERROR and "1 failed" in bad.stdout


async def test_run_tests_pass_and_fail(any_sandbox):
    tests = "def check(candidate):\n    assert candidate([3, 1, 2]) == [1, 2, 3]\n"
    ok = await any_sandbox.run_tests("def srt(x):\n    return sorted(x)\n", tests, "srt")
    bad = await any_sandbox.run_tests("def srt(x):\n    return x\n", tests, "srt")
    missing = await any_sandbox.run_tests("def other(x):\n    return x\n", tests, "srt")
    assert ok.outcome is Outcome.PASS
    assert bad.outcome is Outcome.FAIL
    assert missing.outcome is Outcome.ERROR and "no function named 'srt'" in missing.message


async def test_run_tests_candidate_names_never_stand_in_for_builtins(any_sandbox):
    """MBPP's tests wrap the call in `set(...)`, `abs(...)`: a candidate that defines those
    names (returning one constant) must not make both sides of an assertion equal."""
    tests = (
        "from __future__ import annotations\n"
        "def check(candidate):\n"
        "    assert set(common((1, 2), (2, 3))) == set((2,))\n"
        "    assert abs(common((1,), (1,))[0] - 1) < 1e-9\n"
    )
    forger = (
        "def common(a, b):\n    return (7,)\n"
        "def set(*args):\n    return 0\n"
        "def abs(x):\n    return 0\n"
    )
    honest = "def common(a, b):\n    return tuple(x for x in a if x in b)\n"
    forged = await any_sandbox.run_tests(forger, tests, "common")
    assert forged.outcome is Outcome.FAIL and "set(common" in forged.message
    assert (await any_sandbox.run_tests(honest, tests, "common")).outcome is Outcome.PASS
    # The entry point may itself have a builtin's name (MBPP task 126 asks for `sum`).
    own_sum = await any_sandbox.run_tests(
        "def sum(a, b):\n    return a - b\n",
        "def check(candidate):\n    assert sum(10, 4) == 6\n",
        "sum",
    )
    assert own_sum.outcome is Outcome.PASS


async def test_load_function_in_a_vf(any_sandbox):
    vf = (
        "f = load_function(outputs['code'], 'square')\n"
        "assert f(3) == 9, 'square(3) should be 9'\n"
        "assert f(-2) == 4\n"
    )
    good = await any_sandbox.run_vf(vf, {}, {"code": "def square(x):\n    return x * x\n"})
    fenced = await any_sandbox.run_vf(
        vf, {}, {"code": "```python\ndef square(x):\n    return x * x\n```"}
    )
    wrong = await any_sandbox.run_vf(vf, {}, {"code": "def square(x):\n    return x + x\n"})
    assert good.outcome is Outcome.PASS, good
    assert fenced.outcome is Outcome.PASS, fenced
    assert wrong.outcome is Outcome.FAIL and "square(3) should be 9" in wrong.message


async def test_many_tasks_share_the_pool(any_sandbox):
    results = await asyncio.gather(
        *(any_sandbox.run_vf(f"assert outputs['i'] == {i}", {}, {"i": i}) for i in range(24))
    )
    assert [r.outcome for r in results] == [Outcome.PASS] * 24
    wrong = await asyncio.gather(
        *(any_sandbox.run_vf(f"assert outputs['i'] == {i + 1}", {}, {"i": i}) for i in range(8))
    )
    assert [r.outcome for r in wrong] == [Outcome.FAIL] * 8


async def test_bad_timeout_is_rejected(any_sandbox):
    with pytest.raises(ValueError, match="timeout"):
        await any_sandbox.run_program("pass", timeout=0)


async def test_oversized_program_payload_is_rejected_before_sending(any_sandbox):
    with pytest.raises(ValueError, match="the limit is"):
        await any_sandbox.run_program("pass", files={"big.txt": "x" * (17 * 1024 * 1024)})
    assert (await any_sandbox.run_program("pass")).outcome is Outcome.PASS


def test_unknown_backend_is_a_clear_error():
    from verimap.sandbox import SandboxUnavailable, get_sandbox

    with pytest.raises(SandboxUnavailable, match="unknown sandbox backend 'bogus'"):
        get_sandbox("bogus")


def test_auto_falls_back_to_the_process_backend_without_a_daemon(monkeypatch):
    from verimap.sandbox import get_sandbox

    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.warns(RuntimeWarning, match="isolated far less"):
        sb = get_sandbox("auto", shared=False)
    assert sb.kind == "process"


async def test_program_ends_like_a_script_threads_joined_atexit_run(any_sandbox):
    code = (
        "import atexit, threading, time\n"
        "atexit.register(lambda: print('atexit ran'))\n"
        "def work():\n"
        "    time.sleep(0.2)\n"
        "    print('thread done')\n"
        "threading.Thread(target=work).start()\n"
        "import __main__\n"
        "print(__main__.__file__.endswith('main.py'))\n"
    )
    res = await any_sandbox.run_program(code)
    assert res.outcome is Outcome.PASS
    assert res.stdout == "True\nthread done\natexit ran\n"


async def test_tracebacks_show_the_users_code_not_the_worker(any_sandbox):
    prog = await any_sandbox.run_program("def f():\n    raise ValueError('bad')\nf()\n")
    vf = await any_sandbox.run_vf("x = 1\nassert outputs['y'] == 2, 'no'\n", {}, {"y": 1})
    assert prog.outcome is Outcome.ERROR and "raise ValueError('bad')" in prog.stderr
    assert 'File "<vf>", line 2' in vf.traceback
    worker_frame = re.compile(r'File "[^"]*[/\\]worker[/\\]\w+\.py"')
    assert not worker_frame.search(prog.stderr) and not worker_frame.search(vf.traceback)
    # the frames the worker leaves out are its own: a VF's call into a helper stays
    helper = await any_sandbox.run_vf("parse_number('no digits')", {}, {})
    assert helper.outcome is Outcome.ERROR and worker_frame.search(helper.traceback)


async def test_the_planners_demonstration_vfs_pass_right_outputs_and_fail_wrong_ones(any_sandbox):
    """A demonstration whose VFs do not run would teach the planner broken checks."""
    from verimap.base.plan import PythonVF
    from verimap.planning import prompts
    from verimap.planning.plan import parse_plan

    right = "def running_max(xs):\n    out, m = [], None\n    for x in xs:\n        m = x if m is None else max(m, x)\n        out.append(m)\n    return out\n"
    cases = [
        (
            prompts.CODE_DEMO_PLAN,
            "implement",
            {"USER_TASK": prompts.CODE_DEMO_TASK},
            {"code": right},
            {"code": "def running_max(xs):\n    return xs\n"},
        ),
        (
            prompts.DEMO_PLAN,
            "solve",
            {"USER_TASK": prompts.DEMO_TASK},
            {"answer": 1125},
            {"answer": -12.5},
        ),
        (
            prompts.QA_DEMO_PLAN,
            "check_revenue",
            {"find_buyer.company": "Acme"},
            {"answer": "Yes"},
            {"answer": "yes, it did"},
        ),
    ]
    for plan, node_id, inputs, good, bad in cases:
        vfs = [v for v in parse_plan(plan).node(node_id).verification if isinstance(v, PythonVF)]
        for vf in vfs:
            ok = await any_sandbox.run_vf(vf.code, inputs, good)
            wrong = await any_sandbox.run_vf(vf.code, inputs, bad)
            assert ok.outcome is Outcome.PASS, (node_id, vf.name, ok)
            assert wrong.outcome is Outcome.FAIL, (node_id, vf.name, wrong)


async def test_load_function_on_a_non_string_says_what_it_got(any_sandbox):
    res = await any_sandbox.run_vf(
        "f = load_function(outputs['code'], 'f')", {}, {"code": {"function": "f"}}
    )
    assert res.outcome is Outcome.ERROR and "got code of type dict" in res.message
