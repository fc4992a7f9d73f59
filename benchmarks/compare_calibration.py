"""Paired comparisons validated on the calibration world: CI coverage, the test's size, its power.

    python benchmarks/compare_calibration.py [--runs DIR ...] [--seeds 0 1] [--samples 300]
                                             [--sims 1000] [--json FILE]

**What is real.** The calibration pipeline is run (or read, ``--runs``: folders holding the
``mixed_0`` and ``mixed_1`` runs of ``edct demo`` and any other ``mixed_<p>`` runs of the same
data seed) with the reference targets ``mixed:0`` (every scene ``prior``) and ``mixed:1`` (every
scene ``faithful``) over the calibration items. That gives, per item i, its CCS under each mode:
``c_F[i]`` and ``c_P[i]`` (binary and graded). ``ReferenceVLM.mode`` decides a ``mixed:p`` scene
by a hash ``u[i]`` in [0, 1) of the question and the perceived context (``u < p``: faithful),
computed here from each item's original image exactly as the target computes it. The per-item
model is then: a ``mixed:p`` run scores item i ``c_F[i]`` if ``u[i] < p`` else ``c_P[i]``. The
script *confirms* it on every other ``mixed:p`` run it finds (item by item, both metrics) and on
the real pair ``mixed:0.5`` vs ``mixed:0.6`` whose paired SD is the pilot of the power check.

**What is simulated.** A calibration data seed draws fresh items, whose hashes are uniform and
independent of their (c_F, c_P) (checked: Kolmogorov–Smirnov of the real u). So a simulated
dataset of n items draws n (c_F, c_P) pairs with replacement from the pooled real items and a
fresh ``u ~ U(0, 1)`` per item, and composes the two runs by the model above:

- ``nested p vs q``: the reference target itself (one hash per item, both runs): A's and B's
  modes differ only where ``p <= u < q``;
- ``independent p vs q``: two models with their own decisions (``u`` for A, an independent ``v``
  for B); this stands for two different models of faithfulness p and q. Two ``mixed:p`` reference
  runs are identical item by item (difference 0 everywhere, p = 1), so the test's size is measured
  on ``independent p vs p``, the non-degenerate null.

The true difference of either is ``(p - q) * mean(c_F - c_P)`` over the pool (the population the
items are drawn from). Every simulated pair is analysed with the tool's own test
(``scoring.compare.sign_flip_test``: its p-value and the CI that inverts it, 10,000 patterns,
seed 0 as ``edct compare`` uses). The planned size is ``edct estimate --detect``'s
(``paired_sample_size``) from the population distribution of the per-item differences (exact under
the model) and from the real pilot ``mixed:0.5`` vs ``mixed:0.6``; its realised power is the share
of simulated pairs of that size the test calls significant, next to the size the paired t-test
planned before issue 44 and its realised power.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from edct_task.calibration import ReferenceVLM, perceive, world
from edct_task.calibration.reference_vlm import _unit_hash  # the target's own hash of a scene
from edct_task.run.outputs import load_run
from edct_task.scoring.compare import (
    ALPHA,
    Differences,
    paired_sample_size,
    sign_flip_test,
)
from edct_task.scoring.metrics import GRADED, PRIMARY

METRICS = (PRIMARY.name, GRADED.name)
_FOLDER = re.compile(r"mixed_(\d+(?:\.\d+)?)")


@dataclass
class Pool:
    """Per-item outcomes of the real runs: c_F, c_P per metric, and the target's hash u."""

    u: NDArray[np.float64]
    faithful: dict[str, NDArray[np.float64]]
    prior: dict[str, NDArray[np.float64]]
    confirmed: list[dict[str, Any]]
    dropped: int

    @property
    def n(self) -> int:
        return int(self.u.size)

    def truth(self, metric: str, p: float, q: float) -> float:
        return (p - q) * float(np.mean(self.faithful[metric] - self.prior[metric]))

    def distribution(self, metric: str, p: float, q: float, nested: bool) -> Differences:
        """The population distribution of the per-item difference A − B under the model (exact):
        ``-gap_i`` w.p. ``(q - p) / N`` each (nested, p < q), or ``+gap_i`` w.p. ``p (1 - q) / N``
        and ``-gap_i`` w.p. ``q (1 - p) / N`` (independent); 0 otherwise."""
        gap = self.faithful[metric] - self.prior[metric]
        if nested:
            parts = [(-np.sign(q - p) * gap, np.full(gap.size, abs(q - p) / gap.size))]
        else:
            parts = [(gap, np.full(gap.size, p * (1 - q) / gap.size))]
            parts.append((-gap, np.full(gap.size, q * (1 - p) / gap.size)))
        values = np.concatenate([v for v, _ in parts] + [np.zeros(1)])
        weights = np.concatenate([w for _, w in parts] + [np.zeros(1)])
        weights[-1] = 1.0 - weights[:-1].sum()
        unique, index = np.unique(np.round(values, 12), return_inverse=True)
        summed = np.bincount(index.reshape(-1), weights=weights)
        keep = summed > 0
        return Differences(unique[keep], summed[keep] / summed[keep].sum())

    def paired_sd(self, metric: str, p: float, q: float, nested: bool) -> float:
        """The population SD of the per-item difference A − B under the model (exact).

        d = (c_F - c_P) (1[u < p] - 1[v < q]) with u = v (nested) or independent: E[d^2] is
        mean((c_F - c_P)^2) times |p - q| (nested) or p + q - 2pq (independent)."""
        gap = self.faithful[metric] - self.prior[metric]
        share = abs(p - q) if nested else p + q - 2 * p * q
        return float(np.sqrt(np.mean(gap**2) * share - self.truth(metric, p, q) ** 2))


