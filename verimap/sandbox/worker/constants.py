"""What host and worker must agree on, in one module both import.

The host reads these without starting the worker (the policy check, the pool's
handshake, the process backend's environment), so this module imports nothing
but the standard library and does nothing when imported.
"""

from __future__ import annotations
import __future__

import importlib.util

PROTOCOL = 3  # the hello's protocol: token line first, then frames (stdio or socket)
MAGIC = importlib.util.MAGIC_NUMBER.hex()  # the host sends bytecode only when it matches
VF_COMPILE_FLAGS = __future__.annotations.compiler_flag  # host and worker compile VFs alike

# Modules a VF may import: checked on the host before sending, guarded again at run time.
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
# Functions in scope of every Python VF besides load_function (see helpers.FUNCTIONS).
VF_HELPERS = frozenset(["approx", "isclose", "is_number", "parse_number", "run_examples"])

CHILD_ENV = {  # the whole environment of a job: nothing of the host's
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "OPENBLAS_NUM_THREADS": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONIOENCODING": "utf-8",
}
