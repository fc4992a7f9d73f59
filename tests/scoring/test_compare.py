"""Paired comparisons (scoring.compare) pinned to hand-computed values and reference libraries."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from support.edct_runs import excluded_record, ref, scored_record

from edct_task.core.records import SampleInput
from edct_task.scoring import compare as cmp
from edct_task.scoring.statistics import bootstrap_ci


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


# ----------------------------------------------------------------------------- difference


def test_paired_difference_is_the_bootstrap_of_the_per_item_differences_draw_for_draw():
    a = np.array([1, 1, 0, 1, 1, 0, 1, 1, 1, 0], dtype=float)
    b = np.array([0, 1, 0, 0, 1, 0, 1, 0, 1, 0], dtype=float)
    iv = cmp.paired_difference(a, b, n_resamples=2000, seed=7)
    assert iv.estimate == pytest.approx(0.3)  # (7 - 4) / 10
    ref_iv = bootstrap_ci(a - b, n_resamples=2000, seed=7)
    assert (iv.low, iv.high, iv.n) == (ref_iv.low, ref_iv.high, 10)


def test_paired_difference_validates_shapes_first():
    with pytest.raises(ValueError, match="shapes"):
        cmp.paired_difference([1.0, 0.0], [1.0])
    with pytest.raises(ValueError, match="finite"):
        cmp.paired_difference([1.0, math.nan], [1.0, 0.0])
    with pytest.raises(ValueError, match="one-dimensional"):
        cmp.paired_difference([[1.0]], [[1.0]])


# ----------------------------------------------------------------------------- sign-flip test


def test_sign_flip_exact_p_value_by_hand():
    # five +1 and one -1 (and two zeros, which carry no sign): T = 4 of 64 patterns;
    # |T| >= 4 when 0, 1, 5 or 6 signs are +: (1 + 6 + 6 + 1) / 64
    t = cmp.sign_flip_test([1, 1, 1, 0, 0, -1, 1, 1])
    assert (t.p, t.method, t.n_nonzero, t.n_resamples) == (14 / 64, "exact", 6, 64)


def test_sign_flip_degenerate_cases():
    assert cmp.sign_flip_test([0, 0, 0]).p == 1.0
    assert cmp.sign_flip_test([]).p == 1.0
    assert cmp.sign_flip_test([0.5]).p == 1.0


def test_sign_flip_monte_carlo_above_the_exact_limit_is_seeded_and_close_to_the_binomial_test():
    d = np.r_[np.ones(20), -np.ones(5)]  # 25 non-zero: Monte Carlo
    t1, t2 = cmp.sign_flip_test(d, seed=3), cmp.sign_flip_test(d, seed=3)
    assert t1 == t2 and t1.method == "monte-carlo" and t1.n_resamples == 10_000
    # ±1 differences: the sign-flip test is the two-sided sign test, binomial(25, 1/2) >= 20 or <= 5
    exact = stats.binomtest(20, 25, 0.5).pvalue
    assert exact == pytest.approx(0.004077, abs=1e-6)
    assert abs(t1.p - exact) < 0.0025
    assert t1.p > 0  # (1 + hits) / (1 + draws), never zero
    # no random pattern reaches |T| = 30 (chance 2**-29 each): (1 + 0) / (1 + 999)
    assert cmp.sign_flip_test(np.r_[np.ones(30)], n_resamples=999).p == pytest.approx(1 / 1000)
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
    big = np.round(rng.normal(0.05, 0.3, 200), 2)  # Monte Carlo: agree within their noise
    ours = cmp.sign_flip_test(big, n_resamples=20_000)
    ref_p = stats.permutation_test(
        (big,), np.sum, permutation_type="samples", n_resamples=20_000, alternative="two-sided", rng=1
    ).pvalue
    assert ours.method == "monte-carlo" and abs(ours.p - ref_p) < 4 * math.sqrt(ref_p / 20_000) + 1e-3


def test_sign_flip_exact_matches_binomial_sign_test_at_the_limit():
    d = np.r_[np.ones(13), -np.ones(3)]  # 16 non-zero: exact
    t = cmp.sign_flip_test(d)
    assert t.method == "exact" and t.n_resamples == 2**16
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


def _t_power(effect: float, n: int, alpha: float = 0.05) -> float:
    df, nc = n - 1, effect * math.sqrt(n)
    crit = stats.t.ppf(1 - alpha / 2, df)
    return float(stats.nct.sf(crit, df, nc) + stats.nct.cdf(-crit, df, nc))


def test_paired_sample_size_is_the_smallest_n_with_80_percent_power():
    n = cmp.paired_sample_size(0.1, 0.3)
    # normal approximation (1.96 + 0.8416)**2 * 0.09 / 0.01 = 70.6; the t-test needs a few more
    assert n == 73
    assert _t_power(0.1 / 0.3, 73) >= 0.8 > _t_power(0.1 / 0.3, 72)
    assert cmp.paired_sample_size(-0.1, 0.3) == 73


def test_detectable_difference_inverts_the_sample_size():
    d = cmp.detectable_difference(300, 0.3)
    assert (2.8016 * 0.3 / math.sqrt(300)) < d < 0.0490  # a little above the normal approximation
    assert _t_power(d / 0.3, 300) == pytest.approx(0.8, abs=1e-6)
    with pytest.raises(ValueError, match="sd must be > 0"):
        cmp.detectable_difference(300, 0.0)
    with pytest.raises(ValueError, match="n must be >= 2"):
        cmp.detectable_difference(1, 0.3)
    with pytest.raises(ValueError, match=r"\|delta\| must be > 0"):
        cmp.paired_sample_size(0.0, 0.3)
