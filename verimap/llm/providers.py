"""`provider/model` names, and what each kind of endpoint wants to be sent.

`openai/gpt-4o-mini`, `ollama/qwen2.5:7b` or `local/qwen2.5-coder-1.5b` name the endpoint with
the model, as Inspect AI, LiteLLM and pydantic-ai spell it. Only providers that speak the
OpenAI chat API are known, since that is the one client verimap has; any other prefix is an
error that says what to do instead. A name is read this way only when no endpoint is
configured (`--base-url`, `OPENAI_BASE_URL`): at an endpoint, `Qwen/Qwen2.5-7B-Instruct` (vLLM)
or `openai/gpt-4o` (OpenRouter) is the model's own name there.

OpenAI's reasoning models (o1, o3, o4-mini, gpt-5) refuse `max_tokens` and want
`max_completion_tokens`, which the self-hosted servers (llama.cpp, vLLM, Ollama) do not all
know: the limit is sent under the name the endpoint takes. They also refuse any temperature
or top_p but the default, so those are not sent to them (they sample anyway).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from verimap.base.errors import VerimapError

# What self-hosted servers are sent as a key: they want none, and OPENAI_API_KEY is not theirs.
NO_KEY = "sk-no-key-required"
LOCAL = "local"


@dataclass(frozen=True)
class Provider:
    base_url: str
    # The variable holding the key (None: the server wants none).
    key_env: str | None = None


PROVIDERS: dict[str, Provider] = {
    "openai": Provider("https://api.openai.com/v1", "OPENAI_API_KEY"),
    "openrouter": Provider("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
    "ollama": Provider("http://localhost:11434/v1"),
    "vllm": Provider("http://localhost:8000/v1"),
    "llamacpp": Provider("http://localhost:8080/v1"),
    "lmstudio": Provider("http://localhost:1234/v1"),
}


class UnknownProvider(VerimapError, ValueError):
    """A `provider/model` name whose provider verimap cannot reach."""


@dataclass(frozen=True)
class Target:
    """Where a `provider/model` name points: the model's name there, and the endpoint (None
    for `local`: verimap's own server)."""

    model: str
    provider: str
    base_url: str | None = None
    key_env: str | None = None


def split_provider(name: str) -> tuple[str, str] | None:
    """(`provider`, `model`) of a name written `provider/model`, else None."""
    head, sep, rest = name.partition("/")
    return (head.lower(), rest) if sep and head and rest else None


def resolve(name: str) -> Target | None:
    """The endpoint a `provider/model` name points at; None for a name with no provider.

    Raises `UnknownProvider` for a prefix verimap does not know, naming the known ones."""
    parts = split_provider(name)
    if parts is None:
        return None
    provider, model = parts
    if provider == LOCAL:
        return Target(model, LOCAL)
    known = PROVIDERS.get(provider)
    if known is None:
        raise UnknownProvider(
            f"unknown provider {provider!r} in {name!r}: verimap reaches OpenAI-compatible "
            f"endpoints, named {', '.join([*PROVIDERS, LOCAL])}; for another one give its "
            "OpenAI-compatible URL with --base-url (or OPENAI_BASE_URL) and the model's name "
            "there, which may contain '/'"
        )
    return Target(model, provider, known.base_url, known.key_env)


MaxTokensParam = Literal["auto", "max_tokens", "max_completion_tokens"]
MAX_TOKENS_PARAMS: tuple[str, ...] = ("auto", "max_tokens", "max_completion_tokens")

# OpenAI's reasoning families, by the names OpenAI gives them (dated snapshots included).
_REASONING = re.compile(r"^(o1|o3|o4|gpt-5)([-.].*)?$", re.I)


def is_reasoning_model(model: str) -> bool:
    return bool(_REASONING.match(model))


def token_limit_field(choice: str, base_url: str, model: str) -> str:
    """The request field the reply's token limit goes in. `auto`: `max_completion_tokens` for
    OpenAI's API and for OpenAI's reasoning models anywhere (an Azure or proxy deployment),
    `max_tokens` elsewhere. A wrong guess is corrected on the endpoint's first refusal."""
    if choice not in MAX_TOKENS_PARAMS:
        raise ValueError(
            f"unknown max-tokens parameter {choice!r}; choose one of {', '.join(MAX_TOKENS_PARAMS)}"
        )
    if choice != "auto":
        return choice
    host = urlsplit(base_url).hostname or ""
    if host == "api.openai.com" or is_reasoning_model(model):
        return "max_completion_tokens"
    return "max_tokens"


_REFUSED = {
    "max_tokens": re.compile(r"max_tokens.*max_completion_tokens", re.I | re.S),
    "max_completion_tokens": re.compile(
        r"max_completion_tokens.*(unrecognized|unknown|unsupported|not (supported|permitted|allowed))|"
        r"(unrecognized|unknown|unsupported|extra)\b.*max_completion_tokens",
        re.I | re.S,
    ),
}


def other_field_if_refused(sent: str, error: str) -> str | None:
    """The other field name when `error` says the endpoint refuses the one `sent`, else None."""
    pattern = _REFUSED.get(sent)
    if pattern is None or not pattern.search(error):
        return None
    return "max_completion_tokens" if sent == "max_tokens" else "max_tokens"


_SAMPLING_REFUSED = re.compile(
    r"'?(temperature|top_p)'?\s+(does not support|is not supported|unsupported)|"
    r"unsupported (value|parameter):\s*'?(temperature|top_p)",
    re.I,
)


def sampling_refused(error: str) -> bool:
    """Whether `error` says the model takes no temperature or top_p but its default."""
    return bool(_SAMPLING_REFUSED.search(error))
