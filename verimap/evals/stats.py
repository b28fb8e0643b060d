"""Statistics for eval results that a reader can check by hand.

An accuracy from 20 or 60 tasks is a noisy number, and two methods run on the same tasks are
compared on the tasks where they disagree, not on their totals. So every figure here comes with
its uncertainty:

- a proportion (accuracy, verified precision, coverage) with its Wilson score 95% interval, which
  stays inside [0, 1] and behaves at 0/n and n/n, where the normal approximation does not;
- a paired comparison of two runs on their common tasks: wins, losses, ties, the exact McNemar p
  on the discordant pairs and a seeded paired-bootstrap interval of the accuracy difference;
- verification against gold correctness (the paper's Table 4): coverage, verified precision,
  false positives and negatives, and the risk–coverage curve of selective prediction.

Everything takes plain record dicts (the lines of results.jsonl, as `report.load_records`
returns them), so `verimap eval report`, `verimap eval compare` and `verimap view` can share it.
Only the standard library is used: the formulas are small and scipy is not a dependency.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

# The 97.5th percentile of the standard normal: a two-sided 95% interval.
Z95 = 1.959963984540054
RESAMPLES = 10_000

Record = dict[str, Any]


@dataclass(frozen=True)
class Proportion:
    """k of n, with its Wilson 95% interval; `value` is None when n is 0 (nothing to measure)."""

    k: int
    n: int
    low: float
    high: float

    @property
    def value(self) -> float | None:
        return self.k / self.n if self.n else None


def wilson_interval(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of k successes in n trials. With n = 0 it is the whole [0, 1]:
    no data rules nothing out."""
    if not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return 0.0, 1.0
    p = k / n
    z2 = z * z
    denom = 1 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    # At k = 0 or k = n one bound is exact (0 or 1) in theory; floating point must not miss it.
    low = 0.0 if k == 0 else max(0.0, center - half)
    high = 1.0 if k == n else min(1.0, center + half)
    return low, high


