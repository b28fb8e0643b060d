"""Verification the framework brings beside a plan's own VFs: one `Check` protocol, the built-in
checks as small modules, and their registry (`verimap.checks.registry`).

The names a plan may ask for live below the plan model, in `verimap.base.check_names`.
"""
