"""``edct merge``: the N slices of one run, run as independent ``--shard I/N`` jobs, joined into the
run folder the unsharded run would have written.

Every shard folder is read through ``run.outputs.load_run``. The merge refuses, with one line
naming the folders, shards of different datasets (data section or the items' digest), of different
setups (protocol, gate, roles, backends, prompts, package versions), overlapping slices (one slice
given twice, or one item in two folders), missing slices, and damaged shards (a folder
``load_run`` cannot read, a record outside its slice, positions that disagree with the records, a
missing image). Only ``allow_missing`` merges what is there, and the result says so
(``config.data["partial"]``).

The merged folder: ``samples.jsonl`` holds every record in document order (the unsharded run's
bytes); the statistics in ``results.json`` are recomputed over all records with the project's
scoring code (``summarise``, ``judge_agreement``, ``judge_health``); usage and call counts are the
shards' sums, ``wall_seconds`` the longest shard's.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edct_task.core.errors import UserError
from edct_task.core.records import SampleRecord
from edct_task.engine.files import atomic_write, place
from edct_task.reporting.setup import setup_differences
from edct_task.run.log import RunLog, RunSetup
from edct_task.run.outputs import RESULTS_FILE, SAMPLES_FILE, LoadedRun, RunReadError, image_files, load_run
from edct_task.run.sharding import Shard, items_digest, sum_counts
from edct_task.run.workspace import check_writable, claim
from edct_task.scoring.health import judge_health
from edct_task.scoring.metrics import judge_agreement, summarise

MANIFEST_KEYS = ("index", "count", "items", "items_sha256", "positions")
"""What a shard's run log records as ``config.data["shard"]`` (``run.sharding.take_slice``)."""


class MergeError(UserError):
    """The shards cannot be merged into one trustworthy run; the message names them."""

    prefix = "merge refused: "


@dataclass(frozen=True)
class ShardRun:
    """One shard folder, read and checked."""

    run: LoadedRun
    log: RunLog
    shard: Shard
    items: int
    items_sha256: str
    positions: tuple[int, ...]

    @property
    def path(self) -> Path:
        return self.run.path


@dataclass(frozen=True)
class Merged:
    """The merged run: records in document order and its run log."""

    records: list[SampleRecord]
    log: RunLog
    shards: list[ShardRun]
    missing: list[str]

    @property
    def partial(self) -> bool:
        return bool(self.missing)


def read_shard(path: Path) -> ShardRun:
    """One shard folder, or ``MergeError`` saying why it is not a usable shard."""
    try:
        run = load_run(path)
    except RunReadError as exc:
        raise MergeError(f"damaged shard {path}: {exc}") from None
    if run.log is None:
        raise MergeError(f"{path} is an lmms-eval results folder, not an `edct run --shard` folder")
    manifest = run.log.config.data.get("shard")
    if manifest is None:
        raise MergeError(f"{path} is not a shard: it was run without --shard I/N")
    if not isinstance(manifest, Mapping) or set(manifest) != set(MANIFEST_KEYS):
        raise MergeError(f"damaged shard {path}: config.data.shard is not a shard manifest")
    index, count, items, positions = (manifest[k] for k in ("index", "count", "items", "positions"))
    if not (
        all(isinstance(v, int) and not isinstance(v, bool) for v in (index, count, items))
        and 0 <= index < count
        and isinstance(positions, list)
        and all(isinstance(p, int) and 0 <= p < items for p in positions)
        and positions == sorted(set(positions))
    ):
        raise MergeError(f"damaged shard {path}: its shard manifest is inconsistent")
    shard = Shard(index, count)
    if len(positions) != len(run.records):
        raise MergeError(
            f"damaged shard {path}: {len(run.records)} records in {SAMPLES_FILE}, "
            f"{len(positions)} in its slice"
        )
    for record in run.records:
        if not shard.holds(record.sample.id):
            raise MergeError(f"damaged shard {path}: item {record.sample.id!r} is not in slice {shard.label}")
        for name, ref in image_files(record).items():
            if run.image_path(ref) is None:
                raise MergeError(f"damaged shard {path}: {name} is missing (re-run the shard to rewrite it)")
    return ShardRun(run, run.log, shard, items, str(manifest["items_sha256"]), tuple(positions))


def _setup(s: ShardRun) -> dict[str, Any]:
    """What must be equal across the shards of one run (the data section apart)."""
    config = s.log.config.model_dump(mode="json")
    config.pop("data")
    config.pop("limits")  # concurrency and batching never change a record
    return {
        "record_schema_version": s.log.record_schema_version,
        "versions": s.log.versions,
        "prompt_versions": s.log.prompt_versions,
        "config": config,
    }


