"""The trained tiny VLM through vLLM: (c) a real vLLM server behind an ``openai-chat`` target and
(d) lmms-eval's in-process ``vllm`` model must score the faithful checkpoint like (a), transformers
through ``edct run --model qwen3_vl``: overlapping CIs, the same verdict on at least 90% of samples.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.tiny_vlm_runs import runtime_a, runtime_c, runtime_d

from edct_task.tiny_vlm.comparison import compare, records, summary
from edct_task.tiny_vlm.store import checkpoint_path

pytestmark = pytest.mark.vllm
LIMIT = 20


@pytest.fixture(scope="module")
def faithful_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    folder, _ = checkpoint_path("faithful", log=lambda _: None)
    out = tmp_path_factory.mktemp("tiny-vlm-a")
    runtime_a(folder, out, LIMIT)
    return folder, records(out)


@pytest.mark.parametrize("runtime", [runtime_c, runtime_d], ids=["vllm-server-openai-chat", "lmms-vllm"])
def test_vllm_runtimes_score_the_faithful_checkpoint_like_transformers(
    runtime, faithful_runs, vllm_env_has_lmms, tmp_path
) -> None:
    from transformers import AutoTokenizer

    folder, base = faithful_runs
    runtime(folder, tmp_path, LIMIT, vllm_python=vllm_env_has_lmms)
    got = records(tmp_path)
    assert len(got) == LIMIT
    s_a, s_v = summary(base), summary(got)
    same = compare(base, got, AutoTokenizer.from_pretrained(str(folder)))
    print(f"\n(a) {s_a}\nvLLM {s_v}\nagreement {same}")
    assert same["agreement"] >= 0.9, same
    for name in ("ccs_binary", "ccs_graded"):
        (_, low_a, high_a), (_, low_v, high_v) = s_a[name], s_v[name]
        assert low_a <= high_v and low_v <= high_a, (name, s_a, s_v)
