"""``edct export-counterfactuals``: the verified counterfactual pairs of a run as training data
(paper §4.6).

A pair is one chain step that passed localised edit verification: the sample's original image
and the verified edited image after edits 1..j, the question, the original answer and
explanation, the re-query answer and explanation on the edited image, the cumulative edit
instructions, and the judge's scores for that step. Steps that failed verification (or were
never verified) are not exported; the export manifest counts them.

Output folder:

``dataset/``                 ``datasets`` ``save_to_disk`` folder, one row per pair (``FEATURES``)
``counterfactuals.jsonl``    chat fine-tuning format, one line per pair that has a re-query answer:
                             ``messages`` (system?, user [image, text], assistant [text]) on the
                             edited image with the re-query answer; ``original_messages`` the same on
                             the original image with the original answer; plus the pair fields
``images/<sample>/``         ``original.png``, ``step<j>.png`` and ``step<j>_mask.png`` (the gate's
                             dilated target mask M of the verified edit, white inside; written
                             when the run kept the gate's maps) referenced by the JSONL
``export_manifest.json``     run folder, counts, what was left out and why

The assistant turn is the *target model's* answer on the counterfactual, not a gold label:
filter on ``answer_consistent`` (the judge's AC_j) — or pass ``consistent_only`` — to keep only
answers the judge found consistent with the edit.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edct_task.bench_data.format import BenchDataError
from edct_task.bench_data.output import write_folder
from edct_task.engine.files import atomic_write, json_text
from edct_task.run.outputs import IMAGES_DIR, LoadedRun, RunReadError, load_run, sample_folder

EXPORT_VERSION = 2
"""2: the edit mask M of each pair (``edit_mask``), for ``edct attention``'s localization score."""
JSONL_NAME = "counterfactuals.jsonl"
DATASET_DIR = "dataset"
MANIFEST_NAME = "export_manifest.json"


def features() -> Any:
    import datasets

    text = datasets.Value("string")
    num = datasets.Value("int32")
    return datasets.Features(
        {
            "id": text,
            "sample_id": text,
            "domain": text,
            "step": num,
            "question": text,
            "system_prompt": text,
            "original_image": datasets.Image(),
            "edited_image": datasets.Image(),
            "original_answer": text,
            "original_explanation": text,
            "new_answer": text,
            "new_explanation": text,
            "instruction": text,
            "instructions": datasets.List(text),
            "concepts": datasets.List(text),
            "answer_consistent": num,
            "explanation_faithful": num,
            "graded": num,
            "r_in": datasets.Value("float64"),
            "r_out": datasets.Value("float64"),
            "sample_status": text,
            "edit_type": text,
            "edit_mask": datasets.Image(),
        }
    )


@dataclass
class ExportResult:
    path: Path
    pairs: int
    chat_lines: int
    manifest: dict[str, Any]


def read_run(run_dir: Path) -> LoadedRun:
    """An ``edct run`` output folder (or lmms-eval output with logged samples), read back."""
    try:
        return load_run(run_dir)
    except RunReadError as exc:
        raise BenchDataError(str(exc)) from None


