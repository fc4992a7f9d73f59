"""Tiny copies of the three sources in their published layouts, written by the tests.

Every item is listed with the rule it is meant to hit, so the tests can check the counts.
"""

from __future__ import annotations

import base64
import csv
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

ImageFactory = Callable[[int], Image.Image]


def noise_image(i: int) -> Image.Image:
    """A small distinct RGB image (seeded noise)."""
    rng = np.random.default_rng(i)
    return Image.fromarray(rng.integers(0, 256, size=(24, 32, 3), dtype=np.uint8))


def photo_image(i: int) -> Image.Image:
    """scikit-image's bundled photographs, downscaled."""
    from skimage import data

    photos = (data.astronaut, data.chelsea, data.coffee, data.rocket)
    im = Image.fromarray(photos[i % len(photos)]()).convert("RGB")
    im.thumbnail((160, 160))
    return im


def _jpeg(path: Path, image: Image.Image) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path, format="JPEG", quality=90)


@dataclass
class Sources:
    okvqa_questions: Path
    okvqa_annotations: Path
    coco_images: Path
    drivelm_json: Path
    nuscenes_root: Path
    threedsr_table: Path
    threedsr_images: Path

    def kwargs(self, **override: Path | None) -> dict[str, dict[str, dict[str, Path]]]:
        """``BuildRequest``'s ``inputs=`` for these files (a field named in ``override`` replaced;
        None leaves that input out)."""
        values = {**self.__dict__, **override}
        inputs: dict[str, dict[str, Path]] = {}
        for name, (domain, key) in INPUT_OF.items():
            if values[name] is not None:
                inputs.setdefault(domain, {})[key] = values[name]
        return {"inputs": inputs}


INPUT_OF = {
    "okvqa_questions": ("okvqa", "questions"),
    "okvqa_annotations": ("okvqa", "annotations"),
    "coco_images": ("okvqa", "images"),
    "drivelm_json": ("drivelm", "qa"),
    "nuscenes_root": ("drivelm", "nuscenes_root"),
    "threedsr_table": ("3dsr", "table"),
    "threedsr_images": ("3dsr", "images"),
}
"""Each ``Sources`` field's domain and ``Input.name`` (the domains' records)."""


# OK-VQA: 5 questions; 3 eligible, 1 yes/no, 1 without annotation.
OKVQA_ELIGIBLE = 3
OKVQA_REMOVED = {"okvqa.has_annotation": 1, "okvqa.not_yes_no": 1}
# DriveLM: see the QA list below; 4 eligible (2 preferred).
DRIVELM_ELIGIBLE = 4
DRIVELM_REMOVED = {
    "drivelm.front_camera_image": 1,
    "drivelm.image_coordinates": 2,
    "drivelm.technical_artefacts": 1,
    "drivelm.front_camera_only": 2,
    "drivelm.has_answer": 1,
}
# 3DSRBench: 6 rows; 3 eligible, 2 outside the orientation family, 1 circular variant.
THREEDSR_ELIGIBLE = 3
THREEDSR_REMOVED = {"3dsr.orientation_family": 2, "3dsr.one_variant": 1}
DRIVELM_FRAME = "f0a1b2c3d4e5f60718293a4b5c6d7e8f"


