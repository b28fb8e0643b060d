"""verimap sandbox worker: runs untrusted jobs, a fresh process per job (stdlib only).

It runs inside the sandbox container (or as a host subprocess for the process
backend) and talks to the host over stdin/stdout with length-prefixed JSON
frames. Every job gets a fresh process with rlimits and an empty scratch
directory, forked by a spawner process that never sees a job; the worker
supervises it, enforces the wall timeout, caps output, and before it takes the
next job kills every process the job left behind and wipes scratch, so nothing
of one job reaches the next.

Verdicts are never taken from the job's own process when the job could forge
them: code under test runs in a separate exec'd process behind a proxy and only
plain data crosses (a tagged JSON codec), so the trusted test process alone
decides whether the tests passed.

Invocation:
    python3 -I worker.py serve [--container] [--scratch DIR] [--socket PATH]
    python3 -I wire.py IN_FD OUT_FD                  (code under test, internal)
"""

from __future__ import annotations
import __future__

import binascii
import builtins
import contextlib
import importlib.util
import json
import linecache
import marshal
import math
import operator
import os
import re
import resource
import select
import selectors
import signal
import socket
import string
import sys
import time
import traceback

# Only what a job process needs is imported here; the worker imports ast and shutil
# (about 2 MB) after it has forked the spawner: every page the spawner holds is a
# page table entry that each fork copies and each job process's exit frees.

PROTOCOL = 2
MAGIC = importlib.util.MAGIC_NUMBER.hex()  # the host sends bytecode only when it matches
VF_COMPILE_FLAGS = __future__.annotations.compiler_flag  # host and worker compile VFs alike
RESULT_LIMIT = 4 * 1024 * 1024
DROP_UID: int | None = None  # process backend started as root: jobs run as this uid
CANDIDATE_PYTHON: str | None = None  # interpreter for code under test (default: this one)
CHILD_ENV = {  # the whole environment of a job: nothing of the host's
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "OPENBLAS_NUM_THREADS": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONIOENCODING": "utf-8",
}
TRUNCATION_MARK = "\n[... output truncated by the verimap sandbox ...]\n"


# --------------------------------------------------------------------------- wire (framing, codec)


def _load_wire():
    """wire.py sits next to this file; `-I` keeps the script's directory off sys.path."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "wire.py")
    spec = importlib.util.spec_from_file_location("verimap_sandbox_wire", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


wire = _load_wire()
FRAME, MAX_FRAME = wire.FRAME, wire.MAX_FRAME
read_frame, write_frame, frame_bytes = wire.read_frame, wire.write_frame, wire.frame_bytes
write_all = wire.write_all
CodecError, encode, decode = wire.CodecError, wire.encode, wire.decode
ast_to_json, ast_from_json = wire.ast_to_json, wire.ast_from_json
WIRE_PATH = wire.__file__


# --------------------------------------------------------------------------- restricted runtime

ALLOWED_IMPORTS = frozenset(
    [
        "math",
        "re",
        "json",
        "fractions",
        "decimal",
        "statistics",
        "itertools",
        "collections",
        "string",
        "datetime",
        "sympy",
        "numpy",
        "functools",
        "operator",
        "cmath",
        "random",
        "heapq",
        "bisect",
        "typing",
    ]
)
DENIED_MODULES = ("numpy.ctypeslib", "numpy.f2py", "numpy.distutils", "numpy.testing")
DENIED_ATTRS = frozenset(
    [
        "load",
        "loads",
        "save",
        "savez",
        "savez_compressed",
        "fromfile",
        "tofile",
        "memmap",
        "loadtxt",
        "genfromtxt",
        "sympify",
        "parse_expr",
        "lambdify",
        "ctypes",
        "ctypeslib",
        "f2py",
        "system",
        "popen",
    ]
)
INSPECT_ATTRIBUTES = frozenset(
    [
        "tb_frame",
        "tb_next",
        "f_back",
        "f_builtins",
        "f_code",
        "f_globals",
        "f_locals",
        "f_trace",
        "f_generator",
        "co_code",
        "gi_frame",
        "gi_code",
        "gi_yieldfrom",
        "cr_await",
        "cr_frame",
        "cr_code",
        "cr_origin",
        "ag_code",
        "ag_frame",
        "ag_await",
    ]
)


class PolicyError(Exception):
    """Raised at run time when VF code reaches for something the policy forbids."""


def _guard_module(value, what: str):
    if type(value) is type(sys):
        name = getattr(value, "__name__", "")
        root = name.split(".")[0]
        if root not in ALLOWED_IMPORTS or name.startswith(DENIED_MODULES):
            raise PolicyError(f"{what}: module {name!r} is not allowed in a VF")
    return value


_MISSING = object()


def guarded_getattr(obj, name, default=_MISSING):
    if type(name) is not str:
        raise TypeError("attribute name must be a str")
    if name.startswith("_") or name in INSPECT_ATTRIBUTES:
        raise PolicyError(f"attribute {name!r} is not allowed in a VF (no private/dunder access)")
    if name in DENIED_ATTRS:
        raise PolicyError(f"attribute {name!r} is not allowed in a VF")
    if name in ("format", "format_map") and (
        isinstance(obj, str) or (isinstance(obj, type) and issubclass(obj, str))
    ):
        raise PolicyError("str.format is not allowed in a VF; use f-strings or %")
    if obj is string and name == "Formatter":
        raise PolicyError("string.Formatter is not allowed in a VF")
    value = getattr(obj, name) if default is _MISSING else getattr(obj, name, default)
    return _guard_module(value, f"attribute {name!r}")


def guarded_hasattr(obj, name):
    try:
        guarded_getattr(obj, name)
    except AttributeError:
        return False
    return True


def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
    if level != 0:
        raise PolicyError("relative imports are not allowed in a VF")
    root = name.split(".")[0]
    if root not in ALLOWED_IMPORTS or name.startswith(DENIED_MODULES):
        raise PolicyError(
            f"import of {name!r} is not allowed in a VF; allowed: {', '.join(sorted(ALLOWED_IMPORTS))}"
        )
    for item in fromlist or ():
        if item.startswith("_") or item in DENIED_ATTRS:
            raise PolicyError(f"'from {name} import {item}' is not allowed in a VF")
    module = builtins.__import__(name, globals, locals, fromlist, 0)
    for item in fromlist or ():
        _guard_module(getattr(module, item, None), f"'from {name} import {item}'")
    return module


class _WriteWrapper:
    def __init__(self, ob):
        object.__setattr__(self, "ob", ob)

    def __setitem__(self, key, value):
        ob = object.__getattribute__(self, "ob")
        if isinstance(ob, (dict, list, bytearray)):
            ob[key] = value
        else:
            raise TypeError("item assignment on this object is not allowed in a VF")

    def __delitem__(self, key):
        ob = object.__getattribute__(self, "ob")
        if isinstance(ob, (dict, list, bytearray)):
            del ob[key]
        else:
            raise TypeError("item deletion on this object is not allowed in a VF")

    def __setattr__(self, name, value):
        raise PolicyError("attribute assignment is not allowed in a VF")

    def __delattr__(self, name):
        raise PolicyError("attribute deletion is not allowed in a VF")


def guarded_write(ob):
    if type(ob) in (dict, list, set):
        return ob
    return _WriteWrapper(ob)


_INPLACE = {
    "+=": operator.iadd,
    "-=": operator.isub,
    "*=": operator.imul,
    "/=": operator.itruediv,
    "//=": operator.ifloordiv,
    "%=": operator.imod,
    "**=": operator.ipow,
    "<<=": operator.ilshift,
    ">>=": operator.irshift,
    "&=": operator.iand,
    "|=": operator.ior,
    "^=": operator.ixor,
    "@=": operator.imatmul,
}


def guarded_inplacevar(op, x, y):
    return _INPLACE[op](x, y)


def guarded_unpack_sequence(it, spec, _getiter_):
    ret = list(_getiter_(it))
    if len(ret) < spec["min_len"]:
        return ret
    for idx, child in spec["childs"]:
        ret[idx] = guarded_unpack_sequence(ret[idx], child, _getiter_)
    return ret


def guarded_iter_unpack_sequence(it, spec, _getiter_):
    for ob in _getiter_(it):
        yield guarded_unpack_sequence(ob, spec, _getiter_)


class _Printer:
    """Restricted code's print(): goes to the captured stdout, and to `printed`."""

    def __init__(self, _getattr_=None):
        self.txt = []

    def write(self, text):
        self.txt.append(text)
        sys.stdout.write(text)

    def __call__(self):
        return "".join(self.txt)

    def _call_print(self, *objects, **kwargs):
        kwargs["file"] = self
        print(*objects, **kwargs)


