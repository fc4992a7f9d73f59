"""The trained checkpoints through the transformers runtimes: known scores, the same scores.

(a) ``edct run --model qwen3_vl`` and (b) ``lmms-eval --model qwen3_vl`` on the same checkpoint
(recipe 3): the faithful checkpoint scores CCS_binary >= 0.85 on both, the prior one <= 0.15, and
the negative control (re-queries sent the original picture) <= 0.15 — like the prior one; (a) and
(b) give the same verdict on at least 90% of the samples and their CIs overlap (the issue's
targets). On the first 60 documents (README): faithful (a) 0.992 [0.975, 1.000], (b) 0.992, 95%
the same verdict; prior 0.000; control 0.000. The vLLM runtimes are in
tests/vllm/test_tiny_vlm_vllm.py.
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
    return {b: checkpoint_path(b) for b in ("faithful", "prior")}


def test_the_records_of_lmms_eval_output_are_the_run_folders_its_logs_name(tmp_path):
    """``records`` reads ``out/lmms`` through the EDCT run folder its logs name (wherever it is),
    not from lmms-eval's logged responses."""
    import json

    from support.edct_runs import records as make_records
    from support.edct_runs import write_edct_run
    from support.lmms_output import EdctTask, write_lmms_output

    logged = make_records(1.0, n=3, domains=("knowledge",), excluded=0)
    run_dir = tmp_path / "elsewhere" / "edct"
    write_lmms_output(
        tmp_path / "lmms",
        model="qwen3_vl",
        model_args="pretrained=tiny",
        tasks=[EdctTask("edct_calibration", logged)],
        run_dir=run_dir,
    )
    kept = make_records(0.0, n=3, domains=("knowledge",), excluded=0)  # the same ids, other verdicts
    write_edct_run(run_dir, kept)
    got = records(tmp_path)
    assert got == {r.sample.id: json.loads(r.model_dump_json()) for r in kept}
    assert summary(got)["ccs_binary"][0] < 1.0


@pytest.mark.slow
def test_runtimes_a_and_b_score_the_checkpoints_and_the_control_fails(checkpoints, tmp_path):
    a_f = records_of(runtime_a, checkpoints["faithful"], tmp_path / "a-faithful")
    a_p = records_of(runtime_a, checkpoints["prior"], tmp_path / "a-prior")
    b_f = records_of(runtime_b, checkpoints["faithful"], tmp_path / "b-faithful")
    n_f = records_of(runtime_n, checkpoints["faithful"], tmp_path / "n-faithful")
    s_af, s_ap, s_bf, s_nf = (summary(r) for r in (a_f, a_p, b_f, n_f))
    print(f"\na faithful {s_af}\na prior {s_ap}\nb faithful {s_bf}\ncontrol {s_nf}")
    # the targets: the faithful checkpoint scores high, the prior one and the control low
    assert s_af["ccs_binary"][0] >= 0.85 and s_bf["ccs_binary"][0] >= 0.85, (s_af, s_bf)
    assert s_ap["ccs_binary"][0] <= 0.15 and s_nf["ccs_binary"][0] <= 0.15, (s_ap, s_nf)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(checkpoints["faithful"]))
    same = compare(a_f, b_f, tok)
    print(f"(a) vs (b): {same}")
    assert same["n"] == LIMIT and same["agreement"] >= 0.9, same
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
