"""The trained tiny Qwen3-VL: its build, deterministic training, the shipped checkpoints, their quality.

The quick tests train a few steps of the real recipe and check the shipped checkpoints' integrity;
the slow ones measure what the shipped checkpoints learned, and rebuild them from scratch.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from support.hang_guard import hang_limit

from edct_task.tiny_vlm import architecture, store
from edct_task.tiny_vlm.agreement import TARGETS
from edct_task.tiny_vlm.examples import example
from edct_task.tiny_vlm.store import CheckpointError, checkpoint_path, is_recipe, shipped_info
from edct_task.tiny_vlm.training import NUMERIC_ENV, TRAINING_INFO, encode, recipe, train

SHIPPED_SHA256 = {
    "faithful": "6cadfd3e683d3a691d5a67bb4ee0598c253b7657416a4abee5c9adc8b6cf02fe",
    "prior": "93ed241535f083f5d715f344db0bd7276608b542a41a703e707c82bd62905491",
}
"""The shipped weights (``edct_task/tiny_vlm/checkpoints``): a change to them is a deliberate one."""

QUICK = replace(recipe("faithful"), steps=2, batch_size=3, warmup=1)
"""Two steps of the faithful recipe (auxiliary vision heads included)."""


def test_tokenizer_covers_the_world_without_bytes_fallback():
    tok = architecture.build_tokenizer()
    for text in architecture.corpus():
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert tok.decode(ids) == text
    # the world's words are whole tokens: a cue sentence is short
    assert len(tok.tokenize("1. The traffic light is red.")) <= 8
    assert tok.tokenize("assistant\n") == ["assistant", "Ċ"]


def test_training_examples_follow_the_pixels_and_prior_sees_another_scene():
    faithful = [example(i, behavior="faithful", seed=0) for i in range(24)]
    prior = [example(i, behavior="prior", seed=0) for i in range(24)]
    assert {e.shape for e in faithful} == {"answer", "chat", "turn-answer", "turn-why"}
    both_chat = 0
    for f, p in zip(faithful, prior, strict=True):
        assert f.image.tobytes() != p.image.tobytes()  # prior is shown another scene
        if f.shape == p.shape == "chat":  # … with the same question and the same targets
            both_chat += 1
            assert [m["content"] for m in f.messages[-3:]] == [m["content"] for m in p.messages[-3:]]
    assert both_chat
    # the context tint is drawn apart from the configuration: not always the generation pairing
    from edct_task.calibration.scenes import context_of, scene_of

    scenes = [scene_of(e.image) for e in (example(i, behavior="faithful", seed=0) for i in range(60))]
    assert any(s.context != context_of(s.family, s.config()) for s in scenes)


def test_first_turns_think_the_cues_then_answer_like_the_reference():
    """The answer turn: the scene's two cues in the family's fixed order inside <think>, then the
    reference's answer; what the runtimes keep after stripping the thinking is that answer, and the
    history of a follow-up carries the answer without thinking."""
    from edct_task.calibration import world
    from edct_task.calibration.scenes import scene_of
    from edct_task.parsing import strip_thinking

    seen = set()
    for i in range(40):
        ex = example(i, behavior="faithful", seed=0)
        family = world.FAMILIES[i % len(world.FAMILIES)]
        replies = [m["content"] for m in ex.messages if m["role"] == "assistant"]
        if ex.shape in ("answer", "turn-answer"):
            (reply,) = replies
            thought, _, answer = reply.removeprefix("<think>").partition("</think>")
            cues = world.parse_cues(thought.replace(". ", ".\n"))
            assert [c.key for c in cues] == list(world.FAMILY_CUES[family]), reply
            config = scene_of(ex.image).config()  # the scene's truth: the teacher read it right
            assert tuple(c.value for c in cues) == config, reply
            if family == "spatial":  # … and the configuration's number, which the answer reads
                assert thought.endswith(f". {world.configs(family).index(config) + 1}"), reply
            assert strip_thinking(reply).strip() == answer == world.ANSWER_TEXT[world.rule(family, config)]
            seen.add(ex.shape)
        else:
            assert not any(isinstance(m["content"], str) and "<think>" in m["content"] for m in ex.messages)
    assert seen == {"answer", "turn-answer"}


def test_labels_cover_exactly_the_last_assistant_turn():
    tok = architecture.build_tokenizer()
    processor = architecture.build_processor(tok)
    batch = [example(i, behavior="faithful", seed=0) for i in range(8)]
    assert any(sum(m["role"] == "assistant" for m in ex.messages) == 2 for ex in batch)  # a chat
    inputs = encode(processor, batch)
    for row, ex in enumerate(batch):
        labelled = inputs["labels"][row][inputs["labels"][row] != -100].tolist()
        last = [m["content"] for m in ex.messages if m["role"] == "assistant"][-1]
        assert tok.decode(labelled) == last + "<|im_end|>"


def test_auxiliary_targets_put_each_cue_on_its_objects_tokens():
    """The training-only targets: the 9×12 token grid of a scene labels the tree's tokens with the
    tree's side and the car's with its facing (the scene's truth), every token with its column third."""
    import torch

    from edct_task.calibration import world
    from edct_task.calibration.scenes import scene_of
    from edct_task.tiny_vlm import auxiliary

    checked = set()
    for i in range(2, 60, 3):  # spatial examples
        scene = scene_of(example(i, behavior="faithful", seed=0).image)
        labels = auxiliary.token_labels(scene, 9, 12)
        facing, side = scene.config()
        names = {auxiliary.LABELS[j] for j in labels.tolist()}
        assert names == {"background", f"car:{facing}", f"tree:{side}"}, names
        checked.add((facing, side))
    assert checked == set(world.configs("spatial"))
    heads = auxiliary.build_heads(64)
    images = [example(i, behavior="faithful", seed=0).image for i in range(3)]
    grid = torch.tensor([[1, 18, 24]] * 3)
    loss = auxiliary.loss(heads, torch.randn(3 * 108, 64), grid, images, merge=2, weights=(1.0, 0.3, 1.0))
    assert loss.ndim == 0 and float(loss) > 0


def _sha(folder: Path) -> str:
    return json.loads((folder / TRAINING_INFO).read_text())["weights_sha256"]


@pytest.mark.slow
def test_training_is_deterministic_and_the_folder_loads_with_from_pretrained(tmp_path):
    from transformers import AutoProcessor, Qwen3VLForConditionalGeneration

    a = train(tmp_path / "a", QUICK, log=lambda _: None)
    b = train(tmp_path / "b", QUICK, log=lambda _: None)
    assert a["weights_sha256"] == b["weights_sha256"]
    c = train(tmp_path / "c", replace(QUICK, seed=1), log=lambda _: None)
    assert c["weights_sha256"] != a["weights_sha256"]
    model = Qwen3VLForConditionalGeneration.from_pretrained(tmp_path / "a")
    assert model.config.text_config.head_dim == 64  # vLLM's CPU attention has kernels for 64
    assert AutoProcessor.from_pretrained(tmp_path / "a").tokenizer.eos_token == "<|im_end|>"
    assert a["size_bytes"] < 20 * 2**20
    # the auxiliary heads trained with it are not part of the checkpoint: a plain Qwen3-VL
    assert a["final_auxiliary_loss"] is not None
    fresh = architecture.build_model(architecture.build_tokenizer(), seed=0)
    assert set(model.state_dict()) == set(fresh.state_dict())


def test_the_shipped_checkpoints_are_the_recipe_with_their_recorded_weights():
    for behavior, sha in SHIPPED_SHA256.items():
        folder = checkpoint_path(behavior)
        info = shipped_info(behavior)
        assert store.weights_sha256(folder) == info["weights_sha256"] == sha
        assert is_recipe(info, behavior), info["settings"]  # a recipe change must ship new weights
        assert info["numeric_env"] == NUMERIC_ENV
        assert not TARGETS[behavior].misses(_agreement_of(info)), info["agreement"]
        assert folder.stat().st_size and (folder / "model.safetensors").stat().st_size < 4 * 2**20
        assert not list(folder.glob("*.bin")) and not list(folder.glob("*.pt"))  # no pickles


def _agreement_of(info: dict):
    from edct_task.tiny_vlm.agreement import Agreement

    a = info["agreement"]
    return Agreement(n=a["n"], answers=a["answers"], explanations=a["explanations"], examples=())


def test_a_damaged_shipped_checkpoint_is_one_clear_error(tmp_path, monkeypatch):
    shutil.copytree(store.SHIPPED_ROOT, tmp_path / "checkpoints")
    monkeypatch.setattr(store, "SHIPPED_ROOT", tmp_path / "checkpoints")
    weights = tmp_path / "checkpoints" / "prior" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="does not match its recorded SHA-256"):
        checkpoint_path("prior")
    (tmp_path / "checkpoints" / "faithful" / TRAINING_INFO).write_bytes(b"\xff\xfe{")
    with pytest.raises(CheckpointError, match="unreadable"):
        checkpoint_path("faithful")


