"""``edct build-bench --okvqa-hub/--3dsr-hub/--drivelm-hub``: the sources in their Hub schemas.

The fixture repositories are written in the exact schemas of the Hub datasets (parquet through
``datasets``; DriveLM's JSON + zip). They are read two ways: as local folders, and under the real
Hub ids through ``huggingface_hub`` with ``HF_HUB_OFFLINE=1`` from a Hub cache that holds them —
the code path a Hub id takes online, minus the download.
"""

from __future__ import annotations

import json
from pathlib import Path

import huggingface_hub
import pytest
from support.hub_fixture import (
    OKVQA_REMOVED,
    THREEDSR_REMOVED,
    install_in_hub_cache,
    write_drivelm_repo,
    write_okvqa_repo,
    write_threedsr_repo,
    write_threedsr_tsv_repo,
)
from support.sources_fixture import DRIVELM_ELIGIBLE, DRIVELM_REMOVED, write_sources

from edct_task.bench_data import BenchDataError, BuildRequest, build_bench, load_bench, read_manifest
from edct_task.bench_data.domain import HubSource
from edct_task.bench_data.domains import REGISTRY
from edct_task.bench_data.drivelm import SYSTEM_PROMPT
from edct_task.bench_data.format import file_sha256
from edct_task.cli.main import main

OKVQA_HUB, DRIVELM_HUB, THREEDSR_HUB = (REGISTRY[d].hub.repo for d in ("okvqa", "drivelm", "3dsr"))
COMMITS = {
    OKVQA_HUB: "1f0a" * 10,
    THREEDSR_HUB: "2e1b" * 10,
    DRIVELM_HUB: "3d2c" * 10,
    "ccvl/3DSRBench": "4c3d" * 10,
}
ALL = {"okvqa": 3, "drivelm": DRIVELM_ELIGIBLE, "3dsr": 3}


