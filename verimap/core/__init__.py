"""The loop: the coordinator runs a plan's nodes through the executor and the verifier, retries
with feedback, asks the planner again when a node spends its retries, and reports.

What a run is (`RunScope`), what its steps are told (`RunContext`, `node_context`, `feedback`)
and what it returns (`result`) live here too. The core knows no policy: a policy is applied
where a run is wired (`verimap.wiring`, `verimap.methods`, the CLI).
"""
