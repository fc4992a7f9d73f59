"""``edct export-counterfactuals``: verified pairs of a run → dataset + chat JSONL (paper §4.6)."""

from __future__ import annotations

import json
import shutil

import pytest
from PIL import Image

from edct_task.bench_data import BenchDataError
from edct_task.config import calibration_config
from edct_task.counterfactuals.export import (
    DATASET_DIR,
    JSONL_NAME,
    MANIFEST_NAME,
    export_counterfactuals,
    read_run,
)
from edct_task.run.runner import run


@pytest.fixture(scope="module")
def calibration_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("calib") / "run"
    config = calibration_config(n=20, output_dir=out).model_copy(update={"progress": False})
    run(config)
    return out


def _verified(run_dir):
    return [(r, s) for r in read_run(run_dir).records for s in r.steps if s.verified]


def test_calibration_run_exports_its_verified_pairs(calibration_run, tmp_path):
    import datasets

    verified = _verified(calibration_run)
    assert verified
    result = export_counterfactuals(calibration_run, tmp_path / "cf")
    assert result.pairs == len(verified)
    ds = datasets.load_from_disk(str(tmp_path / "cf" / DATASET_DIR))
    assert len(ds) == len(verified)
    assert ds["id"] == [f"{r.sample.id}-step{s.index}" for r, s in verified]
    row = ds[0]
    rec, step = verified[0]
    assert isinstance(row["original_image"], Image.Image) and isinstance(row["edited_image"], Image.Image)
    assert row["original_image"].tobytes() != row["edited_image"].tobytes()
    assert row["question"] == rec.sample.question
    assert row["original_answer"] == rec.baseline.answer and row["new_answer"] == step.requery.answer
    assert row["instructions"][-1] == row["instruction"] == step.instruction.as_text()
    assert len(row["instructions"]) == step.index
    assert row["answer_consistent"] == step.binary.ac and row["r_in"] > row["r_out"]

    lines = [json.loads(line) for line in (tmp_path / "cf" / JSONL_NAME).read_text().splitlines()]
    assert len(lines) == result.chat_lines == len(verified)  # every calibration step has a re-query
    first = lines[0]
    roles = [m["role"] for m in first["messages"]]
    assert roles[-2:] == ["user", "assistant"]
    user = first["messages"][-2]["content"]
    assert user[0]["type"] == "image" and user[1] == {"type": "text", "text": rec.sample.question}
    assert (tmp_path / "cf" / user[0]["image"]).is_file()
    assert first["messages"][-1]["content"][0]["text"] == step.requery.answer
    assert first["original_messages"][-1]["content"][0]["text"] == rec.baseline.answer
    orig_img = first["original_messages"][-2]["content"][0]["image"]
    assert Image.open(tmp_path / "cf" / orig_img).size == row["original_image"].size
    manifest = json.loads((tmp_path / "cf" / MANIFEST_NAME).read_text())
    assert manifest["pairs"] == len(verified) and manifest["left_out"]["not_verified"] == 0
    assert manifest["edit_masks"] == len(verified) and manifest["export_version"] == 2


def test_each_pair_carries_the_gates_edit_mask(calibration_run, tmp_path):
    """The mask M of the verified attempt travels with the pair (edct attention's localization)."""
    import datasets
    import numpy as np

    from edct_task.run.outputs import load_run
    from verification.gate_maps import unpack_gate_maps

    export_counterfactuals(calibration_run, tmp_path / "cf")
    run_images = load_run(calibration_run)
    lines = [json.loads(line) for line in (tmp_path / "cf" / JSONL_NAME).read_text().splitlines()]
    ds = datasets.load_from_disk(str(tmp_path / "cf" / DATASET_DIR))
    for line, row, (_rec, step) in zip(lines, ds, _verified(calibration_run), strict=True):
        attempt = next(a for a in step.attempts if a.passed and a.image == step.image)
        expected = unpack_gate_maps(Image.open(run_images.image_path(attempt.check.maps)).convert("RGB")).mask
        written = np.asarray(Image.open(tmp_path / "cf" / line["edit_mask"])) > 127
        np.testing.assert_array_equal(written, expected)
        np.testing.assert_array_equal(np.asarray(row["edit_mask"]) > 127, expected)
        assert written.mean() == pytest.approx(attempt.check.mask_fraction, abs=1e-9)
        assert line["edit_type"] == row["edit_type"] == attempt.check.edit_type


