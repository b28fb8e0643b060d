"""Planning: the plan model (a DAG of nodes with their verification functions), the planners
that write plans, and what is checked and fixed in a model's plan before it runs.

Planning does not know the loop: nothing here imports `verimap.core`. What a replan is told
(`failure.FailureContext`) lives here because the planner reads it; the coordinator builds it.
"""
