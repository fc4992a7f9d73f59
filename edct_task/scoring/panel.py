"""A judge panel: several judges (and optional self-consistency samples per judge) → one score.

Pure functions on already-parsed scores; ``None`` is an unscored judgement (unparseable reply or
failed call) and never counts as 0. The engine calls every judge of the panel, keeps every
judge's score in the step record, and uses these functions for the panel's score and for the
judge–judge agreement in the results.

- binary scores (AC, EF ∈ {0, 1}): majority vote of the judges that scored; a tie is unscored by
  default (``tie="unscored"``), or broken by the first judge that scored (``tie="first"``);
- graded scores (1..5): mean of the judges that scored;
- self-consistency: a judge's samples are first reduced the same way (majority / mean), so every
  judge has one vote;
- agreement: for each pair of judges, percent agreement and Cohen's κ over the items both scored
  (optionally quadratic-weighted κ for graded scores; scikit-learn computes it, the degenerate
  cases are decided in :func:`cohen_kappa`), plus their means over pairs.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any, Literal

Tie = Literal["unscored", "first"]


def majority(votes: Sequence[float | None], *, tie: Tie = "unscored") -> int | None:
    """The majority of the scored binary votes; ``None`` when nobody scored (or a tie, by default)."""
    scored = [int(v) for v in votes if v is not None]
    if any(v not in (0, 1) for v in scored):
        raise ValueError(f"binary votes must be 0, 1 or None, got {list(votes)!r}")
    if not scored:
        return None
    ones = sum(scored)
    zeros = len(scored) - ones
    if ones != zeros:
        return int(ones > zeros)
    return scored[0] if tie == "first" else None


def mean_score(scores: Sequence[float | None]) -> float | None:
    """The mean of the scored values; ``None`` when nobody scored."""
    scored = [float(s) for s in scores if s is not None]
    return sum(scored) / len(scored) if scored else None


def judge_vote(
    samples: Sequence[float | None], kind: Literal["binary", "graded"], *, tie: Tie = "unscored"
) -> float | None:
    """One judge's vote from its self-consistency samples (a single sample is returned as is)."""
    if kind == "binary":
        return majority(samples, tie=tie)
    return mean_score(samples)


def panel_score(
    per_judge: Mapping[str, Sequence[float | None]],
    kind: Literal["binary", "graded"],
    *,
    tie: Tie = "unscored",
) -> dict[str, Any]:
    """The panel's score for one item, and every judge's vote (kept for the record).

    ``per_judge`` maps a judge name to its samples for this item (one sample without
    self-consistency). Judges are taken in the mapping's order (``tie="first"`` uses it).
    """
    votes = {name: judge_vote(samples, kind, tie=tie) for name, samples in per_judge.items()}
    values = list(votes.values())
    if kind == "binary":
        score: float | None = majority([None if v is None else int(v) for v in values], tie=tie)
    else:
        score = mean_score(values)
    scored = [v for v in values if v is not None]
    return {
        "score": score,
        "votes": votes,
        "n_scored": len(scored),
        "unanimous": bool(scored) and len(set(scored)) == 1,
    }


def percent_agreement(a: Sequence[Any], b: Sequence[Any]) -> float | None:
    """Share of items on which two raters agree, over the items both scored."""
    pairs = _pairs(a, b)
    return sum(x == y for x, y in pairs) / len(pairs) if pairs else None


def cohen_kappa(
    a: Sequence[Any],
    b: Sequence[Any],
    *,
    weights: Literal["quadratic"] | None = None,
    labels: Sequence[Any] | None = None,
) -> float | None:
    """Cohen's κ of two raters over the items both scored (``sklearn.metrics.cohen_kappa_score``).

    ``labels`` fixes the categories and their order (default: the sorted labels either rater
    used); with ``weights="quadratic"`` the disagreement between the i-th and j-th label costs
    ``(i - j)²`` (for graded 1–5 scores). The cases scikit-learn leaves undefined or handles
    silently are decided here:

    - no item scored by both raters: ``None`` (nothing to measure, not 0);
    - both raters gave one and the same label to every item: chance agreement is 1 and κ is 0/0
      (scikit-learn returns NaN with an ``UndefinedMetricWarning``); 1.0 is returned, since the
      raters agree perfectly (the convention of statsmodels' ``cohens_kappa``);
    - a vote that is not one of ``labels``: ``ValueError`` (scikit-learn would drop the item).

    Raises
    ------
    ValueError
        If the raters scored different numbers of items, or a vote is not among ``labels``.
    """
    pairs = _pairs(a, b)
    if not pairs:
        return None
    first = [x for x, _ in pairs]
    second = [y for _, y in pairs]
    used = set(first) | set(second)
    if labels is None:
        cats = sorted(used)
    else:
        cats = list(labels)
        unknown = used.difference(cats)
        if unknown:
            raise ValueError(f"votes {sorted(unknown, key=repr)!r} are not among the labels {cats!r}")
    if len(used) == 1:
        return 1.0
    from sklearn.metrics import cohen_kappa_score  # ~1 s import: at first use, not at start-up

    return float(cohen_kappa_score(first, second, labels=cats, weights=weights))


def agreement(
    per_judge: Mapping[str, Sequence[Any]],
    *,
    kind: Literal["binary", "graded"] = "binary",
    labels: Sequence[Any] | None = None,
) -> dict[str, Any]:
    """Judge–judge agreement over items: per pair and the mean over pairs.

    ``per_judge`` maps a judge name to its votes, item by item (same order for every judge; None
    = unscored). Graded scores use quadratic-weighted κ over the labels 1..5 unless ``labels``
    says otherwise.
    """
    names = list(per_judge)
    lengths = {len(v) for v in per_judge.values()}
    if len(lengths) > 1:
        raise ValueError("every judge needs one vote per item (None for unscored)")
    weights: Literal["quadratic"] | None = "quadratic" if kind == "graded" else None
    if labels is None:
        labels = (1, 2, 3, 4, 5) if kind == "graded" else (0, 1)
    pairs: list[dict[str, Any]] = []
    for x, y in itertools.combinations(names, 2):
        a, b = per_judge[x], per_judge[y]
        pairs.append(
            {
                "judges": [x, y],
                "n": len(_pairs(a, b)),
                "percent": percent_agreement(a, b),
                "kappa": cohen_kappa(a, b, weights=weights, labels=labels),
            }
        )
    return {
        "kind": kind,
        "kappa_weights": weights,
        "pairs": pairs,
        "mean_percent": mean_score([p["percent"] for p in pairs]),
        "mean_kappa": mean_score([p["kappa"] for p in pairs]),
    }


def _pairs(a: Sequence[Any], b: Sequence[Any]) -> list[tuple[Any, Any]]:
    if len(a) != len(b):
        raise ValueError(f"raters scored different numbers of items ({len(a)} vs {len(b)})")
    return [(x, y) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
