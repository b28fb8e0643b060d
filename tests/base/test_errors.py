"""Every exception verimap raises on purpose has one root, and keeps its standard base."""

import verimap
from verimap.base.accounting import BudgetExceeded
from verimap.base.errors import VerimapError
from verimap.base.iotypes import TypeMismatch
from verimap.base.model import ModelError
from verimap.base.plan import PlanError, PlanningError
from verimap.base.sandbox import SandboxUnavailable
from verimap.evals.data import DataError
from verimap.evals.runner import RunDirError
from verimap.local.server import ServerError


def test_one_clause_catches_them_and_the_old_bases_still_do():
    named = [
        BudgetExceeded,
        DataError,
        RunDirError,
        TypeMismatch,
        ModelError,
        ServerError,
        PlanError,
        PlanningError,
        SandboxUnavailable,
    ]
    assert all(issubclass(e, VerimapError) for e in named)
    assert issubclass(PlanError, ValueError) and issubclass(ModelError, RuntimeError)
    assert verimap.VerimapError is VerimapError
    try:
        verimap.parse_plan({"nodes": []})
    except VerimapError as e:
        assert isinstance(e, PlanError)
    else:
        raise AssertionError("an empty plan must not parse")
