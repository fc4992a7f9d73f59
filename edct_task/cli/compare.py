"""``edct compare RUN_A RUN_B``: is A more faithful than B? The paired difference over the items both scored.

Both runs are read through the report's reader (``reporting.sources.collect``, which reads
``edct run`` folders with ``run.outputs.load_run`` and lmms-eval output folders); each must hold
exactly one EDCT run. Runs of different setups (judge, editor, extractor, protocol, thresholds,
prompts, dataset: ``reporting.setup.setup_identity``) are refused unless ``--force``, naming the
fields that differ. The numbers are ``scoring.compare.compare_paired``: the mean difference A − B
over the items both runs scored on the metric, the paired sign-flip p-value and the CI that inverts
the same test (so the CI excludes 0 exactly when p < 0.05), and the same per domain; items only one
run scored are counted by side and reason. An *unreliable* run (a text role below its known-answer
controls' bar: ``scoring.controls.unreliable_reasons``) is refused too, naming the run and the
reason, unless ``--force``; forced, the output says the comparison includes an unreliable run. A
run made before controls ("controls: not run") is not refused.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from edct_task.core.errors import UserError
from edct_task.scoring.compare import paired_metrics
from edct_task.scoring.metrics import PRIMARY

DEFAULT_RESAMPLES = 10_000
MAX_RESAMPLES = 1_000_000
"""Most Monte Carlo sign patterns ``--resamples`` may ask for (each is a row of n signs)."""


class CompareError(UserError, ValueError):
    """Two runs cannot be compared as given; the message says why and what to pass."""

    prefix = "compare: "


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "compare",
        help="paired difference of two runs over the items both scored: CI, permutation p, per domain",
        description="Compare two runs of the same setup item by item: the mean difference A − B of the "
        "per-item score over the items both runs scored, the paired sign-flip permutation p-value, the "
        "95% CI of the differences that test does not reject (it excludes 0 exactly when p < 0.05), "
        "and the same per domain. Runs of different setups or datasets, and unreliable runs (a text role "
        "below the known-answer controls' bar), are refused unless --force.",
    )
    p.add_argument(
        "run_a", type=Path, metavar="RUN_A", help="an `edct run` folder or lmms-eval output folder"
    )
    p.add_argument("run_b", type=Path, metavar="RUN_B", help="the run to compare it with (same kinds)")
    p.add_argument(
        "--metric",
        choices=paired_metrics(),
        default=PRIMARY.name,
        help=f"the per-item score compared (default {PRIMARY.name})",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the text")
    p.add_argument(
        "--force",
        action="store_true",
        help="compare runs whose setups or datasets differ, or an unreliable run (a role below the "
        "known-answer controls' bar); the differences and the reasons are still reported",
    )
    p.add_argument(
        "--resamples",
        type=int,
        default=DEFAULT_RESAMPLES,
        help="Monte Carlo sign patterns of the test and its CI, above 16 items (10000)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the Monte Carlo sign patterns (0)")


def _one_run(path: Path) -> Any:
    from edct_task.reporting.sources import collect

    runs = [r for m in collect([path]).models.values() for r in m.edct]
    if len(runs) != 1:
        found = ", ".join(f"{r.model_name} ({r.task})" for r in runs) or "none"
        raise CompareError(f"{path} must hold exactly one EDCT run; found {len(runs)}: {found}")
    return runs[0]


def _value(setup: dict[str, Any], dotted: str) -> str:
    node: Any = setup
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    text = json.dumps(node, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 40 else text[:37] + "..."


def _differences(a: Any, b: Any) -> list[dict[str, str]]:
    from edct_task.reporting.setup import setup_differences

    return [
        {"field": f, "a": _value(a.setup, f), "b": _value(b.setup, f)}
        for f in setup_differences(a.setup, b.setup)
    ]


def _signed(x: float | None) -> str:
    return "–" if x is None else f"{x:+.3f}"


def _num(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def _eq(text: str) -> str:
    return text if text.startswith("≤") else f"= {text}"


def _dropped(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {why}" for why, n in counts.items()) or "none"


def _patterns(result: dict[str, Any]) -> str:
    n, nonzero, patterns = result["n_paired"], result["n_nonzero"], result["n_patterns"]
    if result["test"] == "exact":
        return (
            f"exact: all 2^{n} sign patterns ({patterns} distinct) of the {n} differences, {nonzero} non-zero"
        )
    seed = result["seed"]
    return f"monte-carlo: {patterns} random patterns of the {n} differences, {nonzero} non-zero, seed {seed}"


def render(result: dict[str, Any]) -> str:
    """The text ``edct compare`` prints for its JSON object."""
    from edct_task.scoring.compare import p_text

    a, b = result["a"], result["b"]
    test = result["test"]
    lines = [
        f"edct compare: {result['metric']}, A − B over the {result['n_paired']} items both runs scored",
        f"  A: {a['model']}  ({a['source']}), mean {_num(a['mean'])}",
        f"  B: {b['model']}  ({b['source']}), mean {_num(b['mean'])}",
    ]
    if result["setup_differences"]:
        lines.append(
            "  setups differ (--force): "
            + "; ".join(f"{d['field']}: {d['a']} vs {d['b']}" for d in result["setup_differences"])
        )
    else:
        lines.append(f"  setup: the same ({result['setup_id']})")
    for side, reasons in (result.get("unreliable") or {}).items():
        for reason in reasons:
            lines.append(
                f"  UNRELIABLE RUN {side} (--force; the comparison includes an unreliable run): {reason}"
            )
    lines += [
        "",
        f"difference A − B: {_signed(result['difference'])}  "
        f"95% CI [{_signed(result['low'])}, {_signed(result['high'])}]"
        "  (the differences the test below does not reject at 0.05)",
        f"p {_eq(p_text(result['p'], test, result['n_patterns']))}  "
        f"(paired sign-flip permutation test, two-sided, {_patterns(result)})",
        f"dropped: A {_dropped(result['dropped']['a'])}; B {_dropped(result['dropped']['b'])}",
        "",
        f"{'domain':<12} {'n':>5} {'A':>7} {'B':>7} {'A − B':>8} {'95% CI':>18} {'p':>9}",
    ]
    for dom, r in result["per_domain"].items():
        ci = f"[{_signed(r['low'])}, {_signed(r['high'])}]"
        lines.append(
            f"{dom:<12} {r['n_paired']:>5} {_num(r['mean_a']):>7} {_num(r['mean_b']):>7} "
            f"{_signed(r['difference']):>8} {ci:>18} {p_text(r['p'], r['test'], result['n_resamples']):>9}"
        )
    lines.append("(per-domain p-values are not corrected for multiplicity)")
    return "\n".join(lines)


def paired_runs(
    path_a: Path, path_b: Path, *, metric: str, force: bool
) -> tuple[Any, Any, list[dict[str, str]], Any]:
    """``(run_a, run_b, setup_differences, paired)``: the two runs and the items both scored on
    ``metric`` (``scoring.compare.Paired``); raises CompareError where they cannot be compared."""
    from edct_task.scoring.compare import pair_records

    a, b = _one_run(path_a), _one_run(path_b)
    differs = _differences(a, b)
    if differs and not force:
        fields = "; ".join(f"{d['field']} ({d['a']} vs {d['b']})" for d in differs)
        raise CompareError(f"the runs differ in their setup: {fields}; pass --force to compare them anyway")
    unreliable = {side: run.unreliable for side, run in (("A", a), ("B", b)) if run.unreliable}
    if unreliable and not force:
        side, reasons = next(iter(unreliable.items()))
        run = a if side == "A" else b
        raise CompareError(
            f"run {side} ({run.source}) is unreliable: {reasons[0]}"
            + (f" (and {len(reasons) - 1} more)" if len(reasons) > 1 else "")
            + "; pass --force to compare it anyway"
        )
    try:
        paired = pair_records(a.records, b.records, metric)
    except ValueError as exc:  # one id twice in a run
        raise CompareError(f"{exc} ({a.source} vs {b.source}); a run scores each item once") from None
    if paired.n == 0:
        raise CompareError(f"no item was scored on {metric} by both runs (nothing to pair)")
    return a, b, differs, paired


def compare_runs(
    path_a: Path, path_b: Path, *, metric: str, force: bool, n_resamples: int, seed: int
) -> dict[str, Any]:
    """The JSON object of ``edct compare``; raises CompareError where the runs cannot be compared."""
    from edct_task.scoring.compare import compare_paired

    a, b, differs, paired = paired_runs(path_a, path_b, metric=metric, force=force)
    unreliable = {side: run.unreliable for side, run in (("A", a), ("B", b)) if run.unreliable}
    c = compare_paired(paired, metric, n_resamples=n_resamples, seed=seed)
    out = c.as_dict()
    per_domain = out.pop("per_domain", {})
    return {
        **out,
        "n_nonzero": c.test.n_nonzero,
        "n_patterns": c.test.n_resamples,
        "dropped": paired.dropped,
        "per_domain": per_domain,
        "a": {"model": a.model_name, "source": a.source, "mean": out["mean_a"]},
        "b": {"model": b.model_name, "source": b.source, "mean": out["mean_b"]},
        "setup_id": a.setup_id,
        "setup_differences": differs,
        "unreliable": unreliable,
        "n_resamples": n_resamples,
        "seed": seed,
        "confidence": 0.95,
    }


def run(args: argparse.Namespace) -> int:
    if not 100 <= args.resamples <= MAX_RESAMPLES:
        raise CompareError(f"--resamples must be 100 … {MAX_RESAMPLES}")
    if args.seed < 0:
        raise CompareError("--seed must be >= 0")
    result = compare_runs(
        args.run_a,
        args.run_b,
        metric=args.metric,
        force=args.force,
        n_resamples=args.resamples,
        seed=args.seed,
    )
    print(json.dumps(result, indent=2, ensure_ascii=False) if args.json else render(result))
    return 0
