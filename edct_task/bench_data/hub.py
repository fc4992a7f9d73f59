"""The Hub readers of the three shipped domains (each ``Domain.hub.scan``), in the layouts
lmms-eval users already have, and the Hub machinery any domain's reader uses (``snapshot``,
``hub_file``, ``load_table``, ``image_reader``).

``--okvqa-hub``   ``lmms-lab-encoder/OK-VQA`` (lmms-eval 0.7.3's ok_vqa task), config ``default``,
                  split ``val2014``: ``question_id`` (str), ``image`` (Image), ``question``,
                  ``answers`` (list of str), ``question_type``, ``answer_type``.
``--3dsr-hub``    ``oscarqjh/3DSRBench_lmmseval`` (configs ``3dsr``, ``3dsr_circular``; split ``test``:
                  ``image``, ``question``, ``A``–``D``, ``answer``, ``category``, ``index``, ``qid``), or
                  ``ccvl/3DSRBench``, whose VLMEvalKit TSV (``3dsrbench_v1_vlmevalkit.tsv``, base64
                  images) is read by the local TSV reader.
``--drivelm-hub`` ``OpenDriveLab/DriveLM``: files, not a table — ``v1_1_train_nus.json`` and
                  ``drivelm_nus_imgs_train.zip`` (the nuScenes front-camera images), fetched with
                  ``huggingface_hub.hf_hub_download``; images are read from the archive, not unpacked.

Each flag takes a Hub id or a local folder laid out like that repository (so it also works
offline). A Hub id is fetched with the usual Hub client and credentials (``HF_TOKEN``, ``hf auth
login``) into the Hub cache, at ``--<source>-revision`` (a branch, tag or commit; default the main
branch), and the local copy it resolves to is then read exactly as a folder is. With
``HF_HUB_OFFLINE=1`` a cached copy is used. Tables are read with ``datasets.load_dataset``.

The selection rules are the local readers' own (``okvqa.rules``, ``threedsr.scan_rows``,
``drivelm.scan_document``); ids are the same (``okvqa-<question_id>``, ``3dsr-<index>``,
``drivelm-<frame>-<category><i>``), so an ``--ids`` list works with either kind of source. The
manifest records, per source, the id or folder, the requested revision, the commit it resolved
to and the config and split read.
"""

from __future__ import annotations

import hashlib
import re
import threading
import zipfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from edct_task.bench_data import drivelm, okvqa, threedsr
from edct_task.bench_data.domain import Domain, HubSource
from edct_task.bench_data.format import MAX_IMAGE_BYTES, BenchDataError, Candidate, check_unique
from edct_task.bench_data.sources import SourceScan
from edct_task.core.inputs import InputFileError, read_regular

OKVQA_CONFIG, OKVQA_SPLIT = "default", "val2014"
OKVQA_COLUMNS = ("question_id", "image", "question", "answers")
THREEDSR_SPLIT = "test"
THREEDSR_TSV = "3dsrbench_v1_vlmevalkit.tsv"
THREEDSR_TSV_REPOS = ("ccvl/3dsrbench",)
"""Hub repositories (lower case) that hold the VLMEvalKit TSV rather than a table."""
DRIVELM_QA, DRIVELM_IMAGES = "v1_1_train_nus.json", "drivelm_nus_imgs_train.zip"
HAS_ANSWERS = (
    "the row has gold answers (the local layout's rule: an annotation with the same question and image id)"
)
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
DATA_SUFFIXES = (".parquet", ".arrow", ".jsonl", ".json", ".csv", ".tsv", ".zip")


def _check_location(source: HubSource, domain: Domain) -> None:
    flag = domain.hub_flag
    if source.is_folder:
        if source.revision:
            raise BenchDataError(
                f"{flag} {source.location} is a local folder: a revision applies to Hub ids only"
            )
        return
    if Path(source.location).exists():
        raise BenchDataError(
            f"{flag} {source.location}: a file; give a Hub id or a folder laid out like the repo"
        )
    if not HUB_ID.fullmatch(source.location):
        raise BenchDataError(
            f"{flag} {source.location}: no such folder, and not a Hub id (owner/name, e.g. "
            f"{domain.hub.repo if domain.hub else 'owner/name'})"
        )


