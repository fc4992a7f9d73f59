"""Which items a run takes: one slice function for ``edct run --shard I/N`` and for the ranks of
``torchrun`` / ``accelerate``.

An item belongs to slice ``item_slice(id, N)``: the first 8 bytes of the SHA-256 of its id (UTF-8)
as an unsigned big-endian integer, modulo N. The slice of an item depends on its id and N only:
not on its position, on the other items, or on ``data.limit`` (the limit picks the first items of
the data in document order *before* they are sliced, so the N slices of a limited run together
are exactly the items of the unsharded run with the same limit).

``edct run --shard I/N`` (``data.shard``) runs slice I as an ordinary, independent job: its
output folder records the slice (``RunSetup.data.shard``: a :class:`ShardManifest`) and ``edct
merge`` joins the N folders (``edct_task.scale.merge``).

Under ``torchrun --nproc_per_node N -m edct_task.cli.main run …`` or ``accelerate launch
--num_processes N -m edct_task.cli.main run …`` every process sees ``RANK`` and ``WORLD_SIZE``; rank
R takes slice R of N (the same function), runs the driver (``engine.driver.run_samples``) on it with
the shared stage cache, and sends its records to rank 0 over ``torch.distributed`` (gloo: CPU, no
GPU needed); rank 0 puts them back in document order and writes the one output folder. The records
are those of a single-process run (a sample's protocol does not depend on which others run beside
it), so the scores are identical; call counts and usage are summed over the ranks.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from edct_task.config import MAX_SHARDS
from edct_task.core.errors import ConfigError
from edct_task.core.records import SampleInput, SampleRecord

T = TypeVar("T")


Item = SampleInput | SampleRecord
"""A loaded item: its input, or the error record of a row that could not be read."""

SHARD_PATTERN = re.compile(r"^(\d{1,12})/(\d{1,12})$")


def item_slice(item_id: str, count: int) -> int:
    """The slice (0 … count-1) of the item with this id (see the module docstring)."""
    digest = hashlib.sha256(item_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % count


def item_id(item: Item) -> str:
    return item.sample.id if isinstance(item, SampleRecord) else item.id


@dataclass(frozen=True)
class Shard:
    """Slice ``rank`` of ``world_size``: a ``--shard`` job, or a process of a torchrun group."""

    rank: int
    world_size: int

    @property
    def is_main(self) -> bool:
        """Rank 0 gathers and writes the output folder (torchrun)."""
        return self.rank == 0

    @property
    def label(self) -> str:
        """``I/N``, as ``--shard`` takes it."""
        return f"{self.rank}/{self.world_size}"

    def holds(self, item_id: str) -> bool:
        return item_slice(item_id, self.world_size) == self.rank

    def take(self, items: Sequence[T], key: Any = item_id) -> list[T]:
        """The items of this slice, in their order (``key``: an item's id)."""
        return [item for item in items if self.holds(key(item))]


class ShardManifest(BaseModel):
    """What a ``--shard I/N`` job's run log records of its slice (``take_slice``): what ``edct
    merge`` checks the slices against."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int = Field(ge=0, description="The slice I.")
    count: int = Field(ge=1, le=MAX_SHARDS, description="The number of slices N.")
    items: int = Field(ge=0, description="Items of the unsharded run.")
    items_sha256: str = Field(description="``items_digest`` of all the unsharded run's items, in order.")
    positions: list[int] = Field(description="Document positions of this slice's items, ascending.")

    @model_validator(mode="after")
    def _consistent(self) -> ShardManifest:
        if not self.index < self.count:
            raise ValueError(f"slice {self.index} of {self.count}: I must be 0 … N-1")
        if self.positions != sorted(set(self.positions)) or any(
            not 0 <= p < self.items for p in self.positions
        ):
            raise ValueError(f"positions are not distinct, ascending document positions below {self.items}")
        return self

    @property
    def shard(self) -> Shard:
        """The slice as a ``Shard``."""
        return Shard(self.index, self.count)


def parse_shard(text: str) -> Shard:
    """``I/N`` (0 ≤ I < N) as a ``Shard``, or ``ConfigError`` saying what was expected."""
    match = SHARD_PATTERN.match(text.strip())
    if match is None:
        raise ConfigError(f"shard {text!r} must look like I/N (slice I of N, counted from 0), e.g. 0/4")
    index, count = int(match[1]), int(match[2])
    if count > MAX_SHARDS:
        raise ConfigError(f"shard {text!r}: N must be at most {MAX_SHARDS} slices")
    if count < 1 or index >= count:
        raise ConfigError(f"shard {text!r}: I must be 0 … N-1 (slices are counted from 0)")
    return Shard(index, count)


def items_digest(items: Sequence[SampleInput]) -> str:
    """SHA-256 over the items in order: id, image ref and question hash each (what the run read)."""
    h = hashlib.sha256()
    for s in items:
        question = hashlib.sha256(s.question.encode("utf-8")).hexdigest()
        h.update(f"{s.id}\t{s.image}\t{question}\n".encode())
    return h.hexdigest()


def take_slice(spec: str | None, items: list[Item]) -> tuple[list[Item], ShardManifest | None]:
    """A ``--shard`` job's items and the manifest its run log records; all items and None without
    a shard. The manifest: ``index``, ``count``, ``items`` (how many the unsharded run has),
    ``items_sha256`` (``items_digest`` of them all, in order) and ``positions`` (the document
    positions of this slice's items) — what ``edct merge`` checks the slices against."""
    if spec is None:
        return items, None
    shard = parse_shard(spec)
    positions = [i for i, item in enumerate(items) if shard.holds(item_id(item))]
    manifest = ShardManifest(
        index=shard.rank,
        count=shard.world_size,
        items=len(items),
        items_sha256=items_digest([s.sample if isinstance(s, SampleRecord) else s for s in items]),
        positions=positions,
    )
    return [items[i] for i in positions], manifest


def shard_from_env(env: Mapping[str, str] | None = None) -> Shard | None:
    """The shard torchrun / accelerate describe in ``RANK`` and ``WORLD_SIZE``; None for one process."""
    env = os.environ if env is None else env
    try:
        world = int(env.get("WORLD_SIZE", "1"))
        rank = int(env.get("RANK", "0"))
    except ValueError:
        raise ConfigError(
            f"RANK={env.get('RANK')!r} / WORLD_SIZE={env.get('WORLD_SIZE')!r} are not integers"
        ) from None
    if world <= 1:
        return None
    if not 0 <= rank < world:
        raise ConfigError(f"RANK={rank} is outside 0..{world - 1} (WORLD_SIZE={world})")
    if not env.get("MASTER_ADDR") or not env.get("MASTER_PORT"):
        raise ConfigError(
            f"WORLD_SIZE={world} but MASTER_ADDR/MASTER_PORT are unset: start the ranks with torchrun or "
            "accelerate launch, which set them"
        )
    return Shard(rank, world)


def gather_to_main(shard: Shard, payload: Any) -> list[Any] | None:
    """Every rank's ``payload`` (picklable) on rank 0, in rank order; None on the other ranks."""
    import torch.distributed as dist

    started_here = not dist.is_initialized()
    if started_here:
        dist.init_process_group("gloo", rank=shard.rank, world_size=shard.world_size)
    try:
        gathered: list[Any] | None = [None] * shard.world_size if shard.is_main else None
        dist.gather_object(payload, gathered, dst=0)
        return gathered
    finally:
        if started_here:
            dist.destroy_process_group()


def merge_records(parts: Sequence[Sequence[str]], order: Mapping[str, int]) -> list[SampleRecord]:
    """The ranks' records (as JSON lines) in document order."""
    records = [SampleRecord.model_validate_json(line) for part in parts for line in part]
    return sorted(records, key=lambda r: order[r.sample.id])


def sum_counts(parts: Sequence[Any]) -> Any:
    """Add up the ranks' counters (``calls``, ``usage``): numbers are summed, mappings and equally
    long lists merged item by item, anything else is taken from rank 0."""
    first = parts[0]
    if isinstance(first, bool) or first is None:
        return first
    if isinstance(first, (int, float)) and all(isinstance(p, (int, float)) for p in parts):
        total = sum(parts)
        return round(total, 6) if isinstance(total, float) else total
    if isinstance(first, Mapping) and all(isinstance(p, Mapping) for p in parts):
        keys = list(dict.fromkeys(k for p in parts for k in p))
        return {k: sum_counts([p[k] for p in parts if k in p]) for k in keys}
    if isinstance(first, list) and all(isinstance(p, list) and len(p) == len(first) for p in parts):
        return [sum_counts(list(items)) for items in zip(*parts, strict=True)]
    return first


def gather_run(
    shard: Shard,
    records: Sequence[SampleRecord],
    usage: Mapping[str, Any],
    calls: Mapping[str, Any],
    order: Mapping[str, int],
) -> tuple[list[SampleRecord], Any, Any] | None:
    """On rank 0: all ranks' records in document order, summed usage and call counts; else None."""
    parts = gather_to_main(shard, ([r.model_dump_json() for r in records], dict(usage), dict(calls)))
    if parts is None:
        return None
    return (
        merge_records([p[0] for p in parts], order),
        sum_counts([p[1] for p in parts]),
        sum_counts([p[2] for p in parts]),
    )