@pytest.fixture(scope="module")
def repos(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("repos")
    return {
        OKVQA_HUB: write_okvqa_repo(root / "okvqa"),
        THREEDSR_HUB: write_threedsr_repo(root / "3dsr"),
        DRIVELM_HUB: write_drivelm_repo(root / "drivelm"),
        "ccvl/3DSRBench": write_threedsr_tsv_repo(root / "ccvl"),
    }


@pytest.fixture
def hub_cache(repos, tmp_path, monkeypatch) -> Path:
    """A Hub cache holding the fixture repositories under the real ids; the Hub itself unreachable."""
    cache = tmp_path / "hub-cache"
    for repo_id, folder in repos.items():
        install_in_hub_cache(cache, repo_id, folder, COMMITS[repo_id])
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    return cache


def _rules(manifest: dict, domain: str) -> dict[str, int]:
    return {r["name"]: r["removed"] for r in manifest["domains"][domain]["rules"]}


def test_build_from_the_three_hub_ids(hub_cache, tmp_path, capsys):
    out = tmp_path / "bench"
    argv = ["build-bench", "--okvqa-hub", OKVQA_HUB, "--3dsr-hub", THREEDSR_HUB, "--drivelm-hub", DRIVELM_HUB]
    assert main([*argv, "--counts", "3,4,3", "--out", str(out)]) == 0
    assert f"export EDCT_BENCH_DATA={out}" in capsys.readouterr().out
    ds = load_bench(out)
    assert {d: ds["domain"].count(d) for d in ALL} == ALL

    m = read_manifest(out)
    assert m["counts"] == ALL
    for domain, repo_id in (("okvqa", OKVQA_HUB), ("3dsr", THREEDSR_HUB), ("drivelm", DRIVELM_HUB)):
        hub = m["domains"][domain]["hub"]
        assert hub["hub_id"] == repo_id and hub["revision"] == "main" and hub["commit"] == COMMITS[repo_id]
    assert (
        m["domains"]["okvqa"]["hub"] | {"config": "default", "split": "val2014"}
        == m["domains"]["okvqa"]["hub"]
    )
    assert m["domains"]["3dsr"]["hub"]["config"] == "3dsr"
    # the same rules as the local readers, with the same counts
    assert _rules(m, "okvqa") == OKVQA_REMOVED
    assert _rules(m, "3dsr") == THREEDSR_REMOVED
    assert _rules(m, "drivelm") == DRIVELM_REMOVED
    files = m["domains"]["okvqa"]["files"]
    snapshot = hub_cache / f"datasets--{OKVQA_HUB.replace('/', '--')}" / "snapshots" / COMMITS[OKVQA_HUB]
    parquet = snapshot / "data" / "val2014-00000-of-00001.parquet"
    assert files == {
        "data/val2014-00000-of-00001.parquet": {
            "path": str(parquet),
            "sha256": file_sha256(parquet),
            "bytes": parquet.stat().st_size,
        }
    }
    assert set(m["domains"]["drivelm"]["files"]) == {"qa", "images"}

    rows = {r["id"]: r for r in ds}
    ok = rows["okvqa-2971475"]
    meta = json.loads(ok["metadata"])
    assert ok["question"] == "What sport can you use this for?" and meta["answer"] == "racing"
    assert meta["answers"] == ["racing"] * 6 + ["motocross"] * 4 and ok["image"].size == (32, 24)
    drive = [r for r in rows.values() if r["domain"] == "drivelm"]
    assert all(r["system_prompt"] == SYSTEM_PROMPT and r["image"].size == (32, 24) for r in drive)
    three = rows["3dsr-2"]
    assert three["question"].splitlines()[1:3] == ["A. yes", "B. no"]
    assert json.loads(three["metadata"])["qid"] == "q2"


def test_hub_and_local_builds_select_the_same_items(hub_cache, tmp_path):
    """Same candidates, same ids, same seeded shuffle: a Hub build picks what a local build picks."""
    local = write_sources(tmp_path / "local")
    for seed in (0, 3):
        counts = {"okvqa": 2, "drivelm": 3, "3dsr": 2}
        build_bench(BuildRequest(out=tmp_path / f"l{seed}", seed=seed, counts=counts, **local.kwargs()))
        build_bench(
            BuildRequest(
                out=tmp_path / f"h{seed}",
                seed=seed,
                counts=counts,
                hubs={
                    "okvqa": HubSource(OKVQA_HUB),
                    "drivelm": HubSource(DRIVELM_HUB),
                    "3dsr": HubSource(THREEDSR_HUB),
                },
            )
        )
        assert load_bench(tmp_path / f"h{seed}")["id"] == load_bench(tmp_path / f"l{seed}")["id"]


def test_a_revision_pins_a_commit(repos, hub_cache, tmp_path):
    old = "0a9b" * 10
    install_in_hub_cache(hub_cache, OKVQA_HUB, repos[OKVQA_HUB], old, ref="v1")
    counts = {"okvqa": 3, "drivelm": 0, "3dsr": 0}
    for revision, commit in ((old, old), ("v1", old), (None, COMMITS[OKVQA_HUB])):
        out = tmp_path / f"b-{revision}"
        build_bench(BuildRequest(out=out, counts=counts, hubs={"okvqa": HubSource(OKVQA_HUB, revision)}))
        hub = read_manifest(out)["domains"]["okvqa"]["hub"]
        assert hub["commit"] == commit and hub["revision"] == (revision or "main")


def test_local_folders_laid_out_like_the_repos(repos, tmp_path):
    out = tmp_path / "bench"
    argv = ["--okvqa-hub", str(repos[OKVQA_HUB]), "--drivelm-hub", str(repos[DRIVELM_HUB])]
    assert main(["build-bench", *argv, "--3dsr-hub", str(repos["ccvl/3DSRBench"]), "--out", str(out),
                 "--counts", "3,4,3"]) == 0  # fmt: skip
    m = read_manifest(out)
    assert m["domains"]["okvqa"]["hub"] == {
        "folder": str(repos[OKVQA_HUB].resolve()),
        "config": "default",
        "split": "val2014",
    }
    assert m["domains"]["3dsr"]["hub"]["file"] == "3dsrbench_v1_vlmevalkit.tsv"
    assert _rules(m, "3dsr") == THREEDSR_REMOVED
    assert sorted(i for i in load_bench(out)["id"] if i.startswith("3dsr")) == ["3dsr-1", "3dsr-2", "3dsr-3"]


def test_ccvl_tsv_through_the_hub_cache_and_the_circular_config(hub_cache, tmp_path):
    build_bench(
        BuildRequest(
            out=tmp_path / "tsv",
            counts={"okvqa": 0, "drivelm": 0, "3dsr": 3},
            hubs={"3dsr": HubSource("ccvl/3DSRBench")},
        )
    )
    assert read_manifest(tmp_path / "tsv")["domains"]["3dsr"]["hub"]["commit"] == COMMITS["ccvl/3DSRBench"]
    result = build_bench(
        BuildRequest(
            out=tmp_path / "circ",
            counts={"okvqa": 0, "drivelm": 0, "3dsr": 3},
            hubs={"3dsr": HubSource(THREEDSR_HUB, options={"config": "3dsr_circular"})},
        )
    )
    # 12 rows: each question in every option order; one row per question and image is kept
    assert result.manifest["domains"]["3dsr"]["items_read"] == 12
    assert _rules(result.manifest, "3dsr") == {"3dsr.orientation_family": 4, "3dsr.one_variant": 5}
    assert sorted(load_bench(tmp_path / "circ")["id"]) == ["3dsr-1", "3dsr-2", "3dsr-3"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--okvqa-hub", "someone/not-cached"], "not in the Hub cache"),
        (
            ["--okvqa-hub", OKVQA_HUB, "--okvqa-revision", "no-such-tag"],
            "--okvqa-hub lmms-lab-encoder/OK-VQA",
        ),
        (["--okvqa-hub", "not a hub id"], "no such folder, and not a Hub id"),
        (["--okvqa-revision", "v1"], "--okvqa-revision applies to --okvqa-hub"),
        (["--3dsr-hub", THREEDSR_HUB, "--3dsr-config", "nope"], "no config 'nope'"),
        (["--okvqa-hub", OKVQA_HUB, "--okvqa-questions", "q.json"], "both given"),
    ],
)
def test_hub_errors_exit_2_with_one_line(hub_cache, tmp_path, capsys, argv, message):
    rc = main(["build-bench", *argv, "--out", str(tmp_path / "bench")])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "bench").exists()


