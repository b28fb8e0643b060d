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


def test_cached_states_keep_one_row_of_logits_and_restore_without_touching_the_buffer(
    monkeypatch,
):
    """The runtime's own save/load, minus the llama.cpp state calls (they need a model)."""

    def save(self):
        return llama.LlamaState(
            scores=self._scores.copy(),
            input_ids=self.input_ids.copy(),
            n_tokens=self.n_tokens,
            llama_state=b"",
            llama_state_size=0,
            seed=0,
        )

    def load(self, st):
        self.scores[: st.n_tokens, :] = st.scores.copy()
        rest = self.scores[st.n_tokens :, :]
        rest[rest > 0] = 0.0
        self.input_ids, self.n_tokens = st.input_ids.copy(), st.n_tokens

    monkeypatch.setattr(llama.Llama, "save_state", save)
    monkeypatch.setattr(llama.Llama, "load_state", load)
    from verimap.local._serve import _lean_cached_states

    _lean_cached_states()
    m = llama.Llama.__new__(llama.Llama)
    m.scores = np.arange(64 * 10, dtype=np.single).reshape(64, 10)  # logits_all: n_ctx rows
    m.input_ids, m.n_tokens = np.arange(64, dtype=np.intc), 40
    saved = m.save_state()
    assert saved.scores.shape == (1, 10) and saved.n_tokens == 40
    assert (saved.scores[0] == m.scores[39]).all() and m.scores.shape == (64, 10)
    before = m.scores.copy()
    m.n_tokens = 50
    m.load_state(saved)
    assert m.n_tokens == 40 and (m.scores == before).all() and m.scores.shape == (64, 10)
    wide = llama.LlamaState(
        scores=np.ones((3, 10), dtype=np.single),
        input_ids=np.zeros(64, dtype=np.intc),
        n_tokens=3,
        llama_state=b"",
        llama_state_size=0,
        seed=0,
    )
    m.load_state(wide)  # a state saved unpatched still loads the runtime's way
    assert (m.scores[:3] == 1).all() and (m.scores[3:] == 0).all()
