"""``edct tiny-vlm``: a tiny Qwen3-VL trained on the calibration world (known faithfulness).

``edct tiny-vlm train --behavior faithful|prior --out DIR``   train a checkpoint into DIR
``edct tiny-vlm path faithful|prior``   the cached checkpoint's folder (last line), trained once
``edct tiny-vlm agreement DIR``   first-turn agreement with the faithful reference, held-out scenes
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
    t = tsub.add_parser("train", help="train a checkpoint (deterministic, minutes on a CPU)")
    t.add_argument("--behavior", required=True, choices=BEHAVIORS, help="which checkpoint to train")
    add_output(t, "checkpoint folder to write", required=True)
    t.add_argument("--seed", type=int, default=0, help="training seed (0; part of the recipe)")
    t.add_argument("--steps", type=int, default=None, help="optimiser steps (default: the recipe's)")
    w = tsub.add_parser("path", help="print the cached checkpoint's folder, training it first if missing")
    w.add_argument("behavior", choices=BEHAVIORS, help="which checkpoint")
    a = tsub.add_parser("agreement", help="agreement with the faithful reference on held-out scenes")
    a.add_argument("checkpoint", type=Path, help="checkpoint folder (edct tiny-vlm path prints it)")
    a.add_argument("--n", type=int, default=60, help="held-out scenes (edct_calibration documents)")


def run(args: argparse.Namespace) -> int:
    if args.tiny_command == "train":
        return _train(args)
    if args.tiny_command == "path":
        from edct_task.tiny_vlm.store import checkpoint_path

        folder, _ = checkpoint_path(args.behavior, log=_log)
        print(folder)
        return 0
    return _agreement(args)


def _train(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from edct_task.tiny_vlm.training import recipe, train

    if args.out.exists() and (not args.out.is_dir() or any(args.out.iterdir())):
        raise ConfigError(f"--output {args.out} exists and is not an empty folder")
    settings = recipe(args.behavior, seed=args.seed)
    if args.steps is not None:
        if args.steps < 1:
            raise ConfigError("--steps must be at least 1")
        settings = replace(settings, steps=args.steps)
    info = train(args.out, settings, log=_log)
    print(json.dumps(info, sort_keys=True))
    print(args.out)
    return 0


def _agreement(args: argparse.Namespace) -> int:
    from edct_task.tiny_vlm.agreement import measure
    from edct_task.tiny_vlm.store import is_complete

    if not is_complete(args.checkpoint):
        raise ConfigError(f"{args.checkpoint} is not a tiny-VLM checkpoint folder (edct tiny-vlm train)")
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
