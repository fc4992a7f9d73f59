"""Detector/segmenter contracts, cascades, GrabCut, DetectAndSegment and the detector factories.

The end-to-end test finds the astronaut's face with the cascade detector (OpenCV's bundled Haar
cascade; scikit-image's LBP face cascade is the fallback engine where OpenCV ships none), masks it
with GrabCut, and runs the gate on a
programmatic recolouring of that face (pass) and of the whole photo (fail).
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import skimage.data
from PIL import Image
from support.backends import build

import verification
from edct_task.core.errors import ConfigError
from edct_task.roles import RoleSpec, build_roles
from model_adapters.errors import OptionsError
from verification.cascade_detector import CascadeDetector, cascade_for_target
from verification.check import check_edit
from verification.detect_and_segment import DetectAndSegment, FixedBoxDetector
from verification.detection import Detections, Detector, finalize_detections, normalize_target
from verification.factories import build_detector, build_segmenter
from verification.localization import MaskProvider
from verification.segmentation import BoxSegmenter, GrabCutSegmenter, Segmenter

# The astronaut's face as the cascades find it (512×512 photo): x0, y0, x1, y1.
ASTRONAUT_FACE = (177.0, 67.0, 270.0, 160.0)  # OpenCV's haarcascade_frontalface_default
ASTRONAUT_FACE_LBP = (172.0, 66.0, 273.0, 167.0)  # scikit-image's LBP frontal-face cascade


@pytest.fixture(scope="module")
def astronaut() -> Image.Image:
    return Image.fromarray(skimage.data.astronaut())


@pytest.fixture(scope="module")
def cascade() -> CascadeDetector:
    return CascadeDetector()


def _recolour(img: np.ndarray, where: np.ndarray) -> np.ndarray:
    hsv = cv2.cvtColor(img, cv2.COLOR_RGB2HSV)
    hsv[..., 0] = (hsv[..., 0].astype(np.int16) + 60) % 180
    hsv[..., 1] = np.maximum(hsv[..., 1], 140)
    out = cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)
    res = img.copy()
    res[where] = out[where]
    return res


# ------------------------------------------------------------------------------- the contract


def test_public_surface():
    for name in (
        "Detector",
        "Detections",
        "Segmenter",
        "DetectAndSegment",
        "CascadeDetector",
        "GrabCutSegmenter",
        "BoxSegmenter",
        "finalize_detections",
    ):
        assert name in verification.__all__ and hasattr(verification, name)
    assert isinstance(CascadeDetector(), Detector)
    assert isinstance(GrabCutSegmenter(), Segmenter) and isinstance(BoxSegmenter(), Segmenter)
    assert isinstance(DetectAndSegment(FixedBoxDetector([(0, 0, 5, 5)]), BoxSegmenter()), MaskProvider)


def test_finalize_clips_filters_sorts_and_cuts():
    boxes = [(-10, -5, 30, 20), (50, 50, 40, 45), (0, 0, 0.5, 10), (10, 10, 20, 20), (1, 1, 2, np.nan)]
    scores = [0.5, 0.9, 0.99, 0.05, 0.8]
    d = finalize_detections(boxes, scores, (100, 60), threshold=0.1, detail="x")
    # clipped, inverted box reordered, sub-pixel and non-finite and below-threshold boxes dropped
    assert d.boxes == ((40.0, 45.0, 50.0, 50.0), (0.0, 0.0, 30.0, 20.0))
    assert d.scores == (0.9, 0.5) and d.found and len(d) == 2
    assert list(d) == list(zip(d.boxes, d.scores, strict=True))
    assert d.detail.startswith("x: 2 box(es) kept of 5 (threshold 0.1)")
    top = finalize_detections(boxes, scores, (100, 60), threshold=0.0, max_boxes=1)
    assert top.scores == (0.9,)


def test_finalize_not_found_details():
    none = finalize_detections([], [], (10, 10))
    assert not none.found and none.detail == "target not found: the detector returned no boxes"
    low = finalize_detections([(0, 0, 5, 5)], [0.2], (10, 10), threshold=0.5)
    assert not low.found and "none of 1 candidate box(es) reached threshold 0.5" in low.detail


def test_finalize_and_detections_validate():
    with pytest.raises(ValueError, match="one score per box"):
        finalize_detections([(0, 0, 1, 1)], [], (4, 4))
    with pytest.raises(ValueError, match="max_boxes"):
        finalize_detections([], [], (4, 4), max_boxes=0)
    with pytest.raises(ValueError, match=r"\(x0, y0, x1, y1\)"):
        finalize_detections([(0, 0, 1)], [1.0], (4, 4))
    with pytest.raises(ValueError, match="one score per box"):
        Detections(boxes=((0, 0, 1, 1),))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The Red  Car.", "red car"),
        ("  a cat ", "cat"),
        ("the astronaut's face", "astronaut's face"),
        ("", ""),
    ],
)
def test_normalize_target(text, expected):
    assert normalize_target(text) == expected


# ----------------------------------------------------------------------------------- cascades


@pytest.mark.parametrize(
    ("target", "keys"),
    [
        ("the astronaut's face", ("frontalface", "profileface")),
        ("Face", ("frontalface", "profileface")),
        ("his smiling face", ("frontalface", "profileface")),
        ("the cat's face", ("frontalcatface",)),
        ("cat", ("frontalcatface",)),
        ("licence plate", ("plate",)),
        ("the license-plate", ("plate",)),
        ("eyes", ("eye",)),
        ("the pedestrian", ("fullbody", "upperbody")),
        ("red car", ()),
        ("", ()),
    ],
)
def test_cascade_target_mapping(target, keys):
    assert cascade_for_target(target) == keys


def test_cascade_finds_the_astronauts_face(astronaut, cascade):
    d = cascade.detect(astronaut, "the astronaut's face")
    assert d.found and len(d) == 1 and d.scores == (1.0,)
    assert d.boxes[0] == ASTRONAUT_FACE
    assert "frontalface cascade (opencv, haarcascade_frontalface_default.xml)" in d.detail
    eyes = cascade.detect(astronaut, "eyes")
    assert len(eyes) == 2 and all(ASTRONAUT_FACE[0] < b[0] and b[2] < ASTRONAUT_FACE[2] for b in eyes.boxes)


def test_skimage_engine_finds_the_same_face(astronaut):
    d = CascadeDetector(engine="skimage").detect(astronaut, "face")
    assert d.found and d.boxes[0] == ASTRONAUT_FACE_LBP and "(skimage, lbpcascade" in d.detail
    iou_x = min(ASTRONAUT_FACE[2], ASTRONAUT_FACE_LBP[2]) - max(ASTRONAUT_FACE[0], ASTRONAUT_FACE_LBP[0])
    assert iou_x > 90  # both engines agree on where the face is


def test_cascade_unsupported_and_missing_targets_are_not_found(astronaut, cascade):
    car = cascade.detect(astronaut, "the red car")
    assert not car.found and "no cascade for 'the red car'" in car.detail and "face" in car.detail
    cat = cascade.detect(Image.fromarray(skimage.data.chelsea()), "cat face")
    assert not cat.found and "frontalcatface (opencv)" in cat.detail  # Chelsea is seen from the side
    nothing = cascade.detect(Image.fromarray(skimage.data.coffee()), "face")
    assert not nothing.found and nothing.detail.endswith(
        "target not found: no 'face' hits with cascade(s) frontalface (opencv), profileface (opencv)"
    )


def test_cascade_downscales_large_images_and_scales_boxes_back(astronaut):
    big = astronaut.resize((1024, 1024), Image.Resampling.BICUBIC)
    d = CascadeDetector(max_side=512).detect(big, "face")
    assert d.found  # the largest box (cascades rank by area) is the face, in the big image's pixels
    np.testing.assert_allclose(d.boxes[0], [2 * v for v in ASTRONAUT_FACE], atol=4)


def test_cascade_opencv_engine_path(monkeypatch, tmp_path, astronaut):
    """With OpenCV's cascade files and CascadeClassifier (OpenCV 4.x) the opencv engine is used."""
    calls = []

    class FakeClassifier:
        def __init__(self, path):
            self.path = path

        def empty(self):
            return False

        def detectMultiScale(self, grey, scaleFactor, minNeighbors, minSize):
            calls.append((self.path, grey.shape, scaleFactor, minNeighbors, minSize))
            return np.array([[10, 20, 30, 40]]) if "upperbody" in self.path else ()

    for fname in ("haarcascade_fullbody.xml", "haarcascade_upperbody.xml", "haarcascade_frontalcatface.xml"):
        (tmp_path / fname).write_text("<opencv_storage/>")
    monkeypatch.setattr(cv2, "CascadeClassifier", FakeClassifier, raising=False)
    det = CascadeDetector(engine="opencv", cascade_dir=tmp_path, min_neighbors=3)
    d = det.detect(astronaut, "person")
    # fullbody found nothing, upperbody is tried next
    assert [c[0].rsplit("/", 1)[-1] for c in calls] == [
        "haarcascade_fullbody.xml",
        "haarcascade_upperbody.xml",
    ]
    assert calls[0][1:4] == ((512, 512), 1.1, 3)
    assert d.boxes == ((10.0, 20.0, 40.0, 60.0),) and "upperbody cascade (opencv" in d.detail
    assert not det.detect(astronaut, "license plate").found  # file absent from this folder


