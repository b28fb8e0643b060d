"""Prompts of the planner and replanner, and the worked plans shown to it.

They follow the structure of the VeriMAP paper's prompts (App. A.1 of
arXiv:2510.17109: tools, task, demonstration; replanning with the previous DAG and
the failure context), written in our own words and tightened for small models,
which need a worked demonstration and explicit rules about ids and inputs. The executor's
and judge's prompts are in `verimap.core.prompts`: planning does not know the loop.
"""

from __future__ import annotations

import json

PLANNER_SYSTEM = """\
You are the planner of a team of agents. Break the user's task into a small directed acyclic \
graph (DAG) of subtasks that executor agents solve one at a time{vf_goal}.

Rules for the plan (a JSON object with a list of "nodes"):
- Each node has: "id" (short identifier such as "extract" or "n1"), "name", "instruction" (what the \
executor must do, self-contained), "inputs", "outputs" (an object mapping each output name to its \
type: number, integer, string, boolean, list[number], list[string], object, or code for Python \
source){vf_field}. Give one output per value: a number is "number", never an object.
- An input is either "USER_TASK" (the full task text) or "<node_id>.<output_name>" naming an output \
of an earlier node. Never put literal values in inputs. An executor sees ONLY its inputs, so give \
USER_TASK to every node that needs facts from the task.
- Dependencies come only from inputs: an input "<a>.<x>" makes node a run before this node. \
Every node except the last must have an output that a later node takes as input.
- Exactly one node is the final node (the only node whose outputs no other node takes); its \
outputs are the answer to the task.
{vf_rules}- {size_rule}{vf_required}
{tools_section}
Reply with the plan as one JSON object in the format of the example, nothing else."""

# The parts of PLANNER_SYSTEM about verification functions; the paper's MAP and MAP-V baselines
# plan without them.
VF_RULES = """\
- Verification functions, two kinds:
  * {"name": ..., "type": "python", "code": ...}: Python run with dicts `inputs` (keyed by the \
input names, e.g. inputs["USER_TASK"], inputs["n1.total"]; a bare name such as inputs["total"] \
also works when unambiguous) and `outputs` (keyed by this node's output names). Use top-level \
`assert` statements, or define `def verify(inputs, outputs):` that returns True/False. Outputs \
already have their declared types, so do not check types: check what must hold for ANY correct \
answer (sign, whole numbers for counts, ranges, consistency with the inputs, the task's own \
examples). Do not work the answer out again in a VF: a VF that repeats the solution's arithmetic \
shares its mistakes. Never hard-code the answer, and read `outputs`: a check on constants checks \
nothing. Helpers you can call: approx(a, b) \
(compare numbers with a tolerance: never use == on floats), parse_number(text), is_number(x), \
load_function(code, name) (the function `name` from code outputs), and \
run_examples(code, inputs["USER_TASK"]) (runs the task's own >>> examples against the code).
  * {"name": ..., "type": "llm", "content": ...}: a yes/no criterion a judge model checks by \
reading the inputs and outputs; use it only for what code cannot check.
"""
VF_PROMPT_PARTS: dict[bool, dict[str, str]] = {
    True: {
        "vf_goal": ", and give every subtask verification functions (VFs) that decide whether its "
        "outputs can be trusted",
        "vf_field": ', "verification"',
        "vf_rules": VF_RULES,
        "vf_required": " Every node needs at least one VF.",
    },
    False: {"vf_goal": "", "vf_field": "", "vf_rules": "", "vf_required": ""},
}

SIZE_RULE = "Prefer few nodes (1-4) for simple tasks."
# With a cap on the plan's size (`RunConfig.planning.max_nodes`).
SIZE_CAP_RULE = (
    "Use at most {max_nodes} nodes; one node may do several steps of the work, so do not split "
    "a calculation into one node per operation."
)

TOOLS_SECTION = "\nExecutors can use these tools:\n{tools}\n"

PLANNER_USER = """\
{demo_section}Task:
{task}

{schema_section}Write the plan for this task."""

PLAN_THINK = """\
Before you write the plan, work the task out yourself in plain text, briefly (about 150 words at \
most): what is asked, the facts and numbers the task gives, and the steps from them to the \
answer, with the arithmetic done (for code: what the function must return, the edge cases its \
examples show, and the algorithm). No JSON yet."""

PLAN_AFTER_THINKING = """\
Now write the plan as one JSON object. Follow your solution: each node's instruction says what \
to compute and how, and each node's VFs check its outputs against what your solution says."""

SCHEMA_SECTION = "JSON Schema of the plan:\n{schema}\n\n"

DEMO_SECTION = "Here is an example of a good plan for a different task:\n{demo}\n\n"

REPLANNER_USER = """\
The previous plan for this task failed during execution. Write an improved plan: fix the \
{fixable} that caused the failure, and keep the parts that worked unchanged so their results can \
be reused.

Task:
{task}

Previous plan:
{previous}

What failed:
{failure}

{schema_section}Write the new plan."""

REPLAN_FIXABLE = {
    True: "instructions, inputs, outputs or verification functions (a VF may itself be wrong)",
    False: "instructions, inputs or outputs",
}

PLAN_REPAIR = """\
That plan is invalid:
{problems}
Fix every problem and reply with the whole corrected plan as one JSON object."""

