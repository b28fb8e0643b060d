"""Run llama-cpp-python's server, exiting when the owning verimap process dies.

`python -m verimap.local._serve --owner PID -- <llama_cpp.server args>`. A
server started for one command must not outlive it even when the command is
killed (SIGKILL, a CI timeout) before it can stop the server; kept servers run
without `--owner`.
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


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["--owner"]:
        threading.Thread(target=_watch, args=(int(args[1]),), daemon=True).start()
        args = args[2:]
    if args[:1] == ["--"]:
        args = args[1:]
    sys.argv = ["llama_cpp.server", *args]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
