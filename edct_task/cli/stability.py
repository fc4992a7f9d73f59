"""``edct stability RUN…``: mean ± SD of every metric over repeated runs (Table 5).

Repeated runs are runs of one target under one setup that differ only in their seed: runs of
different targets or setups are refused (exit 2, naming the first run that differs and how), since
their mean ± SD would mix two models.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edct_task.core.errors import ConfigError

if TYPE_CHECKING:
    from edct_task.scoring.results import Results


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "stability",
        help="mean ± SD of each metric over repeated runs",
        description="Mean and sample SD (ddof = 1) of every metric over repeated runs of one setup "
        "(Table 5), from their output folders.",
    )
    p.add_argument("runs", nargs="+", type=Path, help="output folders (or results.json files) of the runs")
    p.add_argument("--json", action="store_true", help="print the table as one JSON object instead")


def _identity(results: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """(target, setup without seeds) of a checked results.json."""
    from edct_task.reporting.setup import host_of, setup_identity

    config = results["config"]
    setup = setup_identity(
        roles=config["roles"],
        protocol=config.get("protocol", {}),
        verification=config.get("verification", {}),
        prompt_versions=results.get("prompt_versions", {}),
        dataset_digest=None,
        host=host_of(config["roles"].get("target")),
    )
    return config["roles"].get("target"), setup


def read_repeated_runs(paths: list[Path]) -> list[Results]:
    """The scores of each run (its results.json read through ``run.outputs.load_run``), checked
    for being repeats of the first run."""
    from edct_task.reporting.setup import setup_differences
    from edct_task.run.checks import RunReadError, check_results
    from edct_task.run.outputs import load_run

    results: list[Results] = []
    first = None
    for p in paths:
        if not p.exists():
            raise ConfigError(f"{p} does not exist: pass run output folders or their results.json")
        try:
            loaded = load_run(p)  # lmms-eval output: the run folder its logs name
            f = loaded.results_file or p
            data = check_results(f, loaded.results)
            assert loaded.log is not None  # an edct run folder has its run log
        except RunReadError as exc:
            raise ConfigError(str(exc)) from None
        target, setup = _identity(data)
        if first is None:
            first = (f, target, setup)
        elif target != first[1]:
            raise ConfigError(
                f"{f}: target {json.dumps(target)[:120]} is not {first[0]}'s "
                f"{json.dumps(first[1])[:120]}; stability is over repeated runs of one model"
            )
        elif setup != first[2]:
            diff = ", ".join(setup_differences(first[2], setup)[:5])
            raise ConfigError(
                f"{f}: its setup differs from {first[0]}'s ({diff}); stability is over runs that differ "
                "only in their seed"
            )
        results.append(loaded.log.results)
    return results


def run(args: argparse.Namespace) -> int:
    from edct_task.scoring.metrics import stability

    results = read_repeated_runs(args.runs)
    if len(results) < 2:
        raise ConfigError("stability needs at least two runs")
    table = stability(results)
    if args.json:
        print(json.dumps(table))
        return 0
    print(f"{'metric':<12} {'mean':>8} {'SD':>8} runs")
    for name, row in table.items():
        mean = "–" if row["mean"] is None else f"{row['mean']:.4f}"
        sd = "–" if row["sd"] is None else f"{row['sd']:.4f}"
        print(f"{name:<12} {mean:>8} {sd:>8} {row['runs']}")
    return 0
