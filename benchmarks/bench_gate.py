"""Time alignment + change map + gate for one 1024×1024 pair on one core; prints one JSON line.

Run: ``.venv/bin/python benchmarks/bench_gate.py [--runs N] [--size S]``. Thread counts are pinned
to 1 *before* numpy / OpenCV are imported. The pair is scikit-image's bundled astronaut photo
upscaled to S×S, and the same photo with a recoloured face, translated by 8 px and rotated 1°
(so every alignment stage runs).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import cv2  # noqa: E402
import numpy as np  # noqa: E402
import skimage.data  # noqa: E402

from verification.gate import GateParams, evaluate_gate  # noqa: E402
from verification.masks import boxes_to_mask  # noqa: E402


def make_pair(size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Original, edited (local recolour + 8 px shift + 1° rotation) and the target mask."""
    img = cv2.resize(skimage.data.astronaut(), (size, size), interpolation=cv2.INTER_CUBIC)
    box = (0.27 * size, 0.02 * size, 0.60 * size, 0.30 * size)
    mask = boxes_to_mask([box], (size, size))
    hsv = cv2.cvtColor(img, cv2.COLOR_RGB2HSV_FULL)
    hsv[..., 0] = (hsv[..., 0].astype(np.int32) + 85).astype(np.uint8)
    edited = img.copy()
    edited[mask] = cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB_FULL)[mask]
    m = cv2.getRotationMatrix2D((size / 2, size / 2), 1.0, 1.0)
    m[:, 2] += (8.0, 3.0)
    edited = cv2.warpAffine(edited, m, (size, size), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT)
    return img, edited, mask


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--size", type=int, default=1024)
    args = ap.parse_args()
    cv2.setNumThreads(1)
    original, edited, mask = make_pair(args.size)
    params = GateParams()
    evaluate_gate(original, edited, mask, params)  # warm-up
    times = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        out = evaluate_gate(original, edited, mask, params)
        times.append(time.perf_counter() - t0)
    rep = out.alignment.report if out.alignment else None
    print(
        json.dumps(
            {
                "bench": "gate",
                "size": args.size,
                "runs": args.runs,
                "median_s": round(statistics.median(times), 4),
                "min_s": round(min(times), 4),
                "r_in": round(out.result.r_in, 4),
                "r_out": round(out.result.r_out, 4),
                "passed": out.result.passed,
                "homography_used": rep.homography_used if rep else None,
                "flow_used": rep.flow_used if rep else None,
            }
        )
    )


if __name__ == "__main__":
    main()