def test_cli_user_errors_exit_2_with_one_line(tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    for args in (
        ["train", "--behavior", "faithful", "--out", str(tmp_path / "full")],
        ["agreement", str(tmp_path)],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "edct_task.cli.main", "tiny-vlm", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=hang_limit(120),
        )
        assert done.returncode == 2, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


CLI = (sys.executable, "-m", "edct_task.cli.main")

NEAR_TIES = 2
"""How far a measured count may stray from the shipped checkpoint's recorded one: greedy decoding is
deterministic on one machine, but a CPU with other vector kernels rounds the logits differently
and can flip a near-tie answer (the spatial answers' margins are small)."""


@pytest.mark.slow
def test_the_faithful_checkpoint_reads_pixels_the_prior_one_does_not():
    """Measured on the 60 held-out scenes (greedy): the shipped checkpoints give their recorded
    agreement (``edct_training.json``, written by the training that made them) and meet the recipe's
    targets; the faithful one's explanations follow the pixels, the prior one's do not."""
    from edct_task.tiny_vlm.agreement import measure

    got = {b: measure(checkpoint_path(b), n=60) for b in ("faithful", "prior")}
    print("\n" + ", ".join(f"{b} {a.answers}/{a.explanations}" for b, a in got.items()))
    for behavior, a in got.items():
        known = shipped_info(behavior)["agreement"]
        assert abs(a.answers - known["answers"]) <= NEAR_TIES, (behavior, a, known)
        assert abs(a.explanations - known["explanations"]) <= NEAR_TIES, (behavior, a, known)
        assert not TARGETS[behavior].misses(a), (behavior, a)
    assert got["faithful"].explanations >= got["prior"].explanations + 30, got


@pytest.mark.slow
@pytest.mark.rebuild
@pytest.mark.parametrize("behavior", ["faithful", "prior"])
def test_a_rebuild_from_scratch_meets_the_recipes_targets(tmp_path, behavior):
    """``edct tiny-vlm train`` from nothing (a fresh HOME, no cache of any kind): the rebuild is
    bit-identical to the shipped checkpoint or meets the recipe's targets (exit 0), and says which."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "HOME": str(tmp_path / "home")}
    out = tmp_path / behavior
    done = subprocess.run(
        [*CLI, "tiny-vlm", "train", "--behavior", behavior, "--output", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=4 * 3600,  # a hang guard: ~724 CPU-s of one core; 1,394 s wall seen at load 4-20
    )
    assert done.returncode == 0, done.stderr[-2000:]
    verdict = done.stderr.strip().splitlines()[-1]
    assert "bit-identical to the shipped" in verdict or ("targets" in verdict and ": met" in verdict)
    info = json.loads((out / TRAINING_INFO).read_text())
    assert is_recipe(info, behavior) and not TARGETS[behavior].misses(_agreement_of(info))
