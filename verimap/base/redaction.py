"""What text may leave the process: secrets masked everywhere, terminal controls stripped on a
terminal.

Every boundary where text leaves verimap (the console, log notes, eval directories, traces,
OpenTelemetry spans, the HTML report, the Inspect and preference exports) passes it through
`redact`, so a key an endpoint echoes in an error reaches none of them. The secret set is the
values of secret-named environment variables, the keys and base-URL passwords the process was
given (`add_secret`, `add_url`; model clients register theirs), and anything shaped like a key.
Model text printed to a terminal also passes through `printable`: a reply must not be able to
write the clipboard, retitle the window or reset the terminal. A value read from a file that a
line or a table row shows (a task id, a model name) is `visible`: its controls spelled out.

This module imports only the standard library, so the lowest layers (the model clients) can use it.
"""

from __future__ import annotations

import base64
import os
import re
import threading
from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote, urlsplit

REDACTED = "[REDACTED]"

_SECRET_ENV = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.I)
_SECRET_FIELD = re.compile(r"(api[_-]?key|authorization|password|secret|token)$", re.I)
# Environment values shorter than this are flags and counts ("1", "true"), not secrets.
_MIN_ENV_SECRET = 8
# A password given in a URL or a key given in code is a secret whatever its name; only text so
# short that masking it would mangle ordinary words is left out.
_MIN_GIVEN_SECRET = 6
# Base URLs whose userinfo is a secret although nothing registered them.
_URL_ENV = ("OPENAI_BASE_URL",)
# Keys by their shape: OpenAI/Anthropic-style, bearer tokens, HTTP basic credentials (which
# must hold a digit or symbol, so "Basic arithmetic" stays), GitHub, Hugging Face, AWS.
_KEY_SHAPES = (
    ("sk-", re.compile(r"sk-[A-Za-z0-9_\-]{16,}")),
    ("bearer", re.compile(r"\b[Bb][Ee][Aa][Rr][Ee][Rr]\s+[A-Za-z0-9._~+/\-]{12,}=*")),
    ("basic", re.compile(r"\bBasic\s+(?=[A-Za-z0-9+/]*[0-9+/])[A-Za-z0-9+/]{8,}=*")),
    ("gh", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}")),
    ("hf_", re.compile(r"\bhf_[A-Za-z0-9]{30,}")),
    ("akia", re.compile(r"\bAKIA[0-9A-Z]{16}\b")),
)
# The password of any URL's userinfo (scheme://user:password@host).
_URL_PASSWORD = re.compile(r"(?<=://)([^/\s:@]*):[^/\s@]+(?=@)")

_given: set[str] = set()
_given_lock = threading.Lock()


def add_secret(value: str | None) -> None:
    """Mask `value` from now on wherever text leaves the process (an API key passed in code)."""
    if value and len(value.strip()) >= _MIN_GIVEN_SECRET:
        with _given_lock:
            _given.add(value.strip())


def add_url(url: str | None) -> None:
    """Mask the userinfo of `url` (user:password, the password alone, and the two as basic
    credentials) from now on."""
    for secret in _userinfo(url):
        add_secret(secret)


def _userinfo(url: str | None) -> list[str]:
    if not url or "@" not in url:
        return []
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return []
    password = parts.password
    if not password:
        return []
    user = parts.username or ""
    raw = parts.netloc.rpartition("@")[0]
    # HTTP clients send a URL's userinfo as basic credentials, which a reply may quote.
    basic = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode()
    return [s for s in {raw, f"{user}:{password}", password, unquote(password), basic} if s]


def endpoint_name(url: str | None) -> str:
    """How messages name an endpoint: its host and port, never its userinfo or path."""
    if not url:
        return "the model endpoint"
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname
        port = parts.port
    except ValueError:
        host, port = None, None
    if not host:
        return "the model endpoint"
    host = f"[{host}]" if ":" in host else host
    return f"{host}:{port}" if port else host


def secret_values() -> list[str]:
    """The whole secret set, longest first (so a secret that contains another is masked whole).

    Reads the environment: a caller redacting many texts keeps the list and passes it on."""
    found = {
        v for k, v in os.environ.items() if _SECRET_ENV.search(k) and len(v) >= _MIN_ENV_SECRET
    }
    for name in _URL_ENV:
        found.update(s for s in _userinfo(os.environ.get(name)) if len(s) >= _MIN_GIVEN_SECRET)
    with _given_lock:
        found |= _given
    return sorted(found, key=len, reverse=True)


