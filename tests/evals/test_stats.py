"""The report's statistics against hand-computed cases, and their invariants (hypothesis)."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verimap.evals.report import table_verification
from verimap.evals.stats import (
    Z95,
    RiskPoint,
    compare_records,
    confidence,
    is_verified,
    mcnemar_exact,
    pair_records,
    paired_bootstrap_ci,
    paired_comparison,
    proportion,
    risk_coverage_curve,
    to_json,
    verification_metrics,
    wilson_interval,
)


def rec(i, correct, verified=True, *, method="verimap", bench="gsm8k", run=0, conf=None):
    r = {
        "key": f"r{run}/{bench}/{i}",
        "run": run,
        "task_id": f"{bench}/{i}",
        "benchmark": bench,
        "method": method,
        "status": "success" if verified else "failed",
        "correct": correct,
        "verified": verified,
        "meta": {},
    }
    if conf is not None:
        r["meta"]["confidence"] = conf
    return r


def outcomes(wins, losses, both_right, both_wrong):
    return (
        [(True, False)] * wins
        + [(False, True)] * losses
        + [(True, True)] * both_right
        + [(False, False)] * both_wrong
    )


# ---- Wilson interval ------------------------------------------------------------------------


def test_wilson_interval_of_15_out_of_20():
    """p = 0.75, n = 20, z = 1.96, z^2 = 3.8415.
    denominator 1 + z^2/n = 1.19207; centre (0.75 + z^2/(2n)) / 1.19207 = 0.84604 / 1.19207 = 0.70972;
    half-width z * sqrt(p(1-p)/n + z^2/(4n^2)) / 1.19207 = 1.96 * sqrt(0.009375 + 0.0024009) / 1.19207
    = 1.96 * 0.108517 / 1.19207 = 0.17842; interval [0.70972 - 0.17842, 0.70972 + 0.17842]."""
    low, high = wilson_interval(15, 20)
    assert (round(low, 3), round(high, 3)) == (0.531, 0.888)


def test_wilson_interval_at_the_edges():
    """k = 0: the centre and the half-width are both z^2 / (2 (n + z^2)), so the interval is
    [0, z^2 / (n + z^2)] = [0, 3.8415 / 13.8415] = [0, 0.2775] for n = 10; k = n mirrors it."""
    assert wilson_interval(0, 10) == (0.0, pytest.approx(0.2775, abs=1e-4))
    assert wilson_interval(10, 10) == (pytest.approx(0.7225, abs=1e-4), 1.0)
    assert wilson_interval(0, 0) == (0.0, 1.0)  # no data rules nothing out
    assert proportion(0, 0).value is None
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_z95_is_the_normal_quantile():
    assert 0.5 * math.erfc(-Z95 / math.sqrt(2)) == pytest.approx(0.975, abs=1e-12)


@given(st.integers(0, 5000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_bounds_are_in_0_1_and_hold_the_estimate(kn):
    k, n = kn
    low, high = wilson_interval(k, n)
    p = k / n if n else 0.5
    assert 0.0 <= low <= p <= high <= 1.0


# ---- exact McNemar --------------------------------------------------------------------------


def test_mcnemar_hand_cases():
    """b=6, c=3: n=9, 2 * (C(9,0)+C(9,1)+C(9,2)+C(9,3)) / 2^9 = 2 * (1+9+36+84) / 512 = 0.5078.
    b=10, c=0: 2 * C(10,0) / 2^10 = 2/1024 = 0.001953. b=c: the tail passes 1/2, capped at 1."""
    assert mcnemar_exact(6, 3) == pytest.approx(0.5078125)
    assert round(mcnemar_exact(6, 3), 3) == 0.508
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(10, 0) == pytest.approx(0.001953125)
    assert mcnemar_exact(5, 5) == 1.0
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)


@given(st.integers(0, 400), st.integers(0, 400))
def test_mcnemar_p_is_in_0_1_and_symmetric(b, c):
    p = mcnemar_exact(b, c)
    assert 0.0 < p <= 1.0
    assert p == mcnemar_exact(c, b)


def test_mcnemar_does_not_overflow_on_large_counts():
    assert 0.0 <= mcnemar_exact(3000, 2000) < 1e-40


# ---- paired bootstrap -----------------------------------------------------------------------


def test_bootstrap_ci_of_the_issue_margin():
    """6 wins, 3 losses, 32 + 19 ties: difference 3/60 = 0.05. Each task's difference d is
    +1, -1 or 0, so var(d) = 9/60 - 0.05^2 = 0.1475 and the normal interval is
    0.05 +- 1.96 * sqrt(0.1475 / 60) = [-0.047, 0.147]; the bootstrap must come close to it,
    contain 0.05 and (as McNemar's p = 0.51 says) 0."""
    pairs = outcomes(6, 3, 32, 19)
    low, high = paired_bootstrap_ci(pairs, seed=0)
    assert low < 0 < 0.05 < high
    assert low == pytest.approx(-0.047, abs=0.02) and high == pytest.approx(0.147, abs=0.02)
    assert paired_bootstrap_ci(pairs, seed=0) == (low, high)  # seeded: always the same


def test_bootstrap_ci_without_disagreement_is_a_point():
    assert paired_bootstrap_ci(outcomes(0, 0, 5, 5), resamples=200) == (0.0, 0.0)
    assert paired_bootstrap_ci(outcomes(4, 0, 0, 0), resamples=200) == (1.0, 1.0)
    with pytest.raises(ValueError):
        paired_bootstrap_ci([])


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=40),
    st.integers(0, 2**32),
)
def test_bootstrap_ci_is_ordered_bounded_and_deterministic(pairs, seed):
    low, high = paired_bootstrap_ci(pairs, resamples=200, seed=seed)
    assert -1.0 <= low <= high <= 1.0
    assert paired_bootstrap_ci(pairs, resamples=200, seed=seed) == (low, high)