def write_okvqa(root: Path, image: ImageFactory) -> tuple[Path, Path, Path]:
    coco = root / "coco"
    qs = [
        (297147, 2971475, "What sport can you use this for?", ["racing"] * 6 + ["motocross"] * 4),
        (262148, 2621485, "What is the name of the famous dreamer who spoke at this place?", ["martin"] * 10),
        (458752, 4587525, "What breed is this cat?", ["tabby"] * 7 + ["domestic"] * 3),
        (393226, 3932265, "Is this cat hungry?", ["yes"] * 8 + ["no"] * 2),
        (131074, 1310745, "What drink is in the cup?", None),  # no annotation
    ]
    questions = {
        "license": {"url": "http://creativecommons.org/licenses/by/4.0/", "name": "CC BY 4.0"},
        "data_subtype": "val2014",
        "task_type": "Open-Ended",
        "data_type": "mscoco",
        "questions": [{"image_id": im, "question": q, "question_id": qid} for im, qid, q, _ in qs],
    }
    annotations = {
        "license": questions["license"],
        "data_subtype": "val2014",
        "annotations": [
            {
                "image_id": im,
                "question_id": qid,
                "question_type": "other",
                "answer_type": "other",
                "confidence": 3,
                "answers": [
                    {"answer_id": j + 1, "raw_answer": a, "answer_confidence": "yes", "answer": a}
                    for j, a in enumerate(answers)
                ],
            }
            for im, qid, _, answers in qs
            if answers is not None
        ],
    }
    for i, (im, *_rest) in enumerate(qs):
        _jpeg(coco / "val2014" / f"COCO_val2014_{im:012d}.jpg", image(i))
    qpath, apath = root / "OpenEnded_mscoco_val2014_questions.json", root / "mscoco_val2014_annotations.json"
    qpath.write_text(json.dumps(questions))
    apath.write_text(json.dumps(annotations))
    return qpath, apath, coco


def write_drivelm(root: Path, image: ImageFactory) -> tuple[Path, Path]:
    nus = root / "nuscenes"
    front = "n008-2018-08-01-15-16-36-0400__CAM_FRONT__1533151603512404.jpg"
    back = "n008-2018-08-01-15-16-36-0400__CAM_BACK__1533151603537558.jpg"
    _jpeg(nus / "samples" / "CAM_FRONT" / front, image(10))
    _jpeg(nus / "samples" / "CAM_BACK" / back, image(11))
    front2 = "n015-2018-07-18-11-07-57+0800__CAM_FRONT__1531883530412470.jpg"
    _jpeg(nus / "samples" / "CAM_FRONT" / front2, image(12))

    def qa(q: str, a: str) -> dict:
        return {"Q": q, "A": a, "C": None, "con_up": None, "con_down": None, "cluster": None, "layer": None}

    frame = {
        "key_object_infos": {
            "<c1,CAM_FRONT,714.2,530.8>": {
                "Category": "Traffic element",
                "Status": None,
                "Visual_description": "Red traffic light.",
                "2d_bbox": [700.0, 500.0, 730.0, 560.0],
            }
        },
        "QA": {
            "perception": [
                # front_camera_only (the answer cites the back camera)
                qa(
                    "What are the important objects in the current scene? Those objects will be considered "
                    "for the future reasoning and driving decision.",
                    "There is a red traffic light to the front of the ego vehicle and a white sedan to the "
                    "back of the ego vehicle. The IDs of these objects are <c1,CAM_FRONT,714.2,530.8> and "
                    "<c2,CAM_BACK,883.3,540.8>.",
                ),
                # image_coordinates
                qa("What is the status of the traffic light <c1,CAM_FRONT,714.2,530.8>?", "It is red."),
                qa(
                    "Is the traffic light ahead of the ego vehicle red or green?", "Red."
                ),  # eligible, preferred
                qa("What is the colour of the car at (714.2, 530.8)?", "White."),  # image_coordinates
            ],
            "prediction": [
                qa("Is there any pedestrian crossing in front of the ego vehicle?", "Yes, one pedestrian."),
                # front_camera_only (the question names another camera)
                qa("What is behind the ego vehicle in the back camera view?", "A white sedan."),
            ],
            "planning": [
                qa("What actions could the ego vehicle take based on what it sees ahead?", "Brake gently."),
                qa("Would obj_id_2 be in the moving direction of the ego vehicle?", "No."),  # artefact
                qa("What should the ego vehicle do next?", ""),  # has_answer
            ],
            "behavior": [
                qa(
                    "Predict the behavior of the ego vehicle.",
                    "The ego vehicle is slightly steering to the left. The ego vehicle is driving slowly.",
                )
            ],
        },
        "image_paths": {
            "CAM_FRONT": f"../nuscenes/samples/CAM_FRONT/{front}",
            "CAM_BACK": f"../nuscenes/samples/CAM_BACK/{back}",
        },
    }
    no_front = {
        "key_object_infos": {},
        "QA": {"perception": [qa("What is the moving status of the truck?", "Going ahead.")]},
        "image_paths": {"CAM_BACK": f"../nuscenes/samples/CAM_BACK/{back}"},
    }
    doc = {
        "f0a1b2c3d4e5f60718293a4b5c6d7e8f0": {
            "scene_description": "The ego vehicle waits at a red light in a city.",
            "key_frames": {DRIVELM_FRAME: frame, "aa11bb22cc33dd44ee55ff6677889900": no_front},
        },
    }
    path = root / "v1_1_train_nus.json"
    path.write_text(json.dumps(doc))
    return path, nus


