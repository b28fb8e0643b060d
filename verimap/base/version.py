"""verimap's version, as traces, telemetry and run directories record it."""

__version__ = "0.1.0"