DEMO_TASK = (
    "A bakery sold 125 muffins on Monday and twice as many on Tuesday. Each muffin costs $3. "
    "How many dollars did the bakery earn over the two days?"
)

DEMO_PLAN: dict = {
    "nodes": [
        {
            "id": "extract",
            "name": "Extract quantities",
            "instruction": "Read the task and extract the number of muffins sold on Monday and "
            "the price of one muffin in dollars.",
            "inputs": ["USER_TASK"],
            "outputs": {"monday": "number", "price": "number"},
            "verification": [
                {
                    "name": "positive",
                    "type": "python",
                    "code": "for k in ('monday', 'price'):\n"
                    "    assert outputs[k] > 0, f'{k} must be positive'",
                },
            ],
        },
        {
            "id": "solve",
            "name": "Work out the earnings",
            "instruction": "Work out how many dollars the bakery earned over the two days, "
            "reasoning step by step from the task and the extracted quantities.",
            "inputs": ["USER_TASK", "extract.monday", "extract.price"],
            "outputs": {"answer": "number"},
            "verification": [
                {
                    "name": "positive",
                    "type": "python",
                    "code": "assert outputs['answer'] > 0, 'the bakery sold muffins, so it earned money'",
                },
                {
                    "name": "whole_dollars",
                    "type": "python",
                    "code": "assert float(outputs['answer']).is_integer(), "
                    "'whole muffins at a whole-dollar price earn whole dollars'",
                },
            ],
        },
    ],
}


CODE_DEMO_TASK = (
    "Complete the following Python function so that it is correct for all inputs described in "
    "its docstring. The final answer is the complete Python code of the function `running_max`.\n\n"
    "```python\ndef running_max(xs: list[int]) -> list[int]:\n"
    '    """Return the list whose i-th item is the largest of xs[0..i].\n'
    "    >>> running_max([1, 3, 2, 5])\n    [1, 3, 3, 5]\n"
    '    >>> running_max([])\n    []\n    """\n```'
)

CODE_DEMO_PLAN: dict = {
    "nodes": [
        {
            "id": "implement",
            "name": "Implement the function",
            "instruction": "Write the complete Python code of the function described in the task, "
            "with its signature and any imports it needs. Handle the edge cases the docstring "
            "mentions.",
            "inputs": ["USER_TASK"],
            "outputs": {"code": "code"},
            "verification": [
                {
                    "name": "task_examples",
                    "type": "python",
                    "code": "run_examples(outputs['code'], inputs['USER_TASK'])",
                },
            ],
        }
    ],
}

QA_DEMO_TASK = (
    "Did the company that TechCrunch reported as buying a chip startup in March also report "
    "record revenue according to The Verge?\n\nAnswer from the news corpus, using the search tool."
)

QA_DEMO_PLAN: dict = {
    "nodes": [
        {
            "id": "find_buyer",
            "name": "Find the buyer",
            "instruction": "Search the corpus for the TechCrunch article about a chip startup "
            "acquisition in March and report the buying company and a quote of the evidence.",
            "inputs": ["USER_TASK"],
            "outputs": {"company": "string", "evidence": "string"},
            "verification": [
                {
                    "name": "nonempty",
                    "type": "python",
                    "code": "assert outputs['company'].strip(), 'company is empty'\n"
                    "assert len(outputs['evidence']) > 20, 'quote the evidence'",
                },
                {
                    "name": "grounded",
                    "type": "llm",
                    "content": "The evidence is a TechCrunch passage that names the company as the buyer.",
                },
            ],
        },
        {
            "id": "check_revenue",
            "name": "Check the revenue report",
            "instruction": "Search The Verge's articles about the given company for a report of "
            "record revenue. Answer Yes or No.",
            "inputs": ["find_buyer.company"],
            "outputs": {"answer": "string"},
            "verification": [
                {
                    "name": "yes_no",
                    "type": "python",
                    "code": "assert outputs['answer'] in ('Yes', 'No'), 'answer Yes or No'",
                }
            ],
        },
    ],
}

DEMOS: dict[str, tuple[str, dict]] = {
    "math": (DEMO_TASK, DEMO_PLAN),
    "programming": (CODE_DEMO_TASK, CODE_DEMO_PLAN),
    "qa": (QA_DEMO_TASK, QA_DEMO_PLAN),
}

# What shows that a plan was copied from a demonstration instead of written for its task: the
# math demo's instructions are task-specific; the code demo's are generic, but its function is not.
COPY_MARKERS: dict[str, list[str]] = {
    "math": [n["instruction"] for n in DEMO_PLAN["nodes"]],
    "programming": ["running_max"],
    "qa": ["chip startup", "record revenue"],
}


def copy_markers(domain: str = "math") -> list[str]:
    return COPY_MARKERS.get(domain, COPY_MARKERS["math"])


def default_demo(domain: str = "math", *, with_vfs: bool = True) -> str:
    """The worked example shown to the planner: small models need one of their own domain."""
    task, plan = DEMOS.get(domain, DEMOS["math"])
    if not with_vfs:
        plan = {**plan, "nodes": [without_vfs(n) for n in plan["nodes"]]}
    return f"Task: {task}\nPlan:\n{json.dumps(plan, indent=2)}"


def without_vfs(node: dict) -> dict:
    return {k: v for k, v in node.items() if k != "verification"}