def _guarded_type(*args):
    if len(args) != 1:
        raise PolicyError("type() with 3 arguments is not allowed in a VF")
    return type(args[0])


_SAFE_BUILTIN_NAMES = [
    "abs",
    "all",
    "any",
    "ascii",
    "bin",
    "bool",
    "bytes",
    "callable",
    "chr",
    "complex",
    "dict",
    "divmod",
    "enumerate",
    "filter",
    "float",
    "format",
    "frozenset",
    "hash",
    "hex",
    "int",
    "isinstance",
    "issubclass",
    "iter",
    "len",
    "list",
    "map",
    "max",
    "min",
    "next",
    "oct",
    "ord",
    "pow",
    "range",
    "repr",
    "reversed",
    "round",
    "set",
    "slice",
    "sorted",
    "str",
    "sum",
    "tuple",
    "zip",
    "True",
    "False",
    "None",
    "Ellipsis",
    "NotImplemented",
    "ArithmeticError",
    "AssertionError",
    "AttributeError",
    "BaseException",
    "EOFError",
    "Exception",
    "FloatingPointError",
    "IndexError",
    "KeyError",
    "KeyboardInterrupt",
    "LookupError",
    "MemoryError",
    "NameError",
    "NotImplementedError",
    "OSError",
    "OverflowError",
    "RecursionError",
    "RuntimeError",
    "StopIteration",
    "SystemExit",
    "TypeError",
    "UnicodeError",
    "ValueError",
    "ZeroDivisionError",
    "__build_class__",
]


def restricted_globals():
    b = {name: getattr(builtins, name) for name in _SAFE_BUILTIN_NAMES}
    b.update(
        __import__=guarded_import,
        getattr=guarded_getattr,
        hasattr=guarded_hasattr,
        type=_guarded_type,
        PolicyError=PolicyError,
    )
    return {
        "__builtins__": b,
        "__name__": "__verimap_vf__",
        "__metaclass__": type,
        "_getattr_": guarded_getattr,
        "_getitem_": operator.getitem,
        "_getiter_": iter,
        "_write_": guarded_write,
        "_inplacevar_": guarded_inplacevar,
        "_unpack_sequence_": guarded_unpack_sequence,
        "_iter_unpack_sequence_": guarded_iter_unpack_sequence,
        "_print_": _Printer,
        "_apply_": lambda f, *a, **k: f(*a, **k),
        "load_function": load_function,
        **_VF_HELPER_FUNCTIONS,
    }


def vf_namespace(restricted: bool = True) -> dict:
    """A fresh namespace for one VF: the guarded one, or (policy off) a plain one; both
    with load_function and the VF helpers in scope."""
    if restricted:
        return restricted_globals()
    return {"__name__": "__verimap_vf__", "load_function": load_function, **_VF_HELPER_FUNCTIONS}


_VF_GLOBALS: dict | None = None  # built once in the spawner, before it forks job processes
_SPENT: list[dict] = []


def _vf_globals() -> dict:
    """The namespace for one VF: in a job process, the one the spawner built.

    Building it touches some ninety objects, and in a process fresh from fork()
    each touched page is a page copy; the spawner's prebuilt one is only read
    (about 65 fewer page copies per VF). The spawner never runs a job, so every job
    process gets it pristine; a second VF in one process gets a new one. A taken
    namespace is kept until the process exits: freeing it would write to every
    object it holds (some thirty more page copies, while the worker waits).
    """
    global _VF_GLOBALS
    ns, _VF_GLOBALS = _VF_GLOBALS, None
    if ns is None:
        ns = restricted_globals()
    _SPENT.append(ns)
    return ns


# --------------------------------------------------------------------------- candidate proxy


class CandidateError(Exception):
    """The code under test raised an exception (re-raised on the trusted side by name)."""


class CandidateCrashed(BaseException):
    """The code under test's process died or broke the protocol: never swallowed by tests."""


_REraisable = {
    name: getattr(builtins, name)
    for name in [
        "ValueError",
        "TypeError",
        "IndexError",
        "KeyError",
        "ZeroDivisionError",
        "ArithmeticError",
        "OverflowError",
        "AttributeError",
        "LookupError",
        "RuntimeError",
        "RecursionError",
        "NotImplementedError",
        "StopIteration",
        "UnicodeError",
        "NameError",
    ]
}


def fresh_dir(parent: str, prefix: str) -> str:
    """A new private directory, like tempfile.mkdtemp.

    The worker avoids importing tempfile (and subprocess, below): they bring in
    `random` and `threading`, whose at-fork hooks then run in every job's child and
    add measurable page-copy work to each job.
    """
    while True:
        path = os.path.join(parent, prefix + os.urandom(6).hex())
        try:
            os.mkdir(path, 0o700)
            return path
        except FileExistsError:
            continue


def spawn_candidate(workdir: str, stdout=None, stderr=None):
    """A fresh interpreter serving calls into model-written code: (process, write fd, read fd)."""
    import subprocess  # only tests jobs need it; see fresh_dir

    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()
    extra = {}
    if DROP_UID is not None and os.geteuid() == 0:
        extra = {"user": DROP_UID, "group": DROP_UID, "extra_groups": []}
    proc = subprocess.Popen(
        [CANDIDATE_PYTHON or sys.executable, "-I", WIRE_PATH, str(to_child_r), str(from_child_w)],
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        pass_fds=(to_child_r, from_child_w),
        close_fds=True,
        cwd=workdir,
        env={
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "OPENBLAS_NUM_THREADS": "1",
            "HOME": workdir,
            "TMPDIR": workdir,
        },
        **extra,
    )
    os.close(to_child_r)
    os.close(from_child_w)
    return proc, to_child_w, from_child_r


_SPARE: tuple | None = None  # this job's pre-started candidate interpreter, if any


class _CandidateProcess:
    """Model-written code in its own exec'd interpreter; only codec data crosses."""

    def __init__(self, code: str, spare: tuple | None = None):
        self.workdir = None
        if spare is not None:  # started before the job arrived, off its critical path
            self._proc, self._w, self._r = spare
        else:
            self.workdir = fresh_dir(CANDIDATE_ROOT or os.getcwd(), "cand-")
            self._proc, self._w, self._r = spawn_candidate(self.workdir)
        _candidates.append(self)  # counted, and stopped by close_candidates(), even if it fails
        reply = self._ask({"op": "load", "code": code})
        if not reply.get("ok"):
            what = f"{reply.get('type', 'Exception')}: {reply.get('error', '?')}"
            raise CandidateError(f"candidate code failed to load: {what}")
        self.names = [n for n in reply.get("names", []) if isinstance(n, str)]

    def close(self) -> None:
        """Stop the interpreter and remove its directory (a job process just exits instead)."""
        for fd in (self._w, self._r):
            with contextlib.suppress(OSError):
                os.close(fd)
        if self._proc is not None:
            with contextlib.suppress(OSError):
                self._proc.kill()
            self._proc.wait()
        if self.workdir is not None:
            import shutil

            shutil.rmtree(self.workdir, ignore_errors=True)

    def _ask(self, msg):
        try:
            write_frame(self._w, msg)
            reply = read_frame(self._r)
        except (OSError, ValueError) as e:
            raise CandidateCrashed(f"code under test broke the proxy protocol: {e}") from None
        if not isinstance(reply, dict):
            code = self._proc.poll() if self._proc is not None else "?"
            raise CandidateCrashed(f"code under test exited during a call (status {code})")
        return reply

    def call(self, name, args, kwargs):
        try:
            payload = {
                "op": "call",
                "name": name,
                "args": encode(list(args)),
                "kwargs": encode(dict(kwargs)),
            }
        except CodecError as e:
            raise CandidateError(f"argument cannot be sent to the code under test: {e}") from None
        reply = self._ask(payload)
        if reply.get("ok") is True:
            try:
                return decode(reply.get("value"))
            except (CodecError, KeyError, TypeError, ValueError) as e:
                raise CandidateCrashed(f"code under test returned malformed data: {e}") from None
        etype = str(reply.get("type", "Exception"))
        message = str(reply.get("error", ""))
        exc = _REraisable.get(etype)
        if exc is not None:
            raise exc(message)
        raise CandidateError(f"{etype}: {message}")


