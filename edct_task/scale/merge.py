"""``edct merge``: the N slices of one run, run as independent ``--shard I/N`` jobs, joined into the
run folder the unsharded run would have written.

Every shard folder is read through ``run.outputs.load_run``. The merge refuses, with one line
naming the folders, shards of different datasets (data section or the items' digest), of different
setups (protocol, gate, roles, backends, prompts, package versions), overlapping slices (one slice
given twice, or one item in two folders), missing slices, and damaged shards (a folder
``load_run`` cannot read, a record outside its slice, positions that disagree with the records, a
missing image, an image file whose content id is not the ref its record names, a scored record
whose scores do not follow from its steps: ``protocol.score_sample``). Only ``allow_missing``
merges what is there, and the result says so
(``config.data.partial``).

The merged folder: ``samples.jsonl`` holds every record in document order (the unsharded run's
bytes); the statistics in ``results.json`` are recomputed over all records with the project's
scoring code (``summarise``, ``judge_agreement``, ``judge_health``); usage and call counts are the
shards' sums, ``wall_seconds`` the longest shard's.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edct_task.core.errors import UserError
from edct_task.core.records import ControlRecord, SampleRecord
from edct_task.engine.files import atomic_write, place
from edct_task.engine.protocol import score_sample
from edct_task.engine.stage_cache import image_id
from edct_task.reporting.setup import setup_differences
from edct_task.run.log import MergedFrom, RunLog
from edct_task.run.outputs import (
    CONTROLS_FILE,
    RESULTS_FILE,
    SAMPLES_FILE,
    LoadedRun,
    RunReadError,
    image_files,
    load_run,
)
from edct_task.run.sharding import Shard, items_digest, sum_counts
from edct_task.run.workspace import check_writable, claim
from edct_task.scoring.controls import summarise_controls
from edct_task.scoring.health import judge_health
from edct_task.scoring.metrics import judge_agreement, summarise


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
    controls: list[ControlRecord]
    """The known-answer controls: slice 0 sends them (drawn from every item's domains)."""

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
    manifest = run.log.config.data.shard
    if manifest is None:
        raise MergeError(f"{path} is not a shard: it was run without --shard I/N")
    shard, positions = manifest.shard, manifest.positions
    if len(positions) != len(run.records):
        raise MergeError(
            f"damaged shard {path}: {len(run.records)} records in {SAMPLES_FILE}, "
            f"{len(positions)} in its slice"
        )
    for record in run.records:
        if not shard.holds(record.sample.id):
            raise MergeError(f"damaged shard {path}: item {record.sample.id!r} is not in slice {shard.label}")
        if record.status == "scored" and record.scores != score_sample(
            [s for s in record.steps if s.verified]
        ):
            raise MergeError(
                f"damaged shard {path}: the scores of item {record.sample.id!r} do not follow from its steps"
            )
        for name, ref in image_files(record).items():
            image = run.image_path(ref)
            if image is None:
                raise MergeError(f"damaged shard {path}: {name} is missing (re-run the shard to rewrite it)")
            if _content_id(image) != ref:
                raise MergeError(f"damaged shard {path}: {name} is not the image its record names")
    return ShardRun(run, run.log, shard, manifest.items, manifest.items_sha256, tuple(positions))


def _content_id(path: Path) -> str | None:
    """The image store's content id of the image file ``path`` (None when it does not decode)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            image.load()
            return image_id(image)
    except (OSError, UnidentifiedImageError, ValueError, Image.DecompressionBombError):
        return None


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
    data = s.log.config.data.model_dump(mode="json", exclude={"shard"})
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
    controls = next((s.run.controls for s in shards if s.shard.rank == 0), [])  # slice 0 sends them
    stray = next((s for s in shards if s.shard.rank != 0 and s.run.controls), None)
    if stray is not None:
        raise MergeError(
            f"damaged shards: {stray.path} holds known-answer controls (only slice 0 sends them)"
        )
    return Merged(records, _merged_log(shards, records, missing, controls), shards, missing, controls)


def _merged_log(
    shards: Sequence[ShardRun], records: list[SampleRecord], missing: list[str], controls: list[ControlRecord]
) -> RunLog:
    first = shards[0].log
    partial = (
        MergedFrom(
            missing_slices=missing,
            items=len(records),
            of_items=shards[0].items,
            merged_from=[str(s.path) for s in shards],
        )
        if missing
        else None
    )
    config = first.config.model_copy(
        update={"data": first.config.data.model_copy(update={"shard": None, "partial": partial})}
    )
    protocol = config.protocol
    return RunLog(
        created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        versions=first.versions,
        prompt_versions=first.prompt_versions,
        config=config,
        results=summarise(records, seed=protocol.seed, n_resamples=config.bootstrap_resamples),
        judge_agreement=judge_agreement(records),
        judge_health=judge_health(records),
        controls=summarise_controls(controls, bar=protocol.control_bar, requested=protocol.controls)
        if first.controls is not None
        else None,
        usage=sum_counts([s.log.usage for s in shards]),
        calls=sum_counts([s.log.calls for s in shards]),
        wall_seconds=max(s.log.wall_seconds for s in shards),
    )


def write_merged(merged: Merged, output: Path) -> None:
    """The merged run folder: samples.jsonl, controls.jsonl and every record's images (hard links
    to the shards' files where the file system allows), then results.json last, as ``edct run``
    writes it: a merge killed or stopped by a full disk leaves a folder that reads as unfinished."""
    sources = {s.path.resolve() for s in merged.shards}
    if output.resolve() in sources:
        raise MergeError(f"--output {output} is one of the shards; give the merged run its own folder")
    check_writable(output, "output folder", "--output")
    with claim(output):
        (output / RESULTS_FILE).unlink(missing_ok=True)  # a folder without it reads as unfinished
        atomic_write(output / SAMPLES_FILE, "".join(r.model_dump_json() + "\n" for r in merged.records))
        atomic_write(output / CONTROLS_FILE, "".join(c.model_dump_json() + "\n" for c in merged.controls))
        by_id = {r.sample.id: s.run for s in merged.shards for r in s.run.records}
        for record in merged.records:
            run = by_id[record.sample.id]
            for name, ref in image_files(record).items():
                source = run.image_path(ref)
                assert source is not None  # read_shard checked every image
                target = output / name
                target.parent.mkdir(parents=True, exist_ok=True)
                place(source, target)
        atomic_write(output / RESULTS_FILE, merged.log.to_json())  # last, as `edct run` writes it
