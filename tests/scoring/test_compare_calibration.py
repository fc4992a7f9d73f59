"""benchmarks/compare_calibration.py in small: the per-item CCS model holds on real calibration runs,
and the simulated checks built on it give the numbers their definitions say."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

import compare_calibration as cc

pytestmark = pytest.mark.slow  # four real calibration runs (about 30 s on a busy 2-core machine)


@pytest.fixture(scope="module")
def pool(tmp_path_factory) -> cc.Pool:
    root = tmp_path_factory.mktemp("runs")
    folder = cc.make_runs(0, 24, root, ("mixed:0", "mixed:1", "mixed:0.5", "mixed:0.6"))
    return cc.read_pool([folder])


def test_the_per_item_model_is_the_real_pipeline(pool: cc.Pool) -> None:
    assert pool.n == 24 and pool.dropped == 0
    # the real mixed:0.5 and mixed:0.6 runs score every item as the model composes it from the
    # mixed:1 (faithful) and mixed:0 (prior) runs and the target's hash
    assert [(c["p"], c["items"], c["match"]) for c in pool.confirmed] == [(0.5, 24, 24), (0.6, 24, 24)]
    assert (
        pool.faithful["ccs_binary"].tolist() == [1.0] * 24 and pool.prior["ccs_binary"].tolist() == [0.0] * 24
    )
    assert pool.u.min() >= 0.0 and pool.u.max() < 1.0


def test_truth_and_paired_sd_by_hand(pool: cc.Pool) -> None:
    # binary: c_F - c_P = 1 on every item, so A − B = 1[u < p] - 1[v < q]
    assert pool.truth("ccs_binary", 0.5, 0.6) == pytest.approx(-0.1)
    assert pool.paired_sd("ccs_binary", 0.5, 0.6, nested=True) == pytest.approx(np.sqrt(0.1 - 0.01))
    assert pool.paired_sd("ccs_binary", 0.5, 0.6, nested=False) == pytest.approx(np.sqrt(0.5 - 0.01))
    rng = np.random.default_rng(0)
    a, b = cc.draw(pool, rng, 200_000, "ccs_binary", 0.5, 0.6, nested=True)
    assert set(np.unique(a - b)) <= {-1.0, 0.0} and (a - b).mean() == pytest.approx(-0.1, abs=0.003)
    a, b = cc.draw(pool, rng, 200_000, "ccs_binary", 0.5, 0.6, nested=False)
    assert (a - b).std() == pytest.approx(0.7, abs=0.003)


def test_small_simulation_is_seeded_and_sane(pool: cc.Pool) -> None:
    kw = {"sims": 60, "n": 300, "metric": "ccs_binary", "p": 0.5, "q": 0.6, "seed": 1}
    first = cc.coverage(pool, nested=True, **kw)
    assert first == cc.coverage(pool, nested=True, **kw)  # the same seed, the same numbers
    assert first["truth"] == pytest.approx(-0.1) and first["coverage"] >= 0.85
    null = cc.rejection(pool, nested=False, **{**kw, "q": 0.5})
    assert null["truth"] == 0.0 and null["rejection_rate"] <= 0.15
    same = cc.rejection(pool, nested=True, **{**kw, "q": 0.5})  # two mixed:0.5 reference runs
    assert same["rejection_rate"] == 0.0 and same["tests"] == {"exact": 60}  # identical: no difference
    strong = cc.rejection(pool, nested=True, **kw)  # 300 items detect 0.1 nearly always
    assert strong["rejection_rate"] >= 0.95
