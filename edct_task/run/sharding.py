"""``edct run`` over several processes, on the engines lmms-eval users already launch.

Under ``torchrun --nproc_per_node N -m edct_task.cli.main run …`` or ``accelerate launch
--num_processes N -m edct_task.cli.main run …`` every process sees ``RANK`` and ``WORLD_SIZE``.
Each rank takes every ``WORLD_SIZE``-th document, starting at its rank (as lmms-eval shards), runs
the batched driver on its share with the shared stage cache, and sends its records to rank 0
over ``torch.distributed`` (gloo: CPU, no GPU needed); rank 0 puts them back in document order and
writes the one output folder. The records are those of a single-process run (a sample's protocol
does not depend on which others run beside it), so the scores are identical; call counts and
usage are summed over the ranks.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from edct_task.core.errors import ConfigError
from edct_task.core.records import SampleRecord

T = TypeVar("T")


@dataclass(frozen=True)
class Shard:
    """This process's place in a multi-process run."""

    rank: int
    world_size: int

    @property
    def is_main(self) -> bool:
        """Rank 0 gathers and writes the output folder."""
        return self.rank == 0

    def take(self, items: Sequence[T]) -> list[T]:
        """This rank's share: items rank, rank + world_size, …"""
        return list(items[self.rank :: self.world_size])


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
