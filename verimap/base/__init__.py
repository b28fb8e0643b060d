"""The ground floor: the vocabulary every other part speaks, importing nothing above it.

Errors, verdicts, usage and the ledger that charges it, run events, typed messages, the check
names, the plan model (`plan`), `RunContext` (the one context a run passes to its components),
and the seams the rest is typed against: the model and sandbox protocols (`protocols`), the
planner, executor and verifier protocols (`roles`) and the verification protocol
(`verification`).
"""
