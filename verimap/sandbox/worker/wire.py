"""The sandbox wire format and the code-under-test server (stdlib only, kept small).

Length-prefixed JSON frames, and a tagged codec for plain data: JSON types plus
tuple, set, frozenset, bytes, complex and non-finite floats. Decoding can only
produce builtin types, so nothing that crosses from untrusted code can carry
behaviour (an always-equal object, a patched exception class).

Run as a script it serves calls into model-written code in a fresh interpreter:
    python3 -I wire.py IN_FD OUT_FD
It imports nothing of its package (run as a script, with `-I`, it could not),
so that this interpreter starts fast; host and worker import it as a module.
"""

from __future__ import annotations

import base64
import json
import math
import os
import struct
import sys

FRAME = struct.Struct(">I")
MAX_FRAME = 64 * 1024 * 1024


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int):
    """Read one frame; None on EOF. Raises ValueError on an oversized frame."""
    head = _read_exact(fd, FRAME.size)
    if head is None:
        return None
    (size,) = FRAME.unpack(head)
    if size > MAX_FRAME:
        raise ValueError(f"frame of {size} bytes exceeds {MAX_FRAME}")
    body = _read_exact(fd, size)
    if body is None:
        return None
    return json.loads(body)


def frame_bytes(obj) -> bytes:
    body = json.dumps(obj, allow_nan=False).encode()
    return FRAME.pack(len(body)) + body


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_frame(fd: int, obj) -> None:
    write_all(fd, frame_bytes(obj))


# --------------------------------------------------------------------------- tagged codec


class CodecError(TypeError):
    """A value that cannot cross the sandbox boundary as plain data."""


def _enc_float(x: float):
    if math.isfinite(x):
        return x
    return {"$t": "float", "v": repr(x)}


def encode(obj, _depth: int = 0):
    """Plain data -> JSON: JSON types plus tuple, set, frozenset, bytes, complex, nan/inf.

    Exact type checks: a subclass (e.g. an int whose __eq__ always says True)
    is refused rather than silently converted.
    """
    if _depth > 200:
        raise CodecError("value nested too deeply to cross the sandbox boundary")
    t = type(obj)
    if obj is None or t is bool or t is int or t is str:
        return obj
    if t is float:
        return _enc_float(obj)
    d = _depth + 1
    if t is list:
        return [encode(x, d) for x in obj]
    if t is tuple:
        return {"$t": "tuple", "v": [encode(x, d) for x in obj]}
    if t is set or t is frozenset:
        return {"$t": t.__name__, "v": [encode(x, d) for x in obj]}
    if t is bytes or t is bytearray:
        return {"$t": "bytes", "v": base64.b64encode(bytes(obj)).decode()}
    if t is complex:
        return {"$t": "complex", "v": [_enc_float(obj.real), _enc_float(obj.imag)]}
    if t is dict:
        if all(type(k) is str for k in obj) and "$t" not in obj:
            return {k: encode(v, d) for k, v in obj.items()}
        return {"$t": "dict", "v": [[encode(k, d), encode(v, d)] for k, v in obj.items()]}
    raise CodecError(f"a value of type {t.__name__} cannot cross the sandbox boundary")


def _dec_float(v):
    if isinstance(v, dict):
        return float(v["v"])
    return float(v)


def decode(obj):
    """JSON -> plain data; only builtin types can come out of it."""
    if isinstance(obj, list):
        return [decode(x) for x in obj]
    if isinstance(obj, dict):
        tag = obj.get("$t")
        if tag is None:
            return {k: decode(v) for k, v in obj.items()}
        v = obj["v"]
        if tag == "float":
            return float(v)
        if tag == "tuple":
            return tuple(decode(x) for x in v)
        if tag == "set":
            return {decode(x) for x in v}
        if tag == "frozenset":
            return frozenset(decode(x) for x in v)
        if tag == "bytes":
            return base64.b64decode(v)
        if tag == "complex":
            return complex(_dec_float(v[0]), _dec_float(v[1]))
        if tag == "dict":
            return {decode(k): decode(x) for k, x in v}
        raise CodecError(f"unknown codec tag {tag!r}")
    if obj is None or type(obj) in (bool, int, float, str):
        return obj
    raise CodecError(f"undecodable value of type {type(obj).__name__}")


# --------------------------------------------------------------------------- AST transport


def ast_to_json(node):
    """A policy-checked AST as JSON, line numbers kept, so the worker never re-parses source."""
    import ast

    if isinstance(node, ast.AST):
        out = {"_t": type(node).__name__}
        for field in node._fields:
            value = getattr(node, field, None)
            if isinstance(node, ast.Constant) and field == "value":
                out[field] = {"$c": {"$t": "ellipsis"} if value is ... else encode(value)}
            else:
                out[field] = ast_to_json(value)
        for attr in ("lineno", "col_offset", "end_lineno", "end_col_offset"):
            if hasattr(node, attr):
                out[attr] = getattr(node, attr)
        return out
    if isinstance(node, list):
        return [ast_to_json(x) for x in node]
    return node


def ast_from_json(node):
    """Rebuild the host's policy-checked AST, keeping the original line numbers."""
    import ast

    if isinstance(node, list):
        return [ast_from_json(x) for x in node]
    if isinstance(node, dict):
        if "$c" in node:
            c = node["$c"]
            if isinstance(c, dict) and c.get("$t") == "ellipsis":
                return ...
            return decode(c)
        cls = getattr(ast, node["_t"])
        fields = {k: ast_from_json(v) for k, v in node.items() if k != "_t"}
        return cls(**fields)
    return node


def _lenient_encode(obj):
    """Candidate side: convert numpy scalars/arrays before encoding (not a trust boundary)."""
    mod = type(obj).__module__
    if mod == "numpy" and hasattr(obj, "tolist"):
        return encode(obj.tolist())
    return encode(obj)


def candidate_main(in_fd: int, out_fd: int) -> None:
    """Serve calls into model-written code; runs in its own interpreter."""
    ns: dict = {"__name__": "__candidate__"}
    while True:
        msg = read_frame(in_fd)
        if msg is None:
            os._exit(0)
        try:
            if msg["op"] == "load":
                exec(compile(msg["code"], "<candidate>", "exec"), ns)
                names = [k for k, v in ns.items() if callable(v) and not k.startswith("__")]
                reply = {"ok": True, "names": names}
            else:
                fn = ns[msg["name"]]
                value = fn(*decode(msg["args"]), **decode(msg["kwargs"]))
                reply = {"ok": True, "value": _lenient_encode(value)}
        except BaseException as e:  # the candidate's own failure, reported as data
            try:
                text = str(e)[:2000]
            except BaseException:
                text = "<unprintable>"
            reply = {"ok": False, "type": type(e).__name__, "error": text}
        try:  # its prints belong to this call's output
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:
            pass
        write_frame(out_fd, reply)


if __name__ == "__main__":
    candidate_main(int(sys.argv[1]), int(sys.argv[2]))
