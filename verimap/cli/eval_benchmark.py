"""What `verimap eval` runs: the `-b` spellings (a built-in name, a file, a `datasets`
directory, FILE.py@FUNCTION), the field map of a file benchmark, and the choice of tasks
(`--sample-id`, `--limit N` or `A:B`). Apart from the command so that it stays small; the work
is `verimap.evals.custom`'s and `verimap.evals.sampling`'s."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from verimap.evals.custom_scoring import DOMAINS, SCORERS
from verimap.evals.mbpp import SPLIT_HELP

BENCHMARK_METAVAR = "NAME|FILE|DIR|FILE.py@FN"
BENCHMARK_HELP = (
    "gsm8k, humaneval, multihoprag or mbpp; a .jsonl/.csv/.tsv/.json file or a saved Hugging Face "
    "`datasets` directory (with the field map below); or FILE.py@FUNCTION returning tasks and "
    "a scorer (docs/eval.md#your-own-benchmark)."
)
LIMIT_HELP = "The first N tasks, or the range A:B (0-based, B exclusive, as a Python slice)."


class MBPPSplit(click.ParamType):
    """MBPP's `SET[:PART]` (`verimap.evals.mbpp.parse_split`), kept in its full spelling."""

    name = "SET[:PART]"

    def convert(self, value: Any, param: Any, ctx: Any) -> str:
        from verimap.evals.data import DataError
        from verimap.evals.mbpp import parse_split

        try:
            return str(parse_split(str(value)))
        except DataError as e:
            self.fail(str(e), param, ctx)


# Field-map options: parameter name -> the key of a config file's `benchmark:` mapping.
FIELD_KEYS = {
    "input_field": "input",
    "target_field": "target",
    "id_field": "id",
    "scorer": "scorer",
    "domain": "domain",
    "test_field": "test_field",
    "entry_point_field": "entry_point_field",
}

OPTIONS = [
    click.option(
        "--input",
        "input_field",
        metavar="FIELD",
        default=None,
        help="File benchmark: the field holding each task's input [input, question, "
        "prompt, problem or query].",
    ),
    click.option(
        "--target",
        "target_field",
        metavar="FIELD",
        default=None,
        help="File benchmark: the field holding the expected answer [target, answer, "
        "output, label or expected].",
    ),
    click.option(
        "--id",
        "id_field",
        metavar="FIELD",
        default=None,
        help="File benchmark: the field holding each task's id [the row index].",
    ),
    click.option(
        "--scorer",
        type=click.Choice(list(SCORERS)),
        default=None,
        help="File benchmark: exact (normalised text), numeric (the final number), "
        "code-tests (tests run in the sandbox), judge (the judge model compares with "
        "the target) [exact; code-tests with --test-field].",
    ),
    click.option(
        "--domain",
        type=click.Choice(DOMAINS),
        default=None,
        help="File benchmark: what verimap plans for (the planner's example, the "
        "tools, the answer type) [numeric: math, code-tests: programming, else qa].",
    ),
    click.option(
        "--test-field",
        metavar="FIELD",
        default=None,
        help="code-tests: the field holding the tests (def check(candidate), or "
        "asserts) [test, tests or test_list].",
    ),
    click.option(
        "--entry-point-field",
        metavar="FIELD",
        default=None,
        help="code-tests: the field naming the function under test [entry_point, "
        "else the function the tests assert on].",
    ),
    click.option("--split", type=MBPPSplit(), default=None, help=SPLIT_HELP),
    click.option(
        "--sample-id",
        "sample_id",
        multiple=True,
        metavar="ID[,ID...]",
        help="Run only the tasks with these ids (repeatable, or comma-separated).",
    ),
]