def test_paired_comparison_counts():
    c = paired_comparison(outcomes(6, 3, 32, 19), resamples=500)
    assert (c.n, c.wins, c.losses, c.both_right, c.both_wrong) == (60, 6, 3, 32, 19)
    assert (c.accuracy_a.k, c.accuracy_b.k) == (38, 35)
    assert c.difference == pytest.approx(0.05)
    assert c.p_value == pytest.approx(0.5078125)
    assert c.ci[0] <= c.difference <= c.ci[1]
    with pytest.raises(ValueError, match="no common tasks"):
        paired_comparison([])


# ---- verification against gold correctness -------------------------------------------------


def test_verification_metrics_agree_with_table_4():
    """verified [T, T, F, F], correct [T, F, T, F]: coverage 2/4, precision 1/2, one false
    positive (task 1) and one false negative (task 2), each 1/4 of the tasks as in Table 4."""
    recs = [rec(i, c, v) for i, (c, v) in enumerate([(1, 1), (0, 1), (1, 0), (0, 0)])]
    m = verification_metrics(recs)
    assert (m.tasks, m.coverage.k, m.false_positives, m.false_negatives) == (4, 2, 1, 1)
    assert m.precision is not None and (m.precision.k, m.precision.n) == (1, 2)
    assert m.accuracy.value == 0.5 and m.fp_rate == 0.25 and m.fn_rate == 0.25
    assert "| verimap | GSM8K | 4 | 2 | 1 (25.0%) | 1 (25.0%) |" in table_verification(recs)


def test_a_method_with_no_checks_verifies_nothing():
    """react records say verified: true, but react checks nothing."""
    recs = [rec(0, True, method="react"), rec(1, False, method="react")]
    assert not any(is_verified(r) for r in recs)
    m = verification_metrics(recs)
    assert not m.has_checks and m.coverage.k == 0 and m.precision is None
    assert (m.false_positives, m.false_negatives) == (0, 1)


def test_precision_is_none_when_nothing_is_verified():
    m = verification_metrics([rec(0, True, False), rec(1, False, False)])
    assert m.has_checks and m.precision is None and m.coverage.value == 0.0
    assert verification_metrics([]).fp_rate is None


def test_unknown_methods_keep_their_flag():
    assert is_verified(rec(0, True, method="homegrown"))


# ---- risk-coverage curve --------------------------------------------------------------------


