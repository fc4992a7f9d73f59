"""``edct build-bench``: sources in their published layouts → one dataset with its manifest."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from PIL import Image
from support.sources_fixture import (
    DRIVELM_ELIGIBLE,
    DRIVELM_FRAME,
    DRIVELM_REMOVED,
    INPUT_OF,
    OKVQA_ELIGIBLE,
    OKVQA_REMOVED,
    THREEDSR_ELIGIBLE,
    THREEDSR_REMOVED,
    write_sources,
    write_threedsr_tsv,
)

from edct_task.bench_data import (
    ENV_DATA,
    MANIFEST_NAME,
    BenchDataError,
    BuildRequest,
    build_bench,
    load_bench,
    read_manifest,
)
from edct_task.bench_data.drivelm import SYSTEM_PROMPT
from edct_task.bench_data.format import COLUMNS, file_sha256

ALL = {"okvqa": OKVQA_ELIGIBLE, "drivelm": DRIVELM_ELIGIBLE, "3dsr": THREEDSR_ELIGIBLE}


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    return write_sources(tmp_path_factory.mktemp("sources"))


def request(sources, out: Path, **kw) -> BuildRequest:
    """A request for ``sources`` (a keyword naming a ``Sources`` field replaces that file)."""
    files = {k: kw.pop(k) for k in list(kw) if k in INPUT_OF}
    return BuildRequest(out=out, **{**sources.kwargs(**files), "counts": dict(ALL), **kw})


def _rules(manifest: dict, domain: str) -> dict[str, int]:
    return {r["name"]: r["removed"] for r in manifest["domains"][domain]["rules"]}


def test_build_counts_rules_and_manifest(sources, tmp_path):
    result = build_bench(request(sources, tmp_path / "bench"))
    ds = load_bench(tmp_path / "bench")
    assert list(ds.column_names) == list(COLUMNS) or set(ds.column_names) == set(COLUMNS)
    assert len(ds) == sum(ALL.values())
    domains = ds["domain"]
    assert {d: domains.count(d) for d in ALL} == ALL

    m = read_manifest(tmp_path / "bench")
    assert m == json.loads(json.dumps(result.manifest))
    assert m["format"] == "edct-bench" and m["format_version"] == 1 and m["seed"] == 0
    assert m["counts"] == ALL and m["total"] == len(ds)
    assert _rules(m, "okvqa") == OKVQA_REMOVED
    assert _rules(m, "drivelm") == DRIVELM_REMOVED
    assert _rules(m, "3dsr") == THREEDSR_REMOVED
    assert m["domains"]["drivelm"]["items_read"] == DRIVELM_ELIGIBLE + sum(DRIVELM_REMOVED.values())
    assert m["domains"]["drivelm"]["preferred"] == 2
    files = m["domains"]["okvqa"]["files"]
    assert files["questions"]["sha256"] == file_sha256(sources.okvqa_questions)
    assert files["annotations"]["sha256"] == file_sha256(sources.okvqa_annotations)
    assert m["domains"]["drivelm"]["files"]["qa"]["sha256"] == file_sha256(sources.drivelm_json)
    assert m["domains"]["3dsr"]["files"]["table"]["sha256"] == file_sha256(sources.threedsr_table)
    assert all(r["description"] for d in m["domains"].values() for r in d["rules"])

    rows = {r["id"]: r for r in ds}
    ok = rows["okvqa-2971475"]
    assert ok["question"] == "What sport can you use this for?" and ok["system_prompt"] == ""
    meta = json.loads(ok["metadata"])
    assert meta["answer"] == "racing" and meta["image_id"] == 297147
    assert meta["image_file"] == "COCO_val2014_000000297147.jpg"
    img = Image.open(sources.coco_images / "val2014" / meta["image_file"])
    assert ok["image"].size == img.size  # the source bytes, decoded by the Image feature
    drive = [r for r in rows.values() if r["domain"] == "drivelm"]
    assert all(r["system_prompt"] == SYSTEM_PROMPT for r in drive)
    assert all("CAM_" not in r["question"] and "<" not in r["question"] for r in drive)
    assert {json.loads(r["metadata"])["camera"] for r in drive} == {"CAM_FRONT"}
    assert f"drivelm-{DRIVELM_FRAME}-perception2" in rows
    three = rows["3dsr-2"]
    assert three["question"].splitlines()[1:3] == ["A. yes", "B. no"]
    assert json.loads(three["metadata"])["category"] == "orientation_on_the_left"
    assert three["source"] == "3DSRBench" and three["source_id"] == "2"
    assert not list(tmp_path.glob(".bench.*"))  # no temporary folder left behind


def test_loads_from_env_var_and_through_the_bench_task_hooks(sources, tmp_path, monkeypatch):
    import datasets
    from support.loopback import served_roles_config

    from edct_task.lmms import documents, turns

    build_bench(request(sources, tmp_path / "bench"))
    monkeypatch.setenv(ENV_DATA, str(tmp_path / "bench"))
    # real data needs real roles (no call is made while documents load: any address will do)
    monkeypatch.setenv("EDCT_LOOPBACK_KEY", "sk-unused")
    roles = served_roles_config(tmp_path / "roles.yaml", "http://127.0.0.1:9", "EDCT_LOOPBACK_KEY")
    monkeypatch.setenv("EDCT_CONFIG", str(roles))
    monkeypatch.setenv("EDCT_WORK_DIR", str(tmp_path / "work"))
    assert len(load_bench()) == sum(ALL.values())
    stub = datasets.Dataset.from_list([{documents.STUB_COLUMN: "x"}])
    for hook, domain in (
        (documents.docs_okvqa, "okvqa"),
        (documents.docs_drivelm, "drivelm"),
        (documents.docs_3dsr, "3dsr"),
    ):
        docs = hook(stub)
        assert len(docs) == ALL[domain] and set(docs["domain"]) == {domain}
        doc = docs[0]
        sample = documents.sample_of(doc, "ref")
        assert sample.metadata["source_id"] == doc["source_id"]
        assert documents.doc_to_visual(doc)[0].size[0] > 0
        assert turns.first_turn_text(doc).endswith(doc["question"])
        if domain == "drivelm":
            assert turns.first_turn_text(doc).startswith(SYSTEM_PROMPT)


def test_seeded_selection_is_reproducible(sources, tmp_path):
    counts = {"okvqa": 2, "drivelm": 2, "3dsr": 1}
    picks = []
    for i, seed in enumerate((0, 0, 1, 2, 3)):
        build_bench(request(sources, tmp_path / f"b{i}", counts=counts, seed=seed))
        picks.append(load_bench(tmp_path / f"b{i}")["id"])
    assert picks[0] == picks[1]
    assert len({tuple(p) for p in picks}) > 1  # the seed matters
    for p in picks:  # DriveLM: the two questions about a visual cue come first
        drive = {i for i in p if i.startswith("drivelm-")}
        assert drive == {f"drivelm-{DRIVELM_FRAME}-perception2", f"drivelm-{DRIVELM_FRAME}-prediction0"}


def test_id_list_selects_exactly_those(sources, tmp_path):
    ids = tmp_path / "ids.txt"
    ids.write_text("# curated\nokvqa-4587525\n\n3dsr-3  # a comment\n")
    result = build_bench(request(sources, tmp_path / "bench", ids_file=ids))
    assert load_bench(tmp_path / "bench")["id"] == ["okvqa-4587525", "3dsr-3"]
    assert result.manifest["selection"] == "id list" and result.manifest["ids_file"]["ids"] == 2


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        ("okvqa-3932265\n", "removed by rule okvqa.not_yes_no"),
        (f"drivelm-{DRIVELM_FRAME}-perception1\n", "removed by rule drivelm.image_coordinates"),
        ("3dsr-5\n", "removed by rule 3dsr.orientation_family"),
        ("okvqa-1\n", "'okvqa-1' is not in"),
        ("okvqa-4587525\nokvqa-4587525\n", "duplicate id 'okvqa-4587525'"),
        ("coco-1\n", "domain prefix"),
    ],
)
def test_id_list_errors(sources, tmp_path, ids, message):
    path = tmp_path / "ids.txt"
    path.write_text(ids)
    with pytest.raises(BenchDataError, match=message) as err:
        build_bench(request(sources, tmp_path / "bench", ids_file=path))
    assert str(path) in str(err.value)
    assert not (tmp_path / "bench").exists()


def test_vlmevalkit_tsv_with_inline_images(sources, tmp_path):
    tsv = write_threedsr_tsv(tmp_path, lambda i: Image.new("RGB", (20, 10), (i * 40 % 256, 0, 0)))
    build_bench(
        BuildRequest(out=tmp_path / "bench", inputs={"3dsr": {"table": tsv}}, counts={"okvqa": 0, "3dsr": 3})
    )
    ds = load_bench(tmp_path / "bench")
    assert sorted(ds["id"]) == ["3dsr-1", "3dsr-2", "3dsr-3"] and ds[0]["image"].size == (20, 10)
    assert read_manifest(tmp_path / "bench")["counts"] == {"3dsr": 3}


def test_tsv_rows_with_the_same_question_on_different_images_are_all_kept(tmp_path):
    """The one-variant rule compares whole images: two JPEGs from one encoder share their first
    bytes (header and quantisation tables), which once made different photos count as one."""
    import base64
    import csv

    rows = []
    for i in range(3):
        buf = io.BytesIO()
        Image.new("RGB", (32, 24), (60 * i, 100, 200 - 50 * i)).save(buf, format="JPEG", quality=90)
        rows.append(
            {
                "index": str(i + 1),
                "question": "Is the car facing the camera?",
                "A": "yes",
                "B": "no",
                "answer": "A",
                "category": "orientation_viewpoint",
                "image": base64.b64encode(buf.getvalue()).decode(),
            }
        )
    assert len({r["image"][:64] for r in rows}) == 1  # the same first 48 bytes
    path = tmp_path / "3dsrbench_v1_vlmevalkit.tsv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, list(rows[0]), delimiter="\t")
        w.writeheader()
        w.writerows([*rows, {**rows[0], "index": "4", "A": "no", "B": "yes", "answer": "B"}])  # a variant
    result = build_bench(
        BuildRequest(out=tmp_path / "b", inputs={"3dsr": {"table": path}}, counts={"okvqa": 0, "3dsr": 3})
    )
    assert sorted(load_bench(tmp_path / "b")["id"]) == ["3dsr-1", "3dsr-2", "3dsr-3"]
    assert _rules(result.manifest, "3dsr") == {"3dsr.orientation_family": 0, "3dsr.one_variant": 1}


# ----------------------------------------------------------------------------- errors


def _corrupt(path: Path) -> None:
    path.write_bytes(b"\xff\xd8\xff\xe0 this is not a jpeg")


def test_error_messages_name_the_file_and_rule(sources, tmp_path):
    def fails(match: str, **kw) -> BenchDataError:
        with pytest.raises(BenchDataError, match=match) as err:
            build_bench(request(sources, tmp_path / "bench", **kw))
        assert not (tmp_path / "bench").exists()
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".bench")]
        return err.value

    missing = tmp_path / "nope.json"
    assert str(missing) in str(fails("file not found", okvqa_questions=missing))
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps([{"question": "x"}]))
    assert str(wrong) in str(fails("wrong layout.*questions", okvqa_questions=wrong))
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{not json")
    assert str(bad_json) in str(fails("not valid JSON", drivelm_json=bad_json))
    no_frames = tmp_path / "noframes.json"
    no_frames.write_text(json.dumps({"scene": {"scene_description": "x"}}))
    fails("scene scene has no 'key_frames'", drivelm_json=no_frames)
    fails("wrong layout for --nuscenes-root", nuscenes_root=tmp_path)
    table = tmp_path / "t.csv"
    table.write_text("index,question,answer\n1,q,A\n")
    assert str(table) in str(fails(r"missing column\(s\) \['A', 'B', 'category'\]", threedsr_table=table))
    dup = tmp_path / "dup.json"
    q = json.loads(sources.okvqa_questions.read_text())
    q["questions"].append(dict(q["questions"][0]))
    dup.write_text(json.dumps(q))
    fails("duplicate id '2971475'", okvqa_questions=dup)
    err = fails(r"drivelm: asked for 9 items but only 4 remain", counts={**ALL, "drivelm": 9})
    assert "drivelm.image_coordinates: 2" in str(err)
    fails("--coco-images is required", coco_images=None)


def test_unreadable_image_is_an_error_or_skipped_with_a_count(tmp_path):
    src = write_sources(tmp_path / "src")
    bad = src.coco_images / "val2014" / "COCO_val2014_000000458752.jpg"
    _corrupt(bad)
    with pytest.raises(BenchDataError, match="unreadable image") as err:
        build_bench(request(src, tmp_path / "bench"))
    assert str(bad) in str(err.value) and "okvqa-4587525" in str(err.value)
    assert not (tmp_path / "bench").exists()

    with pytest.raises(BenchDataError, match=r"only 2 remain.*unreadable images skipped: 1"):
        build_bench(request(src, tmp_path / "bench", skip_unreadable=True))  # all 3 asked for
    for i, seed in enumerate(range(6)):  # whichever seeded order, the bad image never gets in
        counts = {**ALL, "okvqa": OKVQA_ELIGIBLE - 1}
        result = build_bench(request(src, tmp_path / f"b{i}", counts=counts, seed=seed, skip_unreadable=True))
        skipped = result.manifest["domains"]["okvqa"]["unreadable_skipped"]
        assert len(skipped) <= 1 and all(str(bad) in s for s in skipped)
        assert "okvqa-4587525" not in load_bench(tmp_path / f"b{i}")["id"]
    ids = tmp_path / "ids.txt"
    ids.write_text("okvqa-4587525\nokvqa-2971475\n")
    result = build_bench(request(src, tmp_path / "listed", ids_file=ids, skip_unreadable=True))
    assert len(result.manifest["domains"]["okvqa"]["unreadable_skipped"]) == 1
    assert load_bench(tmp_path / "listed")["id"] == ["okvqa-2971475"]
    (src.coco_images / "val2014" / "COCO_val2014_000000297147.jpg").unlink()
    with pytest.raises(BenchDataError, match=r"COCO_val2014_000000297147\.jpg: image file not found"):
        build_bench(request(src, tmp_path / "again"))


def test_nothing_half_written_and_overwrite_is_atomic(sources, tmp_path, monkeypatch):
    import datasets

    out = tmp_path / "bench"
    build_bench(request(sources, out, counts={"okvqa": 1, "drivelm": 1, "3dsr": 1}))
    with pytest.raises(BenchDataError, match="already exists"):
        build_bench(request(sources, out))

    def boom(self, *a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(datasets.Dataset, "save_to_disk", boom)
    with pytest.raises(OSError, match="disk full"):
        build_bench(request(sources, out, overwrite=True))
    monkeypatch.undo()
    assert len(load_bench(out)) == 3  # the old build is untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench"]
    build_bench(request(sources, out, overwrite=True))
    assert len(load_bench(out)) == sum(ALL.values())
    assert (out / MANIFEST_NAME).is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench"]


def test_cli_build_bench(sources, tmp_path, capsys):
    from edct_task.cli.main import main

    s = sources
    args = [
        "build-bench",
        "--okvqa-questions",
        str(s.okvqa_questions),
        "--okvqa-annotations",
        str(s.okvqa_annotations),
        "--coco-images",
        str(s.coco_images),
        "--drivelm-json",
        str(s.drivelm_json),
        "--nuscenes-root",
        str(s.nuscenes_root),
        "--3dsr-table",
        str(s.threedsr_table),
        "--3dsr-images",
        str(s.threedsr_images),
        "--seed",
        "3",
        "--counts",
        "2,3,1",
        "--out",
        str(tmp_path / "bench"),
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "drivelm" in out and "EDCT_BENCH_DATA=" in out
    assert read_manifest(tmp_path / "bench")["counts"] == {"okvqa": 2, "drivelm": 3, "3dsr": 1}
    assert main(args) == 2
    assert "already exists" in capsys.readouterr().err
    assert main([*args[:-2], "--counts", "1,2", "--out", str(tmp_path / "x")]) == 2
    assert "--counts" in capsys.readouterr().err


def test_edct_run_data_source_dataset(sources, tmp_path):
    from edct_task.config import config_from_dict
    from edct_task.engine.stage_cache import ImageStore
    from edct_task.run.runner import load_samples

    build_bench(request(sources, tmp_path / "bench"))
    config = config_from_dict(
        {
            "data": {"source": "dataset", "path": str(tmp_path / "bench"), "limit": 5},
            "roles": {"target": {"backend": "calibration-reference"}},
        }
    )
    store = ImageStore(tmp_path / "store")
    samples = load_samples(config.data, store)
    assert len(samples) == 5
    s = samples[0]
    assert s.id.startswith("okvqa-") and s.metadata["source"] == "OK-VQA" and s.metadata["answer"]
    image = store.get(s.image)
    raw = load_bench(tmp_path / "bench")[0]["image"]
    assert image.size == raw.size
    assert isinstance(Image.open(io.BytesIO(store.path(s.image).read_bytes())), Image.Image)