class CandidateFunction:
    """A callable standing in for a function of the code under test."""

    def __init__(self, proc: _CandidateProcess, name: str):
        self._proc = proc
        self._name = name

    def __call__(self, *args, **kwargs):
        return self._proc.call(self._name, args, kwargs)

    def __repr__(self):
        return f"<function {self._name} (sandboxed)>"


_MAX_CANDIDATES = 8

# Signals that stop a process by default and can be caught: the worker ignores them; the spawner
# restores the defaults, which every job process inherits.
_CATCHABLE_STOPS = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGALRM,
    signal.SIGQUIT,
)
_candidates: list[_CandidateProcess] = []
CANDIDATE_ROOT: str | None = None  # where candidates get their directories (default: the cwd)


def close_candidates() -> None:
    """Stop every candidate this process started, so a host that runs VFs in-process
    (the test double) starts each VF with a fresh budget and leaves nothing running."""
    while _candidates:
        _candidates.pop().close()


def _unfence(code: str) -> str:
    """Models often wrap the code they return in a markdown fence; the fence is not Python."""
    lines = code.strip().splitlines()
    if len(lines) >= 2 and lines[0].startswith("```") and lines[-1].strip() == "```":
        return "\n".join(lines[1:-1]) + "\n"
    return code


def load_function(code: str, name: str) -> CandidateFunction:
    """Load `name` from model-written `code` in a separate process and return a proxy to it.

    Only plain data crosses the boundary, so the code under test cannot hand the
    caller an object whose comparisons lie, nor patch the caller's AssertionError.
    """
    if type(code) is not str or type(name) is not str:
        raise TypeError(
            "load_function(code, name) takes the source code as a str and the function name as a "
            f"str; got code of type {type(code).__name__} and name of type {type(name).__name__}"
        )
    if len(_candidates) >= _MAX_CANDIDATES:
        raise RuntimeError(f"at most {_MAX_CANDIDATES} load_function() calls per job")
    proc = _CandidateProcess(_unfence(code))
    if name not in proc.names:
        raise CandidateError(f"the code under test defines no function named {name!r}")
    return CandidateFunction(proc, name)


# --------------------------------------------------------------------------- VF helpers
#
# Plain functions in every VF's namespace, for what small models get wrong when they write
# checks by hand: == on floats, digging the number out of a sentence, and checks that need
# expected values the planner cannot know (the task's own examples know them). They are
# trusted code: the code under test reaches them only as plain data.

_NUMBER = re.compile(
    r"(?<![\w.])[-+]?(?:(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.[0-9]+)?|\.[0-9]+)"
    r"(?:[eE][-+]?[0-9]+)?"
)


def _real(x) -> bool:
    """int or float, or another real number type (numpy scalars, Fraction); never a bool."""
    t = type(x)
    if t is int or t is float:
        return True
    if t is bool or t is str or x is None or t in (list, tuple, dict, set, bytes):
        return False
    import numbers

    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def _plain(x):
    """numpy arrays and scalars as the Python values they hold, so they compare like them."""
    if getattr(type(x), "__module__", None) == "numpy" and hasattr(x, "tolist"):
        return x.tolist()
    return x


def is_number(x) -> bool:
    """True for a finite int or float. A bool is not a number here: True == 1 hides bugs."""
    if not _real(x):
        return False
    if isinstance(x, int):
        return True
    try:
        return math.isfinite(x)
    except OverflowError:  # a Fraction too large for a float is still finite
        return True
    except (TypeError, ValueError):
        return False


def isclose(a, b, rel_tol=1e-9, abs_tol=0.0) -> bool:
    """math.isclose, also for ints too large for a float (compared exactly)."""
    try:
        return math.isclose(a, b, rel_tol=rel_tol, abs_tol=abs_tol)
    except OverflowError:
        return a == b


def _close(a, b, rel, abs_) -> bool:
    if a == b:
        return True
    try:
        return math.isclose(a, b, rel_tol=rel, abs_tol=abs_)
    except OverflowError:
        return False


def _approx(a, b, rel, abs_, strict: bool) -> bool:
    a, b = _plain(a), _plain(b)
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if _real(a) and _real(b):
        return _close(a, b, rel, abs_)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if strict and type(a) is not type(b):
            return False
        return len(a) == len(b) and all(
            _approx(x, y, rel, abs_, strict) for x, y in zip(a, b, strict=True)
        )
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_approx(a[k], b[k], rel, abs_, strict) for k in a)
    return bool(a == b)


def approx(a, b, rel=1e-6, abs=1e-9) -> bool:
    """a and b are equal up to rounding: numbers within `rel` (relative) or `abs` (absolute),
    element by element through lists and tuples (alike, same length) and dicts (same keys);
    anything else must be ==. A bool equals only a bool: approx(True, 1) is False."""
    return _approx(a, b, rel, abs, False)


def parse_number(text):
    """The last number written in `text`, as an int unless it has a decimal point or an
    exponent ("The answer is $1,234.50." -> 1234.5): models end with their answer. A number
    given as a number is returned as it is."""
    if _real(text):
        return text
    if not isinstance(text, str):
        raise TypeError(f"parse_number() takes a str or a number, not {type(text).__name__}")
    last = None
    for last in _NUMBER.finditer(text.replace("\u2212", "-")):  # noqa: B007
        pass
    if last is None:
        raise ValueError(f"no number in {_short(text, 80)}")
    digits = last.group().replace(",", "")
    if "." in digits or "e" in digits or "E" in digits:
        return float(digits)
    return int(digits)


def _short(value, limit: int = 200) -> str:
    return _clip(repr(value), limit)


