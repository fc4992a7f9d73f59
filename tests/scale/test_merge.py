"""``edct merge``: the slices of one run joined into the unsharded run's folder — byte-identical
samples.jsonl, equal results — and a one-line refusal for everything that would make the merged
run untrustworthy."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import SHARDS, N, small_config

from edct_task.cli.main import main
from edct_task.run.runner import run
from edct_task.scale.merge import MergeError, merge_shards, write_merged

RECOMPUTED = ("results", "judge_agreement", "judge_health", "config", "versions", "prompt_versions", "usage")


def _results(folder: Path) -> dict:
    return json.loads((folder / "results.json").read_text())


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("cache"))
    return dst


def _edit_results(folder: Path, change) -> None:
    data = _results(folder)
    change(data)
    (folder / "results.json").write_text(json.dumps(data))


def _shards(runs, *names: str) -> list[Path]:
    return [runs[n] for n in (names or [f"s{i}" for i in range(SHARDS)])]


def test_the_merge_is_the_unsharded_run(runs, tmp_path: Path, capsys) -> None:
    out = tmp_path / "merged"
    # given in any order
    assert main(["merge", *map(str, reversed(_shards(runs))), "--output", str(out)]) == 0
    assert f"merged {SHARDS} shard(s), {N} samples" in capsys.readouterr().out
    assert (out / "samples.jsonl").read_bytes() == (runs["one"] / "samples.jsonl").read_bytes()
    one, merged = _results(runs["one"]), _results(out)
    assert {k: merged[k] for k in RECOMPUTED} == {k: one[k] for k in RECOMPUTED}
    for stage, n in one["calls"]["calls"].items():  # each stage's requests: called or cached
        total = merged["calls"]["calls"].get(stage, 0) + merged["calls"]["cache_hits"].get(stage, 0)
        assert total == n + one["calls"]["cache_hits"].get(stage, 0)
    images = sorted(p.relative_to(runs["one"]) for p in (runs["one"] / "images").rglob("*.png"))
    assert images and sorted(p.relative_to(out) for p in (out / "images").rglob("*.png")) == images
    assert all((out / p).read_bytes() == (runs["one"] / p).read_bytes() for p in images)


def _refused(paths: list[Path], tmp_path: Path, capsys, *extra: str) -> str:
    code = main(["merge", *map(str, paths), "--output", str(tmp_path / "merged"), *extra])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert not (tmp_path / "merged" / "samples.jsonl").exists()  # never a silent partial merge
    return err


def test_missing_slices_are_named_and_refused(runs, tmp_path: Path, capsys) -> None:
    err = _refused(_shards(runs, "s0", "s2"), tmp_path, capsys)
    assert "missing slices: 1/3 of 12 items" in err and "--allow-missing" in err


def test_allow_missing_gives_a_result_labelled_partial(runs, tmp_path: Path, capsys) -> None:
    out = tmp_path / "partial"
    assert main(["merge", *map(str, _shards(runs, "s0", "s2")), "--output", str(out), "--allow-missing"]) == 0
    assert "PARTIAL: slices 1/3 missing" in capsys.readouterr().out
    partial = _results(out)["config"]["data"]["partial"]
    expected = sum(len(_results(runs[s])["config"]["data"]["shard"]["positions"]) for s in ("s0", "s2"))
    assert partial["missing_slices"] == ["1/3"] and partial["items"] == expected and partial["of_items"] == N
    assert _results(out)["results"]["overall"]["counts"]["total"] == expected


def test_a_slice_given_twice_is_an_overlap(runs, tmp_path: Path, capsys) -> None:
    twin = _copy(runs["s1"], tmp_path / "s1-again")
    err = _refused([*_shards(runs), twin], tmp_path, capsys)
    assert f"overlapping slices: slice 1/3 is both {runs['s1']} and {twin}" in err


def test_one_item_in_two_folders_is_an_overlap(runs, tmp_path: Path, capsys) -> None:
    """A folder claiming another slice's position (its records still its own) overlaps."""
    s2 = _copy(runs["s2"], tmp_path / "s2")
    theirs = _results(runs["s0"])["config"]["data"]["shard"]["positions"][0]

    def claim(d):
        mine = d["config"]["data"]["shard"]["positions"]
        d["config"]["data"]["shard"]["positions"] = sorted([*mine[:-1], theirs])

    _edit_results(s2, claim)
    err = _refused([runs["s0"], runs["s1"], s2], tmp_path, capsys)
    assert f"overlapping slices: {runs['s0']} and {s2} both hold item position {theirs}" in err


