"""The ``edct`` command line.

``edct demo``                 the calibration benchmark with reference backends, offline
``edct run --config FILE``    roles → backends from a YAML file (``--set key=value`` overrides)
``edct backends``             the registered backends per role kind
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from edct_task.roles import ConfigError


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--output", type=Path, help="output folder (overrides output_dir)")
    p.add_argument("--no-progress", action="store_true", help="hide the per-stage progress bars")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value, e.g. --set protocol.k=1 (repeatable)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="edct", description="Explanation-Driven Counterfactual Testing of VLMs")
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run EDCT from a YAML config")
    run.add_argument("--config", type=Path, required=True, help="YAML file: roles, protocol, verification, data")
    _add_run_options(run)

    demo = sub.add_parser(
        "demo", help="the calibration benchmark (procedural scenes with known faithfulness), offline",
    )
    demo.add_argument("--behavior", default="faithful",
                      help="reference target: faithful, prior, stale or mixed:P (default faithful)")
    demo.add_argument("-n", "--samples", type=int, default=300, help="number of calibration samples (300)")
    _add_run_options(demo)

    sub.add_parser("backends", help="list registered backends")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return _dispatch(args)
    except ConfigError as exc:
        print(f"edct: configuration error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("edct: interrupted; finished calls are cached, rerun the same command to resume", file=sys.stderr)
        return 130


def _dispatch(args: argparse.Namespace) -> int:
    from edct_task import config as cfg

    if args.command == "backends":
        from edct_task.roles import available_backends

        print(json.dumps(available_backends(), indent=2))
        return 0
    if args.command == "demo":
        out = args.output or Path("runs") / f"demo-{args.behavior.replace(':', '_')}"
        base = cfg.calibration_config(args.behavior, n=args.samples, output_dir=out).model_dump(mode="json")
        config = cfg.config_from_dict(base, args.overrides)
    else:
        config = cfg.load_config(args.config, args.overrides)
        if args.output:
            config = config.model_copy(update={"output_dir": args.output})
    if args.no_progress:
        config = config.model_copy(update={"progress": False})

    from edct_task.report import score_table
    from edct_task.runner import run

    outcome = run(config)
    roles = outcome.results["config"]["roles"]
    print(f"\nEDCT on {outcome.results['config']['data']['source']} "
          f"(target: {roles['target']}, judge: {roles['judge']['backend']}, "
          f"editor: {roles['editor']['backend']}, k={outcome.results['config']['protocol']['k']})\n")
    print(score_table(outcome.results["results"]))
    print(f"\nwrote {outcome.output_dir / 'results.json'}, samples.jsonl and images/ "
          f"({outcome.results['wall_seconds']:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
