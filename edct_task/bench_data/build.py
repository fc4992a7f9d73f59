"""``edct build-bench``: the three sources → one EDCT-Bench dataset folder with its manifest.

Steps: read each source whose files are given (``okvqa``, ``drivelm``, ``threedsr`` modules) and
apply its rules; select per domain (seeded, or the explicit id list); open every selected image;
write the dataset and manifest into a temporary folder beside ``out`` and rename it into place.

Selection: candidates are sorted by id and shuffled with a generator seeded by ``(seed,
domain)``; DriveLM candidates that mention a visual cue (traffic light, pedestrian, sign, …)
come first (EDCT-Bench prefers scenes where changing a visual cue should change the answer). The
first ``count`` whose image decodes are taken. With an id list, exactly the listed ids are taken
(counts are ignored); an id that a rule removed, or that no source has, is an error.

Unreadable images: an error naming the file by default; with ``skip_unreadable`` the item is
skipped, the next candidate is drawn, and the manifest lists the skipped files.
"""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edct_task import __version__
from edct_task.bench_data import drivelm, hub, okvqa, threedsr
from edct_task.bench_data.format import (
    DEFAULT_COUNTS,
    DOMAINS,
    FORMAT_NAME,
    FORMAT_VERSION,
    MANIFEST_NAME,
    SPLIT,
    BenchDataError,
    Candidate,
    check_unique,
    features,
    file_sha256,
    read_image,
    row,
)
from edct_task.bench_data.hub import HubSource
from edct_task.bench_data.output import write_folder
from edct_task.bench_data.sources import SourceScan
from edct_task.core.inputs import InputFileError, read_text
from edct_task.engine.files import atomic_write, json_text


@dataclass
class BuildRequest:
    """Everything ``edct build-bench`` takes. A domain is built when any of its inputs is given."""

    out: Path
    okvqa_questions: Path | None = None
    okvqa_annotations: Path | None = None
    coco_images: Path | None = None
    drivelm_json: Path | None = None
    nuscenes_root: Path | None = None
    threedsr_table: Path | None = None
    threedsr_images: Path | None = None
    okvqa_hub: HubSource | None = None
    drivelm_hub: HubSource | None = None
    threedsr_hub: HubSource | None = None
    threedsr_config: str = hub.THREEDSR_CONFIG
    """The 3DSRBench Hub table's config (``3dsr``; ``3dsr_circular`` holds the circular variants)."""
    seed: int = 0
    ids_file: Path | None = None
    counts: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_COUNTS))
    skip_unreadable: bool = False
    overwrite: bool = False


@dataclass
class BuildResult:
    path: Path
    manifest: dict[str, Any]


def parse_counts(text: str) -> dict[str, int]:
    """``"160,80,60"`` → counts per domain (OK-VQA, DriveLM, 3DSRBench)."""
    parts = [p.strip() for p in text.split(",")]
    try:
        values = [int(p) for p in parts]
    except ValueError:
        raise BenchDataError(f"--counts {text!r}: expected three integers, e.g. 160,80,60") from None
    if len(values) != len(DOMAINS) or any(v < 0 for v in values):
        raise BenchDataError(f"--counts {text!r}: expected three non-negative integers (okvqa,drivelm,3dsr)")
    return dict(zip(DOMAINS, values, strict=True))


def read_ids(path: Path) -> list[str]:
    """An id list: one benchmark id per line (``okvqa-2971475``); blank lines and ``#`` comments ignored."""
    if not Path(path).is_file():
        raise BenchDataError(f"{path}: id list not found (--ids)")
    try:
        text = read_text(Path(path), 16 << 20)
    except InputFileError as exc:
        raise BenchDataError(f"{exc} (--ids)") from None
    ids = []
    for n, line in enumerate(text.splitlines(), start=1):
        item = line.split("#", 1)[0].strip()
        if not item:
            continue
        domain = _domain_of(item)
        if domain is None:
            raise BenchDataError(
                f"{path}:{n}: id {item!r} does not start with a domain prefix "
                f"({', '.join(d + '-' for d in DOMAINS)})"
            )
        if item in ids:
            raise BenchDataError(f"{path}:{n}: duplicate id {item!r} (rule: ids must be unique)")
        ids.append(item)
    return ids