THREEDSR_COLUMNS = [
    "index",
    "question",
    "A",
    "B",
    "C",
    "D",
    "answer",
    "category",
    "image_source",
    "image_url",
]


def _threedsr_rows() -> list[dict[str, str]]:
    url = "http://images.cocodataset.org/train2017/{:012d}.jpg"
    return [
        # kept
        dict(
            index="1",
            question="Is the person facing towards the camera or away?",
            A="towards",
            B="away",
            C="",
            D="",
            answer="A",
            category="orientation_viewpoint",
            image_source="coco",
            image_url=url.format(1),
        ),
        dict(
            index="2",
            question="Is the cat on the left of the chair, from the chair's own viewpoint?",
            A="yes",
            B="no",
            C="",
            D="",
            answer="B",
            category="orientation_on_the_left",
            image_source="coco",
            image_url=url.format(2),
        ),
        dict(
            index="3",
            question="Are the two cars facing the same direction?",
            A="yes",
            B="no",
            C="",
            D="",
            answer="A",
            category="multi_object_same_direction",
            image_source="coco",
            image_url=url.format(3),
        ),
        # circular variant of index 1 (options permuted)
        dict(
            index="4",
            question="Is the person facing towards the camera or away?",
            A="away",
            B="towards",
            C="",
            D="",
            answer="B",
            category="orientation_viewpoint",
            image_source="coco",
            image_url=url.format(1),
        ),
        # outside the orientation family
        dict(
            index="5",
            question="Which object is higher, the lamp or the clock?",
            A="lamp",
            B="clock",
            C="",
            D="",
            answer="A",
            category="height_higher",
            image_source="coco",
            image_url=url.format(4),
        ),
        dict(
            index="6",
            question="Is the cup closer to the camera than the plate?",
            A="yes",
            B="no",
            C="",
            D="",
            answer="A",
            category="location_closer_to_camera",
            image_source="coco",
            image_url=url.format(5),
        ),
    ]


def write_threedsr(root: Path, image: ImageFactory) -> tuple[Path, Path]:
    images = root / "3dsr_images"
    for i in range(1, 6):
        _jpeg(images / f"{i:012d}.jpg", image(20 + i))
    path = root / "3dsrbench_v1.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, THREEDSR_COLUMNS)
        w.writeheader()
        w.writerows(_threedsr_rows())
    return path, images


def write_threedsr_tsv(root: Path, image: ImageFactory) -> Path:
    """The VLMEvalKit layout: a TSV whose ``image`` column holds base64 JPEG bytes."""
    path = root / "3dsrbench_v1_vlmevalkit.tsv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        cols = [c for c in THREEDSR_COLUMNS if c != "image_url"] + ["image"]
        w = csv.DictWriter(f, cols, delimiter="\t")
        w.writeheader()
        for r in _threedsr_rows():
            buf = io.BytesIO()
            image(int(r["image_url"][-8:-4])).save(buf, format="JPEG")
            w.writerow(
                {
                    **{k: v for k, v in r.items() if k != "image_url"},
                    "image": base64.b64encode(buf.getvalue()).decode(),
                }
            )
    return path


def write_sources(root: Path, image: ImageFactory = noise_image) -> Sources:
    q, a, coco = write_okvqa(root, image)
    d, nus = write_drivelm(root, image)
    t, ti = write_threedsr(root, image)
    return Sources(q, a, coco, d, nus, t, ti)
