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
from edct_task.tiny_vlm.training import TRAINING_INFO, TrainSettings, encode, train

QUICK = TrainSettings(steps=2, batch_size=3, warmup=1)


def test_tokenizer_covers_the_world_without_bytes_fallback():
    tok = architecture.build_tokenizer()
    for text in architecture.corpus():
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert tok.decode(ids) == text
    # the world's words are whole tokens: a cue sentence is short
    assert len(tok.tokenize("1. The traffic light is red.")) <= 8
    assert tok.tokenize("assistant\n") == ["assistant", "Ċ"]


def test_training_examples_follow_the_pixels_and_prior_sees_another_scene():
    faithful = [example(i, behavior="faithful", seed=0) for i in range(12)]
    prior = [example(i, behavior="prior", seed=0) for i in range(12)]
    assert {e.shape for e in faithful} >= {"chat", "turn-answer", "turn-why"}
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


def test_labels_cover_exactly_the_assistant_turns():
    tok = architecture.build_tokenizer()
    processor = architecture.build_processor(tok)
    batch = [example(i, behavior="faithful", seed=0) for i in range(4)]
    inputs = encode(processor, batch)
    for row, ex in enumerate(batch):
        labelled = inputs["labels"][row][inputs["labels"][row] != -100].tolist()
        replies = [m["content"] for m in ex.messages if m["role"] == "assistant"]
        assert tok.decode(labelled) == "".join(r + "<|im_end|>" for r in replies)


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
    """Measured on the 60 held-out scenes (greedy, deterministic): faithful 37/60 first-turn answers
    and 19/60 explanations like the reference, prior 33/60 and 10/60 (the prior's answers are right
    whenever the family's most common answer is). The issue's target, 95% of first turns, is NOT
    reached by this recipe (see README, "A trained tiny VLM"); this pins what it does reach."""
    from edct_task.tiny_vlm.agreement import measure

    faithful = measure(checkpoint_path("faithful", log=lambda _: None)[0], n=60)
    prior = measure(checkpoint_path("prior", log=lambda _: None)[0], n=60)
    print(
        f"\nfaithful {faithful.answers}/{faithful.explanations}, prior {prior.answers}/{prior.explanations}"
    )
    assert faithful.answers >= 35 and faithful.explanations >= 17, faithful
    assert faithful.explanations >= prior.explanations + 6, (faithful, prior)
    assert prior.explanations <= 12, prior
