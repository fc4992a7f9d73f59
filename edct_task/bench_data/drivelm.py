"""DriveLM-nuScenes in its published layout (``v1_1_train_nus.json``) with nuScenes images.

``{scene_token: {"scene_description", "key_frames": {frame_token: {"key_object_infos",
"QA": {"perception": [{"Q", "A", …}], "prediction": […], "planning": […], "behavior": […]},
"image_paths": {"CAM_FRONT": "../nuscenes/samples/CAM_FRONT/<file>.jpg", …}}}}}``.
Images resolve under the nuScenes root: ``<root>/samples/CAM_FRONT/<file>.jpg``.

EDCT-Bench's DriveLM rules: front camera only; questions with image coordinates or other technical
artefacts are dropped; every question is asked under the ego-vehicle system prompt.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from edct_task.bench_data.domain import Domain, Hub, Input
from edct_task.bench_data.format import BenchDataError, Candidate
from edct_task.bench_data.sources import RuleTally, SourceScan, load_json

SOURCE = "DriveLM-nuScenes"
FRONT = "CAM_FRONT"
CATEGORIES = ("perception", "prediction", "planning", "behavior")
LAYOUT = (
    'an object {scene_token: {"key_frames": {frame_token: {"QA": {"perception": [{"Q", "A"}], …}, '
    '"image_paths": {"CAM_FRONT": …}}}}}'
)
SYSTEM_PROMPT = (
    "You are assisting the driver of a car that we call the ego vehicle. The image is what the "
    "ego vehicle's front camera sees at this moment, looking ahead in its direction of travel. "
    "Answer every question from the ego vehicle's point of view."
)
"""The system prompt that defines the ego vehicle and says the image is its front camera view, in
our own words."""

# An object tag such as <c1,CAM_FRONT,714.2,530.8>: an id, a camera and pixel coordinates.
OBJECT_TAG = re.compile(r"<[^<>]*\bCAM_[A-Z_]+\b[^<>]*>")
PIXEL_PAIR = re.compile(r"[(\[]\s*-?\d+(?:\.\d+)?\s*,\s*-?\d+(?:\.\d+)?\s*[)\]]")
ARTEFACT = re.compile(r"<[^<>]*>|\bCAM_[A-Z_]+\b|\{|\}|\\n|\b\w+_\w+\b")
OTHER_CAMERA = re.compile(
    r"\bCAM_(?:FRONT_LEFT|FRONT_RIGHT|BACK|BACK_LEFT|BACK_RIGHT)\b"
    r"|\b(?:back|rear|front[- ]left|front[- ]right|left|right|side)[- ](?:camera|view)s?\b"
    r"|\b(?:six|all|surrounding|other) (?:cameras|views|images)\b",
    re.I,
)
VISUAL_CUE = re.compile(
    r"\b(?:traffic (?:light|signal|sign|cone)s?|red light|green light|yellow light|pedestrians?|"
    r"crosswalk|zebra|stop sign|signs?|barriers?|cones?|lane markings?|brake lights?|turn signal|"
    r"bicycles?|cyclists?|motorcycles?|trucks?|bus(?:es)?)\b",
    re.I,
)


def rules() -> list[RuleTally]:
    return [
        RuleTally("drivelm.front_camera_image", "the key frame has a CAM_FRONT image (front camera only)"),
        RuleTally(
            "drivelm.image_coordinates",
            "drop questions with image coordinates, e.g. <c1,CAM_FRONT,714.2,530.8> or (714.2, 530.8)",
        ),
        RuleTally(
            "drivelm.technical_artefacts",
            "drop questions with other technical artefacts: <...> tags, camera identifiers, "
            "snake_case identifiers, braces, escaped newlines",
        ),
        RuleTally(
            "drivelm.front_camera_only",
            "drop questions whose question or answer refers to a camera other than the front one "
            "(not answerable from the front view)",
        ),
        RuleTally("drivelm.has_answer", "the QA pair has a non-empty question and answer"),
    ]


def scan(paths: Mapping[str, Path | None]) -> SourceScan:
    """Read DriveLM-nuScenes (``qa``, ``nuscenes_root``, checked by ``DOMAIN.inputs``) and apply
    its rules; images are located, not read."""
    path, root = Path(paths["qa"]), Path(paths["nuscenes_root"])
    if not (root / "samples" / FRONT).is_dir():
        raise BenchDataError(
            f"{root}: wrong layout for --nuscenes-root, expected <root>/samples/{FRONT}/ "
            "(the nuScenes folder)"
        )
    out = SourceScan("drivelm", SOURCE, {"qa": path}, {"nuscenes_root": root}, rules())
    return scan_document(out, path, lambda front: FrontImage(path=resolve_image(root, front)))


@dataclass(frozen=True)
class FrontImage:
    """Where a key frame's front-camera image is: a file, or a reader (a member of a zip archive)."""

    path: Path | None = None
    reader: Callable[[], bytes] | None = None
    label: str = ""


