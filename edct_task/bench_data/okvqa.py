"""OK-VQA in its published layout: question and annotation JSON, COCO images.

``OpenEnded_mscoco_val2014_questions.json``: ``{"data_subtype": "val2014", "questions":
[{"image_id", "question", "question_id"}, …], …}``.
``mscoco_val2014_annotations.json``: ``{"annotations": [{"question_id", "image_id",
"question_type", "answer_type", "answers": [{"answer", "raw_answer", …}, …]}, …], …}``.
Images: ``<coco dir>/COCO_val2014_000000xxxxxx.jpg`` (the ``val2014`` folder itself, or its parent).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from edct_task.bench_data.domain import Domain, Hub, Input
from edct_task.bench_data.format import BenchDataError, Candidate, check_unique
from edct_task.bench_data.sources import RuleTally, SourceScan, load_json

SOURCE = "OK-VQA"
QUESTIONS_LAYOUT = 'an object with a "questions" list of {image_id, question, question_id}'
ANNOTATIONS_LAYOUT = 'an object with an "annotations" list of {question_id, image_id, answers: [{answer}]}'
YES_NO = {"yes", "no"}


def rules() -> list[RuleTally]:
    return [
        RuleTally(
            "okvqa.has_annotation", "the question has an annotation with the same question and image id"
        ),
        RuleTally(
            "okvqa.not_yes_no",
            "drop questions whose most frequent gold answer is yes/no (they elicit thin explanations)",
        ),
    ]


def scan(paths: Mapping[str, Path | None]) -> SourceScan:
    """Read OK-VQA (``questions``, ``annotations``, ``images``, checked by ``DOMAIN.inputs``) and
    apply its rules; images are located, not read."""
    qpath, apath, images = Path(paths["questions"]), Path(paths["annotations"]), Path(paths["images"])
    qdoc = load_json(qpath, QUESTIONS_LAYOUT)
    adoc = load_json(apath, ANNOTATIONS_LAYOUT)
    questions = _records(qdoc, "questions", ("image_id", "question", "question_id"), qpath, QUESTIONS_LAYOUT)
    annotations = _records(
        adoc, "annotations", ("question_id", "image_id", "answers"), apath, ANNOTATIONS_LAYOUT
    )
    subtype = str(qdoc.get("data_subtype") or "val2014")
    if (images / subtype).is_dir():
        images = images / subtype
    check_unique((str(q["question_id"]) for q in questions), f"{qpath} (question_id)")
    check_unique((str(a["question_id"]) for a in annotations), f"{apath} (question_id)")
    by_qid = {str(a["question_id"]): a for a in annotations}

    out = SourceScan(
        "okvqa",
        SOURCE,
        {"questions": qpath, "annotations": apath},
        {"images": images},
        rules(),
        items_read=len(questions),
    )
    for q in questions:
        qid = str(q["question_id"])
        item_id = f"okvqa-{qid}"
        ann = by_qid.get(qid)
        if ann is None or str(ann["image_id"]) != str(q["image_id"]):
            out.remove(item_id, "okvqa.has_annotation")
            continue
        answers = _answers(ann, apath)
        top = Counter(answers).most_common(1)[0][0] if answers else ""
        if top.strip().lower() in YES_NO:
            out.remove(item_id, "okvqa.not_yes_no")
            continue
        image_id = int(q["image_id"])
        out.candidates.append(
            Candidate(
                id=item_id,
                domain="okvqa",
                question=str(q["question"]).strip(),
                source=SOURCE,
                source_id=qid,
                image_path=images / f"COCO_{subtype}_{image_id:012d}.jpg",
                metadata={
                    "image_id": image_id,
                    "answer": top,
                    "answers": answers,
                    "question_type": str(ann.get("question_type", "")),
                    "answer_type": str(ann.get("answer_type", "")),
                },
            )
        )
    return out


def _records(doc: Any, key: str, fields: tuple[str, ...], path: Path, layout: str) -> list[dict[str, Any]]:
    if not isinstance(doc, dict) or not isinstance(doc.get(key), list):
        raise BenchDataError(f"{path}: wrong layout, expected {layout}")
    for i, rec in enumerate(doc[key]):
        if not isinstance(rec, dict) or any(f not in rec for f in fields):
            raise BenchDataError(
                f"{path}: wrong layout, {key}[{i}] lacks one of {list(fields)} (expected {layout})"
            )
    return doc[key]


def _answers(ann: dict[str, Any], path: Path) -> list[str]:
    answers = ann["answers"]
    if not isinstance(answers, list) or not all(isinstance(a, dict) and "answer" in a for a in answers):
        raise BenchDataError(
            f"{path}: wrong layout, question {ann['question_id']}: answers must be a list of {{answer, …}}"
        )
    return [str(a["answer"]) for a in answers]


DOMAIN = Domain(
    name="okvqa",
    label=SOURCE,
    default_count=160,
    inputs=(
        Input("questions", "--okvqa-questions", "OpenEnded_mscoco_val2014_questions.json"),
        Input("annotations", "--okvqa-annotations", "mscoco_val2014_annotations.json"),
        Input("images", "--coco-images", "COCO val2014 folder (COCO_val2014_000000xxxxxx.jpg)", "folder"),
    ),
    scan=scan,
    hub=Hub(
        "lmms-lab-encoder/OK-VQA",
        "the Hub dataset lmms-eval's ok_vqa task reads (lmms-lab-encoder/OK-VQA, split val2014), "
        "or a local folder laid out like it",
        "edct_task.bench_data.hub:scan_okvqa",
    ),
    description="outside-knowledge questions about COCO photos",
)
"""OK-VQA's registration (``edct_task.bench_data.domains``)."""
