"""The built-in task sets (GSM8K, HumanEval, MultiHopRAG, MBPP) as eval tasks: how each is loaded, posed,
tooled and scored. (Performance benchmarks are the scripts under `benchmarks/`.)"""

from __future__ import annotations

import abc
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from verimap.base.protocols import Sandbox
from verimap.evals import data as d
from verimap.evals import mbpp
from verimap.evals.mbpp import parse_split
from verimap.evals.scoring import Score, score_gsm8k, score_humaneval, score_multihoprag
from verimap.evals.tools import QA_INSTRUCTION, math_tools, programming_tools, qa_tools
from verimap.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from verimap.planning.demos import DemoPool

GSM8K_NOTE = "\n\nSolve this math word problem. The final answer is a single number."
QA_NOTE = f"\n\n{QA_INSTRUCTION}"
_INDEX = re.compile(r"/(\d+)$")


def task_index(task_id: str) -> int | None:
    """The number a built-in task's id ends in (`gsm8k/12`, `HumanEval/7`, `mbpp/602`): its
    index in its source, MBPP's task_id; None for an id that ends in none."""
    m = _INDEX.search(task_id)
    return int(m[1]) if m else None


@dataclass
class EvalTask:
    id: str
    benchmark: str
    prompt: str  # what the coordinator is asked
    gold: str
    meta: dict[str, Any] = field(default_factory=dict)


class Benchmark(abc.ABC):
    """A task set: its `name`, its `domain` (math | programming | qa: what the planner is shown
    and which answer type a plan must end in), where its data came from (`source`), its tasks,
    tools and scorer, and the `meta` key a seeded sample is stratified by (`stratum`). The
    built-in ones are below; `verimap.evals.custom` makes one of a file."""

    name: str
    domain: str
    source: d.DataSource
    stratum: str | None = None

    def __init__(self, data_dir: str | os.PathLike[str] | None = None):
        self.source = d.resolve(self.name, data_dir)

    @abc.abstractmethod
    def tasks(self) -> list[EvalTask]: ...

    @abc.abstractmethod
    def tools(self, sandbox: Sandbox) -> ToolRegistry:
        """A fresh registry per task (the programming workspace holds per-task state)."""

    @abc.abstractmethod
    async def score(self, task: EvalTask, answer: Any, sandbox: Sandbox) -> Score: ...

    def prepare(self) -> None:  # noqa: B027
        """Build what every task shares (the search index) before tasks start."""

    def identity(self) -> dict[str, Any]:
        """What a resumed run must find unchanged besides the name (a custom benchmark's file
        and field map, MBPP's split); the other built-in ones are their name. A built-in
        benchmark is opened again by `get_benchmark(name, data_dir, **identity)`."""
        return {}

    def use_models(self, models: Mapping[str, Any]) -> None:  # noqa: B027
        """Take the run's models, for a scorer that asks one (a custom benchmark's judge)."""

    def held_out(self, extra: DemoPool | None = None) -> frozenset[str]:
        """Ids of tasks a seeded draw leaves out: the planner was shown or developed on them,
        among them those of `extra`, a pool the run shows beside the shipped one (`shown`)."""
        return self.shown(extra)

    def shown(self, extra: DemoPool | None) -> frozenset[str]:
        """Ids of this benchmark's tasks whose plans `extra` holds: a pool mined from runs of
        this benchmark (`DemoPool.benchmark`), its demonstrations' indices (`task_index`)."""
        if extra is None or extra.benchmark != self.name:
            return frozenset()
        indices = {d.index for d in extra.demos}
        return frozenset(t.id for t in self.tasks() if task_index(t.id) in indices)

    @classmethod
    def problem(cls, prompt: str) -> str:
        """The problem a task's `prompt` poses, without the instructions every task of the set
        ends with: the text a demonstration gives (`verimap.planning.demos`)."""
        return prompt


class GSM8K(Benchmark):
    name = "gsm8k"
    domain = "math"

    def tasks(self) -> list[EvalTask]:
        return [
            EvalTask(
                id=f"gsm8k/{i}",
                benchmark=self.name,
                prompt=f"{it.question}{GSM8K_NOTE}",
                gold=it.gold,
            )
            for i, it in enumerate(d.load_gsm8k(self.source))
        ]

    def tools(self, sandbox: Sandbox) -> ToolRegistry:
        return math_tools(sandbox)

    @classmethod
    def problem(cls, prompt: str) -> str:
        return prompt.removesuffix(GSM8K_NOTE)

    async def score(self, task: EvalTask, answer: Any, sandbox: Sandbox) -> Score:
        return score_gsm8k(answer, task.gold)


