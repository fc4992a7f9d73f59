"""``edct attention`` on the tiny Qwen3-VL and calibration counterfactuals: probe, numbers, pages, errors."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from PIL import Image

from edct_task.attention.pairs import load_mask, read_pairs
from edct_task.attention.probe import VLMProbe, text_layers
from edct_task.cli.main import main
from edct_task.config import calibration_config
from edct_task.counterfactuals.export import export_counterfactuals
from edct_task.run.runner import run

pytestmark = pytest.mark.slow  # transformers models run end to end: make test, not make test-fast


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory):
    base = tmp_path_factory.mktemp("attn")
    config = calibration_config(n=3, output_dir=base / "run").model_copy(update={"progress": False})
    run(config)
    export_counterfactuals(base / "run", base / "export")
    return base / "export"


@pytest.fixture(scope="module")
def probe(tiny_qwen3_vl):
    return VLMProbe.load(tiny_qwen3_vl, device="cpu")


def test_hooked_rows_equal_output_attentions_and_hooks_are_removed(probe, export_dir):
    import torch

    pair = read_pairs(export_dir)[0][0]
    image = Image.open(pair.edited_image).convert("RGB")
    before = [len(layer.self_attn._forward_hooks) for layer in text_layers(probe.model)]
    rows = probe.attention(image, pair.question)
    assert [len(layer.self_attn._forward_hooks) for layer in text_layers(probe.model)] == before
    batch = probe.inputs(image, pair.question)
    with torch.inference_mode():
        full = probe.model(**batch, output_attentions=True, use_cache=False).attentions
    ids = batch["input_ids"][0]
    image_pos = (ids == probe.image_token_id).nonzero().flatten()
    expected = np.stack([full[i][0, :, -1, image_pos].float().numpy() for i in probe.layers])
    assert rows.attention.shape == (len(probe.layers), 4, 108) and rows.grid == (9, 12)  # 384×288 / 32
    np.testing.assert_allclose(rows.attention, expected, rtol=1e-5, atol=1e-7)
    # one layer's matrix at a time: heads × T × T float32
    assert rows.largest_matrix_bytes == 4 * rows.tokens * rows.tokens * 4


def test_a_model_loaded_with_sdpa_is_read_in_eager_and_restored(tiny_qwen3_vl, export_dir):
    from transformers import AutoModelForImageTextToText, AutoProcessor

    model = AutoModelForImageTextToText.from_pretrained(str(tiny_qwen3_vl), attn_implementation="sdpa")
    sdpa = VLMProbe(model, AutoProcessor.from_pretrained(str(tiny_qwen3_vl)))
    pair = read_pairs(export_dir)[0][0]
    rows = sdpa.attention(Image.open(pair.original_image).convert("RGB"), pair.question)
    assert rows.attention.shape[2] == 108 and np.all(rows.attention >= 0)
    assert model.config.text_config._attn_implementation == "sdpa"


def test_attention_command_writes_every_number(tiny_qwen3_vl, export_dir, tmp_path, capsys):
    out = tmp_path / "att"
    assert main(["attention", str(export_dir), "--model", str(tiny_qwen3_vl), "--out", str(out)]) == 0
    doc = json.loads((out / "attention.json").read_text())
    pairs, _ = read_pairs(export_dir)
    assert len(doc["pairs"]) == len(pairs) == 6 and doc["layers"] == [0, 1] and doc["text_layers"] == 2
    s = doc["summary"]
    assert s["scored_pairs"] == 6 and s["errors"] == 0
    orig = [p["original"]["localization"] for p in doc["pairs"]]
    cf = [p["counterfactual"]["localization"] for p in doc["pairs"]]
    assert s["localization"]["original"]["estimate"] == pytest.approx(np.mean(orig))
    assert s["difference_counterfactual_minus_original"]["estimate"] == pytest.approx(
        np.mean(cf) - np.mean(orig)
    )
    assert s["counterfactual_more_localized"] == sum(c > o for o, c in zip(orig, cf, strict=True))
    kinds = {p["edit_type"] for p in doc["pairs"]}
    assert kinds <= {"ADD", "MODIFY", "REMOVE"} and set(s["by_edit_type"]) == kinds
    assert sum(v["original"]["n"] for v in s["by_edit_type"].values()) == s["scored_pairs"]
    for p, pair in zip(doc["pairs"], pairs, strict=True):
        mask = load_mask(pair.edit_mask, Image.open(pair.original_image).size)
        assert p["original"]["mask_share"] == pytest.approx(mask.mean())
        assert p["original"]["localization"] == pytest.approx(p["original"]["mass_inside"] / mask.mean())
        overlay = Image.open(out / p["overlay"])
        assert overlay.size == (2 * 384 + 6, 288)
    mem = doc["memory"]
    assert mem["largest_attention_matrix_bytes"] > 0 and mem["kept_per_map_bytes"] == 2 * 4 * 108 * 4
    assert mem["output_attentions_would_keep_bytes"] == 2 * mem["largest_attention_matrix_bytes"]
    md = (out / "summary.md").read_text()
    assert "| original |" in md and all(f"| {kind} | " in md for kind in kinds)
    assert "localization original" in capsys.readouterr().out


def test_model_text_is_escaped_and_a_broken_image_costs_one_pair(tiny_qwen3_vl, export_dir, tmp_path):
    src = tmp_path / "export"
    shutil.copytree(export_dir, src)
    lines = [json.loads(x) for x in (src / "counterfactuals.jsonl").read_text().splitlines()]
    lines[0]["question"] = "<script>alert(1)</script> What sport?"
    (src / lines[1]["edited_image"]).write_bytes(b"\x89PNG\r\n\x1a\n broken")
    lines[3]["edit_mask"] = None  # an export written before masks travelled with the pairs
    (src / "counterfactuals.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = tmp_path / "att"
    assert (
        main(["attention", str(src), "--model", str(tiny_qwen3_vl), "--out", str(out), "--max-pairs", "4"])
        == 0
    )
    page = (out / "index.html").read_text()
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    doc = json.loads((out / "attention.json").read_text())
    assert [p["error"] is not None for p in doc["pairs"]] == [False, True, False, False]
    assert "Error" in doc["pairs"][1]["error"]
    assert doc["pairs"][3]["original"]["localization"] is None and doc["pairs"][3]["overlay"]
    s = doc["summary"]
    assert (s["errors"], s["no_mask"], s["scored_pairs"]) == (1, 1, 2)


def test_a_run_folder_gives_the_same_pairs_and_masks_as_its_export(export_dir):
    from_run, kind = read_pairs(export_dir.parent / "run")
    from_export, _ = read_pairs(export_dir)
    assert kind == "run" and [p.id for p in from_run] == [p.id for p in from_export]
    for a, b in zip(from_run, from_export, strict=True):
        size = Image.open(a.original_image).size
        np.testing.assert_array_equal(load_mask(a.edit_mask, size), load_mask(b.edit_mask, size))


def test_user_errors_exit_2_before_loading_a_model(tmp_path, capsys):
    assert (
        main(["attention", str(tmp_path / "nope"), "--model", str(tmp_path), "--out", str(tmp_path / "o")])
        == 2
    )
    err = capsys.readouterr().err
    assert err.startswith("edct: data error:") and "not a folder" in err and "Traceback" not in err
    (tmp_path / "o").mkdir()
    assert main(["attention", str(tmp_path), "--model", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "already exists" in capsys.readouterr().err
    assert main(["attention", str(tmp_path), "--model", str(tmp_path), "--out", str(tmp_path / "p")]) == 2
    assert "Traceback" not in capsys.readouterr().err  # an empty folder is no run
