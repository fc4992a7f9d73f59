"""The ``edct`` command line: one module per command under ``edct_task.cli``.

``edct demo``                 the calibration reference models side by side, and the report folder
``edct run --config FILE``    roles → backends from a YAML file (``--set key=value`` overrides)
``edct run --model M --tasks T``   the same run with an lmms-eval model as the target
``edct run --config FILE --shard I/N``   one slice of the items, as an independent job
``edct merge SHARD_DIR… --output RUN``   the slices' folders joined into one run, checked
``edct sweep SWEEP.yaml``     models × configs × seeds × shards as jobs (Ray or local; --emit-slurm)
``edct estimate --config FILE|PRESET [--n N]``   calls, tokens, cost and wall time before a run
``edct stability RUN…``       mean ± SD of every metric over repeated runs
``edct compare RUN_A RUN_B``  paired difference of two runs over the items both scored (CI, p)
``edct serve ROLE MODEL``     a local vLLM server for a role, and the config lines that use it
``edct backends``             the registered backends per role kind
``edct verify A B --instruction …``   localised edit verification of one image pair (Algorithm 1)
``edct build-bench --okvqa-hub ID … --output DIR``   the EDCT-Bench dataset from each domain's sources
``edct export-counterfactuals RUN_DIR --output DIR``    verified counterfactual pairs as training data
``edct report PATH… --output DIR``   the paper's tables, Fig. 5 and report.json from runs and bundles
``edct submit RUN --output FILE``    one run as a verifiable leaderboard bundle
``edct hub-benchmark OUT --dataset-id ORG/NAME``   the Hub benchmark repo (eval.yaml) eval-results name
``edct leaderboard BUNDLE… --output DIR``   bundles verified by recomputation, ranked per setup track
``edct audit RUN --output DIR``  a static HTML audit report of a run (opens from file://)
``edct annotate RUN --annotator NAME``   local web app for the human validation of interventions
``edct agreement LABELS.jsonl… --run RUN``   Table 4: human–human, human–EDCT and gate–human agreement
``edct presets [--show NAME]``   the shipped run-config presets
``edct attention EXPORT --model DIR --output OUT``  attention saliency, localization on counterfactual pairs
``edct finetune EXPORT --model DIR --output OUT``    LoRA / Q-LoRA on counterfactual pairs with gold answers
``edct tiny-vlm train|path|agreement``   a tiny Qwen3-VL trained on the calibration world

Each command module exposes ``add_parser(subparsers)`` and ``run(args) -> int``; ``COMMANDS``
lists them. Every ``UserError`` (``edct_task.core.errors``) exits 2 with one line, here and only here.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from types import ModuleType
from typing import NoReturn

from edct_task.core.errors import UserError
from edct_task.core.exit import exit_promptly
from edct_task.core.interrupt import EXIT_INTERRUPTED, EXIT_TERMINATED, Terminated, two_step_interrupts
from edct_task.engine.storage import StorageError, storage_error
from model_adapters.errors import ProviderStop

COMMANDS = (
    "run",
    "merge",
    "sweep",
    "estimate",
    "demo",
    "stability",
    "compare",
    "serve",
    "backends",
    "verify",
    "bench",
    "report",
    "submit",
    "hub_benchmark",
    "leaderboard",
    "audit",
    "annotate",
    "agreement",
    "presets",
    "analysis",
    "tiny_vlm",
)
"""Modules of ``edct_task.cli``, each adding one or more sub-commands."""


def _modules() -> list[ModuleType]:
    return [importlib.import_module(f"edct_task.cli.{name}") for name in COMMANDS]


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, ModuleType]]:
    """The parser, and which module runs each sub-command."""
    parser = argparse.ArgumentParser(
        prog="edct", description="Explanation-Driven Counterfactual Testing of VLMs"
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log at INFO level (default: warnings only)"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    owners: dict[str, ModuleType] = {}
    for module in _modules():
        before = set(sub.choices)
        module.add_parser(sub)
        owners.update({name: module for name in set(sub.choices) - before})
    return parser, owners


def main(argv: list[str] | None = None) -> int:
    try:
        parser, owners = build_parser()  # reads the registered domains (their flags, task names)
    except UserError as exc:  # a bad edct_bench.domains entry point: one line, like every user error
        print(f"edct: {exc.line()}", file=sys.stderr)
        return 2
    argv = list(sys.argv[1:] if argv is None else argv)
    passthrough: list[str] = []
    if "--" in argv:  # `edct serve … -- <vLLM arguments>`: taken verbatim, never parsed here
        cut = argv.index("--")
        argv, passthrough = argv[:cut], argv[cut + 1 :]
    args = parser.parse_args(argv)
    if passthrough and not getattr(owners[args.command], "TAKES_PASSTHROUGH", False):
        parser.error(f"edct {args.command} takes no arguments after --")
    args.passthrough = passthrough
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    quiet_loguru(args.verbose)
    try:
        with two_step_interrupts():  # Ctrl-C: stop new work and say so; twice: quit at once
            return owners[args.command].run(args)
    except UserError as exc:  # every user error: one line, exit 2 (edct_task.core.errors)
        print(f"edct: {exc.line()}", file=sys.stderr)
        return 2
    except (StorageError, OSError) as exc:  # a full or read-only disk, whichever command wrote
        full = storage_error(exc)
        if full is None:
            raise
        print(full.advice(), file=sys.stderr)
        return 1
    except ProviderStop as exc:  # no credits, quota exhausted, max_cost_usd reached: exit 3
        print(exc.line(), file=sys.stderr)
        return 3
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (Terminated)
        print(
            "edct: interrupted; finished calls are cached, rerun the same command to resume", file=sys.stderr
        )
        return EXIT_TERMINATED if isinstance(exc, Terminated) else EXIT_INTERRUPTED


def quiet_loguru(verbose: bool) -> None:
    """lmms-eval logs through loguru, whose default sink prints everything from DEBUG on (a screen
    of task-index lines before a run starts): its lines below WARNING are shown only with ``-v``."""
    try:
        from loguru import logger
    except ImportError:  # without lmms-eval there is no loguru to quiet
        return
    logger.remove()
    logger.add(sys.stderr, level="DEBUG" if verbose else "WARNING")


def console() -> NoReturn:
    """The ``edct`` command: :func:`main`, then :func:`exit_promptly` with its exit code."""
    exit_promptly(main())


if __name__ == "__main__":
    console()