def test_cascade_engine_opencv_needs_classifier(monkeypatch):
    monkeypatch.delattr(cv2, "CascadeClassifier", raising=False)
    with pytest.raises(ValueError, match=r"engine 'opencv' needs cv2\.CascadeClassifier"):
        CascadeDetector(engine="opencv")


@pytest.mark.parametrize(
    "kwargs", [{"engine": "dlib"}, {"scale_factor": 1.0}, {"min_neighbors": 0}, {"min_size_fraction": 0}]
)
def test_cascade_rejects_bad_parameters(kwargs):
    with pytest.raises(ValueError):
        CascadeDetector(**kwargs)


# ---------------------------------------------------------------------------------- segmenters


def test_box_segmenter_gives_one_mask_per_box(astronaut):
    masks = BoxSegmenter().segment(astronaut, [(0, 0, 10, 20), (100, 100, 110, 105)])
    assert [m.sum() for m in masks] == [200, 50] and masks[0].shape == (512, 512)


def test_grabcut_segments_inside_the_box(astronaut):
    (m,) = GrabCutSegmenter().segment(astronaut, [ASTRONAUT_FACE])
    x0, y0, x1, y1 = (int(v) for v in ASTRONAUT_FACE)
    inside = m[y0:y1, x0:x1].mean()
    assert m.dtype == bool and m.shape == (512, 512)
    assert 0.3 < inside < 0.98  # the face, not the whole box
    assert m.sum() == m[y0:y1, x0:x1].sum()  # nothing outside the box


