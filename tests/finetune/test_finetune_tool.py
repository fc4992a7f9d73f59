"""``edct finetune`` on the tiny Qwen3-VL and calibration counterfactuals: numbers, adapter, report."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from PIL import Image

from edct_task.attention.pairs import read_pairs
from edct_task.attention.probe import VLMProbe
from edct_task.cli.main import main
from edct_task.config import calibration_config
from edct_task.counterfactuals.export import export_counterfactuals
from edct_task.run.runner import run

pytestmark = pytest.mark.slow  # exports and trainings end to end: make test, not make test-fast


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory):
    base = tmp_path_factory.mktemp("ft")
    config = calibration_config(n=4, output_dir=base / "run").model_copy(update={"progress": False})
    run(config)
    export_counterfactuals(base / "run", base / "export")
    return base / "export"


def _mean(values):
    return float(np.mean(values))


@pytest.mark.slow
def test_finetune_reports_before_during_after_and_saves_the_trained_adapter(
    tiny_qwen3_vl, export_dir, tmp_path
):
    out = tmp_path / "ft"
    argv = ["finetune", str(export_dir), "--model", str(tiny_qwen3_vl), "--out", str(out)]
    assert main([*argv, "--epochs", "2", "--learning-rate", "0.01", "--lora-r", "4"]) == 0
    doc = json.loads((out / "finetune.json").read_text())
    assert doc["mode"] == "lora" and doc["labels"]["sources"] == ["calibration-world"]
    split = doc["split"]
    assert (split["train_samples"], split["held_out_samples"]) == (3, 1)
    assert (split["train_items"], split["held_out_items"]) == (3 + 6, 1 + 2)  # originals once per sample
    assert len(doc["loss_curve"]) == split["fit_items"] * 2 == 18  # batch 1: one step per item per epoch
    assert [e["epoch"] for e in doc["per_epoch"]] == [0, 1, 2]

    items = doc["items"]
    for side in ("original", "counterfactual"):
        rows = [i for i in items if i["side"] == side]
        before = doc["before"]["all"][side]
        assert before["items"] == len(rows)
        assert before["accuracy"]["estimate"] == pytest.approx(_mean([r["correct_before"] for r in rows]))
        assert before["loss"]["estimate"] == pytest.approx(_mean([r["loss_before"] for r in rows]))
    b = doc["before"]["all"]
    assert b["loss_ratio_counterfactual_to_original"] == pytest.approx(
        b["counterfactual"]["loss"]["estimate"] / b["original"]["loss"]["estimate"]
    )
    train = [i for i in items if i["split"] == "train"]
    assert (
        _mean([i["loss_after"] for i in train]) < _mean([i["loss_before"] for i in train]) - 0.5
    )  # it learned
    for e in doc["per_epoch"]:
        assert set(e["localization"]["localization"]) == {"original", "counterfactual"}
        assert e["held_out"]["counterfactual"]["items"] == 2

    # the adapter on disk is the trained one: reloaded, it gives the held-out answers reported after training
    probe = VLMProbe.load(tiny_qwen3_vl, device="cpu", adapter=out / "adapter")
    pairs = {p.id: p for p in read_pairs(export_dir)[0]}
    for row in (i for i in items if i["split"] == "held_out" and i["side"] == "counterfactual"):
        pair = pairs[row["key"].removesuffix("/counterfactual")]
        image = Image.open(pair.edited_image).convert("RGB")
        assert probe.answer(image, pair.question) == row["answer_after"]
    figure = Image.open(out / "report" / "figure.png")
    assert figure.size[0] > 1000 and "Initial loss ratio" in (out / "report" / "summary.md").read_text()

    att = tmp_path / "att"
    argv = ["attention", str(export_dir), "--model", str(tiny_qwen3_vl), "--adapter", str(out / "adapter")]
    assert main([*argv, "--out", str(att), "--max-pairs", "2"]) == 0
    assert json.loads((att / "attention.json").read_text())["adapter"] == str(out / "adapter")


def test_pairs_without_gold_answers_exit_2_before_training(tiny_qwen3_vl, export_dir, tmp_path, capsys):
    src = tmp_path / "export"
    shutil.copytree(export_dir, src)
    for png in src.glob("images/*/*.png"):
        Image.open(png).copy().save(png)  # re-saved without the calibration scene: a "real" image
    out = tmp_path / "ft"
    assert main(["finetune", str(src), "--model", str(tiny_qwen3_vl), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "0 labelled pairs" in err and "--labels" in err and "Traceback" not in err and not out.exists()
    labels = tmp_path / "labels.jsonl"
    labels.write_text("not json\n")
    assert (
        main(
            ["finetune", str(src), "--model", str(tiny_qwen3_vl), "--out", str(out), "--labels", str(labels)]
        )
        == 2
    )
    assert "line 1" in capsys.readouterr().err


@pytest.mark.slow
def test_both_tools_run_on_the_trained_tiny_faithful_vlm(export_dir, tmp_path):
    """The tiny Qwen3-VL trained on the calibration world (issue 22) answers in the world's words."""
    from edct_task.calibration import world
    from edct_task.tiny_vlm.store import checkpoint_path

    model = checkpoint_path("faithful")
    att = tmp_path / "att"
    assert (
        main(["attention", str(export_dir), "--model", str(model), "--out", str(att), "--max-pairs", "4"])
        == 0
    )
    doc = json.loads((att / "attention.json").read_text())
    for p in doc["pairs"]:
        family = world.family_of_question(p["question"])
        for side in ("original", "counterfactual"):
            assert world.parse_answer(family, p[side]["answer"]) is not None, p[side]["answer"]
    assert doc["summary"]["scored_pairs"] >= 3  # a map can be empty (no token above its layer's mean)
    ft = tmp_path / "ft"
    assert main(["finetune", str(export_dir), "--model", str(model), "--out", str(ft), "--epochs", "1"]) == 0
    before = json.loads((ft / "finetune.json").read_text())["before"]["all"]
    assert (
        before["original"]["accuracy"]["estimate"] > 0 and before["loss_ratio_counterfactual_to_original"] > 0
    )
