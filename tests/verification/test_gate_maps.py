"""The gate's maps kept per check: packing round trip, and the same Fig. 2 figures as check_edit's."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from edct_task.engine.stage_cache import ImageStore
from verification import BoxMaskProvider, check_edit
from verification.gate_maps import heatmap_rgb, overlay_rgb, pack_gate_maps, unpack_gate_maps


def test_pack_and_unpack_round_trip_to_one_level_of_heat():
    rng = np.random.default_rng(0)
    heat = rng.uniform(0, 1, (37, 53)).astype(np.float32)
    changed = rng.uniform(size=(37, 53)) > 0.7
    mask = rng.uniform(size=(37, 53)) > 0.5
    packed = pack_gate_maps(heat, changed, mask)
    assert packed.mode == "RGB" and packed.size == (53, 37)
    maps = unpack_gate_maps(packed)
    assert np.array_equal(maps.changed, changed) and np.array_equal(maps.mask, mask)
    assert np.abs(maps.heat - heat).max() <= 0.5 / 255 + 1e-6
    assert maps.heat.dtype == np.float32


def test_pack_refuses_maps_of_different_shapes():
    with pytest.raises(ValueError, match="one shape"):
        pack_gate_maps(np.zeros((4, 4)), np.zeros((4, 5), bool), np.zeros((4, 4), bool))
    with pytest.raises(ValueError, match="RGB"):
        unpack_gate_maps(Image.new("L", (4, 4)))


def test_stored_maps_redraw_check_edits_own_figures(tmp_path, photos, edits):
    ph = photos["coffee"]
    edited = edits.local_edit(ph, "recolour", None)
    store = ImageStore(tmp_path / "store")
    chk = check_edit(
        Image.fromarray(ph.image),
        Image.fromarray(edited),
        edit_type="MODIFY",
        target="cup",
        locator=BoxMaskProvider(ph.box),
        artefact_dir=tmp_path / "art",
        store_maps=store.put,
    )
    assert chk.passed and chk.maps is not None and chk.schema_version == 2
    maps = unpack_gate_maps(store.get(chk.maps).convert("RGB"))
    with Image.open(tmp_path / "art" / "mask.png") as m:
        assert np.array_equal(maps.mask, np.asarray(m) > 0)
    assert maps.mask.mean() == pytest.approx(chk.mask_fraction)
    with Image.open(tmp_path / "art" / "overlay.png") as o:
        assert np.array_equal(overlay_rgb(ph.image, maps.changed, maps.mask), np.asarray(o))
    with Image.open(tmp_path / "art" / "change_heatmap.png") as hm:
        diff = np.abs(heatmap_rgb(maps.heat).astype(int) - np.asarray(hm).astype(int))
    # heat is kept to 1/255: the colour map may move by one of its 256 levels, nowhere more
    assert diff.max() <= 8 and diff.mean() < 1.0
    # changed pixels inside / outside the mask give the record's r_in and r_out back
    assert maps.changed[maps.mask].mean() == pytest.approx(chk.r_in, abs=1e-9)
    assert maps.changed[~maps.mask].mean() == pytest.approx(chk.r_out, abs=1e-9)


def test_no_maps_are_kept_unless_asked_or_when_the_gate_did_not_run(photos):
    ph = photos["rocket"]
    img = Image.fromarray(ph.image)
    assert check_edit(img, img, edit_type="MODIFY", target="x", locator=BoxMaskProvider(ph.box)).maps is None
    calls = []
    missing = check_edit(
        img,
        img,
        edit_type="MODIFY",
        target="x",
        locator=BoxMaskProvider((5000, 5000, 6000, 6000)),
        store_maps=lambda im: calls.append(im) or "ref",
    )
    assert missing.verdict == "target_not_found" and missing.maps is None and calls == []