class HumanEval(Benchmark):
    name = "humaneval"
    domain = "programming"

    def tasks(self) -> list[EvalTask]:
        return [
            EvalTask(
                id=it.task_id,
                benchmark=self.name,
                prompt=(
                    "Complete the following Python function so that it is correct for all inputs "
                    "described in its docstring. The final answer is the complete Python code of "
                    f"the function `{it.entry_point}` (with any imports it needs).\n\n"
                    f"```python\n{it.prompt}```"
                ),
                gold=it.entry_point,
                meta={
                    "prompt": it.prompt,
                    "test": it.test,
                    "entry_point": it.entry_point,
                    "solution": it.canonical_solution,
                },
            )
            for it in d.load_humaneval(self.source)
        ]

    def tools(self, sandbox: Sandbox) -> ToolRegistry:
        return programming_tools(sandbox)

    async def score(self, task: EvalTask, answer: Any, sandbox: Sandbox) -> Score:
        return await score_humaneval(
            answer,
            prompt=task.meta["prompt"],
            test=task.meta["test"],
            entry_point=task.meta["entry_point"],
            sandbox=sandbox,
        )


class MultiHopRAG(Benchmark):
    name = "multihoprag"
    domain = "qa"
    stratum = "question_type"

    def __init__(self, data_dir: str | os.PathLike[str] | None = None, *, embedder: Any = None):
        super().__init__(data_dir)
        self.queries, self.corpus = d.load_multihoprag(self.source)
        self.embedder = embedder
        self.index: Any = None

    def prepare(self) -> None:
        if self.index is None:
            from verimap.evals.retrieval import CorpusIndex

            self.index = CorpusIndex.build(self.corpus, embedder=self.embedder)

    def tasks(self) -> list[EvalTask]:
        return [
            EvalTask(
                id=f"multihoprag/{i}",
                benchmark=self.name,
                prompt=f"{q.query}{QA_NOTE}",
                gold=q.answer,
                meta={"question_type": q.question_type},
            )
            for i, q in enumerate(self.queries)
        ]

    def tools(self, sandbox: Sandbox) -> ToolRegistry:
        self.prepare()
        return qa_tools(self.index)

    def held_out(self, extra: DemoPool | None = None) -> frozenset[str]:
        """The planner's demonstrations and development queries, when these are the official
        queries they index (a demonstration's question is at its index), and `extra`'s."""
        from verimap.planning import demos

        pool = demos.pool(self.domain)
        aligned = any(
            d.index < len(self.queries) and self.queries[d.index].query == d.task
            for d in pool.demos
        )
        shipped = (
            frozenset(f"{self.name}/{i}" for i in demos.held_out(self.domain))
            if aligned
            else frozenset()
        )
        return shipped | self.shown(extra)

    @classmethod
    def problem(cls, prompt: str) -> str:
        return prompt.removesuffix(QA_NOTE)

    async def score(self, task: EvalTask, answer: Any, sandbox: Sandbox) -> Score:
        return score_multihoprag(answer, task.gold)


class MBPP(Benchmark):
    """MBPP's tasks of one split (`verimap.evals.mbpp`: `sanitized:test` unless `split` says)."""

    name = "mbpp"
    domain = "programming"

    def __init__(self, data_dir: str | os.PathLike[str] | None = None, *, split: str | None = None):
        super().__init__(data_dir)
        self.split = parse_split(split)

    def tasks(self) -> list[EvalTask]:
        out = []
        for it in d.load_mbpp(self.source, self.split.task_set):
            if not self.split.holds(it):
                continue
            entry = mbpp.entry_point(it)
            out.append(
                EvalTask(
                    id=f"mbpp/{it.task_id}",
                    benchmark=self.name,
                    prompt=mbpp.task_prompt(it, entry),
                    gold=entry,
                    meta={
                        "prompt": "",
                        "test": mbpp.tests_of(it, self.split.task_set),
                        "entry_point": entry,
                        "solution": mbpp.plain(it.code) + "\n",
                    },
                )
            )
        return out

    def tools(self, sandbox: Sandbox) -> ToolRegistry:
        return programming_tools(sandbox)

    async def score(self, task: EvalTask, answer: Any, sandbox: Sandbox) -> Score:
        return await score_humaneval(
            answer,
            prompt="",
            test=task.meta["test"],
            entry_point=task.meta["entry_point"],
            sandbox=sandbox,
        )

    def identity(self) -> dict[str, Any]:
        return {"split": str(self.split)}

    @classmethod
    def problem(cls, prompt: str) -> str:
        return mbpp.task_problem(prompt)


BENCHMARKS: dict[str, type[Benchmark]] = {b.name: b for b in (GSM8K, HumanEval, MultiHopRAG, MBPP)}


def is_builtin(bench: Benchmark) -> bool:
    """One of `BENCHMARKS`, opened by name (not a file or a function that reuses a name)."""
    return type(bench) in BENCHMARKS.values()


def get_benchmark(
    name: str, data_dir: str | os.PathLike[str] | None = None, **kw: Any
) -> Benchmark:
    try:
        cls = BENCHMARKS[name]
    except KeyError:
        raise d.DataError(
            f"unknown benchmark {name!r}; choose one of {', '.join(BENCHMARKS)}"
        ) from None
    return cls(data_dir, **kw)
