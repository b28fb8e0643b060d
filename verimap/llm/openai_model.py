"""`Model` on any OpenAI-compatible chat endpoint: OpenAI, vLLM, Ollama, llama.cpp.

Endpoints differ in how they enforce a JSON reply, so the request is shaped by
a *dialect*:

- `openai`: `response_format={"type": "json_schema", ...}`;
- `llamacpp`: `{"type": "json_object", "schema": ...}`, which llama-cpp-python
  enforces by grammar (it rejects `json_schema` with HTTP 500);
- `json_mode`: `{"type": "json_object"}` only; the caller validates and re-asks.

`auto` uses `llamacpp` for our own local server; elsewhere it tries
`json_schema` and, if the endpoint says it is unsupported, falls back (first
to the llama.cpp form, then to plain JSON mode) and remembers the choice.

Retries are done here (not by the SDK) so that every failed attempt is counted
in the returned usage: budgets must see calls that failed. When and how long they wait is
`verimap.llm.retries`' business; how many requests may be in flight at one endpoint,
`verimap.llm.limits`'; the field a reply's token limit goes in, `verimap.llm.providers`'.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Literal

import openai
from openai import AsyncOpenAI

from verimap.base.env import EnvError, getenv
from verimap.base.messages import ModelRequest, ModelResponse, ToolCall, to_openai
from verimap.base.model import ModelError
from verimap.base.redaction import add_secret, add_url, endpoint_name, redact
from verimap.base.usage import Price, Usage, cost_of, price_known
from verimap.llm import limits
from verimap.llm.providers import (
    NO_KEY,
    MaxTokensParam,
    is_reasoning_model,
    other_field_if_refused,
    sampling_refused,
    token_limit_field,
)
from verimap.llm.retries import (
    GiveUp,
    Retries,
    RetryPolicy,
    max_wait_from_env,
    request_timeout_from_env,
    server_wait,
)
from verimap.llm.text_tool_calls import parse_text_tool_calls

log = logging.getLogger(__name__)

Dialect = Literal["auto", "openai", "llamacpp", "json_mode"]
DIALECTS: tuple[str, ...] = ("auto", "openai", "llamacpp", "json_mode")

# Called when the endpoint cannot be reached; may restart a local server and
# return its new base URL (None: nothing to recover, keep retrying as is).
Recover = Callable[[], Awaitable[str | None]]

_UNSUPPORTED = re.compile(
    r"response_format|json_schema|not supported|unsupported|unknown (field|parameter)|"
    r"extra (fields|inputs) (are )?not permitted|should be 'text' or 'json_object'",
    re.I,
)
_FALLBACK_ORDER = {"openai": "llamacpp", "llamacpp": "json_mode"}
# Waits shorter than this pass without a note: a note per sub-second backoff is noise.
_NOTE_WAIT_S = 1.0


class AttemptTimedOut(Exception):
    """An attempt with no complete reply by its deadline: retried, and reported, as a timeout."""

    def __init__(self, seconds: float):
        super().__init__(f"no complete reply within {seconds:g} s")
        self.seconds = seconds


def response_format_for(dialect: str, schema: dict[str, Any], name: str) -> dict[str, Any]:
    if dialect == "openai":
        return {
            "type": "json_schema",
            "json_schema": {
                "name": _schema_name(name),
                "schema": schema,
                "strict": _is_strict(schema),
            },
        }
    if dialect == "llamacpp":
        return {"type": "json_object", "schema": schema}
    if dialect == "json_mode":
        return {"type": "json_object"}
    raise ValueError(f"unknown dialect {dialect!r}; choose one of {', '.join(DIALECTS)}")


def _schema_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64] or "output"


def _is_strict(schema: Any) -> bool:
    """OpenAI strict mode needs every object closed and every property required."""
    if isinstance(schema, dict):
        if schema.get("type") == "object" or "properties" in schema:
            props = schema.get("properties", {})
            if schema.get("additionalProperties") is not False:
                return False
            if set(schema.get("required", [])) != set(props):
                return False
        return all(_is_strict(v) for v in schema.values())
    if isinstance(schema, list):
        return all(_is_strict(v) for v in schema)
    return True


class OpenAIModel:
    """An OpenAI-compatible chat endpoint as a verimap `Model`.

    Retries: `max_retries` for server errors, timeouts and an unreachable endpoint,
    `max_rate_limit_retries` for 429s; a `Retry-After` (or `retry-after-ms`) is honoured up to
    `max_retry_wait` seconds (default `VERIMAP_MAX_RETRY_WAIT`, else 60), and one request waits
    at most `retry_budget` seconds in all. `timeout`: seconds each attempt may take, from
    sending to the reply's last byte, and the HTTP client's per-read timeout (default
    `VERIMAP_REQUEST_TIMEOUT`, else 600). `sleep` does the waiting (tests pass their own).
    `max_connections`: requests in flight at this endpoint, shared with every model on it
    (default 1 for verimap's local server, 16 elsewhere). `max_tokens_param`: the field a
    reply's token limit is sent in (`auto`: see `providers.token_limit_field`)."""

    # For telemetry (OpenTelemetry's gen_ai.provider.name): the API spoken, whoever serves it.
    provider = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        dialect: Dialect = "auto",
        supports_tools: bool = True,
        timeout: float | None = None,
        max_retries: int = 4,
        backoff_base: float = 0.5,
        backoff_max: float = 8.0,
        prices: Mapping[str, Price] | None = None,
        local: bool = False,
        on_unreachable: Recover | None = None,
        extra_body: dict[str, Any] | None = None,
        max_tokens_cap: int | None = None,
        max_rate_limit_retries: int = 12,
        max_retry_wait: float | None = None,
        retry_budget: float = 300.0,
        max_connections: int | None = None,
        max_tokens_param: MaxTokensParam = "auto",
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ):
        if dialect not in DIALECTS:
            raise ValueError(f"unknown dialect {dialect!r}; choose one of {', '.join(DIALECTS)}")
        if max_connections is not None and max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, got {max_connections}")
        self.name = model
        self.supports_tools = supports_tools
        self.base_url = base_url or getenv("OPENAI_BASE_URL", "https://api.openai.com/v1")
        add_url(self.base_url)  # a password in the URL joins the secret set
        self.requested_dialect: str = dialect
        # The dialect in use; "auto" resolves on the first structured request.
        self.dialect: str = "llamacpp" if dialect == "auto" and local else dialect
        try:
            max_wait = max_wait_from_env() if max_retry_wait is None else max_retry_wait
            self.request_timeout = request_timeout_from_env() if timeout is None else timeout
        except EnvError as e:
            raise ModelError(str(e)) from None
        if not self.request_timeout > 0:
            raise ValueError(f"timeout must be a number of seconds > 0, got {timeout}")
        self.retry_policy = RetryPolicy(
            max_retries=max_retries,
            max_rate_limit_retries=max_rate_limit_retries,
            max_wait=max_wait,
            budget=retry_budget,
            backoff_base=backoff_base,
            backoff_max=backoff_max,
        )
        self.max_tokens_cap = max_tokens_cap
        self.requested_max_tokens_param: str = max_tokens_param
        # The field in use; "auto" is resolved now and corrected on the endpoint's refusal.
        self.token_limit_field = token_limit_field(max_tokens_param, self.base_url, model)
        self._field_corrected = False
        # Reasoning models take only their default sampling; others lose it on a refusal.
        self.sends_sampling = not is_reasoning_model(model)
        self.max_connections = max_connections or limits.default_max_connections(local)
        # The endpoint as it was first given: a restarted local server keeps its slots.
        self._slots_key = limits.endpoint_key(self.base_url)
        self._sleep = sleep
        # How often each seeded request was sent (by digest): its k-th repeat gets seed + k.
        self._seeded: dict[str, int] = {}
        self.prices = prices
        self.local = local
        self.on_unreachable = on_unreachable
        self.extra_body = extra_body
        # Our local server gets its own token (`api_key`), never OPENAI_API_KEY: that key is for
        # the user's endpoint, and a process that took the local server's port would receive it.
        key = api_key if local else api_key or getenv("OPENAI_API_KEY")
        if key is None and (local or "api.openai.com" not in self.base_url):
            key = NO_KEY  # self-hosted servers (llama.cpp, vLLM, Ollama) usually need none
        if key is None:
            raise ModelError(
                f"no API key for {endpoint_name(self.base_url)}: set OPENAI_API_KEY, or use the local model "
                "(unset OPENAI_BASE_URL and run without --model/--base-url)"
            )
        if key != NO_KEY:
            add_secret(key)
        self._key = key
        self._client = self._make_client()
        self._retired: list[AsyncOpenAI] = []

    def _make_client(self) -> AsyncOpenAI:
        """A client whose settings follow verimap's rule that an empty variable is unset: base
        URL and key are always passed, and the SDK would take an empty OPENAI_ORG_ID /
        OPENAI_PROJECT_ID as a value and send it as an empty `OpenAI-Organization` /
        `OpenAI-Project` header. The local server is sent neither."""
        client = AsyncOpenAI(
            base_url=self.base_url, api_key=self._key, timeout=self.request_timeout, max_retries=0
        )
        client.organization = None if self.local else getenv("OPENAI_ORG_ID")
        client.project = None if self.local else getenv("OPENAI_PROJECT_ID")
        return client

    @property
    def account(self) -> dict[str, str | None]:
        """The organization and project the endpoint is sent (None: none)."""
        return {"organization": self._client.organization, "project": self._client.project}

    def credential_digest(self, secret: bytes) -> str | None:
        """An HMAC under `secret` of the API key this model sends, never the key: what tells
        two accounts apart in the call cache. None when the key says nothing lasting (none is
        needed, or it is verimap's local server's, new with every start)."""
        if self.local or self._key == NO_KEY:
            return None
        data = f"verimap api key\0{self._key}".encode()
        return hmac.new(secret, data, hashlib.sha256).hexdigest()

    @property
    def price_known(self) -> bool:
        """Whether `cost_of` knows this model's price: the local model's is known, it is free."""
        return self.local or price_known(self.name, self.prices, base_url=self.base_url)

    def cost_of(self, usage: Usage) -> float:
        """US dollars for `usage` on this model: 0.0 for the local one, and for one whose price
        is unknown (`price_known` tells them apart)."""
        if self.local:
            return 0.0
        return cost_of(usage, self.name, self.prices, base_url=self.base_url)

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAIModel({self.name!r}, endpoint={endpoint_name(self.base_url)!r}, dialect={self.dialect!r})"

    async def aclose(self) -> None:
        for client in [*self._retired, self._client]:
            await client.close()
        self._retired.clear()

    def set_base_url(self, base_url: str, api_key: str | None = None) -> None:
        """Point at a new URL (e.g. a restarted local server, with its own token)."""
        self.base_url = base_url
        add_url(base_url)
        if api_key is not None:
            add_secret(api_key)
            self._key = api_key
        self._retired.append(self._client)  # requests in flight keep it until aclose()
        self._client = self._make_client()

    def _kwargs(self, req: ModelRequest, dialect: str, seed: int | None = None) -> dict[str, Any]:
        kw: dict[str, Any] = {"model": self.name, "messages": to_openai(req.messages)}
        if req.tools:
            kw["tools"] = req.tools
            choice = req.tool_choice
            if dialect in ("llamacpp", "auto") and choice == "required":
                # llama.cpp forces only a named tool; with one tool that is the same thing.
                choice = (
                    {"type": "function", "function": {"name": req.tools[0]["function"]["name"]}}
                    if len(req.tools) == 1
                    else "auto"
                )
            if choice is not None:
                kw["tool_choice"] = choice
        if req.response_schema is not None:
            d = "openai" if dialect == "auto" else dialect
            kw["response_format"] = response_format_for(d, req.response_schema, req.schema_name)
        settings = req.settings
        if settings.temperature is not None and self.sends_sampling:
            kw["temperature"] = settings.temperature
        if settings.top_p is not None and self.sends_sampling:
            kw["top_p"] = settings.top_p
        caps = [n for n in (settings.max_tokens, self.max_tokens_cap) if n is not None]
        if caps:
            kw[self.token_limit_field] = min(caps)
        if seed is not None:
            kw["seed"] = seed
        if settings.stop:
            kw["stop"] = list(settings.stop)
        if self.extra_body:
            kw["extra_body"] = self.extra_body
        return kw

    async def request(self, req: ModelRequest) -> ModelResponse:
        retries = Retries(self.retry_policy)
        attempts = 0
        failures = 0
        recovered = False
        seed = self._seed(req)
        while True:
            dialect, field, sampling = self.dialect, self.token_limit_field, self.sends_sampling
            attempts += 1
            try:
                resp = await self._attempt(self._kwargs(req, dialect, seed))
            except openai.APIStatusError as e:
                failures += 1
                body = _error_text(e)
                if self._adapt(req, (dialect, field, sampling), e.status_code, body):
                    continue
                retryable = e.status_code in (408, 409, 429) or (
                    e.status_code >= 500 and "validation error" not in body
                )
                what = f"{endpoint_name(self.base_url)} answered HTTP {e.status_code}"
                failed = f"{what}: {redact(body)[:500]}"
                if not retryable:
                    raise self._error(failed, attempts, failures) from e
                asked = server_wait(e.response.headers if e.response is not None else None)
                try:
                    wait = retries.next_wait(rate_limited=e.status_code == 429, asked=asked)
                except GiveUp as stop:
                    why = f" (not retried: {stop.reason})" if stop.reason else ""
                    raise self._error(failed + why, attempts, failures) from e
                await self._wait(wait, what, asked is not None, retries.retries)
                continue
            except (openai.APIConnectionError, AttemptTimedOut) as e:  # includes timeouts
                failures += 1
                timed_out = isinstance(e, openai.APITimeoutError | AttemptTimedOut)
                if not timed_out and self.on_unreachable is not None and not recovered:
                    recovered = True
                    try:
                        new_url = await self.on_unreachable()
                    except Exception as hook_error:
                        raise self._error(
                            f"the model endpoint {endpoint_name(self.base_url)} is unreachable and could not be "
                            f"recovered: {hook_error}",
                            attempts,
                            failures,
                        ) from hook_error
                    if new_url:
                        if new_url != self.base_url:
                            self.set_base_url(new_url)
                        continue
                what = "timed out" if timed_out else "is unreachable"
                try:
                    wait = retries.next_wait(rate_limited=False, asked=None)
                except GiveUp as stop:
                    why = f"; {stop.reason}" if stop.reason else ""
                    raise self._error(
                        f"the model endpoint {endpoint_name(self.base_url)} {what} after {attempts} "
                        f"attempts ({e}){why}",
                        attempts,
                        failures,
                    ) from e
                await self._wait(
                    wait, f"{endpoint_name(self.base_url)} {what}", False, retries.retries
                )
                continue
            if dialect == "auto":
                self.dialect = "openai" if req.response_schema is not None else "auto"
            return self._to_response(resp, req, attempts, failures)

    async def _attempt(self, kwargs: dict[str, Any]) -> Any:
        """One HTTP attempt in one of the endpoint's slots, ended by `AttemptTimedOut` at
        `request_timeout` seconds (the wait for a slot is not counted)."""
        async with self._slot():
            deadline = asyncio.timeout(self.request_timeout)
            try:
                async with deadline:
                    return await self._client.chat.completions.create(**kwargs)
            except TimeoutError:
                if deadline.expired():
                    raise AttemptTimedOut(self.request_timeout) from None
                raise

    @contextlib.asynccontextmanager
    async def _slot(self) -> AsyncIterator[None]:
        """One of the endpoint's connections, held for one HTTP attempt (never while waiting
        to retry)."""
        async with limits.slots(self._slots_key, self.max_connections):
            yield

    def _seed(self, req: ModelRequest) -> int | None:
        """The seed to send: the request's, plus how often this very request was sent before,
        so a repeated request (a vote's samples, a fresh reference) is a fresh sample."""
        seed = req.settings.seed
        if seed is None:
            return None
        digest = hashlib.sha256(req.model_dump_json().encode()).hexdigest()
        k = self._seeded.get(digest, 0)
        self._seeded[digest] = k + 1
        return seed + k

    def _adapt(
        self, req: ModelRequest, sent: tuple[str, str, bool], status: int, body: str
    ) -> bool:
        """Whether the endpoint refused the request's shape, not its content, and the request
        was reshaped to try again at once: the reply limit's field, the JSON dialect, or the
        sampling fields (all as `sent`; a request in flight meanwhile may have corrected them)."""
        dialect, field, sampling = sent
        if status in (400, 422) and sampling and sampling_refused(body):
            if self.sends_sampling:
                log.warning("%s takes no temperature or top_p: sending none", self.name)
                self.sends_sampling = False
            return True
        sent_limit = req.settings.max_tokens is not None or self.max_tokens_cap is not None
        auto_field = self.requested_max_tokens_param == "auto"
        if status in (400, 422) and sent_limit and auto_field:
            other = other_field_if_refused(field, body)
            if other is not None and field != self.token_limit_field:
                return True  # corrected by another request meanwhile
            if other is not None and not self._field_corrected:
                self.token_limit_field, self._field_corrected = other, True
                return True
        if (
            req.response_schema is not None
            and self.requested_dialect == "auto"
            and status in (400, 422, 500)
            and _UNSUPPORTED.search(body)
        ):
            nxt = _FALLBACK_ORDER.get("openai" if dialect == "auto" else dialect)
            if nxt is not None:
                self.dialect = nxt
                return True
        return False

    async def _wait(self, seconds: float, what: str, asked: bool, retry: int) -> None:
        if seconds >= _NOTE_WAIT_S:
            how = "as it asked" if asked else "before retrying"
            log.info("%s; waiting %.0f s %s (retry %d)", what, seconds, how, retry)
        await self._sleep(seconds)

    def _error(self, msg: str, attempts: int, failures: int) -> ModelError:
        return ModelError(msg, usage=Usage(calls=attempts, failed_calls=failures))

    def _to_response(
        self, resp: Any, req: ModelRequest, attempts: int, failures: int
    ) -> ModelResponse:
        if not resp.choices:
            raise self._error(
                f"{endpoint_name(self.base_url)} returned no choices", attempts, attempts
            )
        choice = resp.choices[0]
        msg = choice.message
        content = msg.content or ""
        calls = [
            ToolCall(
                id=tc.id or f"call_{i}",
                name=tc.function.name,
                arguments=tc.function.arguments or "{}",
            )
            for i, tc in enumerate(msg.tool_calls or [])
            if getattr(tc, "function", None) is not None
        ]
        if not calls and req.tools and req.tool_choice != "none":
            names = {t["function"]["name"] for t in req.tools if "function" in t}
            calls = parse_text_tool_calls(content, names)
            if calls:
                content = ""
        u = resp.usage
        usage = Usage(calls=attempts, failed_calls=failures)
        if u is not None:
            usage.prompt_tokens = u.prompt_tokens or 0
            usage.completion_tokens = u.completion_tokens or 0
            details = getattr(u, "prompt_tokens_details", None)
            usage.cached_tokens = (getattr(details, "cached_tokens", None) or 0) if details else 0
        usage.cost = self.cost_of(usage)
        return ModelResponse(
            content=content,
            tool_calls=calls,
            usage=usage,
            model=resp.model or self.name,
            finish_reason="tool_calls" if calls else choice.finish_reason,
        )


def _error_text(e: openai.APIStatusError) -> str:
    try:
        body = e.response.json()
        err = body.get("error", body) if isinstance(body, dict) else body
        msg = err.get("message") if isinstance(err, dict) else None
        return str(msg or body)
    except Exception:
        return str(e.message if hasattr(e, "message") else e)
