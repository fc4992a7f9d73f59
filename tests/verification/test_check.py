"""check_edit: the PIL-level entry point, its record, its verdicts and artefacts."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from PIL import Image

import verification
from verification import (
    BoxMaskProvider,
    EditCheck,
    GateParams,
    Localization,
    MaskProvider,
    StaticMaskProvider,
    check_edit,
)


class RecordingLocator:
    """Returns a fixed box and remembers which image it searched."""

    name = "recording"

    def __init__(self, box):
        self.inner = BoxMaskProvider(box)
        self.seen: list[np.ndarray] = []

    def locate(self, image: Image.Image, target: str) -> Localization:
        self.seen.append(np.asarray(image))
        return self.inner.locate(image, target)


class BoxesOnlyLocator:
    name = "boxes-only"

    def __init__(self, box):
        self.box = box

    def locate(self, image: Image.Image, target: str) -> Localization:
        return Localization(found=True, mask=None, boxes=(self.box,), scores=(0.9,), detail="boxes only")


def _pil(a: np.ndarray) -> Image.Image:
    return Image.fromarray(a)


def test_public_surface():
    for name in (
        "check_edit",
        "EditCheck",
        "GateParams",
        "BoxMaskProvider",
        "StaticMaskProvider",
        "Localization",
        "MaskProvider",
        "align_images",
        "change_map",
        "gate_decision",
    ):
        assert name in verification.__all__
    assert isinstance(BoxMaskProvider((0, 0, 1, 1)), MaskProvider)


def test_local_edit_passes_and_record_round_trips(photos, edits, donor):
    ph = photos["coffee"]
    edited = edits.local_edit(ph, "paste", donor)
    chk = check_edit(
        _pil(ph.image), _pil(edited), edit_type="modify", target="cup", locator=BoxMaskProvider(ph.box)
    )
    assert chk.passed and chk.verdict == "pass"
    assert chk.edit_type == "MODIFY" and chk.searched == "original" and chk.n_boxes == 1
    assert chk.r_in > 0.1 and chk.r_out < 0.3 and (chk.tau_in, chk.tau_out) == (0.10, 0.30)
    assert 0 < chk.mask_fraction < 0.5 and chk.alignment is not None
    assert EditCheck.model_validate_json(chk.model_dump_json()) == chk


def test_add_searches_the_edited_image(photos, edits, donor):
    ph = photos["astronaut"]
    edited = edits.local_edit(ph, "paste", donor)
    loc = RecordingLocator(ph.box)
    chk = check_edit(_pil(ph.image), _pil(edited), edit_type="ADD", target="patch", locator=loc)
    assert chk.searched == "edited" and chk.passed
    np.testing.assert_array_equal(loc.seen[0], edited)
    loc2 = RecordingLocator(ph.box)
    check_edit(_pil(ph.image), _pil(edited), edit_type="REMOVE", target="face", locator=loc2)
    np.testing.assert_array_equal(loc2.seen[0], ph.image)


def test_target_not_found_is_a_verdict(photos):
    img = _pil(photos["rocket"].image)
    chk = check_edit(
        img, img, edit_type="MODIFY", target="zebra", locator=BoxMaskProvider((5000, 5000, 6000, 6000))
    )
    assert chk.verdict == "target_not_found" and not chk.passed and chk.r_in is None
    assert "no box overlaps" in chk.detail


def test_boxes_without_mask_are_rasterised(photos, edits):
    ph = photos["chelsea"]
    edited = edits.local_edit(ph, "recolour", None)
    chk = check_edit(
        _pil(ph.image), _pil(edited), edit_type="MODIFY", target="cat", locator=BoxesOnlyLocator(ph.box)
    )
    assert chk.passed and "rasterised" in chk.detail


def test_static_mask_at_another_resolution(photos, edits):
    ph = photos["motorcycle"]
    edited = edits.local_edit(ph, "inpaint", None)
    h, w = ph.image.shape[:2]
    mask = np.zeros((h * 2, w * 2), bool)
    x0, y0, x1, y1 = (round(2 * v) for v in ph.box)
    mask[y0:y1, x0:x1] = True
    chk = check_edit(
        _pil(ph.image), _pil(edited), edit_type="REMOVE", target="tank", locator=StaticMaskProvider(mask)
    )
    assert chk.passed and "resized" in chk.detail


def test_resized_edit_is_recorded(photos, edits):
    ph = photos["coffee"]
    edited = _pil(edits.local_edit(ph, "recolour", None))
    bigger = edited.resize((edited.width * 2, edited.height * 2), Image.BILINEAR)
    chk = check_edit(
        _pil(ph.image), bigger, edit_type="MODIFY", target="cup", locator=BoxMaskProvider(ph.box)
    )
    assert chk.passed and chk.edited_resized_from == (bigger.height, bigger.width)


def test_alignment_off_gives_no_alignment_report(photos):
    img = _pil(photos["coffee"].image)
    chk = check_edit(
        img,
        img,
        edit_type="MODIFY",
        target="cup",
        locator=BoxMaskProvider((10, 10, 60, 60)),
        params=GateParams(align=False),
    )
    assert chk.alignment is None and chk.verdict == "no_change_in_target"
    assert chk.r_in == 0.0 and chk.r_out == 0.0


def test_global_edit_fails_with_reason(photos, edits):
    ph = photos["astronaut"]
    chk = check_edit(
        _pil(ph.image),
        _pil(edits.hue_shift(ph.image)),
        edit_type="MODIFY",
        target="face",
        locator=BoxMaskProvider(ph.box),
    )
    assert not chk.passed and chk.verdict == "change_outside_target" and chk.r_out > 0.3


@pytest.mark.parametrize("mode", ["L", "RGBA", "P", "I;16", "I", "F", "LA", "CMYK"])
def test_odd_modes_are_converted(photos, mode):
    rgb = _pil(photos["chelsea"].image)
    if mode == "I;16":
        img = Image.fromarray(np.asarray(rgb.convert("L")).astype(np.uint16) * 257)
        assert img.mode.startswith("I;16")
    elif mode == "I":
        img = rgb.convert("L").convert("I")
    elif mode == "F":
        img = Image.fromarray(np.asarray(rgb.convert("L"), np.float32) / 255.0)
    else:
        img = rgb.convert(mode)
    chk = check_edit(img, img, edit_type="MODIFY", target="cat", locator=BoxMaskProvider((50, 50, 150, 150)))
    assert chk.verdict == "no_change_in_target" and chk.r_in == 0.0 and chk.r_out == 0.0
    if mode != "RGB":
        assert "mode" in chk.detail


def _corrupt_png(photo: np.ndarray) -> Image.Image:
    buf = io.BytesIO()
    Image.fromarray(photo).save(buf, format="PNG")
    return Image.open(io.BytesIO(buf.getvalue()[:2000]))  # lazily opened, truncated


@pytest.mark.parametrize("lenient_pil", [False, True])
def test_truncated_images_are_refused_even_when_pil_is_told_to_pad_them(photos, lenient_pil, monkeypatch):
    from PIL import ImageFile

    monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", lenient_pil)  # lmms-eval sets it True
    good = _pil(photos["rocket"].image)
    chk = check_edit(
        good,
        _corrupt_png(photos["rocket"].image),
        edit_type="MODIFY",
        target="x",
        locator=BoxMaskProvider((0, 0, 10, 10)),
    )
    assert chk.verdict == "bad_image" and "could not be decoded" in chk.detail
    assert ImageFile.LOAD_TRUNCATED_IMAGES is lenient_pil  # the caller's setting is restored


@pytest.mark.parametrize("case", ["zero", "tiny", "huge", "not_pil", "corrupt"])
def test_bad_images_are_a_verdict(photos, case):
    good = _pil(photos["rocket"].image)
    params = GateParams()
    if case == "zero":
        bad = Image.new("RGB", (0, 0))
    elif case == "tiny":
        bad = Image.new("RGB", (8, 300))
    elif case == "huge":
        bad, params = good, GateParams(max_pixels=10_000)
    elif case == "not_pil":
        bad = np.zeros((10, 10, 3), np.uint8)
    else:
        bad = _corrupt_png(photos["rocket"].image)
    chk = check_edit(
        good, bad, edit_type="MODIFY", target="x", locator=BoxMaskProvider((0, 0, 10, 10)), params=params
    )
    assert chk.verdict == "bad_image" and not chk.passed and chk.detail


def test_unknown_edit_type_is_a_caller_error(photos):
    img = _pil(photos["rocket"].image)
    with pytest.raises(ValueError, match="edit_type must be one of"):
        check_edit(img, img, edit_type="SWAP", target="x", locator=BoxMaskProvider((0, 0, 10, 10)))


def test_artefacts_are_written(tmp_path, photos, edits):
    ph = photos["coffee"]
    edited = edits.local_edit(ph, "recolour", None)
    chk = check_edit(
        _pil(ph.image),
        _pil(edited),
        edit_type="MODIFY",
        target="cup",
        locator=BoxMaskProvider(ph.box),
        artefact_dir=tmp_path / "step1",
    )
    assert set(chk.artefacts) == {"change_heatmap", "mask", "overlay", "panel", "record"}
    for fname in chk.artefacts.values():
        assert (tmp_path / "step1" / fname).is_file()
    saved = EditCheck.model_validate(json.loads((tmp_path / "step1" / "check.json").read_text()))
    assert saved == chk
    with Image.open(tmp_path / "step1" / "panel.png") as panel:
        assert panel.size == (4 * ph.image.shape[1], ph.image.shape[0])
    with Image.open(tmp_path / "step1" / "mask.png") as m:
        assert m.mode == "L" and m.size == (ph.image.shape[1], ph.image.shape[0])
