"""The loop: the coordinator runs a plan's nodes through the executor and the verifier, retries
with feedback, asks the planner again when a node spends its retries, and reports.

The loop is typed against the protocols of the ground floor (`verimap.base.roles`), never
against the executor and verifier shipped here (`executor`, `verifier`). What a run is
(`RunScope`), what its steps are told (`node_context`, `feedback`) and what it returns
(`result`) live here too. The core knows no policy: a policy is applied
where a run is wired (`verimap.wiring`, `verimap.methods`, the CLI).
"""
