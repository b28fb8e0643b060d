"""The in-process double judges a VF exactly as a sandbox backend does: same outcome, same
message. Logic tests run on the double, so a difference would make them test something else."""

import os

import pytest

from verimap.sandbox import Outcome
from verimap.testing import InProcessSandboxDouble

TASK = "def double(x):\n    '''\n    >>> double(2)\n    4\n    '''\n"
SQUARE = "def double(x):\n    return x * x\n"

CASES = [
    ("assert outputs['y'] == 4", {}, {"y": 4}),
    ("assert outputs['y'] == 5", {}, {"y": 4}),
    ("assert outputs['y'] == 5, 'y should be 5'", {}, {"y": 4}),
    ("assert outputs['y'] == 5, f'got {outputs[\"y\"]}, é'", {}, {"y": 4}),
    ("assert outputs['y'] == 4\n\nassert outputs['z'] > 1", {}, {"y": 4, "z": 0}),
    ("def verify(inputs, outputs):\n    return False\n", {}, {}),
    ("def verify(inputs, outputs):\n    return 0\n", {}, {}),
    ("def verify(inputs, outputs):\n    return ''\n", {}, {}),
    ("def verify(inputs, outputs):\n    return []\n", {}, {}),
    ("def verify(inputs, outputs):\n    return None\n", {}, {}),
    ("def verify(inputs, outputs):\n    return True\n", {}, {}),
    ("def verify(inputs, outputs):\n    assert outputs['y'] < 0, 'negative'\n", {}, {"y": 1}),
    ("assert undefined_name > 0", {}, {}),
    ("x = 1 / 0", {}, {}),
    ("raise SystemExit(3)", {}, {}),
    ("import subprocess", {}, {}),
    ("import os", {}, {}),
    ("import numpy\nnumpy.ctypeslib", {}, {}),
    ("getattr(1, '__class__')", {}, {}),
    ("open('/etc/passwd')", {}, {}),
    ("def f(:\n    pass", {}, {}),
    ("print('hello')\nassert printed == 'hello\\n'", {}, {}),
    ("assert approx(outputs['y'], 0.3) and is_number(outputs['y'])", {}, {"y": 0.1 + 0.2}),
    ("assert approx(outputs['y'], [1, 2]), 'not close'", {}, {"y": (1, 2.5)}),
    ("assert parse_number(outputs['s']) == 12", {}, {"s": "about 12."}),
    ("parse_number(outputs['s'])", {}, {"s": "none"}),
    ("assert isclose(outputs['y'], 1)", {}, {"y": 1.5}),
    ("assert inputs['t'] == (1, 2) and outputs['b'] == b'x'", {"t": (1, 2)}, {"b": b"x"}),
    ("assert True", {"bad": object()}, {}),
    ("f = load_function(outputs['code'], 'double')\nassert f(3) == 9", {}, {"code": SQUARE}),
    ("f = load_function(outputs['code'], 'triple')", {}, {"code": SQUARE}),
    ("run_examples(outputs['code'], inputs['task'])", {"task": TASK}, {"code": SQUARE}),
    ("run_examples(outputs['code'], inputs['task'])", {"task": "no examples"}, {"code": SQUARE}),
]


@pytest.mark.parametrize(("code", "inputs", "outputs"), CASES)
async def test_the_double_gives_the_backends_verdict(any_sandbox, code, inputs, outputs):
    double = InProcessSandboxDouble()
    here = await double.run_vf(code, inputs, outputs)
    there = await any_sandbox.run_vf(code, inputs, outputs)
    assert (here.outcome, here.message) == (there.outcome, there.message)
    assert here.stdout == there.stdout
    assert double.calls == [(code, inputs, outputs)]


def candidate_children() -> list[str]:
    pid = os.getpid()
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        kids = f.read().split()
    found = []
    for kid in kids:
        try:
            with open(f"/proc/{kid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "wire.py" in cmd:
            found.append(cmd)
    return found


async def test_the_double_stops_what_a_vf_loaded_and_keeps_a_fresh_budget():
    from verimap.sandbox.worker import candidate

    double = InProcessSandboxDouble()
    code = "f = load_function(outputs['code'], 'double')\nassert f(2) == 4"
    for _ in range(12):  # more than the per-job cap on load_function calls
        res = await double.run_vf(code, {}, {"code": SQUARE})
        assert res.passed, res
    broken = await double.run_vf(code, {}, {"code": "def double(x:\n"})
    assert broken.outcome is Outcome.ERROR and "failed to load: SyntaxError" in broken.message
    assert candidate._candidates == [] and candidate_children() == []


async def test_the_double_can_run_vfs_unrestricted_like_a_backend_without_policy():
    double = InProcessSandboxDouble(policy=False)
    res = await double.run_vf("import os\nassert approx(os.sep, '/')", {}, {})
    assert res.passed, res
    assert double.kind == "in-process-double"
