"""``--shard I/N``: a deterministic slice by a hash of the item id, stable under reordering and
``--limit`` (the limit picks the first items, the shard slices them), recorded in the run log;
torchrun's ranks take the same slices."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from conftest import SHARDS, N, small_config
from hypothesis import given
from hypothesis import strategies as st

from edct_task.calibration import generate_samples
from edct_task.config import config_from_dict
from edct_task.core.errors import ConfigError
from edct_task.run.outputs import load_run
from edct_task.run.runner import run
from edct_task.run.sharding import Shard, item_slice, parse_shard, shard_from_env

IDS = st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=40, unique=True)


def test_the_slice_of_an_item_is_pinned() -> None:
    # sha256(id)[:8] as a big-endian integer, modulo N: a change here re-slices every sweep's items
    assert [item_slice("a", 4), item_slice("b", 4), item_slice("item-17", 7)] == [2, 2, 5]
    assert item_slice("a", 1) == 0


@given(IDS, st.integers(1, 9), st.randoms())
def test_slices_partition_the_items_whatever_their_order(ids, count, rnd) -> None:
    shuffled = ids[:]
    rnd.shuffle(shuffled)
    slices = [Shard(i, count).take(ids, key=str) for i in range(count)]
    assert sorted(x for s in slices for x in s) == sorted(ids)  # disjoint, complete
    for i in range(count):  # membership depends on the id alone: reordering keeps each slice's set
        assert set(Shard(i, count).take(shuffled, key=str)) == set(slices[i])
        assert Shard(i, count).take(ids[: len(ids) // 2], key=str) == [
            x for x in slices[i] if x in ids[: len(ids) // 2]
        ]


def test_a_shard_is_i_of_n_counted_from_zero() -> None:
    assert parse_shard("2/4") == Shard(2, 4)
    for bad in ("4/4", "1/0", "a/b", "1-4", "-1/4"):
        with pytest.raises(ConfigError):
            parse_shard(bad)
    raw = small_config(Path("x")).model_dump(mode="json")
    with pytest.raises(ConfigError, match=r"data\.shard"):
        config_from_dict(raw, ["data.shard=4/4"])
    with pytest.raises(ConfigError, match=r"data\.shard"):
        config_from_dict(raw, ["data.shard=two"])


def test_shard_runs_record_their_slice_and_split_the_items(runs) -> None:
    one = load_run(runs["one"])
    assert one.log.config.data.shard is None  # an unsharded run's log is as before
    ids = [r.sample.id for r in one.records]
    seen = []
    for i in range(SHARDS):
        shard = load_run(runs[f"s{i}"])
        manifest = shard.log.config.data.shard
        assert manifest is not None and manifest.shard == Shard(i, SHARDS) and manifest.items == N
        assert [ids[p] for p in manifest.positions] == [r.sample.id for r in shard.records]
        assert all(item_slice(r.sample.id, SHARDS) == i for r in shard.records)
        assert shard.log.config.data.model_copy(update={"shard": None}) == one.log.config.data
        assert shard.log.config.protocol == one.log.config.protocol  # the full setup
        seen += [r.sample.id for r in shard.records]
    assert sorted(seen) == sorted(ids) and len(seen) == N


def test_limit_picks_the_items_then_the_shard_slices_them(tmp_path) -> None:
    """--limit 7 --shard 1/3 = the items of the --limit 7 run that hash to slice 1; the same items
    of slice 1 as without the limit, restricted to the first 7."""
    limited = run(small_config(tmp_path / "lim", limit=7, shard="1/3"))
    full_ids = [s.id for s in generate_samples(n=N, seed=0)]  # the calibration world's, in order
    got = [r.sample.id for r in limited.records]
    assert got == [i for i in full_ids[:7] if item_slice(i, 3) == 1]
    manifest = json.loads((tmp_path / "lim" / "results.json").read_text())["config"]["data"]["shard"]
    assert manifest["items"] == 7 and manifest["positions"] == [full_ids.index(i) for i in got]


def test_torchrun_ranks_take_the_same_slices_as_shard_jobs() -> None:
    env = {"RANK": "1", "WORLD_SIZE": "3", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    rank = shard_from_env(env)
    ids = [f"cal-{i:04d}" for i in range(30)]
    assert rank.take(ids, key=str) == parse_shard("1/3").take(ids, key=str)
    assert rank.take(ids, key=str) != ids[1::3]  # no longer every WORLD_SIZE-th document
    random.Random(0).shuffle(ids)
    assert set(rank.take(ids, key=str)) == {i for i in ids if item_slice(i, 3) == 1}


def test_shard_and_torchrun_together_are_refused(tmp_path, monkeypatch) -> None:
    for k, v in {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(ConfigError, match="without torchrun"):
        run(small_config(tmp_path / "x", shard="0/2"))


def test_the_run_command_takes_shard_on_both_kinds_of_target(runs, tmp_path, capsys) -> None:
    import yaml

    from edct_task.cli.main import main

    raw = small_config(tmp_path / "x").model_dump(mode="json")
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(raw))
    out = tmp_path / "s1"
    assert main(["run", "--config", str(tmp_path / "run.yaml"), "--shard", "1/3", "--output", str(out)]) == 0
    assert (out / "samples.jsonl").read_bytes() == (runs["s1"] / "samples.jsonl").read_bytes()
    assert main(["run", "--config", str(tmp_path / "run.yaml"), "--shard", "3/3", "--output", str(out)]) == 2
    assert "--shard" in capsys.readouterr().err  # the flag the user typed
    # an lmms-eval model as the target: the same slice of the same items, the same records
    model = [
        "run",
        "--model",
        "edct_reference",
        "--model_args",
        "behavior=mixed:0.5",
        "--tasks",
        "edct_calibration",
    ]
    model += ["--limit", str(raw["data"]["n"]), "--shard", "1/3", "--no-progress"]
    assert main([*model, "--output", str(tmp_path / "model")]) == 0
    assert (tmp_path / "model" / "samples.jsonl").read_bytes() == (out / "samples.jsonl").read_bytes()
    assert not (tmp_path / "model" / "lmms").exists()  # a slice exports nothing: merge first