def collect_pairs(
    run_dir: Path, *, consistent_only: bool = False
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Pair rows (image fields are file paths) and the counts of steps left out, by reason."""
    run_dir = Path(run_dir)
    pairs: list[dict[str, Any]] = []
    left_out = {"not_verified": 0, "inconsistent_answer": 0}
    run = read_run(run_dir)
    for record in run.records:
        instructions: list[str] = []
        for step in record.steps:
            instructions.append(step.instruction.as_text())
            attempt = next((a for a in step.attempts if a.passed and a.image == step.image), None)
            if not step.verified or step.image is None or attempt is None:
                left_out["not_verified"] += 1
                continue
            ac = step.binary.ac if step.binary else None
            if consistent_only and ac != 1:
                left_out["inconsistent_answer"] += 1
                continue
            original, edited = run.image_path(record.sample.image), run.image_path(attempt.image)
            if original is None or edited is None:
                raise BenchDataError(f"{run_dir}: images of sample {record.sample.id} not found in the run")
            baseline, requery = record.baseline, step.requery
            pairs.append(
                {
                    "id": f"{record.sample.id}-step{step.index}",
                    "sample_id": record.sample.id,
                    "domain": record.sample.domain,
                    "step": step.index,
                    "question": record.sample.question,
                    "system_prompt": record.sample.system_prompt or "",
                    "original_image": str(original),
                    "edited_image": str(edited),
                    "original_answer": baseline.answer if baseline else None,
                    "original_explanation": baseline.explanation if baseline else None,
                    "new_answer": requery.answer if requery else None,
                    "new_explanation": requery.explanation if requery else None,
                    "instruction": instructions[-1],
                    "instructions": list(instructions),
                    "concepts": list(record.concepts.concepts) if record.concepts else [],
                    "answer_consistent": ac,
                    "explanation_faithful": step.binary.ef if step.binary else None,
                    "graded": step.graded.score if step.graded else None,
                    "r_in": attempt.check.r_in if attempt.check else None,
                    "r_out": attempt.check.r_out if attempt.check else None,
                    "sample_status": record.status,
                    "edit_type": attempt.check.edit_type if attempt.check else None,
                    "gate_maps": _path_or_none(run.image_path(attempt.check.maps if attempt.check else None)),
                }
            )
    return pairs, left_out


def _path_or_none(path: Path | None) -> str | None:
    return None if path is None else str(path)


def mask_png(gate_maps: str) -> bytes:
    """The dilated target mask M of a gate-maps PNG (``verification.gate_maps``), as a mode-L PNG."""
    import io

    from PIL import Image

    from verification.gate_maps import unpack_gate_maps

    with Image.open(gate_maps) as packed:
        mask = unpack_gate_maps(packed.convert("RGB")).mask
    buf = io.BytesIO()
    Image.fromarray(mask.astype("uint8") * 255, mode="L").save(buf, format="PNG")
    return buf.getvalue()


def chat_messages(system_prompt: str, image: str, question: str, answer: str) -> list[dict[str, Any]]:
    """One chat fine-tuning example: optional system turn, user (image + question), assistant (answer)."""
    messages: list[dict[str, Any]] = []
    if system_prompt:
        messages.append({"role": "system", "content": [{"type": "text", "text": system_prompt}]})
    messages.append(
        {"role": "user", "content": [{"type": "image", "image": image}, {"type": "text", "text": question}]}
    )
    messages.append({"role": "assistant", "content": [{"type": "text", "text": answer}]})
    return messages


def export_counterfactuals(
    run_dir: Path, out: Path, *, consistent_only: bool = False, overwrite: bool = False
) -> ExportResult:
    """Write the verified pairs of ``run_dir`` to ``out`` (dataset, chat JSONL, images, manifest)."""
    pairs, left_out = collect_pairs(run_dir, consistent_only=consistent_only)
    chat_lines = 0

    def write(tmp: Path) -> None:
        nonlocal chat_lines
        import datasets

        lines = []
        masks: dict[str, Path | None] = {}
        for p in pairs:
            folder = Path(IMAGES_DIR) / sample_folder(p["sample_id"])
            (tmp / folder).mkdir(parents=True, exist_ok=True)
            original, edited = folder / "original.png", folder / f"step{p['step']}.png"
            if not (tmp / original).exists():
                shutil.copyfile(p["original_image"], tmp / original)
            shutil.copyfile(p["edited_image"], tmp / edited)
            mask = None
            if p["gate_maps"] is not None:
                mask = folder / f"step{p['step']}_mask.png"
                (tmp / mask).write_bytes(mask_png(p["gate_maps"]))
            masks[p["id"]] = mask
            if p["new_answer"] is None:
                continue
            fields = {k: v for k, v in p.items() if k not in ("original_image", "edited_image", "gate_maps")}
            lines.append(
                json.dumps(
                    {
                        **fields,
                        "original_image": original.as_posix(),
                        "edited_image": edited.as_posix(),
                        "edit_mask": None if mask is None else mask.as_posix(),
                        "messages": chat_messages(
                            p["system_prompt"], edited.as_posix(), p["question"], p["new_answer"]
                        ),
                        "original_messages": chat_messages(
                            p["system_prompt"], original.as_posix(), p["question"], p["original_answer"] or ""
                        ),
                    },
                    ensure_ascii=False,
                )
            )
        chat_lines = len(lines)
        atomic_write(tmp / JSONL_NAME, "".join(line + "\n" for line in lines))
        rows = [
            {
                **{k: v for k, v in p.items() if k != "gate_maps"},
                "edit_mask": None
                if masks[p["id"]] is None
                else {"bytes": (tmp / masks[p["id"]]).read_bytes(), "path": "mask.png"},
                "original_image": {
                    "bytes": Path(p["original_image"]).read_bytes(),
                    "path": "original.png",
                },
                "edited_image": {
                    "bytes": Path(p["edited_image"]).read_bytes(),
                    "path": f"step{p['step']}.png",
                },
            }
            for p in pairs
        ]
        if rows:
            ds = datasets.Dataset.from_list(rows, features=features())
            ds.save_to_disk(str(tmp / DATASET_DIR))
        else:
            # A run without any verified step: an empty dataset with the same columns
            # (from_list([]) cannot tell the columns, and datasets cannot load an empty dataset
            # saved in zero shards).
            ds = datasets.Dataset(features().arrow_schema.empty_table())
            ds.save_to_disk(str(tmp / DATASET_DIR), num_shards=1)
        manifest["chat_lines"] = chat_lines
        manifest["edit_masks"] = sum(m is not None for m in masks.values())
        manifest["no_requery_answer"] = len(pairs) - chat_lines
        atomic_write(tmp / MANIFEST_NAME, json_text(manifest, indent=2) + "\n")

    manifest: dict[str, Any] = {
        "export_version": EXPORT_VERSION,
        "run_dir": str(Path(run_dir).absolute()),
        "pairs": len(pairs),
        "left_out": left_out,
        "consistent_only": consistent_only,
        "chat_format": (
            "messages: system?, user [image, text], assistant [text]; image paths relative to this folder"
        ),
    }
    path = write_folder(Path(out), write, overwrite=overwrite)
    return ExportResult(path, len(pairs), chat_lines, manifest)
