"""Verification the framework brings beside a plan's own VFs: the built-in checks as small
modules, and their registry (`verimap.checks.registry`). What a check is (the `Check` protocol,
with `Submission` and `CheckTools`) is on the ground floor, in `verimap.base.verification`.

The names a plan may ask for live below the plan model, in `verimap.base.check_names`.
"""
