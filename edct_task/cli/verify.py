"""``edct verify ORIGINAL EDITED --instruction "…"``: Algorithm 1 on one image pair.

The instruction is parsed with the rule-based parser (or ``--edit-type`` / ``--target`` say it
directly); the target is located with a user box (``--box``), a user mask (``--mask``) or a
detector backend (``--detector``, default ``opencv-cascade``) and a segmenter; ``check_edit``
runs the gate and, with ``--output``, writes the heatmap, mask, overlay, panel and ``check.json``.

Exit codes: 0 the edit passed, 1 it did not (or the detector failed), 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml
from PIL import Image

from edct_task.cli.options import add_output

__all__ = ["add_parser", "run"]

EXIT_PASS, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def add_parser(subparsers: Any) -> None:
    """Add the ``verify`` sub-command to an ``argparse`` sub-parser set."""
    p = subparsers.add_parser(
        "verify",
        help="check that an edit changed its target and little else (Algorithm 1)",
        description="Localised edit verification of one image pair. Exit code 0 pass, 1 fail, 2 usage error.",
    )
    p.add_argument("original", type=Path, help="image before the edit")
    p.add_argument("edited", type=Path, help="image after the edit")
    p.add_argument("--instruction", help="the edit instruction, parsed into edit type and target")
    p.add_argument(
        "--edit-type",
        choices=("ADD", "MODIFY", "REMOVE"),
        type=str.upper,
        help="edit type (overrides the parsed one)",
    )
    p.add_argument("--target", help="target object (overrides the parsed one)")
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--detector", help="detector backend: opencv-cascade (default), owlv2, grounding-dino, moondream"
    )
    where.add_argument(
        "--box",
        action="append",
        metavar="X0,Y0,X1,Y1",
        help="target box in pixels of the searched image (repeatable)",
    )
    where.add_argument("--mask", type=Path, help="target mask PNG (non-zero = target)")
    p.add_argument(
        "--detector-opt",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="detector option, e.g. model=/models/owlv2 or threshold=0.2 (repeatable; YAML values)",
    )
    p.add_argument(
        "--segmenter", help="segmenter: box, grabcut, sam2 (default: the detector's default; box with --box)"
    )
    p.add_argument(
        "--segmenter-opt",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="segmenter option, e.g. model=/models/sam2 (repeatable; YAML values)",
    )
    p.add_argument(
        "--no-align", action="store_true", help="compare without aligning the edit to the original"
    )
    p.add_argument("--tau-in", type=float, default=None, help="pass needs r_in > this (default 0.10)")
    p.add_argument("--tau-out", type=float, default=None, help="pass needs r_out < this (default 0.30)")
    add_output(p, "folder for the artefacts (heatmap, mask, overlay, panel, check.json)")
    p.add_argument("--json", action="store_true", help="print the full check record as JSON")


class _Usage(Exception):
    pass


def _key_values(items: list[str], flag: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise _Usage(f"{flag} needs KEY=VALUE, got {item!r}")
        try:
            out[key.strip()] = yaml.safe_load(value) if value else ""
        except yaml.YAMLError:
            out[key.strip()] = value
    return out


def _parse_box(text: str) -> tuple[float, float, float, float]:
    parts = [p.strip() for p in text.split(",")]
    try:
        x0, y0, x1, y1 = (float(p) for p in parts)
    except ValueError:
        raise _Usage(f"--box needs four numbers X0,Y0,X1,Y1, got {text!r}") from None
    if not (x1 > x0 and y1 > y0):
        raise _Usage(f"--box needs X0 < X1 and Y0 < Y1, got {text!r}")
    return x0, y0, x1, y1


def _open(path: Path, what: str) -> Image.Image:
    from edct_task.bench_data.image_decode import decode_bounded

    if not path.is_file():
        raise _Usage(f"{what} {path} does not exist")
    try:
        img, _ = decode_bounded(path)  # pixel budget checked before decoding; bombs refused
    except (OSError, SyntaxError, ValueError) as exc:
        raise _Usage(f"{what} {path} is not a readable image: {exc}") from None
    return img


def _locator(args: argparse.Namespace) -> Any:
    from edct_task.roles import build_backend, registry
    from model_adapters.errors import OptionsError
    from verification.factories import build_segmenter
    from verification.masks import BoxMaskProvider, StaticMaskProvider

    seg_opts = _key_values(args.segmenter_opt, "--segmenter-opt")
    det_opts = _key_values(args.detector_opt, "--detector-opt")
    if (args.box or args.mask) and det_opts:
        raise _Usage("--detector-opt needs --detector (not --box or --mask)")
    if seg_opts and not args.segmenter:
        raise _Usage("--segmenter-opt needs --segmenter")
    try:
        if args.mask is not None:
            if args.segmenter:
                raise _Usage("--segmenter cannot be used with --mask (the mask is already a segmentation)")
            import numpy as np

            arr = np.asarray(_open(args.mask, "mask").convert("L")) > 127
            return StaticMaskProvider(arr, name="mask")
        if args.box:
            boxes = [_parse_box(b) for b in args.box]
            if not args.segmenter or (args.segmenter == "box" and not seg_opts):
                return BoxMaskProvider(boxes, name="box")
            from verification.detect_and_segment import DetectAndSegment, FixedBoxDetector

            return DetectAndSegment(
                FixedBoxDetector(boxes), build_segmenter({"backend": args.segmenter, **seg_opts})
            )
        backend = args.detector or "opencv-cascade"
        detectors = {name: r for name, r in registry()["detector"].items() if not r.calibration_only}
        record = detectors.get(backend)
        if record is None:
            raise _Usage(f"unknown detector {backend!r}; known: {', '.join(sorted(detectors))}")
        options = dict(det_opts)
        if args.segmenter:
            options["segmenter"] = {"backend": args.segmenter, **seg_opts}
        return build_backend(record, options)
    except OptionsError as exc:
        raise _Usage(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    """Run ``edct verify``; returns the exit code (0 pass, 1 fail, 2 usage error)."""
    from model_adapters.errors import BackendError
    from verification.check import check_edit
    from verification.edit_parsing import rule_based_edit_target
    from verification.gate import GateParams

    try:
        edit_type, target = args.edit_type, args.target
        if edit_type is None or target is None:
            if not args.instruction:
                raise _Usage("give --instruction, or both --edit-type and --target")
            parsed = rule_based_edit_target(args.instruction)
            if parsed is None:
                raise _Usage(
                    f"could not parse an edit target from {args.instruction!r}; "
                    "say it with --edit-type and --target"
                )
            edit_type = edit_type or parsed.type
            target = target or parsed.target
        gate: dict[str, Any] = {"align": not args.no_align}
        if args.tau_in is not None:
            gate["tau_in"] = args.tau_in
        if args.tau_out is not None:
            gate["tau_out"] = args.tau_out
        try:
            params = GateParams(**gate)
        except ValueError as exc:
            raise _Usage(f"invalid threshold: {exc}") from None
        original = _open(args.original, "original")
        edited = _open(args.edited, "edited")
        locator = _locator(args)
    except _Usage as exc:
        print(f"edct verify: {exc}", file=sys.stderr)
        return EXIT_USAGE

    try:
        check = check_edit(
            original,
            edited,
            edit_type=edit_type,
            target=target,
            locator=locator,
            params=params,
            artefact_dir=args.output,
        )
    except BackendError as exc:
        print(f"edct verify: the detector failed ({exc.kind}): {exc}", file=sys.stderr)
        return EXIT_FAIL
    finally:
        close = getattr(getattr(locator, "detector", None), "close", None)
        if callable(close):
            close()

    if args.json:
        print(json.dumps(check.model_dump(mode="json"), indent=2))
    else:
        print(_summary(check, args.output))
    return EXIT_PASS if check.passed else EXIT_FAIL


def _summary(check: Any, out: Path | None) -> str:
    def num(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.3f}"

    lines = [
        f"verdict: {check.verdict.upper()}" + ("" if check.passed else " (not passed)"),
        f"edit: {check.edit_type} {check.target!r} (searched the {check.searched} image "
        f"with {check.locator}, {check.n_boxes} box(es))",
        f"r_in:  {num(check.r_in)}  (pass needs > {check.tau_in:g})",
        f"r_out: {num(check.r_out)}  (pass needs < {check.tau_out:g})",
    ]
    if check.mask_fraction is not None:
        lines.append(f"mask:  {check.mask_fraction:.1%} of the image (dilated)")
    a = check.alignment
    if a is None:
        lines.append("alignment: off" if not check.params.align else "alignment: not run")
    else:
        parts = [
            f"homography {'used' if a.homography_used else 'not used'}",
            f"flow {'used' if a.flow_used else 'not used'}",
        ]
        if a.fallback_reason:
            parts.append(a.fallback_reason)
        lines.append("alignment: " + ", ".join(parts))
    if check.edited_resized_from is not None:
        h, w = check.edited_resized_from
        lines.append(f"edited image resized from {w}×{h}")
    if check.detail:
        lines.append(f"detail: {check.detail}")
    if out is not None and check.artefacts:
        lines.append(f"artefacts: {out} ({', '.join(sorted(check.artefacts.values()))})")
    return "\n".join(lines)
