"""Planning: the planners that write plans, and what is checked and fixed in a model's plan
before it runs (`plan.parse_plan`).

Planning does not know the loop: nothing here imports `verimap.core`. The plan model itself
(`verimap.base.plan`), the `Planner` protocol (`verimap.base.roles`) and what a replan is told
(`verimap.base.failure.FailureContext`) are on the ground floor, which the loop and the
planners both stand on.
"""