def make_runs(seed: int, n: int, root: Path, behaviors: tuple[str, ...]) -> Path:
    """The real pipeline: the calibration benchmark once per behaviour, one shared stage cache."""
    from edct_task.config import calibration_config, config_from_dict
    from edct_task.run.runner import run

    folder = root / f"seed{seed}"
    for b in behaviors:
        base = calibration_config(b, n=n, output_dir=folder / b.replace(":", "_")).model_dump(mode="json")
        base["data"]["seed"] = seed
        cfg = config_from_dict({**base, "progress": False, "cache_dir": str(folder / "cache")})
        t = time.perf_counter()
        run(cfg)
        print(f"  seed {seed} {b}: {time.perf_counter() - t:.1f} s", file=sys.stderr, flush=True)
    return folder


def _scores(folder: Path) -> tuple[dict[str, Any], Any]:
    run = load_run(folder)
    out = {}
    for r in run.records:
        if r.status == "scored" and r.scores is not None:
            out[r.sample.id] = (r.scores.ccs_binary, r.scores.ccs_graded)
        else:
            out[r.sample.id] = None
    return out, run


def _hash(run: Any, record: Any) -> float:
    question = record.sample.question
    family = world.family_of_question(question)
    from PIL import Image

    with Image.open(run.image_path(record.sample.image)) as im:
        percept = perceive(np.asarray(im.convert("RGB")), family)
    u = _unit_hash(f"{question}|{percept.context}|{percept.signature}")
    for p in (0.25, 0.5, 0.75):  # the hash is the one the target decides by
        mode = ReferenceVLM(f"mixed:{p}").mode(question, percept)
        if mode != ("faithful" if u < p else "prior"):
            raise RuntimeError(f"{record.sample.id}: ReferenceVLM.mode does not decide by this hash")
    return u


def read_pool(folders: list[Path]) -> Pool:
    """Pool the items of every folder (``mixed_0`` + ``mixed_1``), and confirm the per-item model on
    each other ``mixed_<p>`` run found beside them."""
    us: list[float] = []
    faithful: dict[str, list[float]] = {m: [] for m in METRICS}
    prior: dict[str, list[float]] = {m: [] for m in METRICS}
    confirmed, dropped = [], 0
    for folder in folders:
        f_scores, f_run = _scores(folder / "mixed_1")
        p_scores, _ = _scores(folder / "mixed_0")
        items: dict[str, tuple[float, Any, Any]] = {}
        for record in f_run.records:
            sid = record.sample.id
            if f_scores.get(sid) is None or p_scores.get(sid) is None:
                dropped += 1
                continue
            u = _hash(f_run, record)
            items[sid] = (u, f_scores[sid], p_scores[sid])
        for _sid, (u, f, p) in sorted(items.items()):
            us.append(u)
            for k, m in enumerate(METRICS):
                faithful[m].append(float(f[k]))
                prior[m].append(float(p[k]))
        for other in sorted(folder.glob("mixed_*")):
            m = _FOLDER.fullmatch(other.name)
            if not m or other.name in ("mixed_0", "mixed_1"):
                continue
            p_mix = float(m.group(1))
            scores, _ = _scores(other)
            match = total = 0
            for sid, (u, f, p) in items.items():
                got = scores.get(sid)
                if got is None:
                    continue
                want = f if u < p_mix else p
                total += 1
                match += int(all(abs(float(g) - float(w)) < 1e-12 for g, w in zip(got, want, strict=True)))
            confirmed.append({"run": str(other), "p": p_mix, "items": total, "match": match})
    return Pool(
        np.asarray(us),
        {m: np.asarray(v) for m, v in faithful.items()},
        {m: np.asarray(v) for m, v in prior.items()},
        confirmed,
        dropped,
    )


