"""The one redaction every outbound boundary uses, and the one terminal filter for model text."""

import pytest

from verimap.base import events
from verimap.base.redaction import (
    REDACTED,
    add_secret,
    add_url,
    endpoint_name,
    for_console,
    printable,
    redact,
    secret_values,
    visible,
)
from verimap.observe.live import clean

# What a model can write to take the terminal over: an OSC 52 clipboard write, an OSC 0 title
# change, a full reset, a CSI screen clear and colour, an 8-bit CSI, an OSC 8 hyperlink (ST form),
# and a carriage return that overwrites what was printed before it.
OSC52 = "\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07"
OSC0 = "\x1b]0;pwned\x07"
RESET = "\x1bc"
CSI = "\x1b[2J\x1b[31m"
C1_CSI = "\x9b31m"
OSC8 = "\x1b]8;;http://127.0.0.1/\x1b\\link\x1b]8;;\x1b\\"
PAYLOADS = (OSC52, OSC0, RESET, CSI, C1_CSI, OSC8, "\r", "\x07", "\x08", "\x7f", "\x85")


@pytest.mark.parametrize("payload", PAYLOADS)
def test_printable_drops_every_control_sequence_whole(payload):
    out = printable(f"before {payload}after\nnext\tcol")
    assert out.startswith("before ") and out.endswith("after\nnext\tcol")
    assert not any(c in out for c in "\x1b\x07\x9b\x9c\x9d\r\x08\x7f\x85")
    # The payloads do not survive as text either: no clipboard data, no title.
    assert "52;" not in out and "pwned" not in out and "[2J" not in out


def test_a_sequence_cut_short_loses_its_escape_and_the_text_stays():
    assert printable("say \x1b]0;no terminator") == "say 0;no terminator"
    assert printable("plain text, unchanged: [red]ü") == "plain text, unchanged: [red]ü"


def test_the_live_view_uses_the_same_filter():
    for payload in PAYLOADS:
        assert clean(f"a {payload} b") == " ".join(printable(f"a {payload} b").split())


def test_the_secret_set_holds_env_values_given_keys_and_url_passwords(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "env-secret-3b8f1c")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://svc:url-env-pw-77a2@127.0.0.1:9/v1")
    add_secret("given-key-5d0e9a")
    add_url("http://alice:given-url-pw-41c6@127.0.0.1:9/v1")
    found = secret_values()
    for s in (
        "env-secret-3b8f1c",
        "url-env-pw-77a2",
        "given-key-5d0e9a",
        "given-url-pw-41c6",
        "alice:given-url-pw-41c6",
    ):
        assert s in found
    assert found == sorted(found, key=len, reverse=True)
    text = "a env-secret-3b8f1c b url-env-pw-77a2 c given-key-5d0e9a d given-url-pw-41c6"
    assert redact(text) == f"a {REDACTED} b {REDACTED} c {REDACTED} d {REDACTED}"


def test_a_cached_secret_list_still_sees_secrets_given_later():
    cached = secret_values()
    add_secret("late-key-9f2a7c")
    assert redact("late-key-9f2a7c", cached) == REDACTED


def test_short_or_blank_values_are_not_secrets(monkeypatch):
    monkeypatch.setenv("SOME_KEY", "true")
    add_secret("abc")
    add_secret("   ")
    add_url("http://u:pw@127.0.0.1/")
    assert redact("true abc pw") == "true abc pw"


def test_key_shapes_and_url_passwords_are_masked_without_being_given():
    text = (
        "sk-proj-ABCDEFGHIJKLMNOPQRST Bearer abcdefghijklmnop Basic YWxpY2U6cHctUmI0N05jMlhlOQ== "
        "ghp_" + "a" * 36 + " hf_" + "B" * 34 + " AKIAABCDEFGHIJKLMNOP "
        "http://bob:hunter22@db.internal/x"
    )
    out = redact(text)
    assert out.count(REDACTED) == 7 and "http://bob:[REDACTED]@db.internal/x" in out
    for word in ("Basic arithmetic", "a basic understanding", "the bearer of news", "sk-short"):
        assert redact(word) == word


def test_secret_named_fields_lose_their_strings_and_keep_their_numbers():
    data = {
        "api_key": "abc",
        "Authorization": ["Bearer x", {"raw": "y"}],
        "token": 5,
        "max_tokens": 9,
        "note": ("t",),
    }
    assert redact(data) == {
        "api_key": REDACTED,
        "Authorization": [REDACTED, {"raw": REDACTED}],
        "token": 5,
        "max_tokens": 9,
        "note": ["t"],
    }


def test_events_redact_is_the_same_function():
    assert events.redact is redact and events.secret_values is secret_values
    assert events.REDACTED == REDACTED


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("http://alice:pw-secret@127.0.0.1:8080/v1", "127.0.0.1:8080"),
        ("https://api.openai.com/v1", "api.openai.com"),
        ("http://[::1]:9/v1/", "[::1]:9"),
        ("not a url", "the model endpoint"),
        (None, "the model endpoint"),
    ],
)
def test_endpoints_are_named_by_host_and_port_only(url, name):
    assert endpoint_name(url) == name


def test_console_text_is_masked_and_stripped():
    add_secret("console-key-0c7d2e")
    assert for_console(f"key console-key-0c7d2e {OSC52}done") == f"key {REDACTED} done"


@pytest.mark.parametrize("payload", PAYLOADS)
def test_visible_spells_every_control_out_on_one_line(payload):
    out = visible(f"model {payload}\nnext\t|é–")
    assert out.isprintable() and "\n" not in out
    assert out.startswith("model ") and out.endswith(r"\nnext\t|é–")
    assert visible("\x1b]0;t\x07\u202e") == r"\x1b]0;t\x07\u202e"