def test_grabcut_without_background_gives_an_empty_mask(astronaut):
    (m,) = GrabCutSegmenter().segment(astronaut, [(0, 0, 512, 512)])
    assert not m.any()
    (tiny,) = GrabCutSegmenter().segment(astronaut, [(5, 5, 6, 6)])
    assert not tiny.any()


def test_detect_and_segment_unions_and_falls_back_to_boxes(astronaut):
    provider = DetectAndSegment(FixedBoxDetector([ASTRONAUT_FACE, (0, 0, 512, 512)]), GrabCutSegmenter())
    loc = provider.locate(astronaut, "face")
    assert loc.found and loc.mask.all()  # the whole-image box fell back to itself
    assert "1 empty mask(s) replaced by their box" in loc.detail and provider.name == "box+grabcut"
    assert provider.identity()["segmenter"]["backend"] == "grabcut"


def test_detect_and_segment_not_found_carries_the_reason(astronaut, cascade):
    loc = DetectAndSegment(cascade, GrabCutSegmenter()).locate(astronaut, "red car")
    assert not loc.found and loc.mask is None and "no cascade for 'red car'" in loc.detail


def test_detect_and_segment_checks_the_segmenter(astronaut):
    class Broken:
        name = "broken"

        def segment(self, image, boxes):
            return []

    with pytest.raises(RuntimeError, match="returned 0 masks for 1 boxes"):
        DetectAndSegment(FixedBoxDetector([(0, 0, 5, 5)]), Broken()).locate(astronaut, "x")


# ------------------------------------------------------------------------------ end to end


def test_cascade_grabcut_gate_verifies_a_face_edit(astronaut, tmp_path):
    provider = build("detector", "opencv-cascade", {})
    assert provider.name == "opencv-cascade+grabcut"
    orig = np.asarray(astronaut)
    face = provider.locate(astronaut, "face").mask
    local = Image.fromarray(_recolour(orig, face))
    chk = check_edit(
        astronaut,
        local,
        edit_type="MODIFY",
        target="astronaut's face",
        locator=provider,
        artefact_dir=tmp_path,
    )
    assert chk.passed and chk.verdict == "pass" and chk.n_boxes == 1
    assert chk.r_in > 0.5 and chk.r_out < 0.02
    assert "frontalface cascade" in chk.detail and "grabcut: 1 mask(s)" in chk.detail
    assert (tmp_path / "overlay.png").is_file() and (tmp_path / "check.json").is_file()

    global_edit = Image.fromarray(_recolour(orig, np.ones(orig.shape[:2], bool)))
    bad = check_edit(astronaut, global_edit, edit_type="MODIFY", target="face", locator=provider)
    assert not bad.passed and bad.verdict == "change_outside_target" and bad.r_out > 0.3


