"""The RestrictedPython policy for VFs: host-side rejection and the worker's runtime guards.

Runtime guards are exercised by calling the worker's VF runner in-process (the
same function the forked child runs), so these tests need no sandbox.
"""

import pytest

from verimap.sandbox.policy import BYTECODE_MAGIC, PolicyViolation, compile_vf, vf_job_code
from verimap.sandbox.worker import jobs, wire


@pytest.fixture(params=["bytecode", "ast"])
def form(request):
    """Every runtime case runs both ways a VF can travel: bytecode, or AST for another Python."""
    return request.param


def run_vf(code, inputs=None, outputs=None, form="ast"):
    job = {
        "source": code,
        **vf_job_code(code, BYTECODE_MAGIC if form == "bytecode" else "another-python"),
        "inputs": wire.encode(inputs or {}),
        "outputs": wire.encode(outputs or {}),
    }
    assert ("code" in job) == (form == "bytecode") and ("ast" in job) == (form == "ast")
    return jobs.run_vf(job)


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ("import os", "import of 'os' is not allowed"),
        ("import subprocess as s", "import of 'subprocess' is not allowed"),
        ("from ctypes import CDLL", "import of 'ctypes' is not allowed"),
        ("from . import x", "relative imports are not allowed"),
        ("x = ().__class__", '"__class__" is an invalid attribute name'),
        ("eval('1')", "Eval calls are not allowed"),
        ("exec('1')", "Exec calls are not allowed"),
        ("_secret = 1", '"_secret" is an invalid variable name'),
        ("def f(:\n  pass", "SyntaxError"),
    ],
)
def test_rejections_name_the_line_and_reason(code, reason):
    with pytest.raises(PolicyViolation) as info:
        compile_vf(code)
    assert reason in info.value.message
    assert "Line " in info.value.message
    assert "imports only from: " in info.value.message  # the hint says what the planner may use


@pytest.mark.parametrize(
    ("code", "outcome", "fragment"),
    [
        ("assert outputs['y'] == inputs['x'] * 2", "PASS", ""),
        ("assert outputs['y'] == 3, 'y should be 3'", "FAIL", "y should be 3"),
        ("assert outputs['y'] == 3", "FAIL", "assert outputs['y'] == 3"),
        (
            "def verify(inputs, outputs):\n    return outputs['y'] > 100\n",
            "FAIL",
            "verify() returned False",
        ),
        ("def verify(inputs, outputs):\n    return outputs['y'] == 4\n", "PASS", ""),
        ("import math, json, re, fractions\nassert math.isclose(outputs['y'], 4.0)", "PASS", ""),
        (
            "import sympy\nx = sympy.Symbol('x')\nassert sympy.expand((x + 1) ** 2) == x**2 + 2*x + 1",
            "PASS",
            "",
        ),
        ("import numpy as np\nassert np.array([1, 2]).sum() == 3", "PASS", ""),
        (
            "total = 0\nfor a, b in [(1, 2), (3, 4)]:\n    total += a * b\nassert total == 14",
            "PASS",
            "",
        ),
        ("d = {}\nd['k'] = [1]\nd['k'].append(2)\nassert d == {'k': [1, 2]}", "PASS", ""),
        ("print('hello')\nassert printed == 'hello\\n'", "PASS", ""),
        ("class P:\n    pass\np = P()\np.x = 1", "POLICY", "attribute assignment"),
        ("import numpy\nnumpy.ctypeslib", "POLICY", "ctypeslib"),
        ("import sympy\nsympy.sympify('1')", "POLICY", "sympify"),
        ("'{0}'.format(1)", "POLICY", "str.format"),
        ("getattr(1, '__class__')", "POLICY", "__class__"),
        ("type('X', (), {})", "POLICY", "type() with 3 arguments"),
        ("open('/etc/passwd')", "ERROR", "NameError"),
        ("raise SystemExit(0)", "ERROR", "SystemExit"),
        ("raise KeyboardInterrupt", "ERROR", "KeyboardInterrupt"),
        ("x = 1 / 0", "ERROR", "ZeroDivisionError"),
    ],
)
def test_runtime_outcomes(code, outcome, fragment, form):
    rec = run_vf(code, {"x": 2}, {"y": 4}, form)
    assert rec["outcome"] == outcome, rec
    assert fragment in rec.get("message", "")


def test_tracebacks_point_at_the_original_source_lines(form):
    code = "a = 1\nb = 2\nassert outputs['y'] == 5, 'nope'\n"
    rec = run_vf(code, {}, {"y": 4}, form)
    assert rec["outcome"] == "FAIL"
    assert 'File "<vf>", line 3' in rec["traceback"]
    assert "assert outputs['y'] == 5" in rec["traceback"]


def test_bytecode_for_another_python_is_refused_not_run():
    job = {
        **vf_job_code("assert True", BYTECODE_MAGIC),
        "source": "assert True",
        "inputs": wire.encode({}),
        "outputs": wire.encode({}),
    }
    job["magic"] = "00000000"
    rec = jobs.run_vf(job)
    assert rec["outcome"] == "SANDBOX_ERROR" and "another Python" in rec["message"]


def test_both_forms_compile_annotations_alike(form):
    code = "def verify(inputs: Undefined, outputs: dict) -> bool:\n    return True\n"
    assert run_vf(code, form=form)["outcome"] == "PASS"  # annotations stay unevaluated