def scan_document(out: SourceScan, path: Path, locate: Callable[[str], FrontImage]) -> SourceScan:
    """Apply the DriveLM rules to the QA JSON ``path`` and add the candidates to ``out``;
    ``locate(image_paths["CAM_FRONT"])`` finds a kept pair's image."""
    doc = load_json(path, LAYOUT)
    if not isinstance(doc, dict):
        raise BenchDataError(f"{path}: wrong layout, expected {LAYOUT}")
    for scene_token, scene in doc.items():
        frames = scene.get("key_frames") if isinstance(scene, dict) else None
        if not isinstance(frames, dict):
            raise BenchDataError(
                f"{path}: wrong layout, scene {scene_token} has no 'key_frames' object ({LAYOUT})"
            )
        for frame_token, frame in frames.items():
            qa, image_paths = _frame(frame, path, scene_token, frame_token)
            front = image_paths.get(FRONT)
            for category in CATEGORIES:
                for i, pair in enumerate(qa.get(category) or []):
                    out.items_read += 1
                    item_id = f"drivelm-{frame_token}-{category}{i}"
                    if not isinstance(pair, dict):
                        raise BenchDataError(
                            f"{path}: wrong layout, {scene_token}/{frame_token}/QA/{category}[{i}] "
                            "is not {Q, A}"
                        )
                    question, answer = str(pair.get("Q") or "").strip(), str(pair.get("A") or "").strip()
                    rule = _failed_rule(question, answer, front)
                    if rule:
                        out.remove(item_id, rule)
                        continue
                    image = locate(str(front))
                    out.candidates.append(
                        Candidate(
                            id=item_id,
                            domain="drivelm",
                            question=question,
                            source=SOURCE,
                            source_id=f"{scene_token}/{frame_token}/{category}/{i}",
                            image_path=image.path,
                            image_reader=image.reader,
                            image_label=image.label,
                            metadata={
                                "scene_token": scene_token,
                                "frame_token": frame_token,
                                "category": category,
                                "qa_index": i,
                                "answer": answer,
                                "camera": FRONT,
                                "image_path": str(front),
                            },
                            preferred=bool(VISUAL_CUE.search(question) or VISUAL_CUE.search(answer)),
                        )
                    )
    return out


def _frame(frame: Any, path: Path, scene: str, token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    if not isinstance(frame, dict) or not isinstance(frame.get("QA"), dict):
        raise BenchDataError(f"{path}: wrong layout, key frame {scene}/{token} has no 'QA' object ({LAYOUT})")
    image_paths = frame.get("image_paths")
    if not isinstance(image_paths, dict):
        raise BenchDataError(f"{path}: wrong layout, key frame {scene}/{token} has no 'image_paths' object")
    return frame["QA"], image_paths


def _failed_rule(question: str, answer: str, front: Any) -> str | None:
    """The first rule (in ``rules()`` order) a QA pair breaks, or None."""
    if not front:
        return "drivelm.front_camera_image"
    if OBJECT_TAG.search(question) or PIXEL_PAIR.search(question):
        return "drivelm.image_coordinates"
    if ARTEFACT.search(question):
        return "drivelm.technical_artefacts"
    if OTHER_CAMERA.search(question) or OTHER_CAMERA.search(answer):
        return "drivelm.front_camera_only"
    if not question or not answer:
        return "drivelm.has_answer"
    return None


def resolve_image(root: Path, image_path: str) -> Path:
    """A DriveLM ``image_paths`` entry (``../nuscenes/samples/CAM_FRONT/x.jpg``) under ``root``."""
    parts = PurePosixPath(image_path.replace("\\", "/")).parts
    if "samples" in parts:
        return root.joinpath(*parts[parts.index("samples") :])
    return root / "samples" / FRONT / parts[-1]


DOMAIN = Domain(
    name="drivelm",
    label=SOURCE,
    default_count=80,
    inputs=(
        Input("qa", "--drivelm-json", "DriveLM QA JSON, e.g. v1_1_train_nus.json"),
        Input("nuscenes_root", "--nuscenes-root", "nuScenes folder holding samples/CAM_FRONT/", "folder"),
    ),
    scan=scan,
    hub=Hub(
        "OpenDriveLab/DriveLM",
        "OpenDriveLab/DriveLM (v1_1_train_nus.json and drivelm_nus_imgs_train.zip), "
        "or a local folder holding those two files",
        "edct_task.bench_data.hub:scan_drivelm",
    ),
    system_prompt=SYSTEM_PROMPT,
    description="driving questions about a car's front-camera view",
)
"""DriveLM-nuScenes' registration (``edct_task.bench_data.domains``)."""
