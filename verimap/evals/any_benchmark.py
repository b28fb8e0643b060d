"""Whatever `-b` names: a built-in benchmark, a file or `datasets` directory read through a
field map, or `FILE.py@FUNCTION`."""

from __future__ import annotations

from pathlib import Path

from verimap.evals.custom import FieldMap, load_file
from verimap.evals.custom_code import is_python_spec, load_python
from verimap.evals.data import DataError
from verimap.evals.tasksets import BENCHMARKS, Benchmark, get_benchmark

KNOWN = (
    f"choose one of {', '.join(BENCHMARKS)}, or give a .jsonl, .csv, .tsv or .json file, a "
    "directory written by Dataset.save_to_disk, or FILE.py@FUNCTION"
)


def open_benchmark(
    spec: str,
    data_dir: str | None = None,
    fm: FieldMap | None = None,
    *,
    run_code: bool = True,
    split: str | None = None,
) -> Benchmark:
    """A built-in benchmark by name (MBPP's tasks of `split`), a file or `datasets` directory
    read through `fm`, or (with `run_code`) what `FILE.py@FUNCTION` returns."""
    fm = fm or FieldMap()
    if split is not None and spec != "mbpp":
        raise DataError(
            f"--split chooses MBPP's tasks; {spec} has no splits to choose (a saved `datasets` "
            "directory's split is DIR/SPLIT)"
        )
    if spec in BENCHMARKS:
        if given := fm.given():
            raise DataError(
                f"{spec} has its own fields and scorer: {', '.join(given)} are for a file benchmark"
            )
        return get_benchmark(spec, data_dir, **({"split": split} if split else {}))
    if is_python_spec(spec):
        if not run_code:
            raise DataError(
                f"{spec!r} names Python code to run, which a config file may not "
                "(nor a VERIMAP_* variable or [tool.verimap]): give it with -b on the "
                "command line"
            )
        if given := fm.given():
            raise DataError(
                f"{spec}: the function says its tasks and scorer; drop {', '.join(given)}"
            )
        return load_python(spec)
    path = Path(spec).expanduser()
    if not path.exists():
        if path.suffix or "/" in spec or "@" in spec:
            raise DataError(f"{spec}: no such file or directory")
        raise DataError(f"unknown benchmark {spec!r}; {KNOWN}")
    return load_file(path, fm)
