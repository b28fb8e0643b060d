"""What the answer-agreement tests share: a one-node plan and scripted solutions."""

from collections.abc import Callable
from typing import Any

import verimap
from verimap.base.check_names import ANSWER_AGREEMENT as NAME
from verimap.base.check_names import MIXED
from verimap.base.events import EventBus
from verimap.config import Loop, RunConfig, Sampling, Verify, merge

PLAN = {
    "nodes": [
        {
            "id": "solve",
            "instruction": "solve",
            "inputs": ["USER_TASK"],
            "outputs": {"total": "number"},
            "verification": [
                {"name": "positive", "type": "python", "code": "assert outputs['total'] > 0"}
            ],
        },
    ]
}
# Most scripted worlds were written for the mixed ballot; `under` chooses another.
CONFIG = RunConfig(
    verify=Verify(checks=[NAME], ballot=MIXED, vacuity_check=False),
    loop=Loop(max_retries=3),
    sampling=Sampling(retry_temperature=0.7),
)


def under(ballot: str) -> RunConfig:
    """`CONFIG` with answer agreement voting under the named ballot."""
    return RunConfig.model_validate(merge(CONFIG.model_dump(), {"verify": {"ballot": ballot}}))


def program(body: str) -> str:
    return f"Here it is.\n```python\ndef solution():\n{body}\n```"


def returning(*values: object) -> Callable[[str], str]:
    """Programs that return each value in turn (the last one repeats)."""
    calls = iter(range(10**6))

    def solve(task: str) -> str:
        i = next(calls)
        return program(f"    return {values[min(i, len(values) - 1)]}")

    return solve


def saying(*values: object) -> Callable[[str], str]:
    """Sampled reasoning replies that end on each value in turn (the last one repeats)."""
    calls = iter(range(10**6))

    def sample(task: str) -> str:
        i = next(calls)
        return f"17 pens at 23 dollars each.\nThe answer is {values[min(i, len(values) - 1)]}."

    return sample


def silent(task: str) -> str:
    return "I cannot tell."


def totals(*answers: float) -> Callable[..., dict]:
    return lambda nid, k, inp, p: {"total": answers[min(k, len(answers) - 1)]}


def events() -> tuple[EventBus, list[Any]]:
    bus = EventBus()
    seen: list[Any] = []
    bus.subscribe(seen.append)
    return bus, seen


async def run(world, sandbox, config=CONFIG, bus=None):
    coordinator = verimap.build(world.models(), sandbox, config=config, events=bus)
    return await coordinator.run("17 pens at 23 dollars: what do they cost?")


def judge_calls(world) -> int:
    return [q.role for q in world.model.requests].count("judge")