def draw(pool: Pool, rng: np.random.Generator, n: int, metric: str, p: float, q: float, nested: bool):
    """One simulated pair of runs (A = mixed:p, B = mixed:q) over n fresh items."""
    idx = rng.integers(0, pool.n, n)
    cf, cp = pool.faithful[metric][idx], pool.prior[metric][idx]
    u = rng.random(n)
    v = u if nested else rng.random(n)
    return np.where(u < p, cf, cp), np.where(v < q, cf, cp)


def coverage(pool: Pool, *, sims: int, n: int, metric: str, p: float, q: float, nested: bool, seed: int):
    rng = np.random.default_rng(seed)
    truth = pool.truth(metric, p, q)
    hits, widths = 0, []
    for _ in range(sims):
        a, b = draw(pool, rng, n, metric, p, q, nested)
        iv = sign_flip_test(a - b)
        hits += int(iv.low <= truth <= iv.high)
        widths.append(iv.high - iv.low)
    return {"truth": truth, "coverage": hits / sims, "mean_width": float(np.mean(widths))}


def rejection(pool: Pool, *, sims: int, n: int, metric: str, p: float, q: float, nested: bool, seed: int):
    rng = np.random.default_rng(seed)
    rejected = 0
    methods: dict[str, int] = {}
    for _ in range(sims):
        a, b = draw(pool, rng, n, metric, p, q, nested)
        t = sign_flip_test(a - b)
        rejected += int(t.p < ALPHA)
        methods[t.method] = methods.get(t.method, 0) + 1
    return {"truth": pool.truth(metric, p, q), "rejection_rate": rejected / sims, "tests": methods}


def t_test_size(delta: float, sd: float) -> int:
    """The size ``edct estimate --detect`` planned before issue 44: the paired t-test's power
    (statsmodels ``TTestPower``) at effect size delta / sd, the smallest n reaching 80 %."""
    from statsmodels.stats.power import TTestPower

    effect, analysis = abs(delta) / sd, TTestPower()
    n = max(2, math.ceil(np.asarray(analysis.solve_power(effect_size=effect, alpha=ALPHA, power=0.8)).item()))
    while n > 2 and analysis.power(effect_size=effect, nobs=n - 1, alpha=ALPHA) >= 0.8:
        n -= 1
    while analysis.power(effect_size=effect, nobs=n, alpha=ALPHA) < 0.8:
        n += 1
    return n


def _pilot(folder: Path, metric: str) -> dict[str, Any] | None:
    from edct_task.scoring.compare import pair_records

    a, b = folder / "mixed_0.5", folder / "mixed_0.6"
    if not (a.is_dir() and b.is_dir()):
        return None
    paired = pair_records(load_run(a).records, load_run(b).records, metric)
    d = paired.a - paired.b
    return {
        "a": str(a),
        "b": str(b),
        "n": paired.n,
        "difference": float(d.mean()),
        "sd": float(d.std(ddof=1)),
        "differences": d,
    }


