"""The gate: pinned ratios on toy arrays, and pass/fail on real photographs with programmatic edits."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from verification.gate import GateParams, evaluate_gate, gate_decision
from verification.masks import boxes_to_mask, dilate_mask, dilation_radius

ALIGN_ON, ALIGN_OFF = GateParams(), GateParams(align=False)
# Photos whose frame is mostly textured: a global filter or a few-pixel shift changes most of it.
# (rocket is ~70% flat night sky: blurring it or shifting it by 8 px leaves most pixels unchanged.)
TEXTURED = ("astronaut", "chelsea", "coffee", "motorcycle")


def _gate(photo, edited, params=ALIGN_ON):
    mask = boxes_to_mask([photo.box], photo.image.shape[:2])
    return evaluate_gate(photo.image, edited, mask, params).result


# ------------------------------------------------------------------ pinned values on toy arrays


def test_identical_change_maps_give_zero_ratios():
    changed = np.zeros((20, 30), bool)
    region = np.zeros((20, 30), bool)
    region[5:10, 5:15] = True
    r = gate_decision(changed, region)
    assert (r.r_in, r.r_out, r.n_in, r.n_out) == (0.0, 0.0, 50, 550)
    assert r.verdict == "no_change_in_target" and not r.passed


def test_ratios_are_per_region_shares():
    region = np.zeros((10, 10), bool)
    region[:, :5] = True  # 50 px inside, 50 outside
    changed = np.zeros((10, 10), bool)
    changed[:5, :5] = True  # 25 inside
    changed[0, 5:9] = True  # 4 outside
    r = gate_decision(changed, region)
    assert r.r_in == 0.5 and r.r_out == 0.08 and r.passed and r.verdict == "pass"


def test_fully_changed_region_gives_r_in_one():
    region = np.zeros((10, 10), bool)
    region[2:6, 2:6] = True
    r = gate_decision(region.copy(), region)
    assert r.r_in == 1.0 and r.r_out == 0.0 and r.passed


def test_thresholds_are_strict():
    region = np.zeros((10, 10), bool)
    region[:, :5] = True
    changed = np.zeros((10, 10), bool)
    changed[:5, 0] = True  # r_in = 5/50 = 0.10 exactly → not > 0.10
    assert gate_decision(changed, region).verdict == "no_change_in_target"
    changed[:, :5] = True
    changed[:3, 5:] = True  # r_out = 15/50 = 0.30 exactly → not < 0.30
    r = gate_decision(changed, region)
    assert r.r_out == pytest.approx(0.3) and r.verdict == "change_outside_target"


def test_invalid_pixels_are_not_counted():
    region = np.zeros((10, 10), bool)
    region[:, :5] = True
    changed = np.zeros((10, 10), bool)
    changed[:, 9] = True
    valid = np.ones((10, 10), bool)
    valid[:, 9] = False
    r = gate_decision(changed, region, valid=valid)
    assert (r.r_out, r.n_out, r.n_in) == (0.0, 40, 50)


def test_whole_image_mask_has_zero_r_out():
    region = np.ones((8, 8), bool)
    r = gate_decision(region, region)
    assert (r.r_in, r.r_out, r.n_out) == (1.0, 0.0, 0)


@pytest.mark.parametrize(
    ("changed", "region", "valid", "match"),
    [
        (np.zeros((4, 4, 3), bool), np.zeros((4, 4), bool), None, "changed must be a 2-D"),
        (np.zeros((4, 4), bool), np.zeros((4, 5), bool), None, "same shape"),
        (np.zeros((4, 4), bool), np.zeros((4, 4), bool), np.zeros((3, 4), bool), "valid must have"),
    ],
)
def test_gate_decision_validation(changed, region, valid, match):
    with pytest.raises(ValueError, match=match):
        gate_decision(changed, region, valid=valid)


def test_dilation_radius_and_disc():
    assert dilation_radius((512, 384), px=None, fraction=0.02) == 8
    assert dilation_radius((512, 384), px=3, fraction=0.02) == 3
    dot = np.zeros((11, 11), bool)
    dot[5, 5] = True
    assert int(dilate_mask(dot, 2).sum()) == 17  # OpenCV 5×5 elliptical disc
    assert int(dilate_mask(dot, 0).sum()) == 1


def test_evaluate_gate_rejects_bad_masks(photos):
    img = photos["coffee"].image
    with pytest.raises(ValueError, match="at least one pixel"):
        evaluate_gate(img, img, np.zeros(img.shape[:2], bool))
    with pytest.raises(ValueError, match="original's H×W"):
        evaluate_gate(img, img, np.ones((10, 10), bool))


def test_identical_photo_gives_zero_ratios(photos, photo_name):
    ph = photos[photo_name]
    r = _gate(ph, ph.image.copy())
    assert r.r_in == 0.0 and r.r_out == 0.0 and r.verdict == "no_change_in_target"


def test_fully_replaced_region_gives_r_in_near_one(photos, photo_name):
    ph = photos[photo_name]
    edited = ph.image.copy()
    x0, y0, x1, y1 = (round(v) for v in ph.box)
    edited[y0:y1, x0:x1] = 255 - edited[y0:y1, x0:x1]
    mask = boxes_to_mask([ph.box], ph.image.shape[:2])
    r = evaluate_gate(ph.image, edited, mask, GateParams(dilation_px=0)).result
    assert r.r_in > 0.9 and r.r_out < 0.05  # Δ bleeds a few px past the box (blur + SSIM window)


# ------------------------------------------------------------------ real photographs


@pytest.mark.parametrize("kind", ["recolour", "inpaint", "paste"])
def test_local_edits_pass(photos, edits, donor, photo_name, kind):
    ph = photos[photo_name]
    r = _gate(ph, edits.local_edit(ph, kind, donor))
    assert r.passed, r
    assert r.r_out < 0.01


def _jpeg_noise(img: np.ndarray, quality: int = 70, sigma: float = 2.0) -> np.ndarray:
    _ok, buf = cv2.imencode(".jpg", cv2.cvtColor(img, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, quality])
    out = cv2.cvtColor(cv2.imdecode(buf, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB).astype(np.float32)
    out += np.random.default_rng(0).normal(0.0, sigma, out.shape)
    return np.clip(out + 0.5, 0, 255).astype(np.uint8)


@pytest.mark.parametrize("kind", ["recolour", "inpaint", "paste"])
def test_local_edits_survive_reencoding_and_drift(photos, edits, donor, photo_name, kind):
    """An editor's re-encoding (JPEG q70 + noise σ=2) plus a 7 px drift is not 'change'."""
    ph = photos[photo_name]
    edited = _jpeg_noise(edits.translate(edits.local_edit(ph, kind, donor), 7, -4))
    r = _gate(ph, edited)
    assert r.passed, r
    assert r.r_out < 0.1


