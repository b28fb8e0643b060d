"""Prompt-lookup decoding on the local server vs. none: the same requests, side by side.

    python benchmarks/prompt_lookup.py [--model qwen2.5-coder-1.5b] [--rounds 2] [--tasks 2]
        [--offset 40] [--num-pred 10]

Plans copy much of their prompt (the demonstration's structure, the task's words, VF idioms),
so drafting the next tokens from an n-gram match in the prompt and checking them in one batch
could generate several tokens per forward pass. On the r33 planner replies an offline replay
gives 2.85 tokens per pass; what a pass of 11 tokens costs on 2 CPU cores decides the gain.

Each round starts a server without and one with `--draft_model prompt-lookup-decoding`
(alternating, so drift hits both) and sends each the same requests at temperature 0: the
verimap planner's request for `--tasks` GSM8K test items from `--offset`, the bare model's
free-text solution of the same items, and one HumanEval completion. At temperature 0 both
must give the same text; the script says when they do not. Prints seconds per request kind and
the ratio none / lookup (> 1: lookup is faster).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from verimap.base.messages import GenerationSettings, ModelRequest, UserMessage
from verimap.evals.tasksets import get_benchmark
from verimap.llm.openai_model import OpenAIModel
from verimap.local import server
from verimap.local.endpoint import resolve_local
from verimap.planning.planner import LLMPlanner, PlannerOptions

# A draft model makes llama-cpp-python 0.3.x write logits for every evaluated token, into a
# buffer of n_batch rows unless `logits_all` sized it for n_ctx: prompts longer than n_batch
# then fail with HTTP 500 ("could not broadcast ... into shape (0,)").
LOOKUP = [
    "--logits_all",
    "True",
    "--draft_model",
    "prompt-lookup-decoding",
    "--draft_model_num_pred_tokens",
]


def requests(model: OpenAIModel, args: argparse.Namespace) -> list[tuple[str, ModelRequest]]:
    gsm = get_benchmark("gsm8k").tasks()[args.offset : args.offset + args.tasks]
    code = get_benchmark("humaneval").tasks()[args.offset]
    planner = LLMPlanner(model, None, PlannerOptions(domain="math"))
    greedy = GenerationSettings(temperature=0, max_tokens=600)
    out = []
    for t in gsm:
        out.append(
            (
                "plan",
                ModelRequest(
                    messages=planner.plan_messages(t.prompt),
                    response_schema=planner.schema,
                    schema_name="plan",
                    settings=greedy.replace(max_tokens=1024),
                    role="planner",
                ),
            )
        )
    for t in gsm:
        content = t.prompt + "\n\nSolve the problem step by step."
        out.append(
            ("solve", ModelRequest(messages=[UserMessage(content=content)], settings=greedy))
        )
    out.append(("code", ModelRequest(messages=[UserMessage(content=code.prompt)], settings=greedy)))
    return out


async def one_server(extra: list[str], args: argparse.Namespace) -> dict[str, list[Any]]:
    choice = resolve_local(args.model)
    info = server.start_server(choice.model_file, alias=choice.alias, extra_args=extra)
    try:
        m = OpenAIModel(choice.alias, base_url=info.base_url, api_key=info.token, local=True)
        res: dict[str, list[Any]] = {}
        for kind, req in requests(m, args):
            t0 = time.monotonic()
            r = await m.request(req)
            res.setdefault(kind, []).append(
                (time.monotonic() - t0, r.usage.completion_tokens, r.content)
            )
        await m.aclose()
        return res
    finally:
        server.stop_server(info)


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--tasks", type=int, default=2)
    ap.add_argument("--offset", type=int, default=40)
    ap.add_argument("--num-pred", type=int, default=10)
    args = ap.parse_args()
    labels = {"none": [], "lookup": [*LOOKUP, str(args.num_pred)]}
    secs: dict[str, dict[str, float]] = {k: {} for k in labels}
    texts: dict[str, dict[str, list[str]]] = {k: {} for k in labels}
    for rnd in range(args.rounds):
        order = list(labels) if rnd % 2 == 0 else list(reversed(labels))
        for label in order:
            res = await one_server(labels[label], args)
            for kind, rows in res.items():
                secs[label][kind] = secs[label].get(kind, 0.0) + sum(s for s, _, _ in rows)
                texts[label].setdefault(kind, []).extend(c for _, _, c in rows)
                toks = sum(n for _, n, _ in rows)
                print(
                    f"round {rnd} {label:6s} {kind:5s} {sum(s for s, _, _ in rows):6.1f} s "
                    f"{toks} tokens",
                    flush=True,
                )
    print("\nkind   none s  lookup s  none/lookup  same text")
    for kind in secs["none"]:
        a, b = secs["none"][kind], secs["lookup"][kind]
        same = sum(x == y for x, y in zip(texts["none"][kind], texts["lookup"][kind], strict=True))
        print(f"{kind:5s} {a:8.1f} {b:9.1f} {a / b:11.2f}  {same}/{len(texts['none'][kind])}")
    a, b = sum(secs["none"].values()), sum(secs["lookup"].values())
    print(f"all   {a:8.1f} {b:9.1f} {a / b:11.2f}")


if __name__ == "__main__":
    asyncio.run(main())