def test_wrong_schema_and_missing_files_name_what_is_wrong(repos, tmp_path):
    import datasets

    bad = tmp_path / "bad-okvqa"
    bad.mkdir()
    (bad / "README.md").write_text((repos[OKVQA_HUB] / "README.md").read_text())
    table = datasets.load_dataset(str(repos[OKVQA_HUB]), split="val2014").remove_columns("answers")
    (bad / "data").mkdir()
    table.to_parquet(str(bad / "data" / "val2014-00000-of-00001.parquet"))
    with pytest.raises(BenchDataError, match=r"missing column\(s\) \['answers'\]"):
        build_bench(BuildRequest(out=tmp_path / "b", counts={"okvqa": 1, "drivelm": 0, "3dsr": 0},
                                 hubs={"okvqa": HubSource(str(bad))}))  # fmt: skip
    half = tmp_path / "drivelm-half"
    half.mkdir()
    (half / "v1_1_train_nus.json").write_text((repos[DRIVELM_HUB] / "v1_1_train_nus.json").read_text())
    with pytest.raises(BenchDataError, match=r"must hold drivelm_nus_imgs_train\.zip"):
        build_bench(BuildRequest(out=tmp_path / "b", counts={"okvqa": 0, "drivelm": 1, "3dsr": 0},
                                 hubs={"drivelm": HubSource(str(half))}))  # fmt: skip


def test_two_folders_of_one_name_are_two_datasets(tmp_path):
    """datasets names a local folder's Arrow cache by the folder's name: without a cache keyed by
    the files, the second ``okvqa`` folder would be read as the first."""
    from support.hub_fixture import OKVQA_ROWS

    first = write_okvqa_repo(tmp_path / "a" / "okvqa")
    build_bench(BuildRequest(out=tmp_path / "b1", counts={"okvqa": 3, "drivelm": 0, "3dsr": 0},
                             hubs={"okvqa": HubSource(str(first))}))  # fmt: skip
    second = tmp_path / "b" / "okvqa"
    write_okvqa_repo(second)
    import datasets

    rows = datasets.load_dataset(str(first), split="val2014", cache_dir=str(tmp_path / "c")).to_list()
    extra = {
        **rows[0],
        "question_id": "7777777",
        "question": "What colour is the bus?",
        "answers": ["red"] * 10,
    }
    table = datasets.Dataset.from_list([*rows, extra], features=datasets.load_dataset(
        str(first), split="val2014", cache_dir=str(tmp_path / "c")).features)  # fmt: skip
    table.to_parquet(str(second / "data" / "val2014-00000-of-00001.parquet"))
    result = build_bench(BuildRequest(out=tmp_path / "b2", counts={"okvqa": 4, "drivelm": 0, "3dsr": 0},
                                      hubs={"okvqa": HubSource(str(second))}))  # fmt: skip
    assert result.manifest["domains"]["okvqa"]["items_read"] == len(OKVQA_ROWS) + 1
    assert "okvqa-7777777" in load_bench(tmp_path / "b2")["id"]
