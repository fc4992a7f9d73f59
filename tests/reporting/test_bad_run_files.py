"""Issue 19, rows 1, 2, 10-12, 14: every reader of a run maps bad bytes and bad shapes to exit 2
with one line naming the file (and line), image refs are content ids, and nothing a tool writes
leaves its output folder."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from support.audit_runs import calibration_run
from support.cli_errors import one_line_exit_2
from support.edct_runs import records, write_edct_run

from edct_task.cli.main import main

ESCAPE = "../../../../../../../x"


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return calibration_run(tmp_path_factory.mktemp("bad") / "run", n=2)


def _copy(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("cache"))
    return dst


def _escaping_run(real_run: Path, tmp_path: Path) -> Path:
    run = _copy(real_run, tmp_path / "deep" / "a" / "b" / "run")
    path = run / "samples.jsonl"
    lines = path.read_text().splitlines()
    record = json.loads(lines[0])
    record["sample"]["image"] = ESCAPE
    path.write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n")
    return run


def _outside(tmp_path: Path) -> list[Path]:
    return [p for p in tmp_path.rglob("x.*") if p.name in ("x.png", "x.jpg")] + [
        p for p in Path("/").glob("x.*") if p.name in ("x.png", "x.jpg")
    ]


def test_audit_refuses_a_ref_that_is_not_a_content_id(real_run: Path, tmp_path: Path, capsys) -> None:
    run = _escaping_run(real_run, tmp_path)
    err = one_line_exit_2(capsys, ["audit", str(run), "--out", str(tmp_path / "deep" / "a" / "report")])
    assert "samples.jsonl, line 1" in err and "not an image id" in err
    assert not _outside(tmp_path)


def test_submit_with_images_refuses_a_ref_that_is_not_a_content_id(
    real_run: Path, tmp_path: Path, capsys
) -> None:
    run = _escaping_run(real_run, tmp_path)
    out = tmp_path / "b.edct.zip"
    one_line_exit_2(capsys, ["submit", str(run), "--out", str(out), "--with-images"], "samples.jsonl")
    assert not out.exists()


def test_submit_with_images_writes_only_content_id_members(real_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "ok.edct.zip"
    assert main(["submit", str(real_run), "--out", str(out), "--with-images"]) == 0
    names = zipfile.ZipFile(out).namelist()
    images = [n for n in names if n.startswith("images/")]
    assert images and all(len(Path(n).stem) == 64 and ".." not in n for n in images)


@pytest.mark.parametrize("command", ["audit", "report", "submit", "export-counterfactuals", "annotate"])
def test_bad_bytes_in_samples_jsonl_are_one_line_naming_file_and_line(
    real_run: Path, tmp_path: Path, capsys, command: str
) -> None:
    run = _copy(real_run, tmp_path / "run")
    with (run / "samples.jsonl").open("ab") as f:
        f.write(b"\xff\xfe\n")
    argv = {
        "audit": ["audit", str(run), "--out", str(tmp_path / "audit")],
        "report": ["report", str(run), "--out", str(tmp_path / "report")],
        "submit": ["submit", str(run), "--out", str(tmp_path / "s.edct.zip")],
        "export-counterfactuals": ["export-counterfactuals", str(run), "--out", str(tmp_path / "export")],
        "annotate": ["annotate", str(run), "--annotator", "alice", "--port", "0"],
    }[command]
    one_line_exit_2(capsys, argv, "samples.jsonl, line 3", "not UTF-8")


def _results(run: Path, edit) -> None:
    data = json.loads((run / "results.json").read_text())
    edit(data)
    (run / "results.json").write_text(json.dumps(data))


BAD_RESULTS = {
    "results-a-string": lambda d: d.__setitem__("results", "x"),
    "no-overall": lambda d: d["results"].pop("overall"),
    "estimate-a-word": lambda d: d["results"]["overall"]["metrics"]["ccs_binary"].__setitem__(
        "estimate", "high"
    ),
    "protocol-a-list": lambda d: d["config"].__setitem__("protocol", [1]),
}


@pytest.mark.parametrize("case", sorted(BAD_RESULTS))
@pytest.mark.parametrize("command", ["report", "submit"])
def test_a_results_json_of_the_wrong_shape_is_one_line(
    tmp_path: Path, capsys, case: str, command: str
) -> None:
    run = tmp_path / "run"
    write_edct_run(run, records(0.5, n=4))
    _results(run, BAD_RESULTS[case])
    out = tmp_path / ("report" if command == "report" else "s.edct.zip")
    one_line_exit_2(capsys, [command, str(run), "--out", str(out)], "results.json")
    assert not (out / "report.json").exists() and not out.is_file()


def test_a_nan_estimate_is_refused_and_report_json_is_valid_json(tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    write_edct_run(run, records(0.5, n=4))
    text = (run / "results.json").read_text()
    data = json.loads(text)
    data["results"]["overall"]["metrics"]["ccs_binary"]["estimate"] = float("nan")
    (run / "results.json").write_text(json.dumps(data))  # json.dumps writes a bare NaN
    one_line_exit_2(capsys, ["report", str(run), "--out", str(tmp_path / "r")], "results.json", "NaN")


def test_report_flags_results_json_that_its_records_contradict(tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    write_edct_run(run, records(0.375, n=8, domains=("okvqa",), excluded=0))
    _results(run, lambda d: d["results"]["overall"]["metrics"]["ccs_binary"].__setitem__("estimate", 0.99))
    assert main(["report", str(run), "--out", str(tmp_path / "r")]) == 0
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    flags = json.dumps(report)
    assert "overall ccs_binary is 0.99 in results.json but the records give" in flags
    assert main(["submit", str(run), "--out", str(tmp_path / "s.edct.zip")]) == 2  # not bundled


def _lmms_output(tmp_path: Path) -> tuple[Path, Path]:
    """lmms-eval output of one EDCT task (its logs name a good run folder); (output, sample log)."""
    from support.lmms_output import EdctTask, write_lmms_output

    recs = records(1.0, n=2, domains=("okvqa",), excluded=0)
    file = write_lmms_output(
        tmp_path / "lmms", model="edct_reference", model_args="", tasks=[EdctTask("edct_calibration", recs)]
    )
    (log,) = file.parent.glob("*_samples_edct_calibration.jsonl")
    return tmp_path / "lmms", log


def _name_in_log(log: Path, value: object) -> None:
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    rows[0]["edct"] = value
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))


HOSTILE_RUN_KEYS = {
    "a list": (["/tmp"], "edct is a list"),
    "a number": ({"run_dir": 7, "id": "okvqa-000"}, "edct.run_dir is 7"),
    "relative": ({"run_dir": "../../../etc", "id": "okvqa-000"}, "not an absolute path"),
    "NUL": ({"run_dir": "/tmp/a\u0000b", "id": "okvqa-000"}, "not an absolute path"),
    "huge": ({"run_dir": "/" + "a" * 100_000, "id": "okvqa-000"}, "100001 characters"),
    "no id": ({"run_dir": "/tmp"}, "edct.id"),
    "0.2.0 digest without a run folder": (
        {"id": "okvqa-000", "setup": {"roles": {}}},
        "edct.run_dir is None",
    ),
}


@pytest.mark.parametrize("command", ["audit", "report", "submit"])
@pytest.mark.parametrize("case", sorted(HOSTILE_RUN_KEYS))
def test_a_hostile_run_key_in_lmms_evals_logs_is_one_line(tmp_path: Path, capsys, command, case) -> None:
    out, log = _lmms_output(tmp_path)
    value, said = HOSTILE_RUN_KEYS[case]
    _name_in_log(log, value)
    argv = {
        "audit": ["audit", str(out), "--output", str(tmp_path / "a")],
        "report": ["report", str(out), "--out", str(tmp_path / "r")],
        "submit": ["submit", str(out), "--out", str(tmp_path / "s.edct.zip")],
    }[command]
    one_line_exit_2(capsys, argv, "_samples_edct_calibration.jsonl, line 1", said)


@pytest.mark.parametrize(
    "what", ["a link to a run folder", "a path through a link", "a file", "a folder that is no run folder"]
)
def test_a_logged_run_folder_that_is_a_link_or_a_file_is_refused(tmp_path: Path, capsys, what) -> None:
    out, log = _lmms_output(tmp_path)
    real = Path(json.loads(log.read_text().splitlines()[0])["edct"]["run_dir"])
    bad = tmp_path / "bad"
    if what == "a file":
        bad.write_text("{}")
    elif what == "a folder that is no run folder":
        bad.mkdir()
    elif what == "a path through a link":
        (tmp_path / "via").symlink_to(real.parent, target_is_directory=True)
        bad = tmp_path / "via" / real.name
    else:
        bad.symlink_to(real, target_is_directory=True)
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    for row in rows:
        row["edct"]["run_dir"] = str(bad)
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    said = {
        "a file": "is not a folder",
        "a folder that is no run folder": "holds no results.json",
        "a path through a link": "is reached through a link",
    }
    err = one_line_exit_2(capsys, ["audit", str(out), "--output", str(tmp_path / "a")], str(bad))
    assert said.get(what, "is a link") in err and "pass the run folder itself" in err


def test_lmms_output_naming_two_run_folders_asks_for_one(tmp_path: Path, capsys) -> None:
    out, log = _lmms_output(tmp_path)
    other = tmp_path / "other"
    write_edct_run(other, records(1.0, n=2, domains=("okvqa",), excluded=0))
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    rows[1]["edct"]["run_dir"] = str(other)
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    one_line_exit_2(capsys, ["audit", str(out)], "name 2 EDCT run folders", str(other), "pass one run folder")


def test_lmms_output_without_logged_samples_names_no_run_folder(tmp_path: Path, capsys) -> None:
    from support.lmms_output import EdctTask, write_lmms_output

    recs = records(1.0, n=2, domains=("okvqa",), excluded=0)
    tasks = [EdctTask("edct_calibration", recs)]
    write_lmms_output(
        tmp_path / "lmms", model="edct_reference", model_args="", tasks=tasks, log_samples=False
    )
    one_line_exit_2(capsys, ["audit", str(tmp_path / "lmms")], "name no EDCT run folder", "--log_samples")


def test_report_of_a_bundle_with_a_claim_of_the_wrong_shape_is_one_line(tmp_path: Path, capsys) -> None:
    from edct_task.leaderboard.bundle import read_bundle, reseal, write_zip

    write_edct_run(tmp_path / "run", records(0.5, n=4))
    good = tmp_path / "good.edct.zip"
    assert main(["submit", str(tmp_path / "run"), "--out", str(good)]) == 0
    bundle = read_bundle(good)
    meta = json.loads(json.dumps(bundle.meta))
    meta["claimed"]["overall"]["metrics"]["ccs_binary"]["estimate"] = "high"
    bad = tmp_path / "bad.edct.zip"
    write_zip(bad, reseal(meta, dict(bundle.members)), dict(bundle.members))
    one_line_exit_2(capsys, ["report", str(bad), "--out", str(tmp_path / "r")], "bad.edct.zip", "estimate")
