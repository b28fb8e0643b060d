"""Run llama-cpp-python's server, exiting when the owning verimap process dies.

`python -m verimap.local._serve --owner PID -- <llama_cpp.server args>`. A
server started for one command must not outlive it even when the command is
killed (SIGKILL, a CI timeout) before it can stop the server; kept servers run
without `--owner`.

It also makes the prompt cache's size limit true: llama-cpp-python's RAM cache counts only the
llama.cpp state of each saved prompt, but every saved state also holds a copy of the logits
buffer (up to n_batch x n_vocab floats: about 311 MB for Qwen2.5's 151,936-token vocabulary), so
a "2 GB" cache grew past 23 GB and the kernel killed the server mid-benchmark.
"""

from __future__ import annotations

import os
import runpy
import sys
import threading
import time
import weakref
from typing import Any


def _watch(owner: int) -> None:
    while True:
        time.sleep(1.0)
        try:
            os.kill(owner, 0)
        except ProcessLookupError:
            os._exit(0)
        except PermissionError:
            pass
        if os.getppid() == 1 and owner != 1:
            os._exit(0)


def _bound_prompt_cache() -> None:
    """Count every byte a cached state holds, so the LRU eviction honours `--cache_size`."""
    try:
        from llama_cpp.llama_cache import LlamaRAMCache
    except ImportError:  # an older or newer runtime without it: nothing to bound
        return

    def cache_size(self: LlamaRAMCache) -> int:
        return sum(
            s.llama_state_size + s.scores.nbytes + s.input_ids.nbytes
            for s in self.cache_state.values()
        )

    LlamaRAMCache.cache_size = property(cache_size)  # type: ignore[method-assign,assignment]


def _lean_cached_states() -> None:
    """Keep one row of logits in a cached state instead of a whole buffer of them.

    `Llama.save_state` copies its logits buffer: n_batch x vocabulary floats (311 MB for Qwen's
    151,936 tokens), or a row per prompt token with `logits_all`, which prompt-lookup decoding
    turns on (0.9 GB for a 1,500-token prompt; the buffer itself is n_ctx rows, 5 GB). No
    saved row is ever read back: sampling reads llama.cpp's own logits of the batch it just
    evaluated, and a restored prompt re-evaluates at least its last token. At full size the
    2 GiB cache held about five states, so the few calls of one node evicted the planner's
    prefix before its replan. `load_state` is patched to match: it would broadcast the row over
    every restored position and scan the rest of the buffer for rows to zero."""
    try:
        from llama_cpp import Llama
    except ImportError:
        return
    save, load = Llama.save_state, Llama.load_state

    def save_state(self: Llama) -> Any:
        scores = self.scores
        last = max(min(self.n_tokens, len(scores)) - 1, 0)
        self.scores = scores[last : last + 1]
        try:
            return save(self)
        finally:
            self.scores = scores

    def load_state(self: Llama, state: Any) -> None:
        if len(state.scores) > 1:
            return load(self, state)
        scores, self.scores = self.scores, self.scores[:0]
        try:
            load(self, state)
        finally:
            self.scores = scores

    # Patching the runtime's methods is the point; mypy rightly flags assignments to methods.
    Llama.save_state = save_state  # type: ignore[method-assign]
    Llama.load_state = load_state  # type: ignore[method-assign]


def _report_cached_tokens() -> None:
    """Say in `usage` how much of a prompt the KV cache served, as OpenAI does
    (`prompt_tokens_details.cached_tokens`): llama-cpp-python reuses a shared prefix but reports
    only the prompt's length, so nobody could tell whether the fixed-prefix prompts pay off.
    The first `eval` of a generation is the part of the prompt the cache did not hold."""
    try:
        import llama_cpp.llama_types as types
        from llama_cpp import Llama
    except ImportError:
        return
    if "prompt_tokens_details" in types.CompletionUsage.__annotations__:
        return
    from typing import NotRequired

    from typing_extensions import TypedDict

    # Built from objects, not annotations: under runpy this module is not importable by name,
    # so pydantic could not resolve string annotations when the server builds its schema.
    PromptTokensDetails = TypedDict("PromptTokensDetails", {"cached_tokens": int})  # noqa: UP013
    CompletionUsage = TypedDict(  # noqa: UP013
        "CompletionUsage",
        {"prompt_tokens": int, "completion_tokens": int, "total_tokens": int,
         "prompt_tokens_details": NotRequired[PromptTokensDetails]},
    )  # fmt: skip
    # The server's response model is built from these annotations when its app is imported.
    types.CompletionUsage = CompletionUsage  # type: ignore[misc]  # replacing the type is the point
    for response in (types.CreateChatCompletionResponse, types.CreateCompletionResponse):
        response.__annotations__["usage"] = CompletionUsage
    evaluate, generate, chat = Llama.eval, Llama.generate, Llama.create_chat_completion
    # Per model: None while a generation waits for its first eval, then that eval's length.
    evaluated: weakref.WeakKeyDictionary[Llama, int | None] = weakref.WeakKeyDictionary()

    def eval_(self: Llama, tokens: Any) -> Any:
        if self in evaluated and evaluated[self] is None:
            evaluated[self] = len(tokens)
        return evaluate(self, tokens)

    def generate_(self: Llama, *args: Any, **kwargs: Any) -> Any:
        evaluated[self] = None
        yield from generate(self, *args, **kwargs)

    def chat_(self: Llama, *args: Any, **kwargs: Any) -> Any:
        evaluated[self] = 0
        out = chat(self, *args, **kwargs)
        n = evaluated.pop(self, None)
        usage: Any = out.get("usage") if isinstance(out, dict) else None
        if usage and n is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": max(0, usage["prompt_tokens"] - n)}
        return out

    # Patching the runtime's methods is the point; mypy rightly flags assignments to methods.
    Llama.eval = eval_  # type: ignore[method-assign]
    Llama.generate = generate_  # type: ignore[method-assign]
    Llama.create_chat_completion = chat_  # type: ignore[method-assign]


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["--owner"]:
        threading.Thread(target=_watch, args=(int(args[1]),), daemon=True).start()
        args = args[2:]
    if args[:1] == ["--"]:
        args = args[1:]
    _bound_prompt_cache()
    _lean_cached_states()
    _report_cached_tokens()
    sys.argv = ["llama_cpp.server", *args]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
