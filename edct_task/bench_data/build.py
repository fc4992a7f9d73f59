"""``edct build-bench``: the registered domains' sources → one EDCT-Bench dataset folder with its manifest.

Steps: read each domain whose local files or Hub copy are given (its ``Domain`` record's readers,
``bench_data.domains``) and apply its rules; select per domain (seeded, or the explicit id list);
open every selected image; write the dataset and manifest into a temporary folder beside ``out``
and rename it into place.

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
from edct_task.bench_data import domains as registry
from edct_task.bench_data.domain import HubSource
from edct_task.bench_data.format import (
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
from edct_task.bench_data.output import write_folder
from edct_task.bench_data.sources import SourceScan
from edct_task.core.inputs import InputFileError, read_text
from edct_task.engine.files import atomic_write, json_text


def default_counts() -> dict[str, int]:
    """Every registered domain's ``default_count`` (the paper's EDCT-Bench: 160, 80, 60)."""
    return {d.name: d.default_count for d in registry.domains()}


@dataclass
class BuildRequest:
    """Everything ``edct build-bench`` takes. A domain is built when any of its inputs is given."""

    out: Path
    inputs: dict[str, dict[str, Path]] = field(default_factory=dict)
    """Domain → its local files by ``Input.name`` (``{"okvqa": {"questions": …, …}}``)."""
    hubs: dict[str, HubSource] = field(default_factory=dict)
    """Domain → its Hub copy (``--<domain>-hub``, its revision and Hub options)."""
    seed: int = 0
    ids_file: Path | None = None
    counts: dict[str, int] = field(default_factory=default_counts)
    """Items per domain; a registered domain not named takes its ``default_count``."""
    skip_unreadable: bool = False
    overwrite: bool = False


@dataclass
class BuildResult:
    path: Path
    manifest: dict[str, Any]


def parse_counts(text: str) -> dict[str, int]:
    """``--counts``: one count per registered domain in registry order (``"160,80,60"``), or
    ``NAME=N`` pairs (``"okvqa=20,3dsr=10"``; a domain not named keeps its default)."""
    names = registry.names()
    parts = [p.strip() for p in text.split(",") if p.strip()]
    order = ",".join(names)
    if parts and all("=" in p for p in parts):
        pairs = [p.split("=", 1) for p in parts]
        unknown = [k.strip() for k, _ in pairs if k.strip() not in names]
        if unknown:
            raise BenchDataError(f"--counts {text!r}: no domain {', '.join(unknown)} (domains: {order})")
        named = {k.strip(): v.strip() for k, v in pairs}
    elif parts and not any("=" in p for p in parts):
        if len(parts) != len(names):
            raise BenchDataError(
                f"--counts {text!r}: expected {len(names)} integers, one per domain ({order}), "
                "or NAME=N pairs"
            )
        named = dict(zip(names, parts, strict=True))
    else:
        raise BenchDataError(f"--counts {text!r}: give one integer per domain ({order}) or NAME=N pairs")
    counts = default_counts()
    for name, value in named.items():
        try:
            counts[name] = int(value)
        except ValueError:
            raise BenchDataError(f"--counts {text!r}: {name}: {value!r} is not an integer") from None
        if counts[name] < 0:
            raise BenchDataError(f"--counts {text!r}: {name}: a count is >= 0")
    return counts


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
        if registry.of_id(item) is None:
            raise BenchDataError(
                f"{path}:{n}: id {item!r} does not start with a domain prefix "
                f"({', '.join(d + '-' for d in registry.names())})"
            )
        if item in ids:
            raise BenchDataError(f"{path}:{n}: duplicate id {item!r} (rule: ids must be unique)")
        ids.append(item)
    return ids


def _domain_of(item_id: str) -> str:
    found = registry.of_id(item_id)
    assert found is not None  # read_ids checked every id
    return found.name


def _scans(req: BuildRequest, wanted: set[str]) -> dict[str, SourceScan]:
    """The wanted domains whose local files or Hub copy are given, read, in registry order."""
    unknown = sorted((set(req.inputs) | set(req.hubs)) - set(registry.names()))
    if unknown:
        raise BenchDataError(f"no domain {', '.join(unknown)} (domains: {', '.join(registry.names())})")
    scans: dict[str, SourceScan] = {}
    for domain in registry.domains():
        local = {k: v for k, v in req.inputs.get(domain.name, {}).items() if v is not None}
        source = req.hubs.get(domain.name)
        if source is not None and local:
            raise BenchDataError(
                f"{domain.hub_flag} and local {domain.name} files both given: use one or the other"
            )
        if domain.name not in wanted or not (local or source is not None):
            continue
        scans[domain.name] = domain.scan_hub(source) if source is not None else domain.scan_local(local)
    return scans


def _source_flags() -> str:
    return ", ".join(d.hub_flag for d in registry.domains() if d.hub is not None)


def build_bench(req: BuildRequest) -> BuildResult:
    """Build the EDCT-Bench dataset folder ``req.out``; nothing is written when anything fails."""
    ids = read_ids(req.ids_file) if req.ids_file else None
    counts = {**default_counts(), **req.counts}
    wanted = {d for d, n in counts.items() if n > 0} if ids is None else {_domain_of(i) for i in ids}
    scans = _scans(req, wanted)
    if not scans:
        labels = ", ".join(d.label for d in registry.domains())
        raise BenchDataError(
            f"no source to build from: give the files of one or more domains ({labels}), or their Hub "
            f"datasets ({_source_flags()}; see `edct build-bench --help`)"
        )
    if ids is not None:
        lacking = sorted({_domain_of(i) for i in ids} - set(scans))
        if lacking:
            raise BenchDataError(f"{req.ids_file}: lists {lacking} ids, but those sources were not given")

    rows: list[dict[str, Any]] = []
    domains: dict[str, Any] = {}
    for domain, scan in scans.items():
        if ids is not None:
            listed = [i for i in ids if _domain_of(i) == domain]
            chosen, skipped = _select_listed(scan, listed, req)
        else:
            chosen, skipped = _select_seeded(scan, counts[domain], req)
        prompt = registry.registry()[domain].system_prompt
        rows += [row(c, data, prompt) for c, data in chosen]
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
        "counts_requested": None if ids is not None else {d: counts[d] for d in scans},
        "counts": {d: m["selected"] for d, m in domains.items()},
        "total": len(rows),
        "unreadable_images": "skip" if req.skip_unreadable else "error",
        "metadata_encoding": "json string",
        "system_prompts": {d.name: d.system_prompt for d in registry.domains() if d.system_prompt},
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
