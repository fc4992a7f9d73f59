"""The EDCT-Bench dataset format: one Hugging Face ``datasets.Dataset``, saved with ``save_to_disk``.

Columns (``FEATURES``):

``id``             unique benchmark id, ``<domain>-<source id>`` (e.g. ``okvqa-2971475``)
``domain``         the domain's name, ``okvqa``, ``drivelm``, ``3dsr`` or a registered one
                   (``bench_data.domains``; the per-domain lmms-eval tasks filter on it)
``question``       the text sent to the target VLM (3DSRBench: question and lettered options)
``system_prompt``  sent before the question: the domain's (``Domain.system_prompt``); ``""`` when
                   there is none (DriveLM: the ego-vehicle prompt)
``source``         the source dataset (``OK-VQA``, ``DriveLM-nuScenes``, ``3DSRBench``)
``source_id``      the item's id in its source (question id; frame token + QA position; table index)
``metadata``       a JSON object *as a string* (``json.loads`` it): source fields kept for audit
                   (gold answers, categories, image file name, image sha256). A string rather than
                   a struct so that the domains, whose fields differ, share one schema.
``image``          ``datasets.Image()``: the source file's bytes, unchanged (JPEG or PNG)

saved as a ``DatasetDict`` with one split, ``test`` (``load_bench`` returns that split).

The build writes ``MANIFEST_NAME`` next to the dataset files: sources and their sha256, the
rules applied and how many items each removed, counts, seed and format version.

Where the data lives is named by ``$EDCT_BENCH_DATA`` (a local folder or a hub id) or, for
``edct run``, by ``data: {source: dataset, path: …}``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edct_task.bench_data.image_decode import decode_bounded
from edct_task.core.errors import UserError
from edct_task.core.inputs import InputFileError, read_regular, read_text

MAX_IMAGE_BYTES = 32 << 20
"""Largest encoded source image read (the leaderboard's cap for one packed image, too)."""

FORMAT_NAME = "edct-bench"
FORMAT_VERSION = 1
"""Bumped whenever a column, the metadata keys or a selection rule changes meaning."""
ENV_DATA = "EDCT_BENCH_DATA"
"""Environment variable naming the dataset for the ``edct_bench*`` lmms-eval tasks."""
MANIFEST_NAME = "edct_manifest.json"
SPLIT = "test"
"""The dataset is saved as a ``DatasetDict`` with this one split (lmms-eval's ``test_split``)."""
COLUMNS = ("id", "domain", "question", "system_prompt", "source", "source_id", "metadata", "image")


class BenchDataError(UserError):
    """A source file is missing or not in its published layout, an image cannot be read, an id
    is duplicated or unknown, or a selection cannot be met. The message names the file (or id)
    and the rule that failed."""

    prefix = "data error: "


def features() -> Any:
    """The ``datasets.Features`` of an EDCT-Bench dataset."""
    import datasets

    return datasets.Features(
        {
            "id": datasets.Value("string"),
            "domain": datasets.Value("string"),
            "question": datasets.Value("string"),
            "system_prompt": datasets.Value("string"),
            "source": datasets.Value("string"),
            "source_id": datasets.Value("string"),
            "metadata": datasets.Value("string"),
            "image": datasets.Image(),
        }
    )


@dataclass(frozen=True)
class Candidate:
    """One source item that passed every rule, before selection; its image is not yet read."""

    id: str
    domain: str
    question: str
    source: str
    source_id: str
    image_path: Path | None
    """The image file; None when the source carries the image inline (``image_data``)."""
    image_data: bytes | None = None
    image_reader: Callable[[], bytes] | None = field(default=None, compare=False, repr=False)
    """Reads the image bytes on demand (a row of a Hub table, a member of a zip archive)."""
    image_label: str = ""
    """How error messages name an inline image (file and row)."""
    metadata: dict[str, Any] = field(default_factory=dict)
    preferred: bool = False
    """Selection takes preferred candidates first (DriveLM: questions about a visual cue)."""

    @property
    def image_name(self) -> str:
        return str(self.image_path) if self.image_path is not None else self.image_label


def read_image(candidate: Candidate) -> bytes:
    """The candidate's image bytes, fully decoded once to prove they are an image.

    Raises
    ------
    BenchDataError
        If the file is missing or cannot be decoded; the message names the file and the item.
    """
    from PIL import UnidentifiedImageError

    if candidate.image_path is not None:
        if not candidate.image_path.exists() and not candidate.image_path.is_symlink():
            raise BenchDataError(
                f"{candidate.image_path}: image file not found (item {candidate.id}; rule: every "
                "selected item's image must exist)"
            )
        try:
            data = read_regular(candidate.image_path, MAX_IMAGE_BYTES)
        except InputFileError as exc:
            raise BenchDataError(f"{exc} (item {candidate.id})") from None
    elif candidate.image_reader is not None:
        try:
            data = candidate.image_reader()
        except (OSError, KeyError, ValueError) as exc:
            raise BenchDataError(
                f"{candidate.image_name}: cannot read image (item {candidate.id}): {exc}"
            ) from None
    else:
        data = candidate.image_data or b""
    try:
        with decode_bounded(data)[0] as im:
            if im.width < 1 or im.height < 1:
                raise ValueError("empty image")
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise BenchDataError(
            f"{candidate.image_name}: unreadable image (item {candidate.id}; rule: every selected "
            f"image must decode): {type(exc).__name__}: {exc}"
        ) from None
    return data


def row(candidate: Candidate, image: bytes, system_prompt: str = "") -> dict[str, Any]:
    """The dataset row of a selected candidate with its image bytes, asked under its domain's
    ``system_prompt``."""
    meta = dict(candidate.metadata)
    meta["image_file"] = Path(candidate.image_name).name
    meta["image_sha256"] = hashlib.sha256(image).hexdigest()
    return {
        "id": candidate.id,
        "domain": candidate.domain,
        "question": candidate.question,
        "system_prompt": system_prompt,
        "source": candidate.source,
        "source_id": candidate.source_id,
        "metadata": json.dumps(meta, sort_keys=True, ensure_ascii=False),
        "image": {"bytes": image, "path": Path(candidate.image_name).name},
    }


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_unique(ids: Iterable[str], where: str) -> None:
    """Raise ``BenchDataError`` naming the first id that occurs twice."""
    seen: set[str] = set()
    for i in ids:
        if i in seen:
            raise BenchDataError(f"{where}: duplicate id {i!r} (rule: ids must be unique)")
        seen.add(i)


# ----------------------------------------------------------------------------- loading


def load_bench(location: str | Path | None = None) -> Any:
    """The EDCT-Bench dataset from a ``save_to_disk`` folder or a hub id.

    ``location`` defaults to ``$EDCT_BENCH_DATA``. A ``DatasetDict`` gives its ``test`` split (or
    its only one). The columns are checked against the format.
    """
    import os

    import datasets

    location = location or os.environ.get(ENV_DATA)
    if not location:
        raise BenchDataError(
            f"no EDCT-Bench data named: pass a path or hub id, or set {ENV_DATA} "
            "(build the dataset with `edct build-bench`)"
        )
    local = Path(location)
    try:
        if local.exists():
            loaded = datasets.load_from_disk(str(local))
        else:
            loaded = datasets.load_dataset(str(location))
    except FileNotFoundError as exc:
        raise BenchDataError(f"{location}: not a saved dataset or hub id ({exc})") from None
    if isinstance(loaded, datasets.DatasetDict):
        split = "test" if "test" in loaded else next(iter(loaded))
        loaded = loaded[split]
    missing = [c for c in COLUMNS if c not in loaded.column_names]
    if missing:
        raise BenchDataError(
            f"{location}: not an EDCT-Bench dataset (missing columns {missing}; has {loaded.column_names})"
        )
    return loaded


def read_manifest(folder: str | Path) -> dict[str, Any]:
    """The build manifest of a local EDCT-Bench folder (a regular file of at most 64 MiB)."""
    path = Path(folder) / MANIFEST_NAME
    if not path.is_file():
        raise BenchDataError(f"{path}: no build manifest (was the folder written by `edct build-bench`?)")
    try:
        value = json.loads(read_text(path, 64 << 20))
    except InputFileError as exc:
        raise BenchDataError(str(exc)) from None
    except (ValueError, RecursionError) as exc:
        raise BenchDataError(f"{path}: not a build manifest ({str(exc)[:200]})") from None
    if not isinstance(value, dict):
        raise BenchDataError(f"{path}: not a build manifest (not a JSON object)")
    return value


def decode_image(value: Any, *, max_pixels: int | None = None) -> Any:
    """A datasets ``Image(decode=False)`` value (``{"bytes", "path"}``) as a fully decoded, upright
    RGB image (``image_decode.decode_bounded``: pixel budget, no bombs, EXIF orientation applied;
    a truncated file is refused even where PIL was told to pad such files)."""
    return decode_row_image(value, max_pixels=max_pixels)[0]


def decode_row_image(value: Any, *, max_pixels: int | None = None) -> tuple[Any, dict[str, str]]:
    """:func:`decode_image` and the notes to record with the sample (the EXIF orientation applied)."""
    from edct_task.bench_data.image_decode import DEFAULT_MAX_PIXELS, decode_bounded

    data = value.get("bytes") if isinstance(value, dict) else None
    source = data if data else (value.get("path") if isinstance(value, dict) else None)
    if source is None:
        raise ValueError("the image column holds neither bytes nor a path")
    return decode_bounded(source, max_pixels=max_pixels or DEFAULT_MAX_PIXELS)


def row_fields(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A row's ``SampleInput`` fields but the image: id, domain, question, system prompt, and its
    metadata with ``source`` and ``source_id`` (the one reading of a row, for every driver)."""
    try:
        raw = json.loads(doc["metadata"]) if doc.get("metadata") else {}
    except json.JSONDecodeError:
        raw = {"metadata": doc["metadata"]}
    meta = {
        k: v if isinstance(v, str) else json.dumps(v)
        for k, v in (raw if isinstance(raw, dict) else {}).items()
    }
    for key in ("source", "source_id"):
        if doc.get(key) is not None:
            meta[key] = str(doc[key])
    return {
        "id": str(doc["id"]),
        "domain": str(doc["domain"]),
        "question": str(doc["question"]),
        "system_prompt": doc.get("system_prompt") or None,
        "metadata": meta,
    }


def bench_samples(
    location: str | Path | None,
    images: Any,
    *,
    max_pixels: int | None = None,
    domains: Sequence[str] | None = None,
    limit: int | None = None,
    limit_per_domain: int | None = None,
) -> list[Any]:
    """The dataset's rows as protocol inputs (``SampleInput``), images put in ``images`` (an ImageStore).

    A row whose image cannot be decoded (truncated, corrupt, not an image) does not stop the
    load: it comes back as an ``error`` ``SampleRecord`` naming the row and the reason, in its
    place, and the run records it like any other failed sample. So does an image over the pixel
    budget ``max_pixels`` (default ``image_decode.DEFAULT_MAX_PIXELS``) or a decompression bomb. An
    EXIF orientation is applied and recorded in the sample's metadata (``exif_orientation``).
    ``domains``: only the rows of these domains; ``limit``: the first N rows, ``limit_per_domain``:
    the first N of each domain (lmms-eval's ``--limit`` on the ``edct_bench`` group), both chosen
    before any image is read.
    """
    import datasets

    from edct_task.core.records import SampleInput, SampleRecord

    ds = load_bench(location).cast_column("image", datasets.Image(decode=False))
    if domains is not None:
        present = sorted(set(ds["domain"]))
        ds = ds.filter(lambda d: d in set(domains), input_columns="domain")
        if len(ds) == 0:
            raise BenchDataError(
                f"{location or ENV_DATA}: no items of domain(s) {', '.join(domains)} (domains present: "
                f"{', '.join(present)})"
            )
    if limit_per_domain is not None:
        seen: dict[str, int] = {}
        keep = []
        for i, domain in enumerate(ds["domain"]):
            seen[domain] = seen.get(domain, 0) + 1
            if seen[domain] <= limit_per_domain:
                keep.append(i)
        ds = ds.select(keep)
    if limit is not None:
        ds = ds.select(range(min(limit, len(ds))))
    out: list[Any] = []
    for doc in ds:
        fields = row_fields(doc)
        try:
            image, notes = decode_row_image(doc["image"], max_pixels=max_pixels)
            ref = images.put(image)
        except (OSError, ValueError, SyntaxError) as exc:
            from edct_task.bench_data.image_decode import ImageRefused

            if isinstance(exc, ImageRefused):
                reason = f"row {fields['id']}: image refused: {exc}"
            else:
                reason = f"row {fields['id']}: image cannot be decoded ({type(exc).__name__}: {exc})"
            out.append(SampleRecord(sample=SampleInput(image="", **fields), status="error", reason=reason))
            continue
        fields["metadata"] = {**fields["metadata"], **notes}
        out.append(SampleInput(image=ref, **fields))
    check_unique((s.id if isinstance(s, SampleInput) else s.sample.id for s in out), str(location))
    return out
