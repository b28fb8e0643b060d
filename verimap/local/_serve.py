"""Run llama-cpp-python's server, exiting when the owning verimap process dies.

`python -m verimap.local._serve [--owner PID] --listen-fd N --token-fd M -- <llama_cpp.server
args>`. A server started for one command must not outlive it even when the command is
killed (SIGKILL, a CI timeout) before it can stop the server; kept servers run
without `--owner`.

It serves on the socket verimap bound and listened on before starting it (fd N): a port
chosen, closed and passed on could be taken by another local process while the model loads.
It requires the per-server token read from the pipe at fd M (never a command line, which any
local user can read in /proc) as a Bearer key on every API request, and proves that it holds
the token at PROOF_PATH, so verimap can tell its own server from an impostor without sending
the token to one; READY_PATH checks the token without waiting for the model.

It also makes the prompt cache's size limit true: llama-cpp-python's RAM cache counts only the
llama.cpp state of each saved prompt, but every saved state also holds a copy of the logits
buffer (up to n_batch x n_vocab floats: about 311 MB for Qwen2.5's 151,936-token vocabulary), so
a "2 GB" cache grew past 23 GB and the kernel killed the server mid-benchmark.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import runpy
import socket
import sys
import threading
import time
import weakref
from typing import Any

from verimap.local.disconnect import CancelOnDisconnect, stop_when_client_gone

# Answers `?nonce=N` with HMAC-SHA256(token, N), without asking for the token.
PROOF_PATH = "/verimap/proof"
# Answers 200 to the token, 401 without it. Unlike the API routes it never waits for the model,
# so a server busy with a long reply is not taken for a dead one.
READY_PATH = "/verimap/ready"


def proof(token: str, nonce: str) -> str:
    """What a server holding `token` answers to `nonce` at PROOF_PATH."""
    return hmac.new(token.encode(), nonce.encode(), hashlib.sha256).hexdigest()


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
        {
            "prompt_tokens": int,
            "completion_tokens": int,
            "total_tokens": int,
            "prompt_tokens_details": NotRequired[PromptTokensDetails],
        },
    )
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


def _read_token(fd: int) -> str:
    """The token verimap wrote to the pipe at `fd` (then closed its end)."""
    chunks = []
    while chunk := os.read(fd, 4096):
        chunks.append(chunk)
    os.close(fd)
    token = b"".join(chunks).decode().strip()
    if not token:
        sys.exit("verimap.local._serve: no token on the token pipe")
    return token


def _require_token(token: str) -> None:
    """Make every API route ask for `token` (llama-cpp-python's `api_key`, Bearer auth) and add
    the proof and ready routes. The key is set on the app's settings, so it is never a
    command-line argument or an environment variable."""
    import llama_cpp.server.app as app_module
    from fastapi import Depends

    create_app = app_module.create_app

    def create_app_(*args: Any, **kwargs: Any) -> Any:
        app = create_app(*args, **kwargs)
        settings = next(app_module.get_server_settings())
        settings.api_key = token

        def prove(nonce: str) -> dict[str, str]:
            return {"proof": proof(token, nonce)}

        def ready() -> dict[str, bool]:
            return {"ready": True}

        app.add_middleware(CancelOnDisconnect)
        app.add_api_route(PROOF_PATH, prove, methods=["GET"], include_in_schema=False)
        app.add_api_route(
            READY_PATH,
            ready,
            methods=["GET"],
            include_in_schema=False,
            dependencies=[Depends(app_module.authenticate)],
        )
        return app

    app_module.create_app = create_app_


def _serve_on(sock: socket.socket) -> None:
    """Make `uvicorn.run` serve on `sock` rather than bind host and port itself."""
    import uvicorn

    def run(app: Any, **kwargs: Any) -> None:
        server = uvicorn.Server(uvicorn.Config(app, **kwargs))
        server.run(sockets=[sock])
        if not server.started:
            sys.exit(3)  # uvicorn's own exit code for a failed start

    uvicorn.run = run


def _split_args(args: list[str]) -> tuple[dict[str, int], list[str]]:
    """`--owner P --listen-fd N --token-fd M -- rest...` as ({option: value}, rest)."""
    ours: dict[str, int] = {}
    while args and args[0] != "--":
        if len(args) < 2 or args[0] not in ("--owner", "--listen-fd", "--token-fd"):
            sys.exit(f"verimap.local._serve: unexpected argument {args[0]!r}")
        ours[args[0]] = int(args[1])
        args = args[2:]
    return ours, args[1:]


def main() -> None:
    ours, args = _split_args(sys.argv[1:])
    if "--owner" in ours:
        threading.Thread(target=_watch, args=(ours["--owner"],), daemon=True).start()
    if "--listen-fd" not in ours or "--token-fd" not in ours:
        sys.exit("verimap.local._serve: --listen-fd and --token-fd are required")
    token = _read_token(ours["--token-fd"])
    _serve_on(socket.socket(fileno=ours["--listen-fd"]))
    _require_token(token)
    _bound_prompt_cache()
    _lean_cached_states()
    _report_cached_tokens()
    stop_when_client_gone()
    sys.argv = ["llama_cpp.server", *args]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