def _clip(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- the task's own examples
#
# Examples are read from the task text as it is written in the wild (HumanEval alone has a
# dozen styles). Whatever cannot be read with certainty is left out: a misread example would
# fail correct code, which is worse than checking one example fewer.

_PURE_FUNCTIONS = {  # may wrap an example call, as in `round(find_zero([1, 2]), 2)`
    f.__name__: f
    for f in (abs, round, sorted, len, list, tuple, set, frozenset, sum, min, max, str, int, float)
}
_DEF_RE = r"^([ \t]*)(?:async[ \t]+)?def[ \t]+([A-Za-z_]\w*)[ \t]*\("
_CLASS_RE = r"^([ \t]*)class[ \t]+[A-Za-z_]"
_CALL_RE = r"(?<![\w.])([A-Za-z_]\w*)[ \t]*\("
_PREFIX_RE = (  # what may come before an example's call on its line
    r"[ \t]*(?:[rRuU]?(?:\"\"\"|'''))?[ \t]*(?:(?:[-*\u2022+]|[0-9]{1,2}[.)])[ \t]+)?"
    r"(?:(?:for[ \t]+example|for[ \t]+instance|e\.g\.|examples?(?:[ \t]*[0-9]+)?|assert|for"
    r"|\**[A-Za-z][\w ]{0,30}:\**)[ \t]*[:,]?[ \t]*)?$"
)
_SEP_RE = (
    r"[ \t]*(?:#[ \t]*)?(==>|-->|=>|->|\u279e|\u2192|\u21d2|==|=(?![=>])|should[ \t]+return"
    r"|should[ \t]+be|will[ \t]+return|returns|evaluates[ \t]+to)[ \t]*"
)
_INPUT_RE = r"^[ \t]*(?:[-\u2022][ \t]*)?\**[ \t]*input[ \t]*\**[ \t]*:[ \t]*\**(.*)$"
_OUTPUT_RE = r"^[ \t]*(?:[-\u2022][ \t]*)?\**[ \t]*output[ \t]*\**[ \t]*:[ \t]*\**(.*)$"
_FOR_RE = (
    r"^[ \t]*(?:[-*\u2022][ \t]*)?for[ \t]+(.+?),?[ \t]+the[ \t]+(?:output|result|answer)[ \t]+"
    r"(?:should[ \t]+be|will[ \t]+be|is)[ \t]*:?[ \t]+(.+)$"
)
_NAMED_VALUE_RE = r"^[ \t]*([A-Za-z_]\w*)[ \t]*[:=][ \t]*(.+?)[ \t]*,?[ \t]*$"
_WORDS = {"true": "True", "false": "False", "none": "None", "null": "None"}
_CLOSERS = {"(": ")", "[": "]", "{": "}"}


def _group_end(text: str, i: int, limit: int = 5000) -> int:
    """Index just past the bracket group that opens at text[i]; -1 if it does not close
    (or a string in it does not end on its line: prose, not code)."""
    stack = []
    end = min(len(text), i + limit)
    j = i
    while j < end:
        c = text[j]
        if c == '"' or c == "'":
            if text.startswith(c * 3, j):
                return -1
            j += 1
            while j < end and text[j] != c:
                if text[j] == "\n":
                    return -1
                j += 2 if text[j] == "\\" else 1
            if j >= end:
                return -1
        elif c == "#":
            j = text.find("\n", j)
            if j < 0:
                return -1
            continue
        elif c in _CLOSERS:
            stack.append(_CLOSERS[c])
        elif c in ")]}":
            if not stack or stack.pop() != c:
                return -1
            if not stack:
                return j + 1
        j += 1
    return -1


def _literal(ast, node):
    """The value of a literal expression node; ValueError for anything else (or an Ellipsis)."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and sub.value is ...:
            raise ValueError("an ellipsis is not a value")
    return ast.literal_eval(node)


def _parse(ast, source: str, mode: str = "eval"):
    """The AST of `source`, or None. Task text is not code: its warnings (an invalid escape
    in a string, "1if") are nobody's to read."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(source.strip(), mode=mode)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    return tree.body if mode == "eval" else tree


def _example_calls(ast, node, known) -> set | None:
    """Task functions an example expression calls; None unless it is one we may evaluate:
    calls with literal arguments, to task functions or to a few pure builtins around them."""
    if not isinstance(node, ast.Call):
        try:
            _literal(ast, node)
        except Exception:
            return None
        return set()
    if not isinstance(node.func, ast.Name):
        return None
    name = node.func.id
    if not known(name) and name not in _PURE_FUNCTIONS:
        return None
    called = {name} if known(name) else set()
    for arg in [*node.args, *(k.value for k in node.keywords)]:
        if isinstance(arg, ast.Starred):
            return None
        sub = _example_calls(ast, arg, known)
        if sub is None:
            return None
        called |= sub
    if any(k.arg is None for k in node.keywords):
        return None
    return called


def _expected(ast, text: str, prose: bool) -> str | None:
    """The source of the literal an example expects, or None when it is not certain.

    Doctest output is taken whole. Prose may follow the value with a comment, a
    parenthetical or a full stop; an unparenthesized tuple, a parenthesized non-tuple
    (`("Venus")`, meant as a 1-tuple) and an ellipsis are ambiguous and left out.
    """
    s = text.strip()
    if not s or len(s) > 20000:
        return None
    if not prose:
        node = _parse(ast, s)
        try:
            _literal(ast, node)
        except Exception:
            return None
        return ast.unparse(node)
    cuts = [len(s) - 1, len(s)] if s.endswith(".") else [len(s)]  # "1." in prose is 1
    for i in range(len(s) - 1, 0, -1):
        rest = s[i:]
        comment = s[i] == "#" or (s[i].isspace() and rest.lstrip()[:1] in ("#", "("))
        if comment or rest.strip() in (".", ",", ";"):
            cuts.append(i)
    for cut in cuts[:64]:
        p = s[:cut].strip()
        if p.lower() in _WORDS:
            return _WORDS[p.lower()]
        node = _parse(ast, p)
        if node is None:
            continue
        try:
            _literal(ast, node)
        except Exception:
            continue
        tuple_ = isinstance(node, ast.Tuple)
        if tuple_ != (p.startswith("(") and p.endswith(")")):
            return None
        return ast.unparse(node)
    return None


def _task_functions(ast, text: str) -> dict:
    """{name: (parameter names or None, required count, offset)} of the task's top-level
    functions (the least indented defs that are not methods), in order of definition."""
    classes = [
        (m.start(), len(m.group(1).expandtabs())) for m in re.finditer(_CLASS_RE, text, re.M)
    ]
    found = []
    for m in re.finditer(_DEF_RE, text, re.M):
        indent = len(m.group(1).expandtabs())
        if not any(pos < m.start() and depth < indent for pos, depth in classes):
            found.append((indent, m))
    top = min((indent for indent, _ in found), default=0)
    funcs: dict = {}
    for indent, m in found:
        if indent != top:
            continue
        params, required = None, 0
        end = _group_end(text, m.end() - 1)
        tree = _parse(ast, f"def f({text[m.end() : end - 1]}):\n pass", "exec") if end > 0 else None
        if tree is not None and tree.body[0].args.vararg is None:
            args = tree.body[0].args
            params = [a.arg for a in [*args.posonlyargs, *args.args]]
            required = len(params) - len(args.defaults)
        funcs.pop(m.group(2), None)
        funcs[m.group(2)] = (params, required, m.start())
    return funcs


def _synthesized_call(ast, name: str, info, text: str) -> str | None:
    """`name(...)` from an "Input: x = 1, y = [2]" style argument list, or None.

    Arguments are passed by position, so they are taken only when their names (if given)
    are the function's leading parameters in order, covering every required one."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    if not lines:
        return None
    if len(lines) > 1:
        named = [re.match(_NAMED_VALUE_RE, ln) for ln in lines]
        if not all(named):
            return None
        inner = ", ".join(f"{m.group(1)}={m.group(2)}" for m in named)
    else:
        inner = lines[0].strip()
        m = re.match(r"^([A-Za-z_]\w*)[ \t]*:[ \t]*(.+)$", inner)
        if m:
            inner = f"{m.group(1)}={m.group(2)}"
    node = _parse(ast, f"f({inner})")
    if not isinstance(node, ast.Call) or (node.args and node.keywords):
        return None
    params, required, _ = info
    if node.keywords:
        names = [k.arg for k in node.keywords]
        if params is None or names != params[: len(names)]:
            return None
        values = [k.value for k in node.keywords]
    else:
        values = node.args
        if params is not None and len(values) > len(params):
            return None
    if params is not None and len(values) < required:
        return None
    try:
        for v in values:
            _literal(ast, v)
    except Exception:
        return None
    return f"{name}({', '.join(ast.unparse(v) for v in values)})"


def _task_examples(task: str, name: str | None = None) -> tuple[list, str | None]:
    """([(call source, expected literal source, task functions called)], entry point)."""
    import ast
    import bisect
    import keyword

    task = task.replace("\r\n", "\n")
    funcs = _task_functions(ast, task)
    entry = name or (next(reversed(funcs)) if funcs else None)
    if funcs or name or re.search(_DEF_RE, task, re.M):
        known = (set(funcs) | ({name} if name else set())).__contains__
    else:  # no code in the task: any name that is not Python's own

        def known(n):
            return not (hasattr(builtins, n) or keyword.iskeyword(n) or n in _PURE_FUNCTIONS)

    lines = task.split("\n")
    offsets = [0]
    for line in lines[:-1]:
        offsets.append(offsets[-1] + len(line) + 1)

    def line_of(pos: int) -> int:
        return bisect.bisect_right(offsets, pos) - 1

    def owner(pos: int) -> str | None:
        before = [n for n, info in funcs.items() if info[2] < pos]
        return before[-1] if before else entry

    def display(source: str, node) -> str:
        source = source.strip()
        return ast.unparse(node) if "\n" in source or "#" in source else source

    found = []  # (offset, call, expected, called, written with "=")
    defined_by_equation = set()  # `tri(n) = ...`: its `tri(3) = 8` lines are maths, not code
    doctest_lines = set()
    i = 0
    while i < len(lines):
        m = re.match(r"^([ \t]*)>>>(?:[ \t]|$)(.*)$", lines[i])
        if not m:
            i += 1
            continue
        start, indent, source = offsets[i], m.group(1), m.group(2)
        doctest_lines.add(i)
        i += 1
        while i < len(lines) and re.match(r"^[ \t]*\.\.\.(?:[ \t]|$)", lines[i]):
            source += "\n" + re.sub(r"^[ \t]*\.\.\.[ \t]?", "", lines[i])
            doctest_lines.add(i)
            i += 1
        want, clear = [], True
        while i < len(lines) and lines[i].strip() and not lines[i].lstrip().startswith(">>>"):
            if not lines[i].startswith(indent):
                clear = False  # output indented less than its prompt: not a doctest
                break
            out = lines[i][len(indent) :]
            if out.rstrip().endswith(('"""', "'''")):
                want.append(out.rstrip()[:-3])
                break
            want.append(out)
            doctest_lines.add(i)
            i += 1
        node = _parse(ast, source)
        text = "\n".join(want).strip()
        expected = _expected(ast, text, prose=False) if text else "None"
        if (  # `>>> f(x) == y` with no output (or True): written as an assertion
            isinstance(node, ast.Compare)
            and len(node.ops) == 1
            and isinstance(node.ops[0], ast.Eq)
            and text in ("", "True")
        ):
            expected = _expected(ast, ast.unparse(node.comparators[0]), prose=False)
            node = node.left
            source = ast.unparse(node)
        called = _example_calls(ast, node, known) if isinstance(node, ast.Call) else None
        if clear and called and expected is not None:
            found.append((start, display(source, node), expected, called, False))

    lines = [_untick(line) for line in lines]
    task = "\n".join(lines)
    i = 0
    while i < len(lines):
        line, base = lines[i], offsets[i]
        if i in doctest_lines:
            i += 1
            continue
        io = re.match(_INPUT_RE, line, re.I)
        target = owner(base)
        if io and target is not None:
            j, given = i + 1, [io.group(1)]
            while j < len(lines) and j < i + 12 and lines[j].strip():
                if re.match(_OUTPUT_RE, lines[j], re.I):
                    break
                given.append(lines[j])
                j += 1
            out = re.match(_OUTPUT_RE, lines[j], re.I) if j < len(lines) else None
            if out:
                info = funcs.get(target, (None, 0, 0))
                call = _synthesized_call(ast, target, info, "\n".join(given))
                text = _value_text(task, offsets[j] + out.start(1))
                expected = _expected(ast, text, prose=True)
                if call and expected is not None:
                    found.append((base, call, expected, {target}, False))
                i = line_of(offsets[j] + out.start(1) + len(text)) + 1
                continue
        m = re.match(_FOR_RE, line, re.I)
        if m and target is not None:
            call = _synthesized_call(ast, target, funcs.get(target, (None, 0, 0)), m.group(1))
            expected = _expected(ast, m.group(2), prose=True)
            if call and expected is not None:
                found.append((base, call, expected, {target}, False))
            i += 1
            continue
        head = next((c for c in re.finditer(_CALL_RE, line) if known(c.group(1))), None)
        if head is None or not re.match(_PREFIX_RE, line[: head.start()], re.I):
            i += 1
            continue
        end = _group_end(task, base + head.end() - 1)
        if end < 0:
            i += 1
            continue
        source = task[base + head.start() : end]
        node = _parse(ast, source)
        line_end = task.find("\n", end)
        sep = re.match(_SEP_RE, task[end : len(task) if line_end < 0 else line_end], re.I)
        if sep is None or not isinstance(node, ast.Call):
            i = line_of(end) + 1
            continue
        by_equation = sep.group(1) == "="
        called = _example_calls(ast, node, known)
        if not called:
            if by_equation:
                defined_by_equation.add(head.group(1))
            i = line_of(end) + 1
            continue
        text = _value_text(task, end + sep.end())
        expected = _expected(ast, text, prose=True)
        if expected is not None and not (by_equation and not funcs and not name):
            found.append((base, display(source, node), expected, called, by_equation))
        i = line_of(end + sep.end() + len(text)) + 1

    examples, seen = [], set()
    for _, call, expected, called, by_equation in sorted(found, key=lambda f: f[0]):
        if (by_equation and called & defined_by_equation) or (call, expected) in seen:
            continue
        seen.add((call, expected))
        examples.append((call, expected, frozenset(called)))
    return examples, entry


def _untick(line: str) -> str:
    """The line with markdown's backticks as spaces (`f(1)` returns `2`), unless one sits in
    a string literal, where it is data; same length, so offsets hold."""
    if "`" not in line:
        return line
    quote = None
    for c in line:
        if quote is None and c in "'\"":
            quote = c
        elif c == quote:
            quote = None
        elif c == "`" and quote is not None:
            return line
    return line if quote is not None else line.replace("`", " ")


def _value_text(text: str, start: int) -> str:
    """The text of a value starting at `start`: to the end of its line, or of the bracket
    group it opens when that spans lines, plus the rest of that line."""
    i = start
    while i < len(text) and text[i] in " \t":
        i += 1
    if i < len(text) and text[i] in _CLOSERS:
        end = _group_end(text, i)
        if end > 0:
            i = end
    line_end = text.find("\n", i)
    value = text[start : len(text) if line_end < 0 else line_end]
    if value.rstrip().endswith(('"""', "'''")):  # the docstring ends on the example's line
        value = value.rstrip()[:-3]
    return value


def extract_examples(task: str, name: str | None = None) -> list[tuple[str, str]]:
    """The examples written in a task, as (call source, expected literal source) pairs.

    Read: doctests (`>>> f(x)` then its output), `f(x) ==> y` and its kin (==, =>, ->, ➞,
    =, returns, should return, # => y), "Input: ... Output: ..." blocks and "For x = ...
    the output should be y" lines. Calls are to the task's top-level functions (`name`
    too; with neither, to any non-builtin name) with literal arguments.
    """
    if not isinstance(task, str):
        raise TypeError(f"the task must be a str, not {type(task).__name__}")
    return [(call, expected) for call, expected, _ in _task_examples(task, name)[0]]


def _run_call(ast, node, funcs: dict, call: str):
    if not isinstance(node, ast.Call):
        return _literal(ast, node)
    args = [_run_call(ast, a, funcs, call) for a in node.args]
    kwargs = {k.arg: _run_call(ast, k.value, funcs, call) for k in node.keywords}
    fname = node.func.id
    fn = funcs.get(fname)
    try:
        if fn is not None:
            return fn(*args, **kwargs)
        return _PURE_FUNCTIONS[fname](*args, **kwargs)
    except CandidateError as e:
        raise AssertionError(f"example {_clip(call)} raised {e}") from None
    except CandidateCrashed as e:
        raise AssertionError(f"example {_clip(call)}: {e}") from None
    except Exception as e:
        what = f"example {_clip(call)}"
        if fn is None:
            what += f": {fname}() around it"
        raise AssertionError(f"{what} raised {type(e).__name__}: {e}") from None


def run_examples(code: str, task: str, name: str | None = None) -> int:
    """Check `code` against the examples written in `task`; returns how many were checked.

    The code is loaded once, in its own process (load_function), for the functions the
    examples call: the entry point is the task's last top-level def unless `name` says
    otherwise. An example calling some other task function the code does not define is
    left out. The first example whose result differs (approx for numbers; a list is not
    a tuple) or that raises is an AssertionError naming it. A task without examples is a
    ValueError: a check that checks nothing must not pass.
    """
    if type(code) is not str or type(task) is not str:
        raise TypeError(
            "run_examples(code, task) takes the code and the task text as str; got "
            f"{type(code).__name__} and {type(task).__name__}"
        )
    if name is not None and type(name) is not str:
        raise TypeError(f"run_examples() name must be a str, not {type(name).__name__}")
    import ast

    examples, entry = _task_examples(task, name)
    if not examples:
        raise ValueError("the task has no examples to run")
    parsed, wanted = [], []
    for call, expected, called in examples:
        parsed.append((call, ast.parse(call, mode="eval").body, ast.literal_eval(expected), called))
        wanted.extend(n for n in sorted(called) if n not in wanted)
    first = entry if entry in wanted else wanted[0]
    try:
        proc = load_function(code, first)._proc
    except CandidateError as e:
        raise AssertionError(str(e)) from None
    funcs = {n: CandidateFunction(proc, n) for n in wanted if n in proc.names}
    checked = 0
    for call, node, expected, called in parsed:
        if not called <= funcs.keys():
            continue
        got = _run_call(ast, node, funcs, call)
        if not _approx(got, expected, 1e-6, 1e-9, True):
            raise AssertionError(
                f"example {_clip(call)} returned {_short(got)}, expected {_short(expected)}"
            )
        checked += 1
    if not checked:
        raise AssertionError(
            "the code defines none of the functions the task's examples call: "
            + ", ".join(sorted(wanted))
        )
    return checked


_VF_HELPER_FUNCTIONS = {
    f.__name__: f for f in (approx, isclose, is_number, parse_number, run_examples)
}
VF_HELPERS = frozenset(_VF_HELPER_FUNCTIONS)


# --------------------------------------------------------------------------- job children


def _record_bytes(rec: dict) -> bytes:
    return json.dumps(rec, allow_nan=False, default=str).encode()[:RESULT_LIMIT]


def _record(fd: int, rec: dict) -> None:
    os.write(fd, _record_bytes(rec))


def _user_traceback(e: BaseException) -> str:
    """The traceback without the worker's own leading frames: what the author can act on."""
    tb = e.__traceback__
    here = os.path.abspath(__file__)
    while tb is not None and tb.tb_next is not None and tb.tb_frame.f_code.co_filename == here:
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


def _child_vf(job: dict, namespace: dict | None = None) -> dict:
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

            tree = ast.fix_missing_locations(ast_from_json(job["ast"]))
            code = compile(tree, "<vf>", "exec", VF_COMPILE_FLAGS, True)
        else:
            code = compile(source, "<vf>", "exec")
        if namespace is not None:
            ns = namespace
        elif job.get("restricted", True):
            ns = _vf_globals()
        else:
            ns = vf_namespace(restricted=False)
        inputs, outputs = decode(job["inputs"]), decode(job["outputs"])
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


def _child_tests(job: dict) -> dict:
    source = job["test_code"]
    linecache.cache["<tests>"] = (len(source), None, source.splitlines(True), "<tests>")
    try:
        global _SPARE
        spare, _SPARE = _SPARE, None
        proc = _CandidateProcess(job["candidate_code"], spare)
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


def _child_program(job: dict, scratch: str) -> dict:
    argv = [os.path.join(scratch, "main.py"), *job.get("argv", [])]
    sys.argv = argv
    sys.path.insert(0, scratch)
    code = job["code"]
    linecache.cache[argv[0]] = (len(code), None, code.splitlines(True), argv[0])
    main = type(sys)("__main__")  # a real __main__ module, as `python main.py` would have
    main.__file__ = argv[0]
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    status = 0
    try:
        exec(compile(code, argv[0], "exec"), main.__dict__)
        _interpreter_shutdown()
        rec = {"outcome": "PASS"}
    except SystemExit as e:
        code = e.code
        if code is None or code == 0:
            rec = {"outcome": "PASS"}
        else:
            if not isinstance(code, int):
                sys.stderr.write(f"{code}\n")
            status = code if isinstance(code, int) else 1
            rec = {"outcome": "ERROR", "message": f"exit status {status}"}
    except BaseException as e:
        sys.stderr.write(_user_traceback(e))
        rec = _exc_record(e, argv[0])
        status = 1
    rec["exit_status"] = status & 0xFF or (1 if status else 0)
    return rec


def _libc():
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True)
    except Exception:
        return None


