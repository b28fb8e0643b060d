"""Prompts of the executor and the judge, the agents of the loop.

They follow the structure of the VeriMAP paper's prompts (App. A.1 of arXiv:2510.17109),
written in our own words and tightened for small models. The planner's prompts and its worked
plans are in `verimap.planning.prompts`.
"""

from __future__ import annotations

# The text-only executor's (the paper's MAP) system prompt. The structured executor has none: the
# task first and the guidance last in one user turn serve a small model better than this persona
# (design/decisions.md, D05).
EXECUTOR_SYSTEM = """\
You are an executor agent. Solve exactly the subtask you are given, using only its inputs. \
Think step by step in plain text; use tools when they help (for arithmetic always use a tool). \
When you are done, state the final value of every requested output."""

EXECUTOR_REACT = """\

You can use tools with this exact text protocol, one action per reply:
Thought: <your reasoning>
Action: <tool name>
Action Input: <JSON object of arguments>
Then wait for the Observation. When you have the result, reply:
Thought: <reasoning>
Final Answer: <the value of every output>

Tools:
{tools}"""

EXECUTOR_USER = """\
{inputs}
{context}
Subtask: {instruction}
Required outputs: {outputs}
{feedback}
{scope}{closing}"""

EXECUTOR_CLOSING = (
    "Think step by step.{tool_hint} End by stating the final value of every required output."
)

# A node whose one output is code gets the request the bare model answers best, not a reasoning
# prompt, under which a small model writes numbered-step code (design/decisions.md, D07).
EXECUTOR_CODE_CLOSING = (
    "Reply with the complete code (with any imports it needs) in one ```python code block."
)

# A retry of such a node first says why its code failed (self-debugging): asked only for the code
# again, a small model sends back the same wrong function (design/decisions.md, D08).
EXECUTOR_CODE_RETRY_CLOSING = (
    "First say in two or three sentences why the previous code fails the check above, then reply "
    "with the corrected complete code (with any imports it needs) in one ```python code block."
)

# For a node whose result another node takes further, so that a node asked for a part does not
# solve the whole task and hand on its total. A plan's final node goes without it: there it costs
# right answers (design/decisions.md, D06).
EXECUTOR_PART = "Do exactly this subtask, nothing more, using only the inputs above. "

# What a model that wrote a tool call into its text hears back (`agent.inline_tool_call`).
INLINE_TOOL_RESULT = (
    "Result of {tool}: {result}\nGo on from this result (it replaces any value you guessed)."
)

# The result of a call made for the agent before its first reply (`ToolRegistry.opening`).
OPENING_RESULT = "Called for you: {tool}({arguments}). Result:\n{result}"
REPEATED_TOOL_CALL = "You made that same tool call before; its result is above. No more tool calls."

EXECUTOR_TOOL_HINT = " Use a tool when a calculation is hard to do reliably by hand."

# A node whose tools say how to go about the task (`ToolRegistry.guidance`): told to look the
# facts up, a small model calls the search tool, where asked to think step by step it describes
# how one would search.
EXECUTOR_GUIDED_CLOSING = "{guidance} End by stating the final value of every required output."

EXECUTOR_CONTEXT = "\nResults of earlier subtasks, for context (JSON):\n{context}\n"

# Text-only hand-offs (the paper's MAP): no named values, no JSON, only what earlier agents wrote.
EXECUTOR_TEXT_USER = """\
Subtask: {instruction}

{task}{earlier}Reply with your result in plain text{outputs}.{feedback}"""

EXECUTOR_TEXT_TASK = "The user's task:\n{task}\n\n"

EXECUTOR_TEXT_EARLIER = "Earlier subtasks and what their agents replied:\n\n{entries}\n\n"

EXECUTOR_TEXT_ENTRY = "[{relation}] Subtask: {instruction}\nReply:\n{text}"

EXECUTOR_TEXT_OUTPUTS = " (it should give: {names})"

EXECUTOR_TEXT_FINAL = "Now give your final result in plain text, without calling any tool."

EXECUTOR_FINAL = """\
Now give your final result as a JSON object with exactly these keys: {outputs}. \
Each value has its type: a number is a plain JSON number (never an object or a sentence); code \
is one string holding the complete source. No extra keys, no commentary."""

JUDGE_SYSTEM = """\
You are a strict verifier. You decide whether the outputs of a subtask satisfy one criterion. \
Reason step by step in plain text first; check facts and arithmetic yourself."""

JUDGE_TOOLS = """ \
Use the tools to check what you can compute (arithmetic, running code) rather than trusting the \
outputs; when you are done checking, reply without a tool call."""

JUDGE_USER = """\
Subtask instruction: {instruction}

Inputs (JSON):
{inputs}

Outputs (JSON):
{outputs}

Criterion: {criterion}

Does the output satisfy the criterion? Explain your reasoning."""

JUDGE_FINAL = """\
Now give your verdict as JSON: {"passed": true or false, "explanation": "<one or two sentences; \
say what is wrong when passed is false>"}"""

JUDGE_SYSTEM_MANY = """\
You are a strict verifier. You decide whether the outputs of a subtask satisfy each of several \
criteria, one at a time. Reason step by step in plain text first; check facts and arithmetic \
yourself."""

JUDGE_USER_MANY = """\
Subtask instruction: {instruction}

Inputs (JSON):
{inputs}

Outputs (JSON):
{outputs}

Criteria:
{criteria}

Does the output satisfy each criterion? Explain your reasoning for each, in order."""

JUDGE_FINAL_MANY = """\
Now give your verdicts as one JSON object with one key per criterion ({names}), each \
{{"passed": true or false, "explanation": "<one or two sentences; say what is wrong when passed \
is false>"}}."""

INSTRUCTION_CRITERION = (
    "The outputs correctly and completely carry out this instruction: {instruction}"
)
