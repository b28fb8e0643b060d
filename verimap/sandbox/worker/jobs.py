"""Inside a job process: confine, wait for the job, run it, report the record, exit.

The spawner forks the process before its job arrives and never sees a job, so
the process holds nothing of earlier jobs. Verdicts are records written to a
pipe of their own; the supervisor judges the exit status and output itself.
"""

from __future__ import annotations

import binascii
import builtins
import json
import linecache
import marshal
import os
import resource
import sys
import traceback

from . import restricted, unix, wire
from .candidate import CandidateError, CandidateFunction, CandidateProcess
from .constants import MAGIC, VF_COMPILE_FLAGS
from .restricted import PolicyError

RESULT_LIMIT = 4 * 1024 * 1024  # bytes of a job's record
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _ours(filename: str) -> bool:
    return os.path.dirname(filename) == _PACKAGE_DIR


def _record_bytes(rec: dict) -> bytes:
    return json.dumps(rec, allow_nan=False, default=str).encode()[:RESULT_LIMIT]


def _record(fd: int, rec: dict) -> None:
    os.write(fd, _record_bytes(rec))


def _user_traceback(e: BaseException) -> str:
    """The traceback without the worker's own leading frames: what the author can act on."""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None and _ours(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(e), e, tb))


def _exc_record(e: BaseException, tb_file: str | None = None) -> dict:
    tb = _user_traceback(e)
    if isinstance(e, AssertionError):
        msg = str(e) or _assert_line(e, tb_file) or "assertion failed"
        return {"outcome": "FAIL", "message": msg, "traceback": tb}
    if isinstance(e, MemoryError):
        return {"outcome": "OOM", "message": "MemoryError: memory limit exceeded", "traceback": tb}
    if isinstance(e, PolicyError):
        return {"outcome": "POLICY", "message": str(e), "traceback": tb}
    try:
        text = str(e)
    except BaseException:
        text = "<unprintable>"
    return {"outcome": "ERROR", "message": f"{type(e).__name__}: {text}"[:4000], "traceback": tb}


def _assert_line(e: BaseException, tb_file: str | None) -> str:
    tb = e.__traceback__
    line = ""
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == tb_file:
            line = linecache.getline(tb_file, tb.tb_lineno).strip()
        tb = tb.tb_next
    return f"assertion failed: {line}" if line else ""


def run_vf(job: dict, namespace: dict | None = None) -> dict:
    """`namespace`: for the warm-up and the host's in-process double (vf_namespace());
    in a job process a VF gets the spawner's pristine one."""
    source = job.get("source", "")
    linecache.cache["<vf>"] = (len(source), None, source.splitlines(True), "<vf>")
    try:
        if "code" in job:
            if job.get("magic") != MAGIC:
                return {"outcome": "SANDBOX_ERROR", "message": "VF bytecode for another Python"}
            code = marshal.loads(binascii.a2b_base64(job["code"]))
        elif job.get("restricted", True):
            import ast

            tree = ast.fix_missing_locations(wire.ast_from_json(job["ast"]))
            code = compile(tree, "<vf>", "exec", VF_COMPILE_FLAGS, True)
        else:
            code = compile(source, "<vf>", "exec")
        if namespace is not None:
            ns = namespace
        elif job.get("restricted", True):
            ns = restricted.take_namespace()
        else:
            ns = restricted.vf_namespace(restricted=False)
        inputs, outputs = wire.decode(job["inputs"]), wire.decode(job["outputs"])
        ns["inputs"], ns["outputs"] = inputs, outputs
        exec(code, ns)
        verify = ns.get("verify")
        if callable(verify):
            ret = verify(inputs, outputs)
            if ret is not None and not bool(ret):
                raise AssertionError(f"verify() returned {ret!r}")
        rec = {"outcome": "PASS"}
    except BaseException as e:
        rec = _exc_record(e, "<vf>")
    return rec


def run_tests(job: dict, spare: tuple | None = None) -> dict:
    source = job["test_code"]
    linecache.cache["<tests>"] = (len(source), None, source.splitlines(True), "<tests>")
    try:
        proc = CandidateProcess(job["candidate_code"], spare)
        entry = job["entry_point"]
        if entry not in proc.names:
            raise CandidateError(f"the candidate defines no function named {entry!r}")
        ns: dict = {"__name__": "__verimap_tests__"}
        for name in proc.names:
            ns[name] = CandidateFunction(proc, name)
        exec(compile(source, "<tests>", "exec"), ns)
        # the entry point always means the code under test, even if the tests restate a stub
        ns[entry] = CandidateFunction(proc, entry)
        check = ns.get("check")
        if not callable(check):
            raise NameError("the test code defines no check(candidate) function")
        check(CandidateFunction(proc, entry))
        rec = {"outcome": "PASS"}
    except BaseException as e:
        rec = _exc_record(e, "<tests>")
    return rec


def _interpreter_shutdown() -> None:
    """What the interpreter does after a script ends: join non-daemon threads, run atexit."""
    threading = sys.modules.get("threading")
    if threading is not None:
        threading._shutdown()
    import atexit

    atexit._run_exitfuncs()


