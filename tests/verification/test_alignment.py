"""Alignment: recovers editor drift, refuses what it cannot trust, never hides a local edit."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

from verification.alignment import AlignmentParams, AlignmentReport, align_images, match_size
from verification.gate import GateParams, evaluate_gate
from verification.masks import boxes_to_mask


def _interior_mad(a: np.ndarray, b: np.ndarray, margin: int = 16) -> float:
    sl = (slice(margin, -margin), slice(margin, -margin))
    return float(np.abs(a[sl].astype(np.float32) - b[sl].astype(np.float32)).mean())


def test_identical_images_need_no_warp(photos):
    img = photos["astronaut"].image
    al = align_images(img, img)
    assert al.report.homography_used is False and al.report.flow_used is False
    assert al.report.fallback_reason is None
    assert al.report.max_corner_shift_px < 0.3
    np.testing.assert_array_equal(al.image, img)
    assert al.valid.all() and al.report.valid_fraction == 1.0


def test_translation_is_recovered(photos, edits, photo_name):
    img = photos[photo_name].image
    moved = edits.translate(img, 7, -4)
    al = align_images(img, moved)
    rep = al.report
    assert rep.homography_used and rep.motion_model == "similarity"
    hm = np.asarray(rep.homography)
    # edited → original maps a point back by (-7, +4)
    np.testing.assert_allclose(hm[:2, 2], [-7, 4], atol=0.6)
    assert _interior_mad(al.image, img) < 0.35 * _interior_mad(moved, img)


@pytest.mark.parametrize("warp", ["rotate", "rescale"])
@pytest.mark.parametrize("name", ["astronaut", "coffee", "motorcycle"])
def test_rotation_and_rescale_are_undone(photos, edits, name, warp):
    img = photos[name].image
    moved = edits.rotate(img, 1.5) if warp == "rotate" else edits.rescale(img, 1.025)
    al = align_images(img, moved)
    assert al.report.homography_used
    assert _interior_mad(al.image, img) < 0.35 * _interior_mad(moved, img)
    assert al.report.valid_fraction > 0.9


def test_size_change_is_resized_and_recorded(photos):
    img = photos["coffee"].image
    h, w = img.shape[:2]
    bigger = cv2.resize(img, (w * 5 // 4, h * 5 // 4), interpolation=cv2.INTER_LINEAR)
    al = align_images(img, bigger)
    assert al.report.resized_from == (h * 5 // 4, w * 5 // 4)
    assert al.image.shape == img.shape
    assert _interior_mad(al.image, img) < 3.0
    assert match_size(img, img)[1] is None


def test_flat_image_falls_back_without_homography():
    flat = np.full((200, 240, 3), 128, np.uint8)
    al = align_images(flat, flat.copy())
    assert not al.report.homography_used
    assert "keypoints" in (al.report.fallback_reason or "")
    np.testing.assert_array_equal(al.image, flat)


def test_unrelated_image_is_not_warped(photos):
    a = photos["astronaut"].image
    b = cv2.resize(photos["coffee"].image, (a.shape[1], a.shape[0]))
    al = align_images(a, b)
    assert not al.report.homography_used
    assert al.report.fallback_reason is not None


def test_large_rotation_is_refused(photos, edits):
    img = photos["motorcycle"].image
    al = align_images(img, edits.rotate(img, 20.0))
    assert not al.report.homography_used
    assert "rotation" in (al.report.fallback_reason or "") or "corner" in (al.report.fallback_reason or "")


def test_flow_is_capped(photos, edits):
    img = photos["chelsea"].image
    p = AlignmentParams(use_homography=False, max_flow_fraction=0.004)
    al = align_images(img, edits.translate(img, 6, 0), params=p)
    cap = 0.004 * max(img.shape[:2])
    assert al.report.max_flow_px <= cap + 1e-6


@pytest.mark.parametrize("kind", ["recolour", "inpaint", "paste"])
def test_alignment_never_explains_away_a_local_edit(photos, edits, donor, photo_name, kind):
    """Even when it is not told where the target is, alignment keeps ≥ 90% of the edit's difference."""
    ph = photos[photo_name]
    edited = edits.local_edit(ph, kind, donor)
    region = edits.box_ellipse(ph.image.shape[:2], ph.box, fill=0.95)
    al = align_images(ph.image, edited)  # ignore=None: the worst case
    diff = lambda x: float(np.abs(x.astype(np.float32) - ph.image.astype(np.float32))[region].mean())  # noqa: E731
    assert diff(al.image) >= 0.9 * diff(edited)


@pytest.mark.parametrize("name", ["astronaut", "coffee", "motorcycle"])
def test_local_displacement_is_not_flowed_away(photos, name):
    """An object moved by 6 px inside its box is an edit; the regularised flow must not undo it."""
    ph = photos[name]
    x0, y0, x1, y1 = (round(v) for v in ph.box)
    edited = ph.image.copy()
    edited[y0:y1, x0 + 6 : x1] = ph.image[y0:y1, x0 : x1 - 6]
    p_on, p_off = GateParams(), GateParams(align=False)
    mask = boxes_to_mask([ph.box], ph.image.shape[:2])
    r_on = evaluate_gate(ph.image, edited, mask, p_on).result.r_in
    r_off = evaluate_gate(ph.image, edited, mask, p_off).result.r_in
    assert r_off > 0.1
    assert r_on >= 0.9 * r_off
    al = align_images(ph.image, edited)
    box = (slice(y0, y1), slice(x0, x1))
    before = np.abs(edited[box].astype(np.float32) - ph.image[box]).mean()
    after = np.abs(al.image[box].astype(np.float32) - ph.image[box]).mean()
    assert after >= 0.85 * before


def test_report_is_frozen_and_json_serialisable(photos, edits):
    img = photos["astronaut"].image
    rep = align_images(img, edits.translate(img, 5, 5)).report
    data = json.loads(rep.model_dump_json())
    assert AlignmentReport.model_validate(data) == rep
    assert len(data["homography"]) == 3 and all(len(r) == 3 for r in data["homography"])
    with pytest.raises(Exception):  # noqa: B017 - pydantic's ValidationError on a frozen model
        rep.n_matches = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    ("original", "edited", "ignore", "match"),
    [
        (np.zeros((32, 32), np.uint8), np.zeros((32, 32, 3), np.uint8), None, "H×W×3"),
        (np.zeros((32, 32, 3), np.float32), np.zeros((32, 32, 3), np.uint8), None, "uint8"),
        (np.zeros((4, 32, 3), np.uint8), np.zeros((32, 32, 3), np.uint8), None, "at least 8×8"),
        (np.zeros((32, 32, 3), np.uint8), np.zeros((32, 32, 3), np.uint8), np.zeros((8, 8), bool), "ignore"),
    ],
)
def test_validation_errors_name_the_rule(original, edited, ignore, match):
    with pytest.raises(ValueError, match=match):
        align_images(original, edited, ignore=ignore)
