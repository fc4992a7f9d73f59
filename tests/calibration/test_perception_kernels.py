"""The reference VLMs' pixel kernels are exact replacements: OpenCV's ``inRange`` masks equal the
numpy comparisons they replaced, and the histogram medians equal ``np.median``, on random arrays
(wrapping hues, odd and even pixel counts, ties) and on calibration scenes."""

from __future__ import annotations

import numpy as np
import pytest

from edct_task.calibration import calibration_sample, perception


def _numpy_mask(hsv: np.ndarray, hue: tuple[int, int], s_min: int, v_min: int) -> np.ndarray:
    h, s, v = hsv[..., 0], hsv[..., 1], hsv[..., 2]
    lo, hi = hue
    in_hue = (h >= lo) & (h <= hi) if lo <= hi else (h >= lo) | (h <= hi)
    return in_hue & (s >= s_min) & (v >= v_min)


def _random_image(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    """A uint8 array of 1..rows × 1..cols × 3 random values."""
    shape = (int(rng.integers(1, rows)), int(rng.integers(1, cols)), 3)
    return rng.integers(0, 256, size=shape, dtype=np.uint8)


@pytest.mark.parametrize("seed", range(4))
def test_masks_equal_the_numpy_comparisons(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(100):
        hsv = _random_image(rng, 40, 50)
        hsv[..., 0] %= 180
        hue = (int(rng.integers(0, 180)), int(rng.integers(0, 180)))  # lo > hi wraps around 0
        s_min, v_min = (int(x) for x in rng.integers(0, 256, size=2))
        got = perception._mask(hsv, hue, s_min, v_min)
        assert got.dtype == bool and np.array_equal(got, _numpy_mask(hsv, hue, s_min, v_min))
        assert int(got.sum()) == int(_numpy_mask(hsv, hue, s_min, v_min).sum())


@pytest.mark.parametrize("seed", range(4))
def test_channel_medians_equal_np_median(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for i in range(100):
        pixels = _random_image(rng, 30, 40)
        if i % 3 == 0:
            pixels = (pixels // 85 * 85).astype(np.uint8)  # few values: ties around the middle
        expected = np.median(pixels.astype(np.float32).reshape(-1, 3), axis=0)
        got = perception.channel_medians(pixels)
        assert got.dtype == expected.dtype and np.array_equal(got, expected)


def test_calibration_scenes_read_the_same_context() -> None:
    for i in range(30):
        pixels = np.asarray(calibration_sample(i).image.convert("RGB"))
        band = pixels[: perception.TOP_BAND]
        assert np.array_equal(
            perception.channel_medians(band), np.median(band.astype(np.float32).reshape(-1, 3), axis=0)
        )