def _hub_call(source: HubSource, flag: str, what: str, call: Callable[[], str]) -> Path:
    """Run a ``huggingface_hub`` download; its errors become one ``BenchDataError`` line."""
    try:
        return Path(call())
    except Exception as exc:  # the Hub client raises many kinds (HTTP, offline, not found, gated)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        hint = ""
        name = type(exc).__name__
        if name in ("LocalEntryNotFoundError", "IncompleteSnapshotError", "OfflineModeIsEnabled"):
            hint = "; it is not in the Hub cache and the Hub cannot be reached (HF_HUB_OFFLINE=1?)"
        elif name in ("GatedRepoError", "RepositoryNotFoundError"):
            hint = "; check the id and your Hub credentials (HF_TOKEN or `hf auth login`)"
        elif name == "RevisionNotFoundError":
            hint = f"; revision {source.revision!r} does not exist"
        raise BenchDataError(
            f"{flag} {source.location}: cannot fetch {what} ({name}: {first}){hint}"
        ) from None


def snapshot(source: HubSource, domain: Domain) -> tuple[Path, dict[str, Any]]:
    """The local folder of a table repository (a Hub id is downloaded into the Hub cache) and its
    provenance for the manifest."""
    _check_location(source, domain)
    flag = domain.hub_flag
    if source.is_folder:
        return Path(source.location), {"folder": str(Path(source.location).resolve())}
    from huggingface_hub import snapshot_download

    folder = _hub_call(
        source,
        flag,
        "the dataset",
        lambda: snapshot_download(source.location, repo_type="dataset", revision=source.revision),
    )
    return folder, _provenance(source, folder)


def hub_file(source: HubSource, domain: Domain, filename: str) -> tuple[Path, dict[str, Any]]:
    """One file of a repository (``hf_hub_download``), or of a local folder laid out like it."""
    _check_location(source, domain)
    flag = domain.hub_flag
    if source.is_folder:
        path = Path(source.location) / filename
        if not path.is_file():
            raise BenchDataError(f"{path}: file not found ({flag} {source.location} must hold {filename})")
        return path, {"folder": str(Path(source.location).resolve())}
    from huggingface_hub import hf_hub_download

    path = _hub_call(
        source,
        flag,
        filename,
        lambda: hf_hub_download(source.location, filename, repo_type="dataset", revision=source.revision),
    )
    return path, _provenance(source, path)


def _provenance(source: HubSource, local: Path) -> dict[str, Any]:
    """Hub id, requested revision and the commit the local copy belongs to (``snapshots/<commit>``)."""
    parts = local.parts
    commit = parts[parts.index("snapshots") + 1] if "snapshots" in parts[:-1] else None
    return {"hub_id": source.location, "revision": source.revision or "main", "commit": commit}


def data_files(folder: Path) -> dict[str, Path]:
    """The data files of a repository folder (hashed into the manifest), by path in the repo."""
    return {
        str(p.relative_to(folder)): p
        for p in sorted(folder.rglob("*"))
        if p.is_file()
        and p.suffix.lower() in DATA_SUFFIXES
        and not p.relative_to(folder).parts[0].startswith(".")
    }


def load_table(folder: Path, config: str, split: str, flag: str) -> Any:
    """``datasets.load_dataset`` on a repository folder; image columns left undecoded."""
    import datasets

    try:
        builder_configs = datasets.get_dataset_config_names(str(folder))
    except Exception:  # a folder without a card lists no configs: its files are the default one
        builder_configs = []
    name = config if config in builder_configs else None
    if builder_configs and name is None and config != "default":
        raise BenchDataError(f"{flag} {folder}: no config {config!r} (configs: {', '.join(builder_configs)})")
    try:
        table = datasets.load_dataset(str(folder), name=name, split=split, cache_dir=_arrow_cache(folder))
    except ValueError as exc:
        raise BenchDataError(
            f"{flag} {folder}: cannot read split {split!r} of config {config!r} ({exc})"
        ) from None
    except (FileNotFoundError, datasets.exceptions.DatasetNotFoundError) as exc:
        raise BenchDataError(f"{flag} {folder}: no dataset files ({exc})") from None
    if "image" in table.column_names:
        table = table.cast_column("image", datasets.Image(decode=False))
    return table


def _arrow_cache(folder: Path) -> str:
    """Where ``datasets`` keeps its Arrow copy of this folder's tables: a folder keyed by every data
    file's path, size and modification time.

    ``datasets`` 5.2 names the cache of a local folder by the folder's name and config, not by its
    files: two different folders called ``okvqa`` (or two Hub snapshots) would share one cache and
    the second build would silently read the first one's rows.
    """
    import datasets

    h = hashlib.sha256()
    for rel, path in sorted(data_files(folder).items()):
        st = path.stat()
        h.update(f"{rel}|{path.resolve()}|{st.st_size}|{st.st_mtime_ns}\n".encode())
    return str(Path(datasets.config.HF_DATASETS_CACHE) / "edct-bench-sources" / h.hexdigest()[:20])