def redact(obj: Any, secrets: Iterable[str] | None = None) -> Any:
    """A copy of `obj` (strings, and dicts, lists and tuples of them) with the secret set, the
    passwords of URLs and key-shaped strings masked, and the string values of secret-named
    fields (`api_key`, `authorization`, ...) replaced whole. Numbers and other values are kept.

    `secrets` is a list `secret_values()` gave earlier; secrets registered since are added."""
    known = secret_values() if secrets is None else _with_given(secrets)
    return _redact(obj, known, False)


# (the caller's list, how many secrets were registered then, the two merged), by the list's id:
# a bus redacts every event with one list, and merging it per event dominated a run's overhead.
_merged: dict[int, tuple[Iterable[str], int, list[str]]] = {}


def _with_given(secrets: Iterable[str]) -> list[str]:
    with _given_lock:
        hit = _merged.get(id(secrets))
        if hit is not None and hit[0] is secrets and hit[1] == len(_given):
            return hit[2]
        known = sorted(set(secrets) | _given, key=len, reverse=True)
        if len(_merged) > 64:
            _merged.clear()
        _merged[id(secrets)] = (secrets, len(_given), known)
        return known


class Redactor:
    """The secret set read once, for a caller that masks many values in one go (every value
    printed into a page): reading and sorting the set per value cost a report ten times its
    rendering time."""

    def __init__(self) -> None:
        self.secrets = secret_values()

    def __call__(self, obj: Any) -> Any:
        return _redact(obj, self.secrets, False)


def _redact(obj: Any, secrets: list[str], whole: bool) -> Any:
    if isinstance(obj, str):
        return REDACTED if whole and obj else _redact_text(obj, secrets)
    if isinstance(obj, dict):
        return {
            k: _redact(v, secrets, whole or (isinstance(k, str) and bool(_SECRET_FIELD.search(k))))
            for k, v in obj.items()
        }
    if isinstance(obj, list | tuple):
        return [_redact(v, secrets, whole) for v in obj]
    return obj


def _redact_text(text: str, secrets: list[str]) -> str:
    for s in secrets:
        if s in text:
            text = text.replace(s, REDACTED)
    if "@" in text:
        text = _URL_PASSWORD.sub(lambda m: f"{m.group(1)}:{REDACTED}", text)
    low = text.lower()
    for prefix, shape in _KEY_SHAPES:
        # Each shape only where its prefix is: one regex of all the shapes, tried at every
        # position of every value, cost a page of many values seconds.
        if prefix in low:
            text = shape.sub(REDACTED, text)
    return text


# -- terminals -----------------------------------------------------------------------------------

# Whole escape sequences, payload included: OSC (title, clipboard, hyperlinks) and the other
# string commands up to their terminator (BEL or ST), CSI (cursor, colours, modes), then any
# other two-or-three byte escape (ESC c resets the terminal). Their 8-bit C1 forms too.
_ESCAPES = re.compile(
    r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"
    r"|(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|\x1b[ -/]*[0-~]"
)
# Whatever control is left (a sequence cut short, a carriage return that would overwrite the
# line, a backspace): C0 but newline and tab, DEL, C1.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: Any) -> str:
    """`text` as it may be written to a terminal: every escape sequence and control character
    removed, newlines and tabs kept. For model text, endpoint replies and anything read from
    a file; verimap's own styling goes through rich, after this."""
    s = str(text)
    if s.isprintable():
        return s
    return _CONTROLS.sub("", _ESCAPES.sub("", s.replace("\r\n", "\n")))


_SPELLED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def visible(text: Any) -> str:
    """`text` on one line with every character that is not printable spelled as its Python
    escape (a newline as `\\n`, ESC as `\\x1b`, a bidi override as `\\u202e`): for a value read
    from a file (a task id, a model name) where a reader must see it whole, in a table row or a
    line of its own, and it must not break the line or drive a terminal."""
    s = str(text)
    if s.isprintable():
        return s
    return "".join(c if c.isprintable() else _SPELLED.get(c) or repr(c)[1:-1] for c in s)


def for_console(text: Any) -> str:
    """Text as it may be printed: secrets masked, terminal controls stripped."""
    return printable(redact(str(text)))