def _data(s: ShardRun) -> dict[str, Any]:
    data = {k: v for k, v in s.log.config.data.items() if k != "shard"}
    return {**data, "items": s.items, "items_sha256": s.items_sha256}


def check_compatible(shards: Sequence[ShardRun]) -> None:
    """``MergeError`` unless every shard is a slice of the same data, setup and split."""
    first = shards[0]
    for other in shards[1:]:
        if diff := setup_differences(_data(first), _data(other)):
            raise MergeError(
                f"shards of different datasets: {first.path} and {other.path} differ in {', '.join(diff)}"
            )
        if diff := setup_differences(_setup(first), _setup(other)):
            raise MergeError(
                f"shards of different setups: {first.path} and {other.path} differ in {', '.join(diff)}"
            )
        if other.shard.world_size != first.shard.world_size:
            raise MergeError(
                f"shards of different splits: {first.path} is slice {first.shard.label}, "
                f"{other.path} is slice {other.shard.label}"
            )


def check_slices(shards: Sequence[ShardRun]) -> list[str]:
    """``MergeError`` when a slice is given twice or two folders hold one item; the missing slices."""
    seen: dict[int, Path] = {}
    for s in shards:
        if s.shard.rank in seen:
            raise MergeError(
                f"overlapping slices: slice {s.shard.label} is both {seen[s.shard.rank]} and {s.path}"
            )
        seen[s.shard.rank] = s.path
    owner: dict[int, Path] = {}
    for s in shards:
        for p in s.positions:
            if p in owner:
                raise MergeError(f"overlapping slices: {owner[p]} and {s.path} both hold item position {p}")
            owner[p] = s.path
    count = shards[0].shard.world_size
    return [f"{i}/{count}" for i in range(count) if i not in seen]


def merge_shards(paths: Sequence[Path], *, allow_missing: bool = False) -> Merged:
    """The shards in ``paths`` as one run (nothing written); see the module docstring."""
    if not paths:
        raise MergeError("no shard folder given")
    shards = sorted((read_shard(Path(p)) for p in paths), key=lambda s: s.shard.rank)
    check_compatible(shards)
    missing = check_slices(shards)
    if missing and not allow_missing:
        raise MergeError(
            f"missing slices: {', '.join(missing)} of {shards[0].items} items "
            "(run them, or pass --allow-missing for a result labelled partial)"
        )
    placed = sorted(
        ((p, r) for s in shards for p, r in zip(s.positions, s.run.records, strict=True)), key=lambda x: x[0]
    )
    records = [r for _, r in placed]
    if not missing and items_digest([r.sample for r in records]) != shards[0].items_sha256:
        raise MergeError(
            "damaged shards: the merged items do not match the items the shards were cut from "
            f"(items_sha256 {shards[0].items_sha256[:12]}…)"
        )
    return Merged(records, _merged_log(shards, records, missing), shards, missing)


def _merged_log(shards: Sequence[ShardRun], records: list[SampleRecord], missing: list[str]) -> RunLog:
    first = shards[0].log
    data = {k: v for k, v in first.config.data.items() if k != "shard"}
    if missing:
        data["partial"] = {
            "missing_slices": missing,
            "items": len(records),
            "of_items": shards[0].items,
            "merged_from": [str(s.path) for s in shards],
        }
    setup = first.config.model_dump(mode="json")
    config = RunSetup(**{**setup, "data": data})
    protocol = setup["protocol"]
    return RunLog(
        created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        versions=first.versions,
        prompt_versions=first.prompt_versions,
        config=config,
        results=summarise(records, seed=protocol["seed"], n_resamples=setup["bootstrap_resamples"]),
        judge_agreement=judge_agreement(records),
        judge_health=judge_health(records),
        usage=sum_counts([s.log.usage for s in shards]),
        calls=sum_counts([s.log.calls for s in shards]),
        wall_seconds=max(s.log.wall_seconds for s in shards),
    )


def write_merged(merged: Merged, output: Path) -> None:
    """The merged run folder: results.json, samples.jsonl and every record's images (hard links
    to the shards' files where the file system allows)."""
    sources = {s.path.resolve() for s in merged.shards}
    if output.resolve() in sources:
        raise MergeError(f"--output {output} is one of the shards; give the merged run its own folder")
    check_writable(output, "output folder", "--output")
    with claim(output):
        atomic_write(output / RESULTS_FILE, merged.log.to_json())
        atomic_write(output / SAMPLES_FILE, "".join(r.model_dump_json() + "\n" for r in merged.records))
        by_id = {r.sample.id: s.run for s in merged.shards for r in s.run.records}
        for record in merged.records:
            run = by_id[record.sample.id]
            for name, ref in image_files(record).items():
                source = run.image_path(ref)
                assert source is not None  # read_shard checked every image
                target = output / name
                target.parent.mkdir(parents=True, exist_ok=True)
                place(source, target)