@pytest.mark.parametrize("kind", ["recolour_all", "posterise", "background_change"])
def test_global_edits_fail(photos, edits, donor, photo_name, kind):
    ph = photos[photo_name]
    if kind == "recolour_all":
        edited = edits.hue_shift(ph.image)
    elif kind == "posterise":
        edited = edits.posterise(ph.image, 3)
    else:  # heavy background change: tint everything outside the object's box
        outside = ~boxes_to_mask([ph.box], ph.image.shape[:2])
        edited = edits.tint(edits.local_edit(ph, "recolour", donor), outside, strength=0.5)
    r = _gate(ph, edited)
    assert not r.passed and r.verdict == "change_outside_target", r


@pytest.mark.parametrize("kind", ["blur", "stylise"])
@pytest.mark.parametrize("name", TEXTURED)
def test_style_filters_fail(photos, edits, name, kind):
    ph = photos[name]
    edited = edits.blur(ph.image, 8.0) if kind == "blur" else edits.stylise(ph.image)
    r = _gate(ph, edited)
    assert not r.passed and r.verdict == "change_outside_target", r


WARPS = {
    "translate": lambda e, img: e.translate(img, 8, 3),
    "rotate": lambda e, img: e.rotate(img, 1.5),
    "rescale": lambda e, img: e.rescale(img, 1.03),
}


@pytest.mark.parametrize("warp", sorted(WARPS))
def test_drifted_local_edit_passes_only_with_alignment(photos, edits, photo_name, warp):
    ph = photos[photo_name]
    edited = WARPS[warp](edits, edits.local_edit(ph, "recolour", None))
    on = _gate(ph, edited, ALIGN_ON)
    assert on.passed and on.r_out < 0.01, on
    if photo_name in TEXTURED:
        off = _gate(ph, edited, ALIGN_OFF)
        assert not off.passed and off.verdict == "change_outside_target", off


def test_background_spill_fails(photos, edits, photo_name):
    """Local edit + a strong tint over the top 45% of the background."""
    ph = photos[photo_name]
    bg = ~boxes_to_mask([ph.box], ph.image.shape[:2])
    cum = np.cumsum(bg.sum(axis=1))
    cut = int(np.searchsorted(cum, 0.45 * bg.sum()))
    spill = bg.copy()
    spill[cut + 1 :] = False
    assert spill.sum() > 0.4 * bg.sum()
    edited = edits.tint(edits.local_edit(ph, "recolour", None), spill, strength=0.5)
    r = _gate(ph, edited)
    assert not r.passed and r.verdict == "change_outside_target" and r.r_in > 0.1, r
