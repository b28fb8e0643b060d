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


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["--owner"]:
        threading.Thread(target=_watch, args=(int(args[1]),), daemon=True).start()
        args = args[2:]
    if args[:1] == ["--"]:
        args = args[1:]
    _bound_prompt_cache()
    sys.argv = ["llama_cpp.server", *args]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
