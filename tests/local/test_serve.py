"""The server wrapper's prompt-cache bound, on llama-cpp-python's own cache class."""

import numpy as np
import pytest

llama_cache = pytest.importorskip("llama_cpp.llama_cache", reason="the llama.cpp runtime")
llama = pytest.importorskip("llama_cpp.llama")

from verimap.local._serve import _bound_prompt_cache  # noqa: E402


def state(n_rows: int) -> object:
    return llama.LlamaState(
        input_ids=np.zeros(8, dtype=np.intc),
        scores=np.zeros((n_rows, 1000), dtype=np.single),
        n_tokens=8,
        llama_state=b"x" * 100,
        llama_state_size=100,
        seed=0,
    )


def test_the_cache_counts_the_logits_each_saved_prompt_holds():
    _bound_prompt_cache()
    cache = llama_cache.LlamaRAMCache(capacity_bytes=10_000_000)
    for i in range(10):  # each state holds 4 MB of logits but only 100 B of llama.cpp state
        cache[(i, 1, 2)] = state(1000)
    assert len(cache.cache_state) == 2
    assert cache.cache_size <= 10_000_000
    assert (9, 1, 2) in cache.cache_state and (0, 1, 2) not in cache.cache_state
