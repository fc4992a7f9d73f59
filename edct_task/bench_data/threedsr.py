"""3DSRBench in its published layout: the question table and its images.

The table is ``3dsrbench_v1.csv`` (raw annotations: ``index, question, A, B, C, D, answer,
category, image_source, image_url``) or a VLMEvalKit TSV (``3dsrbench_v1_vlmevalkit.tsv``,
``…_circular.tsv``) whose ``image`` column holds the image as base64. Without an inline image the
file is found in ``--3dsr-images`` (e.g. the unzipped ``coco_images.zip``) by the ``image_path``
column, else by the file name of ``image_url``.

EDCT-Bench keeps the orientation family (orientation, orientation-conditioned reference frames and
closely related 3D relations), matched on the ``category`` column (``ORIENTATION_FAMILY``).
"""

from __future__ import annotations

import base64
import binascii
import csv
import hashlib
import io
import string
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from edct_task.bench_data.domain import Domain, Hub, HubOption, Input
from edct_task.bench_data.format import BenchDataError, Candidate, check_unique
from edct_task.bench_data.sources import RuleTally, SourceScan
from edct_task.core.inputs import InputFileError, open_regular

SOURCE = "3DSRBench"
REQUIRED = ("index", "question", "A", "B", "answer", "category")
IMAGE_COLUMNS = ("image", "image_path", "image_url")
ORIENTATION_FAMILY = (
    # orientation
    "orientation_viewpoint",
    # orientation-conditioned reference frames (left/front of an object from its own orientation)
    "orientation_in_front_of",
    "orientation_on_the_left",
    "multi_object_viewpoint_towards_object",
    # closely related 3D relations (relative orientation of two objects)
    "multi_object_facing",
    "multi_object_parallel",
    "multi_object_same_direction",
)
"""3DSRBench categories kept; height, location and multi_object_closer_to are dropped."""
NAN = {"", "nan", "none"}
CONFIG = "3dsr"
"""The default config of lmms-eval's Hub table (``--3dsr-config``)."""


def rules() -> list[RuleTally]:
    return [
        RuleTally(
            "3dsr.orientation_family",
            "keep the categories " + ", ".join(ORIENTATION_FAMILY) + " (orientation, orientation-"
            "conditioned reference frames, related 3D relations)",
        ),
        RuleTally(
            "3dsr.one_variant",
            "keep one row per question and image: circular variants (same question, permuted options) "
            "are dropped",
        ),
    ]


TABLE = Input("table", "--3dsr-table", "3dsrbench_v1.csv, or a VLMEvalKit TSV with base64 images")
IMAGES = Input(
    "images",
    "--3dsr-images",
    "folder of the 3DSRBench images (e.g. the unzipped coco_images.zip)",
    "folder",
    required=False,
)
"""Needed unless the table holds its images inline (the TSV's ``image`` column)."""


def scan(paths: Mapping[str, Path | None]) -> SourceScan:
    """Read the 3DSRBench table (``table``; ``images`` unless the table holds them, checked by
    ``DOMAIN.inputs``) and apply its rules; images are located, not read."""
    path = Path(paths["table"])  # type: ignore[arg-type]
    rows = _read_table(path)
    columns = set(rows[0]) if rows else set()
    missing = [c for c in REQUIRED if c not in columns]
    if missing or not columns & set(IMAGE_COLUMNS):
        raise BenchDataError(
            f"{path}: wrong layout, missing column(s) {missing or []} "
            f"{'' if columns & set(IMAGE_COLUMNS) else 'and one of ' + str(list(IMAGE_COLUMNS))} "
            f"(has {sorted(columns)})"
        )
    inline = "image" in columns
    folder = None if inline else replace(IMAGES, required=True).check(paths.get("images"))
    check_unique((str(r["index"]) for r in rows), f"{path} (index)")
    out = SourceScan(
        "3dsr", SOURCE, {"table": path}, {"images": folder} if folder else {}, rules(), items_read=len(rows)
    )
    by_name: dict[str, Path] | None = None

    def image_of(line: int, r: dict[str, str]) -> RowImage:
        nonlocal by_name
        if inline:
            try:
                data = base64.b64decode(str(r["image"]), validate=False)
            except (binascii.Error, ValueError) as exc:
                raise BenchDataError(
                    f"{path}: line {line} (index {r['index']}): image is not base64 ({exc})"
                ) from None
            return RowImage(key=hashlib.sha256(data).hexdigest(), data=data)
        if r.get("image_path"):
            return RowImage(key=str(r["image_path"]), path=folder / str(r["image_path"]))  # type: ignore[operator]
        name = PurePosixPath(str(r["image_url"]).split("?")[0]).name
        image_path = folder / name  # type: ignore[operator]
        if not image_path.is_file():
            if by_name is None:
                by_name = {p.name: p for p in folder.rglob("*") if p.is_file()}  # type: ignore[union-attr]
            image_path = by_name.get(name, image_path)
        return RowImage(key=str(r["image_url"]), path=image_path)

    return scan_rows(out, rows, image_of, str(path))