def evaluate(pool: Pool, *, sims: int, n: int, seed: int, pilot_folder: Path | None) -> dict[str, Any]:
    """Coverage, size and power; one row per scenario and metric."""
    rows: list[dict[str, Any]] = []
    for metric in METRICS:
        for nested in (True, False):
            kind = "nested" if nested else "independent"
            r = coverage(pool, sims=sims, n=n, metric=metric, p=0.5, q=0.6, nested=nested, seed=seed)
            rows.append(
                {
                    "check": "coverage of the 95% CI",
                    "pair": f"{kind} 0.5 vs 0.6",
                    "metric": metric,
                    "n": n,
                    **r,
                }
            )
        r = rejection(pool, sims=sims, n=n, metric=metric, p=0.5, q=0.5, nested=False, seed=seed + 1)
        rows.append(
            {"check": "false-positive rate", "pair": "independent 0.5 vs 0.5", "metric": metric, "n": n, **r}
        )
    power_rows = []
    for metric in METRICS:
        delta = abs(pool.truth(metric, 0.5, 0.6))
        pilot = _pilot(pilot_folder, metric) if pilot_folder else None
        for nested in (True, False):
            kind = "nested" if nested else "independent"
            population = pool.distribution(metric, 0.5, 0.6, nested)
            sources: list[tuple[str, Differences, float]] = [
                ("the per-item model (exact)", population, pool.paired_sd(metric, 0.5, 0.6, nested))
            ]
            if nested and pilot is not None:
                sources.append(
                    (
                        f"the real pilot {Path(pilot['a']).name} vs {Path(pilot['b']).name}",
                        Differences.from_sample(pilot["differences"]),
                        pilot["sd"],
                    )
                )
            for source, planned_from, sd in sources:
                plan = paired_sample_size(planned_from, delta)
                old = t_test_size(delta, sd)
                for planner, n_star, promised in (
                    ("sign-flip power (now)", plan.n, plan.power),
                    ("t-test (before)", old, 0.8),
                ):
                    r = rejection(
                        pool, sims=sims, n=n_star, metric=metric, p=0.5, q=0.6, nested=nested, seed=seed + 2
                    )
                    power_rows.append(
                        {
                            "check": "power at the planned size",
                            "pair": f"{kind} 0.5 vs 0.6",
                            "metric": metric,
                            "delta": delta,
                            "sd": sd,
                            "sd_from": source,
                            "planner": planner,
                            "promised": promised,
                            "n": n_star,
                            **r,
                        }
                    )
    return {"rows": rows + power_rows}


def ks_uniform(u: NDArray[np.float64]) -> float:
    from scipy import stats

    return float(stats.kstest(u, "uniform").pvalue)


def table(result: dict[str, Any], sims: int) -> str:
    lines = [
        f"| check | pair (A vs B) | metric | n | true A − B | result over {sims} simulated pairs |",
        "|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        if "coverage" in r:
            value = f"coverage {r['coverage']:.1%} (mean width {r['mean_width']:.3f})"
        else:
            value = f"rejects {r['rejection_rate']:.1%} at α = 0.05"
        if "promised" in r:
            value = f"promised {r['promised']:.1%}, realised {r['rejection_rate']:.1%}"
        extra = ""
        if "sd_from" in r:
            extra = f" ({r['planner']}; SD {r['sd']:.4f} from {r['sd_from']})"
        lines.append(
            f"| {r['check']} | {r['pair']} | {r['metric']} | {r['n']}{extra} | {r['truth']:+.4f} | {value} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs", type=Path, nargs="*", default=None, help="folders of existing runs (edct demo)"
    )
    parser.add_argument(
        "--seeds", type=int, nargs="*", default=[0], help="data seeds to run the pipeline for"
    )
    parser.add_argument("--samples", type=int, default=300, help="items per real run and per simulated pair")
    parser.add_argument("--sims", type=int, default=1000, help="simulated pairs per check")
    parser.add_argument("--seed", type=int, default=0, help="seed of the simulation")
    parser.add_argument("--json", type=Path, default=None, help="write the numbers here")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    if args.runs:
        folders = list(args.runs)
    else:
        root = Path(tempfile.mkdtemp(prefix="edct-compare-"))
        behaviors = ("mixed:0", "mixed:1", "mixed:0.5", "mixed:0.6")
        folders = [make_runs(s, args.samples, root, behaviors) for s in args.seeds]
    pool = read_pool(folders)
    ks = ks_uniform(pool.u)
    print(
        f"pool: {pool.n} real items from {len(folders)} data seed(s) "
        f"({pool.dropped} not scored by both modes)"
    )
    for m in METRICS:
        print(
            f"  {m}: c_F mean {pool.faithful[m].mean():.4f}, c_P mean {pool.prior[m].mean():.4f}, "
            f"mean(c_F - c_P) {np.mean(pool.faithful[m] - pool.prior[m]):.4f}"
        )
    print(f"  target hash u: Kolmogorov–Smirnov against U(0, 1), p = {ks:.3f}")
    for c in pool.confirmed:
        print(
            f"  per-item model vs the real {c['run']}: {c['match']}/{c['items']} items equal (both metrics)"
        )
    pilot_folder = next(
        (f for f in folders if (f / "mixed_0.5").is_dir() and (f / "mixed_0.6").is_dir()), None
    )
    result = evaluate(pool, sims=args.sims, n=args.samples, seed=args.seed, pilot_folder=pilot_folder)
    print()
    print(table(result, args.sims))
    print(f"\ntime: {time.perf_counter() - started:.1f} s")
    result.update(
        {
            "pool": {"items": pool.n, "dropped": pool.dropped, "ks_p": ks, "confirmed": pool.confirmed},
            "sims": args.sims,
            "samples": args.samples,
            "seed": args.seed,
        }
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