def benchmark_options(f: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(OPTIONS):
        f = option(f)
    return f


class LimitRange(click.ParamType):
    """A positive number of tasks N, or a range `A:B` (kept as text: config.json records it)."""

    name = "N|A:B"

    def convert(self, value: Any, param: Any, ctx: Any) -> int | str:
        from verimap.evals.sampling import SelectionError, parse_range

        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            return value
        text = str(value).strip()
        if text.isdigit() and int(text) >= 1:
            return int(text)
        if ":" in text:
            try:
                parse_range(text)
            except SelectionError:
                pass
            else:
                return text.replace(" ", "")
        self.fail(
            f"{value!r} is neither a positive number of tasks N nor a range A:B (0-based, B "
            "exclusive)",
            param,
            ctx,
        )


def sample_ids(kw: dict[str, Any]) -> list[str] | None:
    """`--sample-id a --sample-id b,c` as [a, b, c] (None: not given)."""
    ids = [i.strip() for given in kw.get("sample_id") or () for i in str(given).split(",")]
    return [i for i in ids if i] or None


def _settle_ids(kw: dict[str, Any], from_config: set[str]) -> None:
    """`kw["sample_ids"]`: the ids asked for. Like `--limit` and `--sample`, a flag overrides
    its config file (`--sample-id` on a config that samples runs those ids; `--limit` on one
    that lists ids, the first N); both from the same place is an error."""
    ids = kw["sample_ids"] = sample_ids(kw)
    others = [k for k in ("limit", "sample") if kw.get(k) is not None]
    if not ids or not others:
        return
    if "sample_id" not in from_config and all(k in from_config for k in others):
        for k in (*others, "seed"):
            kw[k] = None
        click.echo(f"note: --sample-id overrides the config's {' and '.join(others)}", err=True)
    elif "sample_id" in from_config and not any(k in from_config for k in others):
        kw["sample_ids"] = None
        click.echo(f"note: --{others[0]} overrides the config's sample_id", err=True)
    else:
        raise click.UsageError(
            f"--sample-id and --{others[0]} exclude each other: --sample-id runs the tasks with "
            "those ids; give one of them"
        )


def open_benchmark(kw: dict[str, Any]) -> Any:
    """The benchmark `kw` names, with its field map, and which of its tasks to run
    (`kw["sample_ids"]`); a `ClickException` when it cannot be opened. FILE.py@FUNCTION runs
    code, so it is taken only from the command line (`kw["benchmark_runs_code"]`), never from a
    config file, a variable or [tool.verimap]."""
    from verimap.evals.any_benchmark import open_benchmark as open_any
    from verimap.evals.custom import FieldMap
    from verimap.evals.data import DataError
    from verimap.evals.tasksets import is_builtin

    fm = FieldMap(
        input=kw.get("input_field"),
        target=kw.get("target_field"),
        id=kw.get("id_field"),
        scorer=kw.get("scorer"),
        domain=kw.get("domain"),
        test=kw.get("test_field"),
        entry_point=kw.get("entry_point_field"),
    )
    from_config = set(kw.get("from_config") or ())
    _settle_ids(kw, from_config)
    try:
        bench = open_any(
            kw["benchmark"],
            kw.get("data_dir"),
            fm,
            run_code=bool(kw.get("benchmark_runs_code")),
            split=kw.get("split"),
        )
    except DataError as e:
        raise click.ClickException(str(e)) from None
    if not is_builtin(bench) and kw.get("data_dir"):
        click.echo(
            f"note: --data-dir is for the built-in benchmarks; {bench.name} is read "
            f"from {bench.source.root}",
            err=True,
        )
    return bench


def factory_benchmark(bench: Any) -> Any:
    """What a `--models-factory` is given: a built-in benchmark's name, or a benchmark that a
    name alone does not open (a custom one, MBPP with its split) itself."""
    return bench if bench.identity() else bench.name


def expand_config_benchmark(flat: dict[str, Any], spelled: dict[str, str], p: Path) -> None:
    """A config file's `benchmark:` mapping (`path` and the field map) as flat settings;
    FILE.py@FUNCTION is refused there, as `models_factory` is: a config file runs no code."""
    from verimap.evals.custom_code import is_python_spec

    given = flat.get("benchmark")
    if isinstance(given, dict):
        keys = {**{v: k for k, v in FIELD_KEYS.items()}, **{k: k for k in FIELD_KEYS}}
        for k, v in given.items():
            key = str(k).replace("-", "_")
            if key == "path":
                flat["benchmark"] = v
            elif key in keys:
                flat[keys[key]], spelled[keys[key]] = v, f"benchmark.{k}"
            else:
                raise click.BadParameter(
                    f"{p}: unknown setting 'benchmark.{k}'; a benchmark mapping takes path, "
                    f"{', '.join(FIELD_KEYS.values())}",
                    param_hint="--config",
                )
        if "path" not in {str(k) for k in given}:
            raise click.BadParameter(
                f"{p}: the benchmark mapping needs a path", param_hint="--config"
            )
    if isinstance(flat.get("benchmark"), str) and is_python_spec(flat["benchmark"]):
        raise click.BadParameter(
            f"{p}: benchmark {flat['benchmark']!r} is not allowed in a config file: it names "
            "Python code to run; give -b FILE.py@FUNCTION on the command line",
            param_hint="--config",
        )
    if isinstance(flat.get("sample_id"), str | int):
        flat["sample_id"] = [str(flat["sample_id"])]