@dataclass(frozen=True)
class RowImage:
    """Where a table row's image is: a file, inline bytes, or a reader; ``key`` tells images apart."""

    key: str
    path: Path | None = None
    data: bytes | None = None
    reader: Callable[[], bytes] | None = None


def scan_rows(
    out: SourceScan,
    rows: Iterable[dict[str, str]],
    image_of: Callable[[int, dict[str, str]], RowImage],
    label: str,
    first_line: int = 2,
) -> SourceScan:
    """Apply the 3DSRBench rules to table rows (``index, question, A…D, answer, category``, values as
    text) and add the candidates to ``out``; ``image_of(line, row)`` locates a kept row's image."""
    seen: set[tuple[str, str, tuple[str, ...]]] = set()
    for line, r in enumerate(rows, start=first_line):
        item_id = f"3dsr-{r['index']}"
        category = str(r["category"]).strip()
        if category not in ORIENTATION_FAMILY:
            out.remove(item_id, "3dsr.orientation_family")
            continue
        options = {
            k: str(r[k]).strip() for k in string.ascii_uppercase[:4] if str(r.get(k) or "").lower() not in NAN
        }
        image = image_of(line, r)
        key = (str(r["question"]).strip(), image.key, tuple(sorted(options.values())))
        if key in seen:
            out.remove(item_id, "3dsr.one_variant")
            continue
        seen.add(key)
        answer = str(r["answer"]).strip()
        out.candidates.append(
            Candidate(
                id=item_id,
                domain="3dsr",
                question=render_question(str(r["question"]).strip(), options),
                source=SOURCE,
                source_id=str(r["index"]),
                image_path=image.path,
                image_data=image.data,
                image_reader=image.reader,
                image_label=f"{label}:{line} (image of index {r['index']})",
                metadata={
                    "index": str(r["index"]),
                    "category": category,
                    "options": options,
                    "answer": answer,
                    "answer_text": options.get(answer, ""),
                    **{k: str(r[k]) for k in ("image_source", "image_url", "qid") if r.get(k)},
                },
            )
        )
    return out


def render_question(question: str, options: dict[str, str]) -> str:
    """The question with its lettered options, as the target sees it."""
    lines = [question, *(f"{k}. {v}" for k, v in options.items())]
    return "\n".join(lines) + "\nAnswer with the letter of the correct option."


def _read_table(path: Path) -> list[dict[str, str]]:
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # base64 images in the TSV
    try:
        with io.TextIOWrapper(open_regular(path), encoding="utf-8", newline="") as f:
            head = f.readline()
            f.seek(0)
            delimiter = "\t" if path.suffix.lower() == ".tsv" or head.count("\t") > head.count(",") else ","
            return [dict(r) for r in csv.DictReader(f, delimiter=delimiter)]
    except InputFileError as exc:
        raise BenchDataError(str(exc)) from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise BenchDataError(f"{path}: not a readable CSV/TSV question table ({exc})") from None


DOMAIN = Domain(
    name="3dsr",
    label=SOURCE,
    default_count=60,
    inputs=(TABLE, IMAGES),
    scan=scan,
    hub=Hub(
        "oscarqjh/3DSRBench_lmmseval",
        "oscarqjh/3DSRBench_lmmseval (lmms-eval's copy, split test), ccvl/3DSRBench (its VLMEvalKit "
        "TSV), or a local folder laid out like one of them",
        "edct_task.bench_data.hub:scan_threedsr",
        options=(
            HubOption(
                "config",
                CONFIG,
                "config of the lmms-eval table (default 3dsr; 3dsr_circular holds the circular variants, "
                "which the one-variant rule drops)",
            ),
        ),
    ),
    description="3D spatial reasoning: object orientation and reference frames",
)
"""3DSRBench's registration (``edct_task.bench_data.domains``)."""