def image_reader(table: Any, row: int, folder: Path) -> Callable[[], bytes]:
    """The row's image bytes: held in the table, or a file the table names, read only when it is
    a regular file inside the table's own folder (a path to ``/dev/zero``, ``/etc/…`` or ``../``
    is refused: a table names its images, it does not get to read the machine)."""

    def read() -> bytes:
        value = table[row]["image"]
        if isinstance(value, dict) and value.get("bytes"):
            data = value["bytes"]
            if len(data) > MAX_IMAGE_BYTES:
                raise ValueError(f"the image is {len(data)} bytes, over the limit of {MAX_IMAGE_BYTES}")
            return data
        if isinstance(value, dict) and value.get("path"):
            return _image_file(folder, str(value["path"]))
        raise ValueError("the image column holds neither bytes nor a path")

    return read


def _image_file(folder: Path, name: str) -> bytes:
    path = Path(name) if Path(name).is_absolute() else folder / name
    root = folder.resolve()
    try:
        inside = path.resolve().is_relative_to(root)
    except (OSError, RuntimeError):
        inside = False
    if not inside:
        raise ValueError(f"the image path {name[:200]!r} is outside the table's folder {folder}; not read")
    try:
        return read_regular(path, MAX_IMAGE_BYTES)
    except InputFileError as exc:
        raise ValueError(str(exc)) from None


def require_columns(table: Any, columns: tuple[str, ...], where: str, layout: str) -> None:
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise BenchDataError(
            f"{where}: wrong layout, missing column(s) {missing} "
            f"(has {table.column_names}; expected {layout})"
        )


# ----------------------------------------------------------------------------------- OK-VQA


def scan_okvqa(source: HubSource) -> SourceScan:
    """OK-VQA from the Hub table: the local reader's rules, applied to its rows."""
    flag = okvqa.DOMAIN.hub_flag
    folder, provenance = snapshot(source, okvqa.DOMAIN)
    table = load_table(folder, OKVQA_CONFIG, OKVQA_SPLIT, flag)
    where = f"{source.location} ({OKVQA_CONFIG}/{OKVQA_SPLIT})"
    require_columns(table, OKVQA_COLUMNS, where, "question_id, image, question, answers (list of str)")
    text = table.remove_columns("image")
    check_unique((str(q) for q in text["question_id"]), f"{where} (question_id)")
    rules = okvqa.rules()
    rules[0].description = HAS_ANSWERS
    out = SourceScan("okvqa", okvqa.SOURCE, data_files(folder), {}, rules, items_read=len(table))
    out.provenance = {**provenance, "config": OKVQA_CONFIG, "split": OKVQA_SPLIT}
    for i, r in enumerate(text):
        qid = str(r["question_id"])
        item_id = f"okvqa-{qid}"
        answers = r["answers"]
        if isinstance(answers, str) or not isinstance(answers, list):
            raise BenchDataError(f"{where}: row {i} (question_id {qid}): answers must be a list of strings")
        answers = [str(a) for a in answers]
        if not answers:  # the table's counterpart of a question without annotation
            out.remove(item_id, "okvqa.has_annotation")
            continue
        top = Counter(answers).most_common(1)[0][0]
        if top.strip().lower() in okvqa.YES_NO:
            out.remove(item_id, "okvqa.not_yes_no")
            continue
        out.candidates.append(
            Candidate(
                id=item_id,
                domain="okvqa",
                question=str(r["question"]).strip(),
                source=okvqa.SOURCE,
                source_id=qid,
                image_path=None,
                image_reader=image_reader(table, i, folder),
                image_label=f"{where} row {i} (question_id {qid})",
                metadata={
                    "answer": top,
                    "answers": answers,
                    "question_type": str(r.get("question_type") or ""),
                    "answer_type": str(r.get("answer_type") or ""),
                },
            )
        )
    return out


# ------------------------------------------------------------------------------- 3DSRBench


def _is_tsv_source(source: HubSource) -> bool:
    if source.is_folder:
        return (Path(source.location) / THREEDSR_TSV).is_file()
    return source.location.lower() in THREEDSR_TSV_REPOS


