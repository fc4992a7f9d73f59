"""Paired comparisons (scoring.compare) pinned to hand-computed values and reference libraries."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats
from support.edct_runs import excluded_record, ref, scored_record

from edct_task.core.records import SampleInput
from edct_task.scoring import compare as cmp


def _sample(i: int, domain: str = "okvqa") -> SampleInput:
    sid = f"{domain}-{i:03d}"
    return SampleInput(id=sid, domain=domain, question=f"What about {sid}?", image=ref(sid))


PASS = ((1, 1), (1, 1), (5, 5))  # CCS_binary 1.0
FAIL = ((1, 0), (1, 1), (4, 2))  # CCS_binary 0.5


# ----------------------------------------------------------------------------- pairing


def test_pair_records_keeps_items_both_scored_and_counts_the_dropped_by_side_and_reason():
    a = [scored_record(_sample(0), *PASS), scored_record(_sample(1), *PASS), excluded_record(_sample(2))]
    a.append(scored_record(_sample(3), *FAIL))
    b = [scored_record(_sample(0), *FAIL), excluded_record(_sample(1)), excluded_record(_sample(2))]
    b.append(scored_record(_sample(4), *PASS))  # item 3 absent from B, item 4 absent from A
    paired = cmp.pair_records(a, b)
    assert paired.ids == ("okvqa-000",)
    assert paired.a.tolist() == [1.0] and paired.b.tolist() == [0.5]
    assert paired.dropped == {"a": {"absent": 1, "excluded": 1}, "b": {"absent": 1, "excluded": 2}}


def test_pair_records_refuses_an_unknown_metric_and_a_repeated_id():
    rec = scored_record(_sample(0), *PASS)
    with pytest.raises(ValueError, match="metric must be one of"):
        cmp.pair_records([rec], [rec], "ac_k1")
    with pytest.raises(ValueError, match="twice"):
        cmp.pair_records([rec, rec], [rec])


# ------------------------------------------------------------------------- sign-flip test and its interval


def _p_by_enumeration(d: np.ndarray, delta: float) -> float:
    """The exact two-sided sign-flip p-value of "symmetric about delta", over all 2**n patterns."""
    x = d - delta
    signs = np.array(list(itertools.product((-1, 1), repeat=x.size)))
    return float(np.mean(np.abs(signs @ x) >= abs(x.sum()) - 1e-9))


def test_sign_flip_exact_p_value_by_hand():
    # five +1 and one -1 (and two zeros, which carry no sign): T = 4; of the 64 patterns of the six
    # non-zero differences |T*| >= 4 when 0, 1, 5 or 6 signs are +: (1 + 6 + 6 + 1) / 64
    t = cmp.sign_flip_test([1, 1, 1, 0, 0, -1, 1, 1])
    assert (t.p, t.method, t.n_nonzero) == (14 / 64, "exact", 6)
    assert t.n_resamples == 3 * 6 * 2  # distinct patterns: 0..5 of the +1s, 0..2 zeros, 0..1 -1s


@pytest.mark.parametrize("seed", range(6))
def test_the_interval_is_the_set_the_test_does_not_reject(seed):
    rng = np.random.default_rng(seed)
    d = rng.choice([-1.0, -0.5, 0.0, 0.5, 1.0], p=[0.1, 0.1, 0.4, 0.2, 0.2], size=rng.integers(6, 12))
    t = cmp.sign_flip_test(d)
    assert t.method == "exact" and t.p == pytest.approx(_p_by_enumeration(d, 0.0), abs=1e-12)
    for delta in np.linspace(-1, 1, 201):
        if min(abs(delta - t.low), abs(delta - t.high)) < 1e-6:
            continue  # the ends themselves: a matter of ties
        inside = t.low <= delta <= t.high
        assert inside == (_p_by_enumeration(d, delta) >= 0.05), (d.tolist(), delta, t)


def test_too_few_items_to_reject_anything_give_the_whole_range():
    t = cmp.sign_flip_test([1.0, 1.0, 1.0, 1.0, 1.0])  # 2 of 32 patterns as extreme: p = 0.0625
    assert (t.p, t.low, t.high) == (0.0625, -1.0, 1.0)
    t = cmp.sign_flip_test([1.0] * 6)  # p = 2 / 64 < 0.05: only δ = 1 is not rejected
    assert t.p == pytest.approx(1 / 32) and t.low == pytest.approx(1.0) and t.high == 1.0


def test_sign_flip_degenerate_cases():
    assert cmp.sign_flip_test([0, 0, 0]).p == 1.0
    empty = cmp.sign_flip_test([])
    assert empty.p == 1.0 and math.isnan(empty.low) and empty.as_dict()["low"] is None
    one = cmp.sign_flip_test([0.5])
    assert (one.p, one.low, one.high) == (1.0, -1.0, 1.0)
    agree = cmp.sign_flip_test(np.zeros(40))  # 40 items, every one the same in both runs
    assert (
        agree.p == 1.0
        and agree.low == pytest.approx(0.0, abs=1e-6)
        and agree.high == pytest.approx(0.0, abs=1e-6)
    )
    with pytest.raises(ValueError, match="within bounds"):
        cmp.sign_flip_test([1.5, 0.0])
    with pytest.raises(ValueError, match="low <= 0 <= high"):
        cmp.sign_flip_test([0.5], bounds=(0.2, 1.0))


def test_sign_flip_monte_carlo_above_the_exact_limit_is_seeded_and_close_to_the_binomial_test():
    d = np.r_[np.ones(20), -np.ones(5)]  # 21 · 6 = 126 distinct patterns: exact
    t = cmp.sign_flip_test(d)
    assert t.method == "exact" and t.p == pytest.approx(stats.binomtest(20, 25, 0.5).pvalue, abs=1e-12)
    t1, t2 = cmp.sign_flip_test(d, seed=3, exact_max=100), cmp.sign_flip_test(d, seed=3, exact_max=100)
    assert t1 == t2 and t1.method == "monte-carlo" and t1.n_resamples == 10_000
    # ±1 differences: the sign-flip test is the two-sided sign test, binomial(25, 1/2) >= 20 or <= 5
    exact = stats.binomtest(20, 25, 0.5).pvalue
    assert exact == pytest.approx(0.004077, abs=1e-6)
    assert abs(t1.p - exact) < 0.0025
    assert t1.p > 0  # (1 + hits) / (1 + draws), never zero
    # no random pattern reaches |T| = 30 (chance 2**-29 each): (1 + 0) / (1 + 999)
    assert cmp.sign_flip_test(np.r_[np.ones(30)], n_resamples=999, exact_max=1).p == pytest.approx(1 / 1000)
    assert cmp.p_text(1 / 1000, "monte-carlo", 999) == "≤ 0.0010"
    assert cmp.p_text(0.0123, "monte-carlo", 999) == "0.0123" and cmp.p_text(1.2e-5, "exact", 1) == "1.2e-05"


def test_sign_flip_equals_scipy_permutation_test():
    rng = np.random.default_rng(4)
    d = np.round(rng.normal(0.1, 0.3, 14), 2)  # graded-like differences, 14 non-zero: exact
    ours = cmp.sign_flip_test(d)
    ref_p = stats.permutation_test(
        (d,), np.sum, permutation_type="samples", n_resamples=np.inf, alternative="two-sided"
    ).pvalue
    assert ours.method == "exact" and ours.p == pytest.approx(ref_p, abs=1e-12)
    big = np.clip(np.round(rng.normal(0.05, 0.3, 200), 2), -1, 1)  # Monte Carlo: agree within their noise
    ours = cmp.sign_flip_test(big, n_resamples=20_000)
    ref_p = stats.permutation_test(
        (big,), np.sum, permutation_type="samples", n_resamples=20_000, alternative="two-sided", rng=1
    ).pvalue
    assert ours.method == "monte-carlo" and abs(ours.p - ref_p) < 4 * math.sqrt(ref_p / 20_000) + 1e-3


def test_sign_flip_exact_matches_binomial_sign_test_at_the_limit():
    d = np.r_[np.ones(13), -np.ones(3)]  # 16 items: exact however many distinct values
    t = cmp.sign_flip_test(d)
    assert t.method == "exact" and t.n_resamples == 14 * 4
    assert t.p == pytest.approx(stats.binomtest(13, 16, 0.5).pvalue, abs=1e-12)


# ----------------------------------------------------------------------------- compare_paired


def test_compare_paired_overall_and_per_domain():
    a, b = [], []
    for i in range(4):
        a.append(scored_record(_sample(i, "okvqa"), *PASS))
        b.append(scored_record(_sample(i, "okvqa"), *(FAIL if i < 2 else PASS)))
        a.append(scored_record(_sample(i, "3dsr"), *PASS))
        b.append(scored_record(_sample(i, "3dsr"), *PASS))
    c = cmp.compare_paired(cmp.pair_records(a, b), n_resamples=500)
    assert c.n_paired == 8
    assert c.difference.estimate == pytest.approx(2 * 0.5 / 8)
    assert c.per_domain["okvqa"].difference.estimate == pytest.approx(0.25)
    assert c.per_domain["3dsr"].difference.estimate == 0.0 and c.per_domain["3dsr"].test.p == 1.0
    assert c.per_domain["okvqa"].test.p == pytest.approx(0.5)  # two +0.5: 2 of 4 patterns reach |T| = 1
    d = c.as_dict()
    assert set(d) >= {"difference", "low", "high", "p", "n_paired", "per_domain"}
    assert d["per_domain"]["okvqa"]["n_paired"] == 4


def _paired(a: np.ndarray, b: np.ndarray, domains: list[str]) -> cmp.Paired:
    ids = tuple(f"i{k:04d}" for k in range(a.size))
    return cmp.Paired(ids, tuple(domains), a, b, {"a": {}, "b": {}})


def test_the_ci_and_the_p_value_never_disagree():
    """Issue 44: in 10 of 40 replications the bootstrap CI excluded 0 while the sign-flip p was
    >= 0.05. Now both come from one test: over 300 seeded comparisons (exact and Monte Carlo, binary
    and graded, 2 to 300 items, near the 0.05 boundary and far from it), overall and per domain,
    the CI excludes 0 exactly when p < 0.05."""
    rng = np.random.default_rng(44)
    near = 0
    for case in range(300):
        n = int(rng.choice([2, 5, 9, 16, 17, 30, 33, 60, 120, 300]))
        grid = 2 if case % 2 else 8  # CCS_binary steps of 1/2, CCS_graded of 1/8
        shift = rng.uniform(-0.3, 0.3)
        a = np.clip(np.round((rng.random(n) * 0.6 + 0.2 + shift) * grid) / grid, 0, 1)
        b = np.where(rng.random(n) < rng.uniform(0.3, 0.9), a, np.round(rng.random(n) * grid) / grid)
        domains = ["x" if k % 3 else "y" for k in range(n)]
        c = cmp.compare_paired(_paired(a, b, domains), n_resamples=2000, seed=case)
        for part in (c, *c.per_domain.values()):
            excludes = part.difference.low > 0 or part.difference.high < 0
            assert excludes == (part.test.p < 0.05), (case, part.difference, part.test)
            near += 0.02 < part.test.p < 0.1
    assert near >= 20  # the boundary itself was exercised


# ----------------------------------------------------------------------------- Holm


def test_holm_by_hand():
    # sorted 0.01, 0.03, 0.04 -> 3*0.01, max(0.03, 2*0.03), max(0.06, 1*0.04)
    assert cmp.holm([0.01, 0.04, 0.03]).tolist() == pytest.approx([0.03, 0.06, 0.06])
    assert cmp.holm([0.5, 0.9]).tolist() == pytest.approx([1.0, 1.0])
    assert cmp.holm([]).size == 0
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        cmp.holm([0.2, 1.5])


# ----------------------------------------------------------------------------- ranks


def test_rank_intervals_of_a_dominating_entry_and_of_exact_ties():
    rng = np.random.default_rng(0)
    x = rng.random(40)
    scores = np.c_[x, x + 1.0, x]  # entry 1 beats the others on every item; 0 and 2 are equal
    r = cmp.rank_intervals(scores, n_resamples=500)
    assert r.rank.tolist() == [2, 1, 2]  # ties share the better rank
    assert r.low.tolist() == [2, 1, 2] and r.high.tolist() == [2, 1, 2]


def test_rank_intervals_draw_the_bootstrap_indices_of_scoring_statistics():
    scores = np.array([[1, 0], [0, 1], [1, 1], [0, 0], [1, 0]], dtype=float)
    r = cmp.rank_intervals(scores, n_resamples=20, seed=5, confidence=0.5)
    idx = np.random.default_rng(5).integers(0, 5, (20, 5))  # the same draws as bootstrap_ci
    means = scores[idx].mean(axis=1)
    ranks = np.stack([1 + (means[:, 1] > means[:, 0]), 1 + (means[:, 0] > means[:, 1])], axis=1)
    assert r.low.tolist() == np.quantile(ranks, 0.25, axis=0, method="lower").tolist()
    assert r.high.tolist() == np.quantile(ranks, 0.75, axis=0, method="higher").tolist()
    assert r.rank.tolist() == [1, 2]  # 3/5 against 2/5


def test_rank_intervals_validate_shapes_first():
    with pytest.raises(ValueError, match="two-dimensional"):
        cmp.rank_intervals([1.0, 2.0])
    with pytest.raises(ValueError, match="at least one column"):
        cmp.rank_intervals(np.zeros((3, 0)))
    empty = cmp.rank_intervals(np.zeros((0, 3)))
    assert empty.low.tolist() == [1, 1, 1] and empty.high.tolist() == [3, 3, 3]


def test_tied_groups_are_transitive_overlaps():
    assert cmp.tied_groups([1, 2, 3, 5], [1, 3, 4, 5]) == [[0], [1, 2], [3]]
    assert cmp.tied_groups([1, 2, 3], [2, 3, 4]) == [[0, 1, 2]]  # 0 and 2 chained by 1
    assert cmp.tied_groups([3, 1, 1], [3, 2, 2]) == [[1, 2], [0]]
    with pytest.raises(ValueError, match="low <= high"):
        cmp.tied_groups([2], [1])


# ----------------------------------------------------------------------------- power


NESTED = cmp.Differences(np.array([0.0, 0.5]), np.array([0.8, 0.2]))
"""Runs that differ on a fifth of the items, always the same way (mean 0.1): the sign-flip test is
discrete there (it needs 6 same-signed differences to reject at 0.05)."""


def _realised_power(dist: cmp.Differences, n: int, sims: int, seed: int) -> float:
    """Share of simulated comparisons of n items that ``edct compare``'s test (``sign_flip_test``
    with compare's defaults) calls significant: items drawn in random order."""
    rng = np.random.default_rng(seed)
    draws = rng.choice(dist.values, p=dist.weights, size=(sims, n))
    return float(np.mean([cmp.sign_flip_test(d).p < 0.05 for d in draws]))


