"""`--otel` for the commands that run tasks: spans to an OTLP collector.

The OpenTelemetry packages are an optional extra, so nothing here imports them until spans
are asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

import click

from verimap.base.env import getenv
from verimap.base.redaction import redact

if TYPE_CHECKING:
    from verimap.observe.otel import OtelSpans

# Either one names a collector, which asks for spans as --otel does (blank means unset).
ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def otel_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--otel",
        is_flag=True,
        help="Send OpenTelemetry spans (run > iteration > node > attempt > model call / VF / "
        "tool call) over OTLP to $OTEL_EXPORTER_OTLP_ENDPOINT (default http://localhost:4318); "
        "on by itself when that variable is set. Needs the otel extra.",
    )(f)


def otel_requested(flag: bool) -> bool:
    return flag or any(getenv(v) is not None for v in ENDPOINT_VARS)


@contextmanager
def otel_spans(
    flag: bool, span: str | None = None, attributes: Mapping[str, Any] | None = None
) -> Iterator[OtelSpans | None]:
    """An `OtelSpans` subscriber exporting over OTLP while the block runs (None when spans are
    not asked for), its spans under one named `span` when given; the spans still queued are
    sent when the block ends."""
    if not otel_requested(flag):
        yield None
        return
    try:
        from verimap.observe import otel
    except ImportError:
        if flag:
            raise click.ClickException(
                "--otel needs the OpenTelemetry SDK: pip install 'verimap[otel]'"
            ) from None
        click.echo(
            "note: an OTEL_EXPORTER_OTLP_*ENDPOINT variable is set, but the OpenTelemetry SDK "
            "is not installed (pip install 'verimap[otel]'): no spans are sent",
            err=True,
        )
        yield None
        return
    try:
        provider = otel.otlp_provider()
    except otel.OtelSetupError as e:
        raise click.ClickException(str(e)) from None
    try:
        tracer = provider.get_tracer("verimap", otel.__version__)
        spans = otel.OtelSpans(tracer)
        # Exceptions are recorded by hand: the SDK would export their messages unredacted.
        outer = (
            tracer.start_as_current_span(
                span,
                attributes=redact(dict(attributes or {})),
                record_exception=False,
                set_status_on_exception=False,
            )
            if span is not None
            else nullcontext()
        )
        with outer as current:
            try:
                yield spans
            except BaseException as e:
                if current is not None:
                    error = redact(f"{type(e).__name__}: {e}")[:500]
                    current.set_status(otel.Status(otel.StatusCode.ERROR, error))
                raise
            finally:
                spans.close()
    finally:
        provider.shutdown()