def scan_threedsr(source: HubSource) -> SourceScan:
    """3DSRBench from lmms-eval's Hub table (``source.options["config"]``, ``--3dsr-config``), or
    from ``ccvl/3DSRBench``'s TSV."""
    flag = threedsr.DOMAIN.hub_flag
    config = source.options.get("config", threedsr.CONFIG)
    if _is_tsv_source(source):
        path, provenance = hub_file(source, threedsr.DOMAIN, THREEDSR_TSV)
        out = threedsr.scan({"table": path})
        out.provenance = {**provenance, "file": THREEDSR_TSV}
        return out
    folder, provenance = snapshot(source, threedsr.DOMAIN)
    table = load_table(folder, config, THREEDSR_SPLIT, flag)
    where = f"{source.location} ({config}/{THREEDSR_SPLIT})"
    require_columns(
        table, (*threedsr.REQUIRED, "image"), where, "image, question, A–D, answer, category, index"
    )
    text = table.remove_columns("image")
    rows = [{k: "" if v is None else str(v) for k, v in r.items()} for r in text]
    check_unique((r["index"] for r in rows), f"{where} (index)")
    out = SourceScan("3dsr", threedsr.SOURCE, data_files(folder), {}, threedsr.rules(), items_read=len(rows))
    out.provenance = {**provenance, "config": config, "split": THREEDSR_SPLIT}

    def image_of(line: int, r: dict[str, str]) -> threedsr.RowImage:
        reader = image_reader(table, line, folder)
        try:
            key = hashlib.sha256(reader()).hexdigest()
        except (OSError, ValueError):
            key = f"row {line}"  # unreadable: told apart by its row; the selection reports it if chosen
        return threedsr.RowImage(key=key, reader=reader)

    return threedsr.scan_rows(out, rows, image_of, where, first_line=0)


# --------------------------------------------------------------------------------- DriveLM


def scan_drivelm(source: HubSource) -> SourceScan:
    """DriveLM-nuScenes from the Hub files: the QA JSON, and the images read from the zip archive."""
    qa, provenance = hub_file(source, drivelm.DOMAIN, DRIVELM_QA)
    archive, _ = hub_file(source, drivelm.DOMAIN, DRIVELM_IMAGES)
    images = ZipMembers(archive)
    try:
        members = [n for n in images.zip().namelist() if not n.endswith("/")]
    except (zipfile.BadZipFile, OSError) as exc:
        raise BenchDataError(f"{archive}: not a readable zip archive ({exc})") from None
    by_tail: dict[str, str] = {}
    for name in members:
        parts = PurePosixPath(name).parts
        if "samples" in parts:
            by_tail.setdefault("/".join(parts[parts.index("samples") :]), name)
        by_tail.setdefault(parts[-1], name)

    def locate(front: str) -> drivelm.FrontImage:
        parts = PurePosixPath(front.replace("\\", "/")).parts
        tail = "/".join(parts[parts.index("samples") :]) if "samples" in parts else parts[-1]
        member = by_tail.get(tail) or by_tail.get(parts[-1])
        label = f"{archive.name}:{member or tail}"
        if member is None:
            return drivelm.FrontImage(reader=_missing(archive, tail), label=label)
        return drivelm.FrontImage(reader=_member(images, member), label=label)

    out = SourceScan("drivelm", drivelm.SOURCE, {"qa": qa, "images": archive}, {}, drivelm.rules())
    out.provenance = {**provenance, "files": [DRIVELM_QA, DRIVELM_IMAGES]}
    return drivelm.scan_document(out, qa, locate)


MAX_COMPRESSION_RATIO = 200
"""Highest uncompressed/compressed ratio of an image member (JPEGs and PNGs barely compress; a
ratio in the hundreds is a zip bomb)."""


class ZipMembers:
    """One zip archive, opened and its directory parsed once for every member read: reading all of
    a build's images costs one pass over the directory, not one per image. zipfile's shared file
    handle serialises concurrent member reads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._zip: zipfile.ZipFile | None = None
        self._lock = threading.Lock()

    def zip(self) -> zipfile.ZipFile:
        with self._lock:
            if self._zip is None:
                self._zip = zipfile.ZipFile(self.path)
            return self._zip


def _member(archive: ZipMembers, member: str) -> Callable[[], bytes]:
    """The member's bytes, checked by its directory entry before a byte is inflated (size,
    compression ratio, no encryption) and read never beyond its declared size."""

    def read() -> bytes:
        z = archive.zip()
        info = z.getinfo(member)
        if info.file_size > MAX_IMAGE_BYTES:
            raise ValueError(
                f"{member} is {info.file_size} bytes uncompressed, over the limit of {MAX_IMAGE_BYTES}"
            )
        if info.file_size > MAX_COMPRESSION_RATIO * max(info.compress_size, 1) + 4096:
            raise ValueError(f"{member} inflates {info.file_size // max(info.compress_size, 1)}-fold")
        if info.flag_bits & 0x1:
            raise ValueError(f"{member} is encrypted")
        with z.open(info) as f:
            data = f.read(MAX_IMAGE_BYTES + 1)
        if len(data) > info.file_size:
            raise ValueError(f"{member} inflates beyond its declared size")
        return data

    return read


def _missing(archive: Path, tail: str) -> Callable[[], bytes]:
    def read() -> bytes:
        raise FileNotFoundError(f"{tail} is not in {archive}")

    return read
