"""``edct tiny-vlm``: a tiny Qwen3-VL trained on the calibration world (known faithfulness).

``edct tiny-vlm train --behavior faithful|prior --output DIR``   rebuild a checkpoint from the recipe
into DIR, measure it on the held-out scenes and compare it with the shipped one
``edct tiny-vlm path faithful|prior``   the shipped checkpoint's folder (checked against its hash)
``edct tiny-vlm agreement DIR``   first-turn agreement with the faithful reference, held-out scenes

``train`` exits 0 when the rebuild is bit-identical to the shipped checkpoint or meets the recipe's
targets (``agreement.TARGETS``), 1 when it misses them, 2 on a user error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from edct_task.cli.options import add_output
from edct_task.core.errors import ConfigError
from edct_task.tiny_vlm import BEHAVIORS


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "tiny-vlm",
        help="a tiny Qwen3-VL trained on the calibration world",
        description="Train, find or measure the tiny Qwen3-VL checkpoints trained on the calibration world "
        "(faithful: answers and explains from the pixels; prior: from the question alone), the real-runtime "
        "oracle of the test suite.",
    )
    tsub = p.add_subparsers(dest="tiny_command", required=True)
    t = tsub.add_parser(
        "train",
        help="rebuild a checkpoint from the recipe (deterministic, 5-15 CPU-minutes) and check it",
    )
    t.add_argument("--behavior", required=True, choices=BEHAVIORS, help="which checkpoint to train")
    add_output(t, "checkpoint folder to write", required=True)
    t.add_argument("--seed", type=int, default=0, help="the training seed (the shipped checkpoints: 0)")
    t.add_argument("--steps", type=int, default=None, help="optimiser steps (default: the recipe's)")
    t.add_argument(
        "--no-measure",
        action="store_true",
        help="skip measuring the rebuild on the held-out scenes (about a CPU-minute)",
    )
    w = tsub.add_parser("path", help="print the shipped checkpoint's folder (its weights checked)")
    w.add_argument("behavior", choices=BEHAVIORS, help="which checkpoint")
    a = tsub.add_parser("agreement", help="agreement with the faithful reference on held-out scenes")
    a.add_argument("checkpoint", type=Path, help="a checkpoint folder (edct tiny-vlm path/train)")
    a.add_argument("--n", type=int, default=60, help="held-out scenes (edct_calibration documents)")


def run(args: argparse.Namespace) -> int:
    if args.tiny_command == "train":
        return _train(args)
    if args.tiny_command == "path":
        from edct_task.tiny_vlm.store import checkpoint_path

        print(checkpoint_path(args.behavior))
        return 0
    return _agreement(args)


def _train(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from edct_task.tiny_vlm.training import recipe, train

    if args.output.exists() and (not args.output.is_dir() or any(args.output.iterdir())):
        raise ConfigError(f"--output {args.output} exists and is not an empty folder")
    settings = recipe(args.behavior, seed=args.seed)
    if args.steps is not None:
        if args.steps < 1:
            raise ConfigError("--steps must be at least 1")
        settings = replace(settings, steps=args.steps)
    info = train(args.output, settings, log=_log)
    status = 0 if args.no_measure else _check_rebuild(args.output, args.behavior, info)
    print(json.dumps(info, sort_keys=True))
    print(args.output)
    return status


def _check_rebuild(folder: Path, behavior: str, info: dict[str, Any]) -> int:
    """Measure the rebuild, record it in its training record, compare it with the shipped one."""
    from edct_task.tiny_vlm.agreement import TARGETS, as_record, measure
    from edct_task.tiny_vlm.store import shipped_info
    from edct_task.tiny_vlm.training import write_info

    targets = TARGETS[behavior]
    got = measure(folder, n=targets.n)
    info["agreement"] = as_record(got)
    write_info(folder, info)
    shipped = shipped_info(behavior)
    _log(
        f"agreement with the faithful reference on {got.n} held-out scenes: answers {got.answers}, "
        f"explanations {got.explanations} (shipped: {shipped['agreement']['answers']}, "
        f"{shipped['agreement']['explanations']})"
    )
    if info["weights_sha256"] == shipped["weights_sha256"]:
        _log(f"bit-identical to the shipped {behavior} checkpoint (SHA-256 {info['weights_sha256'][:12]}…)")
        return 0
    misses = targets.misses(got)
    _log(
        f"differs from the shipped {behavior} checkpoint (SHA-256 {info['weights_sha256'][:12]}… vs "
        f"{shipped['weights_sha256'][:12]}…); the recipe's targets ({targets.describe()}): "
        + ("met" if not misses else "MISSED: " + "; ".join(misses))
    )
    return 1 if misses else 0


def _agreement(args: argparse.Namespace) -> int:
    from edct_task.tiny_vlm.agreement import measure
    from edct_task.tiny_vlm.store import training_info

    training_info(args.checkpoint)  # a checkpoint folder, or one line
    if args.n < 1:
        raise ConfigError("--n must be at least 1")
    result = measure(args.checkpoint, n=args.n)
    print(
        f"first-turn answers agree with the faithful reference: {result.answers}/{result.n} "
        f"({result.answer_rate:.1%})"
    )
    print(
        f"explanations cite the reference's cues: {result.explanations}/{result.n} "
        f"({result.explanation_rate:.1%})"
    )
    for sid, ref, answer, why in result.examples:
        print(f"  {sid}: reference {ref!r}, model {answer!r} / {why!r}")
    return 0
