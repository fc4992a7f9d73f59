"""Judge-panel aggregation and agreement, pinned to hand-computed reference values."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from edct_task.scoring.panel import (
    agreement,
    cohen_kappa,
    majority,
    mean_score,
    panel_score,
    percent_agreement,
)

A = [1, 1, 0, 0, 1, 0, 1, 1, 0, 1]
B = [1, 0, 0, 0, 1, 1, 1, 1, 0, 1]


def test_majority_ignores_unscored_and_reports_ties() -> None:
    assert majority([1, 1, 0]) == 1
    assert majority([0, None, 0, 1]) == 0
    assert majority([None, None]) is None
    assert majority([1, 0]) is None
    assert majority([None, 0, 1], tie="first") == 0
    with pytest.raises(ValueError, match="0, 1 or None"):
        majority([2])


def test_graded_mean_over_scoring_judges() -> None:
    assert mean_score([5, None, 3]) == 4.0
    assert mean_score([None]) is None


def test_panel_keeps_every_vote_and_reduces_self_consistency_samples() -> None:
    out = panel_score({"qwen": [1, 1, 0], "gpt": [0], "glm": [None, 1]}, "binary")
    assert out == {"score": 1, "votes": {"qwen": 1, "gpt": 0, "glm": 1}, "n_scored": 3, "unanimous": False}
    graded = panel_score({"qwen": [4, 5], "gpt": [3], "glm": [None]}, "graded")
    assert (
        graded["score"] == pytest.approx(3.75) and graded["votes"]["glm"] is None and graded["n_scored"] == 2
    )


def test_cohens_kappa_reference_value() -> None:
    # p_o = 0.8; both raters say 1 six times in ten: p_e = 0.6·0.6 + 0.4·0.4 = 0.52; κ = 0.28 / 0.48
    assert percent_agreement(A, B) == pytest.approx(0.8)
    assert cohen_kappa(A, B) == pytest.approx(0.28 / 0.48)
    assert cohen_kappa(A, A) == 1.0
    assert cohen_kappa([1, 1], [1, 1]) == 1.0
    assert cohen_kappa([None], [1]) is None


def test_kappa_matches_statsmodels() -> None:
    inter_rater = pytest.importorskip("statsmodels.stats.inter_rater")

    a = [1, 2, 3, 3, 4, 5, 5, 2, 1, 4, 3, 5]
    b = [1, 3, 3, 2, 4, 5, 4, 2, 2, 4, 3, 5]
    table = np.zeros((5, 5))
    for x, y in zip(a, b, strict=True):
        table[x - 1, y - 1] += 1
    assert cohen_kappa(a, b, labels=range(1, 6)) == pytest.approx(inter_rater.cohens_kappa(table).kappa)
    quad = inter_rater.cohens_kappa(table, wt="quadratic").kappa
    assert cohen_kappa(a, b, weights="quadratic", labels=range(1, 6)) == pytest.approx(quad)


@pytest.mark.parametrize("weights", [None, "quadratic"])
def test_kappa_is_scikit_learns_on_random_raters(weights: str | None) -> None:
    rng = np.random.default_rng(3)
    a = rng.integers(1, 6, size=200).tolist()
    b = [x if rng.random() < 0.6 else int(rng.integers(1, 6)) for x in a]
    ours = cohen_kappa(a, b, weights=weights, labels=range(1, 6))  # type: ignore[arg-type]
    assert ours == pytest.approx(cohen_kappa_score(a, b, labels=[1, 2, 3, 4, 5], weights=weights), abs=1e-15)
    assert 0.3 < ours < 0.9  # a real, partial agreement


@pytest.mark.parametrize(
    ("a", "b", "labels", "expected"),
    [
        ([1, 1, 1], [1, 1, 1], (0, 1), 1.0),  # one shared label throughout: κ = 0/0, agreement perfect
        ([0, 0], [0, 0], None, 1.0),
        ([4, 4, None], [4, 4, 2], (1, 2, 3, 4, 5), 1.0),  # the unscored item is left out first
        ([1, 1, 1], [0, 0, 0], (0, 1), 0.0),  # each rater constant, never agreeing
        ([1, 1, 1, 1], [1, 0, 1, 1], (0, 1), 0.0),  # one constant rater: p_o = p_e
    ],
)
def test_kappa_degenerate_cases_are_decided_without_warnings(
    a: list, b: list, labels: tuple | None, expected: float
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # scikit-learn's UndefinedMetricWarning would fail here
        assert cohen_kappa(a, b, labels=labels) == expected
        assert cohen_kappa(a, b, labels=labels, weights="quadratic") == expected


def test_kappa_refuses_votes_outside_the_labels() -> None:
    with pytest.raises(ValueError, match=r"votes \[7\] are not among the labels \[1, 2, 3\]"):
        cohen_kappa([1, 2, 3], [1, 2, 7], labels=(1, 2, 3))
    with pytest.raises(ValueError, match="different numbers of items"):
        cohen_kappa([1, 0], [1])


def test_agreement_report_over_pairs_skips_unscored_items() -> None:
    report = agreement({"j1": [*A, None], "j2": [*B, 1], "j3": [*A, 0]})
    pairs = {tuple(p["judges"]): p for p in report["pairs"]}
    assert pairs[("j1", "j2")]["n"] == 10 and pairs[("j1", "j2")]["kappa"] == pytest.approx(0.28 / 0.48)
    assert pairs[("j1", "j3")]["percent"] == 1.0 and pairs[("j2", "j3")]["n"] == 11
    assert report["mean_percent"] == pytest.approx((0.8 + 1.0 + pairs[("j2", "j3")]["percent"]) / 3)
    with pytest.raises(ValueError, match="one vote per item"):
        agreement({"j1": [1], "j2": [1, 0]})


def test_role_usage_collects_backends_that_report_it() -> None:
    from model_adapters.usage import role_usage

    class Paid:
        def __init__(self, cost):
            self.cost = cost

        def usage(self):
            return {"requests": 1, "cost_usd": self.cost}

    judge = Paid(0.5)
    out = role_usage(
        {
            "target": Paid(None),
            "extractor": Paid(0.25),
            "judge": judge,
            "edit_parser": judge,
            "detector": object(),
            "editor": None,
        }
    )
    assert set(out["roles"]) == {"target", "extractor", "judge"} and out["cost_usd"] == 0.75
    assert role_usage({"target": object()}) == {"roles": {}, "cost_usd": None}