def test_cascade_miss_is_a_target_not_found_verdict(astronaut):
    provider = build("detector", "opencv-cascade", {"segmenter": "box"})
    chk = check_edit(astronaut, astronaut, edit_type="REMOVE", target="the flag", locator=provider)
    assert chk.verdict == "target_not_found" and "no cascade for 'the flag'" in chk.detail


# ---------------------------------------------------------------------------------- factories


def test_registered_detector_backends():
    """Each leaf owns its detectors; the composition root merges them with the calibration oracle."""
    from model_adapters.factories import RECORDS as ADAPTER_RECORDS
    from verification.factories import RECORDS

    assert {r.name for r in RECORDS if r.kind == "detector"} == {"opencv-cascade", "owlv2", "grounding-dino"}
    assert {r.name for r in ADAPTER_RECORDS if r.kind == "detector"} == {"moondream"}
    from edct_task.roles import available_backends

    assert {"opencv-cascade", "owlv2", "grounding-dino", "moondream", "calibration-oracle"} <= set(
        available_backends()["detector"]
    )


def test_segmenter_defaults_and_nesting():
    cascade = build("detector", "opencv-cascade", {"min_neighbors": 12, "segmenter": {"backend": "box"}})
    assert cascade.segmenter.name == "box" and cascade.detector.min_neighbors == 12
    grab = build_segmenter({"backend": "grabcut", "iterations": 2})
    assert isinstance(grab, GrabCutSegmenter) and grab.iterations == 2
    assert isinstance(build_segmenter(None), BoxSegmenter)


@pytest.mark.parametrize(
    ("backend", "options", "match"),
    [
        ("opencv-cascade", {"colour": 1}, r"does not take option\(s\) colour \(known: .*segmenter"),
        ("opencv-cascade", {"scale_factor": 0.9}, "scale_factor must be > 1"),
        ("opencv-cascade", {"segmenter": {"backend": "magic"}}, "unknown segmenter backend 'magic'"),
        (
            "opencv-cascade",
            {"segmenter": {"backend": "grabcut", "x": 1}},
            r"segmenter 'grabcut' does not take",
        ),
        ("opencv-cascade", {"segmenter": {"backend": "sam2"}}, "segmenter 'sam2' needs model"),
        ("opencv-cascade", {"segmenter": 3}, "segmenter must be a name or a mapping"),
        ("owlv2", {}, "detector 'owlv2' needs model"),
        ("owlv2", {"model": "/nonexistent/owlv2", "threshold": 0.1}, "detector 'owlv2': "),
        ("grounding-dino", {"model": "m", "text_treshold": 0.2}, "text_treshold"),
        ("moondream", {}, "MOONDREAM_API_KEY"),
    ],
)
def test_bad_options_are_clear_errors(backend, options, match, monkeypatch):
    monkeypatch.delenv("MOONDREAM_API_KEY", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from edct_task.roles import REGISTRY, build_backend

    with pytest.raises(OptionsError, match=match):
        build_backend(REGISTRY["detector"][backend], options)


def test_build_detector_rejects_unknown_backend():
    with pytest.raises(OptionsError, match="unknown detector backend 'yolo'"):
        build_detector("yolo", {})


def test_build_roles_reports_bad_detector_options_as_config_errors():
    specs = {
        "target": RoleSpec("calibration-reference", {}),
        "extractor": RoleSpec("calibration-rules", {}),
        "judge": RoleSpec("calibration-rules", {}),
        "editor": RoleSpec("calibration-editor", {}),
        "detector": RoleSpec("opencv-cascade", {"min_neighbours": 3}),
    }
    with pytest.raises(ConfigError, match=r"roles\.detector \(backend 'opencv-cascade'\): .*min_neighbours"):
        build_roles(specs)
    specs["detector"] = RoleSpec("opencv-cascade", {"segmenter": {"backend": "grabcut", "iterations": 3}})
    roles = build_roles(specs)
    assert roles.detector.name == "opencv-cascade+grabcut"
