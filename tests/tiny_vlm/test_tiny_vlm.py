"""The trained tiny Qwen3-VL: its build, deterministic training, the once-only cache, its quality.

The quick tests train a few steps of the real recipe; the slow ones use the real checkpoints
(``edct tiny-vlm path``, trained once into ``$EDCT_TINY_VLM_CACHE``) and measure what they learned.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from edct_task.tiny_vlm import architecture
from edct_task.tiny_vlm.examples import example
from edct_task.tiny_vlm.store import RECIPE_VERSION, checkpoint_path
from edct_task.tiny_vlm.training import TRAINING_INFO, encode, recipe, train

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


def _path_in_process(root: str, queue) -> None:  # a child process of the lock test
    import edct_task.tiny_vlm.store as store

    store.recipe = lambda behavior: replace(QUICK, behavior=behavior)  # type: ignore[misc]
    folder, trained = checkpoint_path("prior", root=Path(root), log=lambda _: None)
    queue.put((str(folder), trained))


def test_path_trains_once_even_when_two_processes_ask_at_once(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_path_in_process, args=(str(tmp_path), queue)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=600)
    got = [queue.get(timeout=5) for _ in procs]
    version = f"v{RECIPE_VERSION}"
    assert {folder for folder, _ in got} == {str(tmp_path / version / "prior")}
    assert sorted(trained for _, trained in got) == [False, True]
    assert not list(tmp_path.glob(f"{version}/.prior.partial"))


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
            timeout=120,
        )
        assert done.returncode == 2, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


@pytest.mark.slow
def test_the_faithful_checkpoint_reads_pixels_the_prior_one_does_not():
    """Measured on the 60 held-out scenes (greedy, deterministic), recipe 3: faithful 60/60
    first-turn answers and 59/60 explanations like the reference, prior 28/60 and 10/60 (the
    prior's answers are right whenever the family's most common answer is). The margin below the
    faithful numbers allows for a torch build that rounds differently: the spatial answers are
    near-ties (README, "A trained tiny VLM")."""
    from edct_task.tiny_vlm.agreement import measure

    faithful = measure(checkpoint_path("faithful", log=lambda _: None)[0], n=60)
    prior = measure(checkpoint_path("prior", log=lambda _: None)[0], n=60)
    print(
        f"\nfaithful {faithful.answers}/{faithful.explanations}, prior {prior.answers}/{prior.explanations}"
    )
    assert faithful.answers >= 57 and faithful.explanations >= 56, faithful
    assert faithful.explanations >= prior.explanations + 6, (faithful, prior)
    assert prior.explanations <= 12, prior
