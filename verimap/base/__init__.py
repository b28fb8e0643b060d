"""The ground floor: the vocabulary every other part speaks, importing nothing above it.

Errors, verdicts, usage and the ledger that charges it, run events, the model and sandbox
interfaces, typed messages, the check names and `RunContext`, the one context a run passes
to its components.
"""
