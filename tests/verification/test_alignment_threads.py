"""The gate gives the same numbers whether numpy's BLAS runs on one thread (as during a run, see
``engine.runtime.SingleThreadedBlas``) or on several: alignment (homography, similarity, robust
flow fit), change map and decision, on the bundled photographs and on calibration edit pairs."""

from __future__ import annotations

import os

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from edct_task.calibration import (
    Degradation,
    OracleMaskProvider,
    SceneEdit,
    SceneEditor,
    calibration_sample,
    scene_of,
    world,
    write_change,
)
from verification.alignment import align_images
from verification.check import check_edit
from verification.gate import evaluate_gate

SEVERAL = max(2, min(4, os.cpu_count() or 2))


pytestmark = pytest.mark.slow  # verification of whole calibration edits: make test, not make test-fast


def _both(fn):
    with threadpool_limits(limits=SEVERAL, user_api="blas"):
        several = fn()
    with threadpool_limits(limits=1, user_api="blas"):
        one = fn()
    return several, one


@pytest.mark.parametrize("warp", ["shift", "rotate", "zoom"])
def test_alignment_and_gate_equal_on_photos(photos, edits, donor, photo_name, warp) -> None:
    photo = photos[photo_name]
    local = edits.local_edit(photo, "paste", donor)
    moved = {
        "shift": lambda im: edits.translate(im, 6.0, -4.0),
        "rotate": lambda im: edits.rotate(im, 1.5),
        "zoom": lambda im: edits.rescale(im, 1.03),
    }[warp](local)
    mask = edits.box_ellipse(photo.image.shape[:2], photo.box)
    several, one = _both(lambda: align_images(photo.image, moved, ignore=mask))
    assert several.report == one.report
    assert np.array_equal(several.image, one.image) and np.array_equal(several.valid, one.valid)
    gate_several, gate_one = _both(lambda: evaluate_gate(photo.image, moved, mask))
    assert gate_several.result == gate_one.result
    assert np.array_equal(gate_several.change.changed, gate_one.change.changed)


@pytest.mark.parametrize(
    "degradation",
    [
        None,
        Degradation(shift=(5.0, -3.0), rotation_deg=1.0, scale=1.01),
        Degradation(noise_sigma=6.0, spill=0.3),
    ],
    ids=["clean", "warped", "noisy"],
)
def test_checks_equal_on_calibration_edits(degradation) -> None:
    editor, oracle = SceneEditor(degradation), OracleMaskProvider()
    checked = 0
    for index in range(9):  # three scenes of each family, each cue changed once
        sample = calibration_sample(index)
        for cue in world.cited_order(sample.domain, scene_of(sample.image).config()):
            new = next(v for v in world.CUE_VALUES[cue.key] if v != cue.value)
            edit = SceneEdit(cue.obj, cue.attr, new, cue.value)
            edited = editor.edit(sample.image, f"Change: {write_change(cue, new)}", seed=index)
            several, one = _both(
                lambda o=sample.image, e=edited, x=edit: check_edit(
                    o, e, edit_type=x.edit_type, target=x.obj, locator=oracle
                )
            )
            assert several == one
            checked += 1
    assert checked == 18