def test_risk_coverage_of_a_verimap_run_has_three_points():
    """Verified: tasks 0, 2, 4 with one wrong (2): coverage 3/5, risk 1/3. Everything: 2 of 5
    wrong (2, 3): risk 0.4."""
    recs = [rec(0, True), rec(1, True, False), rec(2, False), rec(3, False, False), rec(4, True)]
    assert risk_coverage_curve(recs) == [
        RiskPoint(0.0, None, 0, 0),
        RiskPoint(0.6, pytest.approx(1 / 3), 3, 1),
        RiskPoint(1.0, 0.4, 5, 2),
    ]
    assert risk_coverage_curve([]) == []


def test_risk_coverage_with_confidences_is_the_full_curve():
    """Ranked a (verified, .9, right), b (verified, .5, wrong), c (1.0, right), d and e (.6,
    tied: one point, one wrong), f (no confidence: last, wrong)."""
    recs = [
        rec(5, False, False),  # f
        rec(3, False, False, conf=0.6),  # d
        rec(0, True, conf=0.9),  # a
        rec(2, True, False, conf=1.0),  # c
        rec(4, True, False, conf=0.6),  # e
        rec(1, False, conf=0.5),  # b
    ]
    curve = [(p.covered, p.wrong) for p in risk_coverage_curve(recs)]
    assert curve == [(0, 0), (1, 0), (2, 1), (3, 1), (5, 2), (6, 3)]


def test_risk_coverage_of_a_method_without_checks_follows_its_confidence():
    recs = [rec(0, False, method="react", conf=0.4), rec(1, True, method="react", conf=0.8)]
    assert [(p.coverage, p.risk) for p in risk_coverage_curve(recs)] == [
        (0.0, None),
        (0.5, 0.0),
        (1.0, 0.5),
    ]


def test_confidence_must_be_a_finite_number():
    assert confidence(rec(0, True, conf=0.7)) == 0.7
    for bad in (True, "0.7", float("nan"), None):
        r = rec(0, True)
        r["meta"]["confidence"] = bad
        assert confidence(r) is None


@given(st.lists(st.tuples(st.booleans(), st.booleans(), st.none() | st.floats(0, 1)), max_size=30))
def test_risk_coverage_invariants(rows):
    recs = [rec(i, c, v, conf=k) for i, (c, v, k) in enumerate(rows)]
    curve = risk_coverage_curve(recs)
    if not recs:
        return
    assert curve[0] == RiskPoint(0.0, None, 0, 0)
    assert [p.covered for p in curve] == sorted({p.covered for p in curve})
    assert curve[-1].covered == len(recs)
    assert curve[-1].wrong == sum(1 for c, _, _ in rows if not c)
    assert all(0.0 <= p.risk <= 1.0 for p in curve[1:] if p.risk is not None)


# ---- pairing --------------------------------------------------------------------------------


def test_pairing_by_key_matches_run_with_run():
    a = [rec(0, True), rec(0, False, run=1), rec(1, True)]
    b = [
        rec(0, False, method="react"),
        rec(0, True, method="react", run=1),
        rec(2, True, method="react"),
    ]
    p = pair_records(a, b)
    assert [(ra["key"], rb["key"]) for ra, rb in p.pairs] == [
        ("r0/gsm8k/0", "r0/gsm8k/0"),
        ("r1/gsm8k/0", "r1/gsm8k/0"),
    ]
    assert [r["key"] for r in p.only_a] == ["r0/gsm8k/1"]
    assert [r["key"] for r in p.only_b] == ["r0/gsm8k/2"]


def test_compare_records_per_benchmark():
    a = [rec(i, True) for i in range(3)] + [rec(i, i == 0, bench="humaneval") for i in range(2)]
    b = [rec(i, i == 0, method="react") for i in range(4)]
    comps = compare_records(a, b, resamples=200)
    assert [c.benchmark for c in comps] == ["gsm8k"]
    (c,) = comps
    assert (c.comparison.n, c.comparison.wins, c.comparison.losses) == (3, 2, 0)
    assert (c.only_a, c.only_b) == (0, 1)
    assert c.verification_a.coverage.k == 3 and not c.verification_b.has_checks
    assert compare_records(a, b, benchmark="humaneval") == []
    data = to_json(c)
    assert data["comparison"]["accuracy_a"]["value"] == 1.0
    assert data["verification_b"]["precision"] is None
    assert data["verification_a"]["fp_rate"] == 0.0