def proportion(k: int, n: int) -> Proportion:
    low, high = wilson_interval(k, n)
    return Proportion(k, n, low, high)


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p: a binomial test with p = 1/2 of b wins against c losses, the
    tasks where the two methods disagree (ties carry no information about which is better).
    p = min(1, 2 * sum_{k <= min(b, c)} C(b + c, k) / 2^(b + c)); 1 when they never disagree."""
    if b < 0 or c < 0:
        raise ValueError(f"counts must be non-negative, got b={b}, c={c}")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1))
    return min(1.0, 2 * tail / 2**n)  # int / int: exact, then rounded once


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default, R's type 7)."""
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def paired_bootstrap_ci(
    pairs: Sequence[tuple[bool, bool]],
    *,
    resamples: int = RESAMPLES,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile bootstrap interval of accuracy(A) - accuracy(B), resampling whole tasks so
    each keeps both its outcomes (the pairing is what makes the comparison sharp). Seeded, so
    the same results always print the same interval."""
    if not pairs:
        raise ValueError("no pairs to resample")
    if resamples < 1 or not 0 < level < 1:
        raise ValueError(f"need resamples >= 1 and 0 < level < 1, got {resamples}, {level}")
    n = len(pairs)
    diffs = [int(a) - int(b) for a, b in pairs]
    rng = random.Random(seed)
    stats = sorted(sum(rng.choices(diffs, k=n)) / n for _ in range(resamples))
    tail = (1 - level) / 2
    return _quantile(stats, tail), _quantile(stats, 1 - tail)


@dataclass(frozen=True)
class PairedComparison:
    """Method A against method B on the same n tasks. wins: A right and B wrong; losses: A
    wrong and B right; difference: accuracy A - accuracy B (a fraction, not points)."""

    n: int
    wins: int
    losses: int
    both_right: int
    both_wrong: int
    accuracy_a: Proportion
    accuracy_b: Proportion
    difference: float
    ci: tuple[float, float]
    p_value: float
    resamples: int
    seed: int


def paired_comparison(
    pairs: Sequence[tuple[bool, bool]], *, resamples: int = RESAMPLES, seed: int = 0
) -> PairedComparison:
    """Compare A and B from (A correct, B correct) per common task."""
    if not pairs:
        raise ValueError("no common tasks to compare")
    n = len(pairs)
    wins = sum(1 for a, b in pairs if a and not b)
    losses = sum(1 for a, b in pairs if b and not a)
    both_right = sum(1 for a, b in pairs if a and b)
    right_a, right_b = both_right + wins, both_right + losses
    return PairedComparison(
        n=n,
        wins=wins,
        losses=losses,
        both_right=both_right,
        both_wrong=n - wins - losses - both_right,
        accuracy_a=proportion(right_a, n),
        accuracy_b=proportion(right_b, n),
        difference=(right_a - right_b) / n,
        ci=paired_bootstrap_ci(pairs, resamples=resamples, seed=seed),
        p_value=mcnemar_exact(wins, losses),
        resamples=resamples,
        seed=seed,
    )


# ---- verification against gold correctness ------------------------------------------------


def preset_of(method: str | None) -> str | None:
    """The preset a method's name stands for: the name itself when it is one, else the METHOD
    of `METHOD VARIANT` (a compact file's name for a method run with another setting) or of
    `METHOD-VARIANT` (a benchmark's name for one, recorded in its directory: `sc-planned`,
    `verimap-planned`), the longest preset that fits; None for any other name."""
    from verimap.methods.presets import METHODS

    name = method or ""
    if name in METHODS:
        return name
    head = name.split(" ", 1)[0]
    if head in METHODS:
        return head
    fits = [m for m in METHODS if head.startswith(f"{m}-")]
    return max(fits, key=len) if fits else None


def method_has_checks(method: str | None) -> bool:
    """False for a method whose preset turns verification off (react, map): its records may say
    `verified: true`, but nothing checked them. The same rule as report.table_verification; a
    method named as a variant of a preset is that preset (`preset_of`); a method not in the
    presets keeps its records' own flag."""
    from verimap.methods.presets import METHODS

    preset = preset_of(method)
    return preset is None or METHODS[preset].verification != "none"


def total_calls(record: Record) -> int:
    """Model calls of a result record over all roles (a compact record carries the sum)."""
    if isinstance(record.get("calls"), int):
        return int(record["calls"])
    return sum(int(u.get("calls", 0)) for u in (record.get("usage") or {}).values())


def is_verified(record: Record) -> bool:
    """Whether a check accepted the record's answer (never so for a method with no checks)."""
    return bool(record.get("verified")) and method_has_checks(record.get("method"))


@dataclass(frozen=True)
class VerificationMetrics:
    """Verification of one method's records against gold correctness.

    `tasks` counts records (task x run). coverage: share of tasks verified; precision: share of
    verified answers that are right (None when nothing is verified). As in the paper's Table 4
    and report.table_verification, a false positive is verified but wrong and a false negative
    is right but not verified, and both rates are over all tasks (FP / tasks, FN / tasks), not
    over the verified or the right ones."""

    tasks: int
    has_checks: bool
    accuracy: Proportion
    coverage: Proportion
    precision: Proportion | None
    false_positives: int
    false_negatives: int

    @property
    def fp_rate(self) -> float | None:
        return self.false_positives / self.tasks if self.tasks else None

    @property
    def fn_rate(self) -> float | None:
        return self.false_negatives / self.tasks if self.tasks else None


def verification_metrics(records: Sequence[Record]) -> VerificationMetrics:
    """Accuracy, coverage, verified precision, false positives and negatives of `records`."""
    n = len(records)
    right = [bool(r.get("correct")) for r in records]
    verified = [is_verified(r) for r in records]
    n_ver = sum(verified)
    right_ver = sum(1 for ok, v in zip(right, verified, strict=True) if ok and v)
    return VerificationMetrics(
        tasks=n,
        has_checks=any(method_has_checks(r.get("method")) for r in records),
        accuracy=proportion(sum(right), n),
        coverage=proportion(n_ver, n),
        precision=proportion(right_ver, n_ver) if n_ver else None,
        false_positives=n_ver - right_ver,
        false_negatives=sum(right) - right_ver,
    )


def confidence(record: Record) -> float | None:
    """A numeric confidence the method recorded in `meta` (e.g. a vote share), else None."""
    value = (record.get("meta") or {}).get("confidence")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


@dataclass(frozen=True)
class RiskPoint:
    """Answer only the `covered` most confident tasks: `coverage` is their share of all tasks,
    `risk` the share of them that is wrong (None at coverage 0, where nothing is answered)."""

    coverage: float
    risk: float | None
    covered: int
    wrong: int


def _rank(record: Record) -> tuple[bool, float]:
    c = confidence(record)
    return is_verified(record), -math.inf if c is None else c


def risk_coverage_curve(records: Sequence[Record]) -> list[RiskPoint]:
    """The selective-prediction curve: tasks ranked verified first, then by `meta.confidence`
    when recorded (missing ranks lowest), ties in record order; one point per distinct rank,
    since a threshold cannot split tied tasks. Without confidences that is three points:
    coverage 0, the verified tasks only, and every task."""
    if not records:
        return []
    ranked = sorted(records, key=_rank, reverse=True)  # sorted() is stable: ties keep order
    points = [RiskPoint(0.0, None, 0, 0)]
    wrong = 0
    for i, r in enumerate(ranked, 1):
        wrong += not r.get("correct")
        if i == len(ranked) or _rank(ranked[i]) != _rank(r):
            points.append(RiskPoint(i / len(ranked), wrong / i, i, wrong))
    return points


# ---- pairing two runs -----------------------------------------------------------------------


def record_key(record: Record) -> str:
    """What pairs a record with its counterpart: the runner's key, "r{run}/{task_id}", so run i
    of a task meets run i of the same task."""
    key = record.get("key")
    return str(key) if key else f"r{record.get('run', 0)}/{record['task_id']}"


def benchmark_of(record: Record) -> str:
    return str(record.get("benchmark") or str(record.get("task_id", "")).split("/")[0])


@dataclass(frozen=True)
class Pairing:
    """Records of A and B matched by `record_key`, and the records only one side has."""

    pairs: list[tuple[Record, Record]]
    only_a: list[Record]
    only_b: list[Record]


def _by_key(records: Iterable[Record]) -> dict[str, Record]:
    out: dict[str, Record] = {}
    for r in records:
        out.setdefault(record_key(r), r)  # the first wins, as in ResultsLog.load
    return out


def pair_records(a: Iterable[Record], b: Iterable[Record]) -> Pairing:
    ka, kb = _by_key(a), _by_key(b)
    return Pairing(
        pairs=[(ra, kb[k]) for k, ra in ka.items() if k in kb],
        only_a=[r for k, r in ka.items() if k not in kb],
        only_b=[r for k, r in kb.items() if k not in ka],
    )


@dataclass(frozen=True)
class BenchmarkComparison:
    """A against B on one benchmark: the paired statistics and each side's verification, both
    over the common tasks only, so the two sides are measured on the same tasks."""

    benchmark: str
    comparison: PairedComparison
    verification_a: VerificationMetrics
    verification_b: VerificationMetrics
    only_a: int
    only_b: int


def compare_records(
    a: Sequence[Record],
    b: Sequence[Record],
    *,
    benchmark: str | None = None,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> list[BenchmarkComparison]:
    """One comparison per benchmark that both sides share tasks in (all, or only `benchmark`)."""
    pairing = pair_records(a, b)
    found = {benchmark_of(ra) for ra, _ in pairing.pairs}
    benches = sorted(found if benchmark is None else found & {benchmark})
    out = []
    for bench in benches:
        pairs = [(ra, rb) for ra, rb in pairing.pairs if benchmark_of(ra) == bench]
        side_a, side_b = [ra for ra, _ in pairs], [rb for _, rb in pairs]
        outcomes = [(bool(ra.get("correct")), bool(rb.get("correct"))) for ra, rb in pairs]
        out.append(
            BenchmarkComparison(
                benchmark=bench,
                comparison=paired_comparison(outcomes, resamples=resamples, seed=seed),
                verification_a=verification_metrics(side_a),
                verification_b=verification_metrics(side_b),
                only_a=sum(1 for r in pairing.only_a if benchmark_of(r) == bench),
                only_b=sum(1 for r in pairing.only_b if benchmark_of(r) == bench),
            )
        )
    return out


def to_json(obj: Any) -> Any:
    """The dataclasses above as plain JSON values, derived figures (value, rates) included."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {f.name: to_json(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
        for name in ("value", "fp_rate", "fn_rate"):
            if hasattr(obj, name):
                out[name] = getattr(obj, name)
        return out
    if isinstance(obj, list | tuple):
        return [to_json(x) for x in obj]
    return obj