_LIBC = None


def _prctl(option: int, arg: int) -> None:
    global _LIBC
    if _LIBC is None:
        _LIBC = _libc()
    if _LIBC is not None:
        with contextlib.suppress(Exception):
            _LIBC.prctl(option, arg, 0, 0, 0)


def _set_dumpable(flag: int) -> None:
    """PR_SET_DUMPABLE=0 hides /proc/<pid>/mem, fd and environ from same-uid processes."""
    _prctl(4, flag)


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


_WARM_FRAME = frame_bytes(  # shaped like the usual job: a VF, checked and compiled on the host
    {
        "kind": "vf",
        "source": "x = 1",
        "inputs": encode({"question": "text", "n": 1, "items": [1.5, True, None]}),
        "outputs": encode({"answer": "text", "pairs": [(1, 2)]}),
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


def _warm_up(jobdir: str, scratch: str) -> bool:
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
            os.write(w, _WARM_FRAME)
            job = read_frame(r)
        finally:
            os.close(r)
            os.close(w)
        _write_files(job, jobdir, scratch)
        for limit in _LIMITS:
            resource.setrlimit(limit, resource.getrlimit(limit))
        rec = _child_vf(job, namespace={"__builtins__": {}})
        _record_bytes(rec)
        linecache.cache.pop("<vf>", None)
        sys.stdout.flush()
        sys.stderr.flush()
        return rec == {"outcome": "PASS"}
    except BaseException:
        return False


def _close_all_but(keep: set[int]) -> None:
    """Close every other fd, a range at a time (no /proc listing: fewer page copies)."""
    low = 0
    for fd in sorted(keep):
        if fd > low:  # never an empty range: closerange(0, 0) closes every fd
            os.closerange(low, fd)
        low = fd + 1
    top = os.sysconf("SC_OPEN_MAX")
    os.closerange(low, top if top > low else 1 << 20)


def _child_main(job_fd: int, jobdir: str, scratch: str, fds: dict) -> None:
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
        spare = fds.get("spare")
        if spare is not None:
            keep.update(spare[1:])
        _close_all_but(keep)
        if DROP_UID is not None:
            for path in (jobdir, scratch):
                os.chown(path, DROP_UID, DROP_UID)
            os.setgroups([])
            os.setgid(DROP_UID)
            os.setuid(DROP_UID)
        os.chdir(scratch)
        if scratch != _HOME:  # the spawner set HOME and TMPDIR to the usual one
            os.environ["HOME"] = os.environ["TMPDIR"] = scratch
        _warm_up(jobdir, scratch)
        job = read_frame(job_fd)
        if job is None:
            os._exit(0)
        os.close(job_fd)
        if spare is not None:
            if job.get("kind") == "tests":
                global _SPARE
                _SPARE = spare
            else:
                for fd in spare[1:]:
                    os.close(fd)
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
            rec = _child_vf(job)
        elif kind == "tests":
            rec = _child_tests(job)
        elif kind == "program":
            rec = _child_program(job, scratch)
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


# --------------------------------------------------------------------------- the spawner


class SpawnerGone(Exception):
    """The spawner process died or stopped answering (a job may kill it: same uid)."""


_HOME: str | None = None  # HOME and TMPDIR the spawner set for job processes


def _spawner_main(sock: socket.socket, home: str) -> None:
    """Serve the worker's requests until it hangs up; never returns.

    spawn: reap the previous job process, fork the next one with the fds sent
    along, answer its pid. wait / poll: answer a job process's exit status.
    Requests are NUL-separated fields; there is no unsolicited message. The
    spawner never reads a job, so a process it forks holds nothing of any job.
    """
    _close_all_but({0, 1, 2, sock.fileno()})
    # what every job process needs and no job changes is set up here, once
    os.environ.clear()
    os.environ.update(CHILD_ENV, HOME=home, TMPDIR=home)
    global _HOME
    _HOME = home
    for sig in (signal.SIGPIPE, *_CATCHABLE_STOPS):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    global _VF_GLOBALS
    _VF_GLOBALS = restricted_globals()
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)  # free heap pages back: fewer page-table entries for fork to copy
    sys.stdin = open(0, closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", closefd=False, errors="backslashreplace")  # noqa: SIM115
    sys.stderr = open(2, "w", closefd=False, errors="backslashreplace")  # noqa: SIM115
    try:
        while True:
            msg, fds, _flags, _addr = socket.recv_fds(sock, 8192, 8)
            if not msg:
                break
            op, *args = msg.split(b"\0")
            if op == b"spawn":
                jobdir, scratch, names, reap = args
                if reap:
                    with contextlib.suppress(ChildProcessError):
                        os.waitpid(int(reap), 0)
                pid = os.fork()
                if pid == 0:
                    named = dict(zip(names.decode().split(","), fds, strict=True))
                    if "spare_w" in named:
                        named["spare"] = (None, named.pop("spare_w"), named.pop("spare_r"))
                    _child_main(named.pop("job"), jobdir.decode(), scratch.decode(), named)
                for fd in fds:
                    os.close(fd)
                sock.send(b"%d" % pid)
            else:
                try:
                    wpid, st = os.waitpid(int(args[0]), 0 if op == b"wait" else os.WNOHANG)
                    sock.send(b"%d" % st if wpid else b"running")
                except ChildProcessError:
                    sock.send(b"unknown")
    except BaseException:  # the worker is gone, or we cannot serve it: it will start another
        pass
    os._exit(0)


def _own_status(pid: int, wait: bool) -> int | None:
    """Wait status of a child of ours; raises ChildProcessError if it is not ours."""
    wpid, st = os.waitpid(pid, 0 if wait else os.WNOHANG)
    return st if wpid else None


class Spawner:
    """Forks job processes for the worker, so that the worker itself never forks.

    fork() write-protects every page of the process that calls it; the caller then
    takes a page fault on each page it writes, and on a VM a fault costs several
    microseconds. The worker writes a few hundred pages per job while supervising
    it; the spawner's loop writes few. It is forked before any job.
    """

    def __init__(self, home: str) -> None:
        """`home`: the scratch directory job processes usually get (HOME and TMPDIR)."""
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.pid = os.fork()
        if self.pid == 0:
            self.sock.close()
            _spawner_main(theirs, home)
        theirs.close()
        self.last: int | None = None  # the last job process: reaped at the next spawn

    def _ask(self, msg: bytes, fds: list[int] | None = None, timeout: float = 5.0) -> bytes:
        if self.sock.fileno() < 0:
            raise SpawnerGone("the spawner was given up")
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGCONT)  # a job may have stopped it
        try:
            socket.send_fds(self.sock, [msg], fds or [])
            ready = select.select([self.sock], [], [], timeout)[0]
            reply = self.sock.recv(64) if ready else b""
        except OSError:
            reply = b""
        if not reply:
            # dead, or late: a late answer would be taken for the next request's
            self.close()
            raise SpawnerGone("the spawner died or did not answer")
        return reply

    def spawn(self, fds: dict[str, int], jobdir: str, scratch: str) -> int:
        fields = [b"spawn", jobdir.encode(), scratch.encode(), ",".join(fds).encode()]
        fields.append(b"%d" % self.last if self.last else b"")
        self.last = int(self._ask(b"\0".join(fields), list(fds.values())))
        return self.last

    def status(self, pid: int, wait: bool) -> int | None:
        """A job process's wait status; None while it runs (wait=False) or if it was lost.

        If the spawner died, the job process was reparented to the worker (the
        subreaper) and is waited for here.
        """
        try:
            return _own_status(pid, wait)
        except ChildProcessError:
            pass
        try:
            reply = self._ask(b"%s\0%d" % (b"wait" if wait else b"poll", pid), timeout=2.0)
        except SpawnerGone:
            try:
                return _own_status(pid, wait)
            except ChildProcessError:
                return None
        return int(reply) if reply.isdigit() else None

    def alive(self) -> bool:
        try:
            return os.waitpid(self.pid, os.WNOHANG)[0] == 0
        except ChildProcessError:
            return False

    def close(self) -> None:
        self.sock.close()
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


# --------------------------------------------------------------------------- the worker


class Worker:
    def __init__(self, container: bool, scratch_root: str):
        self.container = container
        self.scratch_root = scratch_root
        self.pid = os.getpid()
        self.next = None
        self.current = None
        self.want_spare = False  # pre-start a candidate interpreter (after a tests job)
        self.spare_proc = None
        os.makedirs(scratch_root, exist_ok=True)
        # forked first, while this process holds little: see the imports at the top
        self.spawner: Spawner | None = Spawner(self._scratch(self._jobdir()))

    # -- cleanup ---------------------------------------------------------------

    def _descendants(self) -> list[int]:
        """Every process a job may have left, living or not yet reaped.

        The spawner is not one, nor are its reaped-at-next-spawn zombies (earlier
        job processes, already dead); a job process of its that still lives is.
        """
        spawner = self.spawner.pid if self.spawner is not None else None
        try:
            fd = os.open(f"/proc/{self.pid}/task/{self.pid}/children", os.O_RDONLY)
            try:
                children = os.read(fd, 65536).split()
            finally:
                os.close(fd)
        except OSError:
            children = None
        if children is not None and all(int(c) == spawner for c in children):
            # Orphans come to us (the subreaper) and the job process was killed, so
            # with no child but the spawner nothing is left: skip reading all of /proc.
            return []
        parents: dict[int, int] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            rest = stat[stat.rfind(b")") + 2 :].split()
            pid, ppid = int(entry), int(rest[1])
            if not (ppid == spawner and rest[0] == b"Z"):
                parents[pid] = ppid
        if self.container:
            return [p for p in parents if p not in (1, self.pid, spawner)]
        found, frontier = [], [self.pid]
        while frontier:
            cur = frontier.pop()
            kids = [p for p, pp in parents.items() if pp == cur]
            found.extend(k for k in kids if k != spawner)
            frontier.extend(kids)
        return found

    def kill_leftovers(self, pgid: int | None) -> None:
        """Kill every process a job left behind, then reap them (we are their subreaper).

        The job's own child is awaited on its pidfd rather than polled: a SIGKILLed
        process is gone within microseconds, and a fixed poll interval was most of the
        per-job cost.
        """
        if pgid:
            with contextlib.suppress(OSError):
                os.killpg(pgid, signal.SIGKILL)
            self._await_exit(pgid, 1.0)
        for _ in range(5):
            pids = self._descendants()
            if not pids:
                break
            for p in pids:
                with contextlib.suppress(OSError):
                    os.kill(p, signal.SIGKILL)
            deadline = time.monotonic() + 0.2
            for p in pids:
                self._await_exit(p, max(0.0, deadline - time.monotonic()))
        self._reap()

    @staticmethod
    def _await_exit(pid: int, wait_s: float) -> None:
        try:
            fd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            return
        try:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            poller.poll(wait_s * 1000)
        finally:
            os.close(fd)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)

    @staticmethod
    def _reap() -> None:
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass

    def wipe(self, jobdir: str) -> None:
        import shutil

        try:  # most jobs leave scratch empty: a few syscalls instead of rmtree's thirty
            fd = os.open(jobdir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            try:
                os.rmdir(os.path.basename(self._scratch(jobdir)), dir_fd=fd)
            finally:
                os.close(fd)
            os.rmdir(jobdir)
        except OSError:  # not empty, a symlink, gone: rmtree copes (and never follows links)
            shutil.rmtree(jobdir, ignore_errors=True)
        if self.container:
            for root in ("/tmp", "/dev/shm"):
                try:
                    entries = os.listdir(root)
                except OSError:
                    continue
                for name in entries:
                    path = os.path.join(root, name)
                    try:
                        if os.path.isdir(path) and not os.path.islink(path):
                            shutil.rmtree(path, ignore_errors=True)
                        else:
                            os.unlink(path)
                    except OSError:
                        pass

    # -- one job ---------------------------------------------------------------

    def prefork(self) -> None:
        """Have the next job's process forked now, while nobody waits for it."""
        jobdir = self._jobdir()
        try:  # the usual path, whose HOME and TMPDIR the spawner set once for all jobs
            os.mkdir(jobdir, 0o700)
        except OSError:  # something is in the way (cleanup wipes it before the next job)
            jobdir = fresh_dir(self.scratch_root, "job-")
        scratch = self._scratch(jobdir)
        os.mkdir(scratch)
        job_r, job_w = os.pipe()
        pipes = {name: os.pipe() for name in ("stdout", "stderr", "result")}
        child_fds = {"job": job_r, **{k: w for k, (_r, w) in pipes.items()}}
        spare = None
        if self.want_spare:
            cand_dir = os.path.join(jobdir, "cand")
            os.mkdir(cand_dir)
            if DROP_UID is not None:
                for path in (jobdir, cand_dir):
                    os.chown(path, DROP_UID, DROP_UID)
            try:
                spare = spawn_candidate(cand_dir, child_fds["stdout"], child_fds["stderr"])
                child_fds.update(spare_w=spare[1], spare_r=spare[2])
                self.spare_proc = spare[0]
            except OSError:
                spare = None
        pid = self._spawn(child_fds, jobdir, scratch)
        os.close(job_r)
        for _r, w in pipes.values():
            os.close(w)
        if spare is not None:
            os.close(spare[1])
            os.close(spare[2])
        self.next = (pid, job_w, jobdir, {k: r for k, (r, _w) in pipes.items()})

    def _jobdir(self) -> str:
        return os.path.join(self.scratch_root, "job")

    @staticmethod
    def _scratch(jobdir: str) -> str:
        return os.path.join(jobdir, "work")

    def _spawn(self, fds: dict[str, int], jobdir: str, scratch: str) -> int:
        for attempt in range(2):
            if self.spawner is not None and not self.spawner.alive():
                self.spawner.close()
                self.spawner = None
                self._reap()  # the job processes it had are ours now (we are the subreaper)
            if self.spawner is None:
                self.spawner = Spawner(self._scratch(self._jobdir()))
            try:
                return self.spawner.spawn(fds, jobdir, scratch)
            except SpawnerGone:
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def run(self, job: dict) -> dict:
        """Run one job on the pre-forked child; cleanup() must follow before the next job."""
        if self.next is None:
            self.prefork()
        pid, job_w, jobdir, readers = self.next
        self.next = None
        self.want_spare = job.get("kind") == "tests"
        self.current = (pid, jobdir)
        start = time.monotonic()
        timeout = float(job.get("timeout", 10.0))
        out_limit = int(job.get("output_limit", 64 * 1024))
        try:
            write_frame(job_w, job)
        except OSError as e:
            for fd in readers.values():
                os.close(fd)
            return {
                "outcome": "SANDBOX_ERROR",
                "message": f"job child vanished before its job: {e}",
            }
        finally:
            os.close(job_w)
        rec = self._supervise(job["kind"], pid, readers, start, timeout, out_limit)
        rec["duration_s"] = time.monotonic() - start
        return rec

    def shutdown(self, remove_root: bool) -> None:
        """The host is gone: stop every process we started and, on the host, remove scratch."""
        if self.next is not None:
            pid, job_w, jobdir, readers = self.next
            self.next = None
            for fd in (job_w, *readers.values()):
                with contextlib.suppress(OSError):
                    os.close(fd)
            self.current = (pid, jobdir)
        if self.current is not None:
            pid, jobdir = self.current
            self.current = None
            self.kill_leftovers(pid)
            self.wipe(jobdir)
        if self.spawner is not None:
            self.spawner.close()
            self.spawner = None
        if remove_root:
            import shutil

            shutil.rmtree(self.scratch_root, ignore_errors=True)

    def cleanup(self) -> None:
        """Kill what the last job left behind, wipe scratch, and pre-fork the next job process."""
        if self.current is not None:
            pid, jobdir = self.current
            self.current = None
            self.kill_leftovers(pid)
            if self.spare_proc is not None:
                # killed and reaped above; mark it so subprocess never polls a reused pid
                if self.spare_proc.returncode is None:
                    self.spare_proc.returncode = -signal.SIGKILL
                self.spare_proc = None
            self.wipe(jobdir)
        self.prefork()

    def _supervise(
        self, kind: str, pid: int, readers: dict, start: float, timeout: float, out_limit: int
    ) -> dict:
        bufs = {k: bytearray() for k in readers}
        caps = {"stdout": out_limit, "stderr": out_limit, "result": RESULT_LIMIT}
        overflow = False
        timed_out = False
        early = False  # the record came and its fd closed: answer without awaiting teardown
        lost = False  # the job process ended but its exit status could not be had
        status = None
        sel = selectors.DefaultSelector()
        for name, fd in readers.items():
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ, name)
        try:
            pidfd = os.pidfd_open(pid)
            sel.register(pidfd, selectors.EVENT_READ, "exit")
        except (AttributeError, OSError):
            pidfd = None
        deadline = start + timeout
        open_fds = set(readers.values())
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            events = sel.select(min(remaining, 0.05) if pidfd is None else remaining)
            exited = False
            for key, _ in events:
                if key.data == "exit":
                    exited = True
                    continue
                fd = key.fd
                try:
                    chunk = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    sel.unregister(fd)
                    open_fds.discard(fd)
                    if key.data == "result" and bufs["result"]:
                        early = True
                    continue
                buf = bufs[key.data]
                room = caps[key.data] + 1 - len(buf)
                if room > 0:
                    buf += chunk[:room]
                if len(buf) > caps[key.data] and key.data != "result":
                    overflow = True
            if overflow or early:
                break
            if pidfd is None or exited:
                status = self.spawner.status(pid, wait=exited)
                if status is not None or exited:
                    lost = status is None
                    break
        if status is None and not early and not lost:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            status = self.spawner.status(pid, wait=True)
        # drain what is already buffered; never wait for grandchildren holding pipes
        for fd in list(open_fds):
            name = sel.get_key(fd).data
            try:
                while len(bufs[name]) <= caps[name]:
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        break
                    bufs[name] += chunk
            except (BlockingIOError, OSError):
                pass
            if len(bufs[name]) > caps[name] and name != "result":
                overflow = True
        sel.close()
        for fd in readers.values():
            os.close(fd)
        if pidfd is not None:
            os.close(pidfd)
        return self._classify(kind, status, bufs, caps, overflow, timed_out, timeout)

    @staticmethod
    def _classify(kind, status, bufs, caps, overflow, timed_out, timeout) -> dict:
        def text(name):
            raw = bytes(bufs[name][: caps[name]])
            s = raw.decode("utf-8", "replace")
            return s + TRUNCATION_MARK if len(bufs[name]) > caps[name] else s

        rec: dict = {"stdout": text("stdout"), "stderr": text("stderr"), "truncated": overflow}
        parsed = None
        raw = bytes(bufs["result"])
        if raw:
            try:
                parsed = json.loads(raw.decode("utf-8", "replace"))
            except ValueError:
                parsed = None
        if not isinstance(parsed, dict):
            parsed = None
        if status is None:  # answered on the record alone, or the exit status was lost
            sig = None
            code = (parsed or {}).get("exit_status") if kind == "program" else 0
        else:
            sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
            code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
        if timed_out:
            rec.update(outcome="TIMEOUT", message=f"timed out after {timeout:g}s (wall clock)")
        elif overflow:
            rec.update(
                outcome="OUTPUT_LIMIT", message="output exceeded the sandbox limit; job stopped"
            )
        elif sig == signal.SIGXCPU:
            rec.update(outcome="TIMEOUT", message="CPU time limit exceeded")
        elif sig == signal.SIGKILL or code == 137:
            rec.update(outcome="OOM", message="killed (SIGKILL/exit 137): memory limit exceeded")
        elif sig is not None:
            rec.update(outcome="ERROR", message=f"killed by signal {signal.Signals(sig).name}")
        elif kind == "program" and code == 0:
            rec.update(outcome="PASS", message="exit status 0")
        elif kind == "program":
            outcome = str((parsed or {}).get("outcome", "ERROR"))
            rec.update(
                outcome=outcome if outcome in {"FAIL", "ERROR", "OOM"} else "ERROR",
                message=str((parsed or {}).get("message") or f"exit status {code}")[:8000],
                traceback=str((parsed or {}).get("traceback", ""))[:32000],
            )
        elif parsed is None:
            how = f"with status {code}" if status is not None else "(exit status lost)"
            rec.update(outcome="ERROR", message=f"exited {how} before reporting a verdict")
        else:
            outcome = str(parsed.get("outcome", "ERROR"))
            if outcome not in {"PASS", "FAIL", "ERROR", "OOM", "POLICY", "SANDBOX_ERROR"}:
                outcome = "ERROR"
            if outcome == "PASS" and code != 0:
                outcome, parsed["message"] = "ERROR", f"exited with status {code}"
            rec.update(
                outcome=outcome,
                message=str(parsed.get("message", ""))[:8000],
                traceback=str(parsed.get("traceback", ""))[:32000],
            )
        return rec