def test_the_planned_size_delivers_the_promised_power_with_compares_own_test():
    size = cmp.paired_sample_size(NESTED, 0.1)
    assert size.power >= 0.8
    # the normal-theory (paired t) plan, 34 items here, delivers ~72 %: 34 < the plan
    normal = math.ceil(((1.959964 + 0.841621) * NESTED.sd / 0.1) ** 2)
    assert normal < size.n
    sims = 2000
    realised = _realised_power(NESTED, size.n, sims, seed=1)
    assert realised >= 0.8 - 2 * math.sqrt(0.8 * 0.2 / sims), (size, realised)
    assert _realised_power(NESTED, normal, sims, seed=2) < 0.77


def test_sign_flip_power_is_the_tests_rejection_rate_in_the_monte_carlo_regime():
    graded = cmp.Differences(np.arange(-8, 9) / 8, stats.binom.pmf(np.arange(17), 16, 0.52))
    assert cmp.sign_flip_test(np.round(np.linspace(-1, 1, 30) * 8) / 8).method == "monte-carlo"
    simulated = cmp.sign_flip_power(graded, 30, sims=1000)
    realised = _realised_power(graded, 30, sims=300, seed=3)
    assert abs(simulated - realised) < 4 * math.sqrt(0.25 / 300)


def test_differences_tilt_keeps_the_values_and_reaches_the_mean():
    pilot = cmp.Differences.from_sample([0.5] * 9 + [0.0] * 18 + [-0.5] * 3)
    assert pilot.values.tolist() == [-0.5, 0.0, 0.5] and pilot.mean == pytest.approx(0.1)
    tilted = pilot.tilted(0.2)
    assert tilted.values.tolist() == pilot.values.tolist() and tilted.mean == pytest.approx(0.2)
    assert pilot.tilted(0.1).weights == pytest.approx(pilot.weights)  # already there: unchanged
    assert cmp.Differences.from_sample([0.0, -1.0, -1.0]).tilted(0.5).mean == pytest.approx(-0.5)
    with pytest.raises(ValueError, match="no mix"):
        pilot.tilted(0.5)  # the largest difference is 0.5: no mix of them has mean 0.5
    assert cmp.DEFAULT_DIFFERENCES.sd == pytest.approx(0.5)


def test_paired_sample_size_and_detectable_difference_invert_each_other():
    size = cmp.paired_sample_size(cmp.DEFAULT_DIFFERENCES, 0.1)
    # many items: a little above the normal-theory size at the SD of the reweighted differences
    # (200; the permutation test's spread is that of Σ d², mean included, and its sums are discrete)
    tilted = cmp.DEFAULT_DIFFERENCES.tilted(0.1)
    normal = ((1.959964 + 0.841621) * tilted.sd / 0.1) ** 2
    assert normal <= size.n <= normal * 1.15 and size.power >= 0.8
    assert cmp.sign_flip_power(tilted, size.n, sims=4000, seed=9) >= 0.8 - 2 * math.sqrt(0.16 / 4000)
    detectable = cmp.detectable_difference(cmp.DEFAULT_DIFFERENCES, size.n)
    assert detectable == pytest.approx(0.1, abs=0.01)
    assert cmp.detectable_difference(NESTED, 5) is None  # 5 items: the test cannot reject
    with pytest.raises(ValueError, match="delta must be > 0"):
        cmp.paired_sample_size(NESTED, 0.0)
    with pytest.raises(ValueError, match="n must be >= 2"):
        cmp.detectable_difference(NESTED, 1)