def run_program(job: dict, scratch: str) -> dict:
    argv = [os.path.join(scratch, "main.py"), *job.get("argv", [])]
    sys.argv = argv
    sys.path.insert(0, scratch)
    code = job["code"]
    linecache.cache[argv[0]] = (len(code), None, code.splitlines(True), argv[0])
    main = type(sys)("__main__")  # a real __main__ module, as `python main.py` would have
    main.__file__ = argv[0]
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    status = 0
    rec: dict
    try:
        exec(compile(code, argv[0], "exec"), main.__dict__)
        _interpreter_shutdown()
        rec = {"outcome": "PASS"}
    except SystemExit as e:
        exit_code = e.code
        if exit_code is None or exit_code == 0:
            rec = {"outcome": "PASS"}
        else:
            if not isinstance(exit_code, int):
                sys.stderr.write(f"{exit_code}\n")
            status = exit_code if isinstance(exit_code, int) else 1
            rec = {"outcome": "ERROR", "message": f"exit status {status}"}
    except BaseException as e:
        sys.stderr.write(_user_traceback(e))
        rec = _exc_record(e, argv[0])
        status = 1
    rec["exit_status"] = status & 0xFF or (1 if status else 0)
    return rec


def _write_files(job: dict, jobdir: str, scratch: str) -> None:
    for rel, text in (job.get("files") or {}).items():
        path = os.path.normpath(os.path.join(scratch, rel))
        if not path.startswith(scratch + os.sep):
            raise ValueError(f"file path escapes scratch: {rel!r}")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    stdin = job.get("stdin", "")
    if stdin:
        stdin_path = os.path.join(jobdir, "stdin")
        with open(stdin_path, "w", encoding="utf-8") as f:
            f.write(stdin)
        fd = os.open(stdin_path, os.O_RDONLY)
        os.unlink(stdin_path)
    else:
        fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(fd, 0)
    os.close(fd)


WARM_FRAME = wire.frame_bytes(  # shaped like the usual job: a VF, checked and compiled on the host
    {
        "kind": "vf",
        "source": "x = 1",
        "inputs": wire.encode({"question": "text", "n": 1, "items": [1.5, True, None]}),
        "outputs": wire.encode({"answer": "text", "pairs": [(1, 2)]}),
        "code": binascii.b2a_base64(marshal.dumps(compile("x = 1", "<warm>", "exec"))).decode(),
        "magic": MAGIC,
        "limits": {"memory_bytes": 1, "cpu_s": 1, "fsize_bytes": 1, "nofile": 1},
        "output_limit": 1,
        "timeout": 1.0,
        "id": 1,
        "token": "",
    }
)
_LIMITS = (resource.RLIMIT_AS, resource.RLIMIT_CPU, resource.RLIMIT_FSIZE, resource.RLIMIT_NOFILE)


def warm_up(jobdir: str, scratch: str) -> bool:
    """Run the usual job's code path once, on a dummy VF, before the job arrives.

    After fork every page is shared copy-on-write and CPython's refcounting writes
    to each object it touches, so the first use of a code path costs page copies;
    paying them while the child waits keeps them off the job's critical path (on
    the build VM, 92 -> 15 page copies between a VF's arrival and its verdict).
    The dummy VF runs in a namespace of its own: a VF must not see warm-up names.
    True when the whole path ran.
    """
    try:
        r, w = os.pipe()
        try:
            os.write(w, WARM_FRAME)
            job = wire.read_frame(r)
        finally:
            os.close(r)
            os.close(w)
        _write_files(job, jobdir, scratch)
        for limit in _LIMITS:
            resource.setrlimit(limit, resource.getrlimit(limit))
        rec = run_vf(job, namespace={"__builtins__": {}})
        _record_bytes(rec)
        linecache.cache.pop("<vf>", None)
        sys.stdout.flush()
        sys.stderr.flush()
        return rec == {"outcome": "PASS"}
    except BaseException:
        return False


def child_main(
    job_fd: int, jobdir: str, scratch: str, fds: dict[str, int], home: str, spare: tuple | None
) -> None:
    """In the pre-forked job process: confine, wait for the job, run it, report, exit.

    The spawner forks it before its job arrives (so fork latency is off the
    critical path); the spawner never sees a job, so this process holds nothing
    of earlier jobs. Everything that does not depend on the job is done before
    it arrives.
    """
    status = 0
    try:
        os.setsid()
        os.dup2(fds["stdout"], 1)
        os.dup2(fds["stderr"], 2)
        keep = {0, 1, 2, fds["result"], job_fd}
        if spare is not None:
            keep.update(spare[1:])
        unix.close_all_but(keep)
        uid = unix.DROP_UID
        if uid is not None:
            for path in (jobdir, scratch):
                os.chown(path, uid, uid)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
        os.chdir(scratch)
        if scratch != home:  # the spawner set HOME and TMPDIR to the usual one
            os.environ["HOME"] = os.environ["TMPDIR"] = scratch
        warm_up(jobdir, scratch)
        job = wire.read_frame(job_fd)
        if job is None:
            os._exit(0)
        os.close(job_fd)
        if spare is not None and job.get("kind") != "tests":
            for fd in spare[1:]:
                os.close(fd)
            spare = None
        _write_files(job, jobdir, scratch)
        limits = job.get("limits", {})
        mem = limits.get("memory_bytes")
        if mem:
            resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        cpu = limits.get("cpu_s")
        if cpu:
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        fsize = limits.get("fsize_bytes")
        if fsize:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        nofile = limits.get("nofile")
        if nofile:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        kind = job["kind"]
        if kind == "vf":
            rec = run_vf(job)
        elif kind == "tests":
            rec = run_tests(job, spare)
        elif kind == "program":
            rec = run_program(job, scratch)
            status = rec["exit_status"]
        else:
            rec = {"outcome": "SANDBOX_ERROR", "message": f"unknown job kind {kind}"}
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:
            pass
        # output first, then the record, then close it: the worker may answer on
        # the record alone, before this process has finished tearing down
        _record(fds["result"], rec)
        os.close(fds["result"])
    except BaseException:
        status = 70
    os._exit(status)
