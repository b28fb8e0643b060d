"""Watching a run: OpenTelemetry spans, the live board, trace files read back, a run's picture."""
