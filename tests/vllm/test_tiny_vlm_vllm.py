"""The trained tiny VLM (recipe 3, faithful) through vLLM, against transformers:

- (c) a real vLLM server behind an ``openai-chat`` target vs (a) ``edct run --model qwen3_vl``:
  both send the real multi-turn conversation (the driving scenes' system prompt: a system message
  for (c), the first paragraph of the first user turn for (a), both shapes trained);
- (d) lmms-eval's in-process ``vllm`` model vs (b) ``lmms-eval --model qwen3_vl``: both go through
  lmms-eval's agentic loop (one user turn with the history quoted in its text);
- (i) ``inspect eval edct/edct_calibration`` with Inspect's ``openai-api`` provider on the server
  of (c) vs (a): Inspect's solver sends the real multi-turn conversation too (needs the
  ``inspect`` extra in the main environment).

Every reply through vLLM must be a sentence of the calibration world (an answer label, then a
two-cue explanation): the chat template, the multi-turn history, the image and the end-of-turn
token all reach the model as in training; the same verdict as transformers on at least 90% of the
samples, overlapping CIs, and CCS_binary >= 0.85 (the faithful checkpoint reads the pixels on
every engine). On the first 60 documents (README): (c) 0.992 and the same verdict as (a) on 100%.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.inspect_extra import require_inspect
from support.tiny_vlm_runs import assert_world_replies, runtime_a, runtime_b, runtime_c, runtime_d, runtime_i
from support.vllm_server import check_lmms_output

from edct_task.tiny_vlm.comparison import compare, records, summary
from edct_task.tiny_vlm.store import checkpoint_path

pytestmark = pytest.mark.vllm
LIMIT = 20


@pytest.fixture(scope="module")
def transformers_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict]]:
    folder = checkpoint_path("faithful")
    runs = {}
    for name, runtime in (("a", runtime_a), ("b", runtime_b)):
        out = tmp_path_factory.mktemp(f"tiny-vlm-{name}")
        runtime(folder, out, LIMIT)
        runs[name] = records(out)
    return folder, runs


@pytest.fixture(scope="module")
def faithful_server(vllm_env: Path, tmp_path_factory: pytest.TempPathFactory):
    """ONE vLLM server of the faithful checkpoint for the runtimes that talk to a server ((c), (i))."""
    from support.vllm_server import start_edct_serve

    served = start_edct_serve(
        vllm_env,
        checkpoint_path("faithful"),
        tmp_path_factory.mktemp("faithful-server") / "vllm.log",
        name="tiny-vlm",
    )
    yield served
    served.stop()


@pytest.mark.parametrize(
    "runtime, against",
    [(runtime_c, "a"), (runtime_d, "b"), (runtime_i, "a")],
    ids=[
        "vllm-server-openai-chat-vs-edct-run",
        "lmms-vllm-vs-lmms-qwen3_vl",
        "inspect-openai-api-vs-edct-run",
    ],
)
def test_vllm_runs_the_trained_checkpoint_like_transformers(
    runtime, against, transformers_runs, vllm_env_has_lmms, tmp_path, request
) -> None:
    from transformers import AutoTokenizer

    if runtime is runtime_i:
        require_inspect()
    folder, runs = transformers_runs
    served = request.getfixturevalue("faithful_server") if runtime in (runtime_c, runtime_i) else None
    runtime(folder, tmp_path, LIMIT, vllm_python=vllm_env_has_lmms, served=served)
    got, base = records(tmp_path), runs[against]
    assert len(got) == LIMIT
    s_t, s_v = summary(base), summary(got)
    same = compare(base, got, AutoTokenizer.from_pretrained(str(folder)))
    print(f"\ntransformers {s_t}\nvLLM {s_v}\nagreement {same}")
    assert_world_replies(got.values())
    if runtime is runtime_d:  # lmms-eval's own results and logged samples, every request answered
        check_lmms_output(tmp_path / "lmms", LIMIT)
    assert same["n"] == LIMIT and same["agreement"] >= 0.9, same
    assert s_v["ccs_binary"][0] >= 0.85, s_v
    for name in ("ccs_binary", "ccs_graded"):
        (_, low_t, high_t), (_, low_v, high_v) = s_t[name], s_v[name]
        assert low_t <= high_v and low_v <= high_t, (name, s_t, s_v)
