"""``edct submit RUN --output FILE [--with-images]``: pack one run into a verifiable leaderboard bundle,
and optionally its published forms: the Hub's eval-results files (``--eval-results``) and an Every
Eval Ever record (``--every-eval-ever``), both made from the bundle's claimed numbers."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from edct_task.cli.options import add_output
from edct_task.core.errors import ConfigError
from edct_task.leaderboard.every_eval_ever import RELATIONSHIPS


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "submit",
        help="pack one run (lmms-eval output or `edct run` folder) into a bundle",
        description="Pack one run into a verifiable leaderboard bundle (*.edct.zip): its setup, claimed "
        "scores, sample records, dataset manifest and content hashes (images with --with-images).",
    )
    p.add_argument(
        "run", type=Path, help="an `edct run` output folder or an lmms-eval output folder of one run"
    )
    add_output(p, "bundle file to write (name it *.edct.zip)", metavar="FILE", required=True)
    p.add_argument("--with-images", action="store_true", help="also pack every image (original and edits)")
    p.add_argument(
        "--eval-results",
        type=Path,
        metavar="DIR",
        help="also write the Hub's evaluation-results files into DIR/.eval_results/ (DIR: a model repo)",
    )
    p.add_argument(
        "--dataset-id", help="with --eval-results: the Hub dataset id of the benchmark (dataset.id), required"
    )
    p.add_argument("--dataset-revision", help="with --eval-results: the dataset's revision hash (optional)")
    p.add_argument(
        "--source-url",
        help="with --eval-results or --every-eval-ever: where the bundle or traces are published",
    )
    p.add_argument(
        "--every-eval-ever",
        type=Path,
        metavar="DIR",
        help="also write the run's Every Eval Ever record into DIR/data/edct-bench/<developer>/<model>/",
    )
    p.add_argument(
        "--organization",
        help="with --every-eval-ever: who publishes the record (source_organization_name; default unknown)",
    )
    p.add_argument(
        "--evaluator-relationship",
        choices=RELATIONSHIPS,
        help="with --every-eval-ever: who ran the evaluation, relative to the model (default third_party)",
    )


def run(args: argparse.Namespace) -> int:
    from edct_task.leaderboard.bundle import BundleError, create_bundle
    from edct_task.leaderboard.eval_results import claimed_overall
    from edct_task.reporting.sources import BUNDLE_SUFFIX
    from edct_task.scoring.metrics import PRIMARY

    if not args.run.exists():
        raise ConfigError(
            f"{args.run} does not exist: pass an `edct run` output folder or an lmms-eval output folder"
        )
    if not args.output.name.endswith(BUNDLE_SUFFIX):
        raise ConfigError(
            f"--output {args.output}: name the bundle *{BUNDLE_SUFFIX} "
            "(edct report and leaderboard look for it)"
        )
    if args.eval_results is not None and not args.dataset_id:
        raise ConfigError("--eval-results needs --dataset-id (the Hub dataset id of the benchmark, org/name)")
    if args.eval_results is None and (args.dataset_id or args.dataset_revision):
        raise ConfigError("--dataset-id and --dataset-revision go with --eval-results DIR")
    if args.every_eval_ever is None and (args.organization or args.evaluator_relationship):
        raise ConfigError("--organization and --evaluator-relationship go with --every-eval-ever DIR")
    if args.source_url and args.eval_results is None and args.every_eval_ever is None:
        raise ConfigError("--source-url goes with --eval-results DIR or --every-eval-ever DIR")
    try:
        meta = create_bundle(args.run, args.output, with_images=args.with_images)
    except BundleError as exc:
        raise ConfigError(str(exc)) from None
    if args.eval_results is not None:
        from edct_task.leaderboard.eval_results import write_eval_results

        written = write_eval_results(
            meta,
            args.eval_results,
            dataset_id=args.dataset_id,
            revision=args.dataset_revision,
            source_url=args.source_url,
        )
        print(f"wrote {len(written)} Hub eval-results file(s) into {args.eval_results}/.eval_results/")
    if args.every_eval_ever is not None:
        from edct_task.leaderboard.bundle import read_bundle
        from edct_task.leaderboard.every_eval_ever import write_eee_record

        with read_bundle(args.output) as bundle:
            results = bundle.json_object("results.json")
        path = write_eee_record(
            meta,
            results,
            args.every_eval_ever,
            organization=args.organization or "unknown",
            relationship=args.evaluator_relationship or "third_party",
            source_url=args.source_url,
        )
        print(f"wrote the Every Eval Ever record {path}")
    overall = claimed_overall(meta)
    print(
        f"wrote {args.output}: {meta['model']['name']}, {overall.counts.total} samples, "
        f"{PRIMARY.label} {_three(overall.estimate(PRIMARY.name))}, {len(meta['files'])} members, "
        f"digest {meta['digest']}"
    )
    return 0


def _three(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"