def test_only_verified_steps_and_consistent_only(calibration_run, tmp_path):
    """A step that failed verification is left out and counted; consistent_only filters on AC."""
    run_dir = tmp_path / "run"
    shutil.copytree(calibration_run, run_dir, ignore=shutil.ignore_patterns("cache"))
    records = read_run(run_dir).records
    first = records[0]
    step = first.steps[0]
    failed = step.model_copy(
        update={
            "verified": False,
            "image": None,
            "attempts": tuple(
                a.model_copy(update={"check": None, "failure": "verification: r_in too low"})
                for a in step.attempts
            ),
        }
    )
    records[0] = first.model_copy(update={"steps": (failed, *first.steps[1:]), "status": "excluded"})
    second = records[1]
    s2 = second.steps[0]
    records[1] = second.model_copy(
        update={
            "steps": (
                s2.model_copy(update={"binary": s2.binary.model_copy(update={"ac": 0}), "requery": None}),
                *second.steps[1:],
            )
        }
    )
    (run_dir / "samples.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in records))
    total = len(_verified(calibration_run))

    result = export_counterfactuals(run_dir, tmp_path / "cf")
    assert result.pairs == total - 1
    assert result.manifest["left_out"]["not_verified"] == 1
    assert result.chat_lines == total - 2  # the pair without a re-query answer has no chat line
    consistent = export_counterfactuals(run_dir, tmp_path / "cf2", consistent_only=True)
    ac_ones = sum(1 for r, s in _verified(run_dir) if s.binary and s.binary.ac == 1)
    assert consistent.pairs == ac_ones and consistent.manifest["left_out"]["inconsistent_answer"] >= 1


def test_export_errors(calibration_run, tmp_path):
    with pytest.raises(BenchDataError, match=r"is not a run folder: expected results\.json"):
        export_counterfactuals(tmp_path, tmp_path / "cf")
    run_dir = tmp_path / "run"
    shutil.copytree(calibration_run, run_dir, ignore=shutil.ignore_patterns("cache", "images"))
    with pytest.raises(BenchDataError, match=r"images of sample .* not found in the run"):
        export_counterfactuals(run_dir, tmp_path / "cf")
    (run_dir / "samples.jsonl").write_text('{"nope": 1}\n')
    with pytest.raises(BenchDataError, match=r"samples.jsonl, line 1: not a sample record"):
        export_counterfactuals(run_dir, tmp_path / "cf")
    assert not (tmp_path / "cf").exists()


def test_cli_export_counterfactuals(calibration_run, tmp_path, capsys):
    from edct_task.cli.main import main

    assert main(["export-counterfactuals", str(calibration_run), "--out", str(tmp_path / "cf")]) == 0
    assert "verified pairs" in capsys.readouterr().out
    assert main(["export-counterfactuals", str(tmp_path / "missing"), "--out", str(tmp_path / "x")]) == 2
    assert "samples.jsonl" in capsys.readouterr().err


def test_a_full_disk_fails_the_export_in_one_line_and_leaves_nothing(
    calibration_run, tmp_path, monkeypatch, capsys
):
    """Issue 46: the disk fills while the pairs' images are copied: exit 1 with one line (no
    traceback), and neither the export folder nor its temporary folder is left behind."""
    import errno

    from edct_task.cli.main import main
    from edct_task.counterfactuals import export

    copied = []

    def full_disk(src, dst, *args, **kwargs):
        if len(copied) == 3:
            raise OSError(errno.ENOSPC, "No space left on device", str(dst))
        copied.append(dst)
        return shutil.copyfile(src, dst, *args, **kwargs)

    monkeypatch.setattr(export.shutil, "copyfile", full_disk)
    out = tmp_path / "pairs"
    rc = main(["export-counterfactuals", str(calibration_run), "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 1, err
    assert "disk refused a write" in err and "No space left" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert len(copied) == 3 and not out.exists() and list(tmp_path.iterdir()) == []