def _domain_of(item_id: str) -> str | None:
    return next((d for d in DOMAINS if item_id.startswith(d + "-")), None)


def _scans(req: BuildRequest, wanted: set[str]) -> dict[str, SourceScan]:
    given = {
        "okvqa": (req.okvqa_questions, req.okvqa_annotations, req.coco_images),
        "drivelm": (req.drivelm_json, req.nuscenes_root),
        "3dsr": (req.threedsr_table, req.threedsr_images),
    }
    hubs = {"okvqa": req.okvqa_hub, "drivelm": req.drivelm_hub, "3dsr": req.threedsr_hub}
    flags = {"okvqa": "--okvqa-hub", "drivelm": "--drivelm-hub", "3dsr": "--3dsr-hub"}
    scans: dict[str, SourceScan] = {}
    for domain in DOMAINS:
        local = any(v is not None for v in given[domain])
        if hubs[domain] is not None and local:
            raise BenchDataError(f"{flags[domain]} and local {domain} files both given: use one or the other")
        if domain not in wanted or not (local or hubs[domain] is not None):
            continue
        source = hubs[domain]
        if source is not None:
            if domain == "okvqa":
                scans[domain] = hub.scan_okvqa(source)
            elif domain == "drivelm":
                scans[domain] = hub.scan_drivelm(source)
            else:
                scans[domain] = hub.scan_threedsr(source, req.threedsr_config)
        elif domain == "okvqa":
            scans[domain] = okvqa.scan(req.okvqa_questions, req.okvqa_annotations, req.coco_images)
        elif domain == "drivelm":
            scans[domain] = drivelm.scan(req.drivelm_json, req.nuscenes_root)
        else:
            scans[domain] = threedsr.scan(req.threedsr_table, req.threedsr_images)
    return scans


def build_bench(req: BuildRequest) -> BuildResult:
    """Build the EDCT-Bench dataset folder ``req.out``; nothing is written when anything fails."""
    ids = read_ids(req.ids_file) if req.ids_file else None
    wanted = {d for d in DOMAINS if (ids is None and req.counts.get(d, 0) > 0)}
    if ids is not None:
        wanted = {_domain_of(i) for i in ids}  # type: ignore[misc]
    scans = _scans(req, wanted)
    if not scans:
        raise BenchDataError(
            "no source to build from: give the OK-VQA, DriveLM and/or 3DSRBench files, or their Hub "
            "datasets (--okvqa-hub, --drivelm-hub, --3dsr-hub; see `edct build-bench --help`)"
        )
    if ids is not None:
        lacking = sorted({_domain_of(i) for i in ids} - set(scans))  # type: ignore[type-var]
        if lacking:
            raise BenchDataError(f"{req.ids_file}: lists {lacking} ids, but those sources were not given")

    rows: list[dict[str, Any]] = []
    domains: dict[str, Any] = {}
    for domain, scan in scans.items():
        if ids is not None:
            listed = [i for i in ids if _domain_of(i) == domain]
            chosen, skipped = _select_listed(scan, listed, req)
        else:
            chosen, skipped = _select_seeded(scan, req.counts[domain], req)
        rows += [row(c, data) for c, data in chosen]
        domains[domain] = _domain_manifest(scan, len(chosen), skipped, req)
    check_unique((r["id"] for r in rows), "the selected items")

    manifest = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "builder": f"edct-bench {__version__}",
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "seed": req.seed,
        "selection": "id list" if ids is not None else "seeded",
        "ids_file": None
        if req.ids_file is None
        else {"path": str(req.ids_file), "sha256": file_sha256(Path(req.ids_file)), "ids": len(ids or [])},
        "counts_requested": None if ids is not None else {d: req.counts[d] for d in scans},
        "counts": {d: m["selected"] for d, m in domains.items()},
        "total": len(rows),
        "unreadable_images": "skip" if req.skip_unreadable else "error",
        "metadata_encoding": "json string",
        "system_prompts": {"drivelm": drivelm.SYSTEM_PROMPT},
        "domains": domains,
    }

    def write(tmp: Path) -> None:
        import datasets

        ds = datasets.Dataset.from_list(rows, features=features())
        datasets.DatasetDict({SPLIT: ds}).save_to_disk(str(tmp))
        atomic_write(tmp / MANIFEST_NAME, json_text(manifest, indent=2) + "\n")

    path = write_folder(Path(req.out), write, overwrite=req.overwrite)
    return BuildResult(path, manifest)