def serve(container: bool, scratch_root: str, socket_path: str | None = None) -> None:
    _set_dumpable(0)
    _prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: orphans of a job come to us and get reaped
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    for sig in _CATCHABLE_STOPS:
        signal.signal(sig, signal.SIG_IGN)  # a job cannot stop its worker with a catchable signal
    hello = {
        "ready": True,
        "protocol": PROTOCOL,
        "python": sys.version.split()[0],
        "magic": MAGIC,
    }
    if socket_path:
        # a direct socket to the host (bind-mounted), instead of stdin/stdout through the
        # docker daemon; the host sends a one-time token on stdin to authenticate us
        import socket

        token = b""
        while not token.endswith(b"\n"):
            chunk = os.read(0, 256)
            if not chunk:
                return
            token += chunk
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(socket_path)
        in_fd = out_fd = sock.detach()
        hello["token"] = token.decode().strip()
    else:
        in_fd, out_fd = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    for fd in (in_fd, out_fd):
        os.set_inheritable(fd, False)
    worker = Worker(container, scratch_root)
    try:
        worker.prefork()
        write_frame(out_fd, hello)
        _serve_loop(worker, in_fd, out_fd)
    finally:
        worker.shutdown(remove_root=not container)


def _serve_loop(worker: Worker, in_fd: int, out_fd: int) -> None:
    while True:
        try:
            job = read_frame(in_fd)
        except ValueError as e:
            write_frame(out_fd, {"outcome": "SANDBOX_ERROR", "message": str(e)})
            return
        if job is None:
            return
        if job.get("kind") == "ping":
            res = {"outcome": "PASS"}
        else:
            try:
                res = worker.run(job)
            except Exception as e:
                res = {"outcome": "SANDBOX_ERROR", "message": f"worker: {type(e).__name__}: {e}"}
        res["id"] = job.get("id")
        res["token"] = job.get("token")
        write_frame(out_fd, res)
        if job.get("kind") != "ping":
            worker.cleanup()


def main(argv: list[str]) -> None:
    container = "--container" in argv
    scratch = "/tmp"
    if "--scratch" in argv:
        scratch = argv[argv.index("--scratch") + 1]
    global DROP_UID, CANDIDATE_PYTHON
    if "--drop-uid" in argv:
        DROP_UID = int(argv[argv.index("--drop-uid") + 1])
    if "--candidate-python" in argv:
        CANDIDATE_PYTHON = argv[argv.index("--candidate-python") + 1]
    socket_path = argv[argv.index("--socket") + 1] if "--socket" in argv else None
    serve(container, scratch, socket_path)


if __name__ == "__main__":
    main(sys.argv[1:])
