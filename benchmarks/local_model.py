"""Local model server: start time, prompt/generation speed, one plan request, and the
executor's tool-call strategies measured side by side in one run.

    python benchmarks/local_model.py [--model qwen2.5-coder-0.5b] [--problems 6]

Strategies (the same GSM8K problems, the engine's Executor, calculator tool):
- `auto/default`: the server's default chat format (the model's own template); `tool_choice="auto"`,
  the model's text tool calls parsed client-side by OpenAIModel;
- `auto/chatml-fc`: a server started with `--chat_format chatml-function-calling`;
- `no-tools`: free-text reasoning only, then the structured final object.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from verimap.base.messages import GenerationSettings, ModelRequest, UserMessage
from verimap.base.plan import Node, plan_json_schema
from verimap.base.run_context import RunContext
from verimap.cli import log_to_stderr
from verimap.core.executor import EXECUTOR_SETTINGS, Executor
from verimap.evals.data import load_gsm8k, resolve
from verimap.evals.scoring import score_gsm8k
from verimap.llm.openai_model import OpenAIModel
from verimap.llm.structured import request_structured
from verimap.local import server
from verimap.local.endpoint import resolve_local
from verimap.planning.planner import LLMPlanner
from verimap.tools.registry import ToolRegistry, calculator_tool

STORY = "Write a detailed, 300-word story about a lighthouse keeper and a storm."


async def speeds(m: OpenAIModel) -> dict[str, float]:
    long_prompt = (
        " ".join(f"item{i} costs {i % 17} dollars;" for i in range(220)) + " Sum nothing, say OK."
    )
    t0 = time.monotonic()
    r = await m.request(
        ModelRequest(
            messages=[UserMessage(content=long_prompt)],
            settings=GenerationSettings(max_tokens=1, temperature=0),
        )
    )
    prompt_s = time.monotonic() - t0
    t0 = time.monotonic()
    g = await m.request(
        ModelRequest(
            messages=[UserMessage(content=STORY)],
            settings=GenerationSettings(max_tokens=200, temperature=0),
        )
    )
    gen_s = time.monotonic() - t0
    return {
        "prompt_tokens": r.usage.prompt_tokens,
        "prompt_tok_s": r.usage.prompt_tokens / prompt_s,
        "gen_tokens": g.usage.completion_tokens,
        "gen_tok_s": g.usage.completion_tokens / gen_s,
    }


async def plan_request(m: OpenAIModel) -> tuple[float, int, int]:
    msgs = LLMPlanner(m).plan_messages(
        "A shop sells pens at $2 each. Ana buys 7 pens and pays with $20. What is her change?"
    )
    t0 = time.monotonic()
    _, resps = await request_structured(m, msgs, plan_json_schema(), role="planner", max_repairs=1)
    return (
        time.monotonic() - t0,
        resps[0].usage.prompt_tokens,
        sum(r.usage.completion_tokens for r in resps),
    )


async def executor_run(m: OpenAIModel, items, tools: bool) -> dict[str, float]:
    ex = Executor(
        m,
        ToolRegistry([calculator_tool()]) if tools else ToolRegistry(),
        max_steps=6,
        settings=EXECUTOR_SETTINGS.replace(temperature=0),
    )
    node = Node.model_validate(
        {
            "id": "solve",
            "instruction": "Solve the math word problem in USER_TASK step by step; output the final number as answer.",
            "inputs": ["USER_TASK"],
            "outputs": ["answer"],
        }
    )
    correct, steps, calls, secs, errors = 0, [], [], [], 0
    for it in items:
        t0 = time.monotonic()
        out = await ex.execute(node, {"USER_TASK": it.question}, ctx=RunContext())
        secs.append(time.monotonic() - t0)
        print(
            f"  tools={tools} steps={out.steps} calls={out.tool_calls} {secs[-1]:.0f}s ok={out.ok}",
            flush=True,
        )
        steps.append(out.steps)
        calls.append(out.tool_calls)
        if not out.ok:
            errors += 1
            continue
        correct += score_gsm8k((out.outputs or {}).get("answer"), it.gold).correct
    return {
        "correct": correct,
        "errors": errors,
        "steps": statistics.mean(steps),
        "tool_calls": statistics.mean(calls),
        "s_per_problem": statistics.mean(secs),
    }


def show(msg: str) -> None:
    print(msg, flush=True)


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--problems", type=int, default=4, help="GSM8K problems per strategy (0: skip)")
    args = ap.parse_args()
    log_to_stderr()
    choice = resolve_local(args.model)
    items = load_gsm8k(resolve("gsm8k"))[: args.problems] if args.problems else []
    rows: dict[str, dict] = {}

    t0 = time.monotonic()
    info = server.start_server(choice.model_file, alias=choice.alias)
    show(f"model {choice.alias}, {info.threads} threads, n_ctx {info.n_ctx}")
    show(f"server start (until /v1/models answers): {time.monotonic() - t0:.2f} s")
    try:
        m = OpenAIModel(choice.alias, base_url=info.base_url, api_key=info.token, local=True)
        sp = await speeds(m)
        show(f"prompt processing: {sp['prompt_tok_s']:.0f} tok/s ({sp['prompt_tokens']} tokens)")
        show(
            f"generation: {sp['gen_tok_s']:.1f} tok/s ({sp['gen_tokens']} tokens, incl. first-token latency)"
        )
        plan_s, plan_in, plan_out = await plan_request(m)
        show(
            f"one plan request (demo prompt): {plan_s:.1f} s, {plan_in} prompt + {plan_out} completion tokens"
        )
        if items:
            rows["auto/default"] = await executor_run(m, items, tools=True)
            rows["no-tools"] = await executor_run(m, items, tools=False)
        await m.aclose()
    finally:
        server.stop_server(info)
    if not items:
        return
    fc = server.start_server(
        choice.model_file, alias=choice.alias, chat_format="chatml-function-calling"
    )
    try:
        m = OpenAIModel(choice.alias, base_url=fc.base_url, api_key=fc.token, local=True)
        rows["auto/chatml-fc"] = await executor_run(m, items, tools=True)
        await m.aclose()
    finally:
        server.stop_server(fc)
    show(f"\nexecutor on GSM8K first {len(items)} (temperature 0, max 6 steps), side by side:")
    show(
        f"{'strategy':<16}{'correct':>8}{'errors':>8}{'steps':>7}{'tools':>7}{'s/prob':>8}{'time ratio':>12}"
    )
    base = rows["auto/default"]["s_per_problem"]
    for name, r in rows.items():
        show(
            f"{name:<16}{r['correct']:>5}/{len(items):<2}{r['errors']:>8}{r['steps']:>7.1f}{r['tool_calls']:>7.1f}{r['s_per_problem']:>8.1f}{r['s_per_problem'] / base:>12.2f}"
        )


if __name__ == "__main__":
    asyncio.run(main())