def _read(c: Candidate, req: BuildRequest, skipped: list[str]) -> bytes | None:
    try:
        return read_image(c)
    except BenchDataError as exc:
        if not req.skip_unreadable:
            raise
        skipped.append(str(exc))
        return None


def _select_seeded(
    scan: SourceScan, count: int, req: BuildRequest
) -> tuple[list[tuple[Candidate, bytes]], list[str]]:
    rng = random.Random(f"edct-bench:{req.seed}:{scan.domain}")
    ordered = sorted(scan.candidates, key=lambda c: c.id)
    preferred = [c for c in ordered if c.preferred]
    others = [c for c in ordered if not c.preferred]
    rng.shuffle(preferred)
    rng.shuffle(others)
    chosen: list[tuple[Candidate, bytes]] = []
    skipped: list[str] = []
    for c in preferred + others:
        if len(chosen) == count:
            break
        data = _read(c, req, skipped)
        if data is not None:
            chosen.append((c, data))
    if len(chosen) < count:
        removed = ", ".join(f"{r.name}: {r.removed}" for r in scan.rules)
        raise BenchDataError(
            f"{scan.domain}: asked for {count} items but only {len(chosen)} remain in "
            f"{', '.join(str(p) for p in scan.files.values())} ({scan.items_read} read; removed by rule: "
            f"{removed}; unreadable images skipped: {len(skipped)}); lower --counts"
        )
    return chosen, skipped


def _select_listed(
    scan: SourceScan, listed: list[str], req: BuildRequest
) -> tuple[list[tuple[Candidate, bytes]], list[str]]:
    by_id = {c.id: c for c in scan.candidates}
    chosen: list[tuple[Candidate, bytes]] = []
    skipped: list[str] = []
    for item in listed:
        c = by_id.get(item)
        if c is None:
            files = ", ".join(str(p) for p in scan.files.values())
            if item in scan.removed_by:
                raise BenchDataError(
                    f"{req.ids_file}: id {item!r} was removed by rule {scan.removed_by[item]} ({files})"
                )
            raise BenchDataError(f"{req.ids_file}: id {item!r} is not in {files}")
        data = _read(c, req, skipped)
        if data is not None:
            chosen.append((c, data))
    return chosen, skipped


def _domain_manifest(
    scan: SourceScan, selected: int, skipped: list[str], req: BuildRequest
) -> dict[str, Any]:
    return {
        "source": scan.source,
        **({"hub": scan.provenance} if scan.provenance is not None else {}),
        "files": {
            role: {"path": str(p), "sha256": file_sha256(p), "bytes": p.stat().st_size}
            for role, p in scan.files.items()
        },
        "folders": {role: str(p) for role, p in scan.folders.items()},
        "items_read": scan.items_read,
        "rules": [r.as_dict() for r in scan.rules],
        "eligible": len(scan.candidates),
        "preferred": sum(c.preferred for c in scan.candidates),
        "unreadable_skipped": skipped,
        "selected": selected,
    }