def test_shards_of_different_setups_are_refused(runs, tmp_path: Path, capsys) -> None:
    s1 = _copy(runs["s1"], tmp_path / "s1")
    _edit_results(s1, lambda d: d["config"]["protocol"].update(k=d["config"]["protocol"]["k"] + 1))
    err = _refused([runs["s0"], s1, runs["s2"]], tmp_path, capsys)
    assert f"shards of different setups: {runs['s0']} and {s1} differ in config.protocol.k" in err


def test_shards_of_different_datasets_are_refused(runs, tmp_path: Path, capsys) -> None:
    s1 = _copy(runs["s1"], tmp_path / "s1")
    _edit_results(s1, lambda d: d["config"]["data"].update(seed=1))
    err = _refused([runs["s0"], s1, runs["s2"]], tmp_path, capsys)
    assert f"shards of different datasets: {runs['s0']} and {s1} differ in seed" in err
    s2 = _copy(runs["s2"], tmp_path / "s2")
    _edit_results(s2, lambda d: d["config"]["data"]["shard"].update(items_sha256="0" * 64))
    assert "differ in items_sha256" in _refused([runs["s0"], runs["s1"], s2], tmp_path, capsys)


def test_shards_of_different_splits_are_refused(runs, tmp_path: Path, capsys) -> None:
    half = tmp_path / "half"
    run(small_config(half, shard="1/2"))
    err = _refused([runs["s0"], half], tmp_path, capsys)
    assert f"shards of different splits: {runs['s0']} is slice 0/3, {half} is slice 1/2" in err


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("truncated", "damaged shard {p}: {p}/samples.jsonl"),
        ("image", "damaged shard {p}: images/"),
        ("foreign", "damaged shard {p}: item "),
        ("count", "damaged shard {p}: "),
        ("results", "damaged shard {p}: {p}/results.json"),
    ],
)
def test_damaged_shards_are_refused(runs, tmp_path: Path, capsys, damage: str, message: str) -> None:
    p = _copy(runs["s1"], tmp_path / "s1")
    samples = p / "samples.jsonl"
    if damage == "truncated":  # a shard killed while its folder was copied
        samples.write_bytes(samples.read_bytes()[:-40])
    elif damage == "image":
        next((p / "images").rglob("original.png")).unlink()
    elif damage == "foreign":  # a record of slice 0 pasted into slice 1
        lines = samples.read_text().splitlines(keepends=True)
        samples.write_text(
            "".join([*lines[:-1], (runs["s0"] / "samples.jsonl").read_text().splitlines(True)[0]])
        )
    elif damage == "count":
        samples.write_text("".join(samples.read_text().splitlines(keepends=True)[:-1]))
    else:
        (p / "results.json").write_text("{not json")
    err = _refused([runs["s0"], p, runs["s2"]], tmp_path, capsys)
    assert message.format(p=p) in err


def test_an_unsharded_run_is_not_a_shard(runs, tmp_path: Path, capsys) -> None:
    err = _refused([runs["one"]], tmp_path, capsys)
    assert f"{runs['one']} is not a shard: it was run without --shard I/N" in err


def test_the_output_may_not_be_a_shard(runs) -> None:
    merged = merge_shards(_shards(runs))
    with pytest.raises(MergeError, match="is one of the shards"):
        write_merged(merged, runs["s0"])
