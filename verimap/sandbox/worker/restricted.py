"""The runtime half of the VF policy: guards RestrictedPython's rewritten code calls.

The host rewrites and checks a VF (verimap.sandbox.policy) before sending it; the
rewritten code calls `_getattr_`, `_write_`, `__import__` and the rest, which are
these guards, so a VF reaches no private attribute, no module outside
`ALLOWED_IMPORTS` and no dangerous function of an allowed one, even dynamically.
"""

from __future__ import annotations

import builtins
import operator
import string
import sys

from . import helpers
from .candidate import load_function
from .constants import ALLOWED_IMPORTS

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
        **helpers.FUNCTIONS,
    }


def vf_namespace(restricted: bool = True) -> dict:
    """A fresh namespace for one VF: the guarded one, or (policy off) a plain one; both
    with load_function and the VF helpers in scope."""
    if restricted:
        return restricted_globals()
    return {"__name__": "__verimap_vf__", "load_function": load_function, **helpers.FUNCTIONS}


_VF_GLOBALS: dict | None = None  # built once in the spawner, before it forks job processes
_SPENT: list[dict] = []


def prebuild() -> None:
    """Build the namespace the next job process takes (the spawner calls it once)."""
    global _VF_GLOBALS
    _VF_GLOBALS = restricted_globals()


def take_namespace() -> dict:
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
