#!/usr/bin/env bash
# A prepared check for a machine with an NVIDIA GPU and the CUDA build of vLLM (`pip install vllm`),
# never run by CI. From the repository root:
#
#   bash benchmarks/gpu_check.sh
#   EDCT_PYTHON=.venv/bin/python EDCT_VLLM_PYTHON=/opt/vllm/bin/python bash benchmarks/gpu_check.sh
#
# EDCT_PYTHON: a Python with edct-bench[test] (default: python); EDCT_VLLM_PYTHON: one with vllm
# (default: EDCT_PYTHON). It builds the tiny random Qwen3-VL, serves it with vLLM on the GPU through
# `edct serve`, runs `edct run` against it and the batching benchmark, stops the server (checking
# that none of its processes remain), and runs the tiny FLUX.1 Kontext (diffusers) and SAM2 models
# on CUDA. One summary line per check; the exit status is the number of failed checks. Every check
# has its own time limit; all of them together stay within 8 minutes, plus about 5 for §4.6 below.
#
# §4.6 tools: `edct attention` and `edct finetune` (Q-LoRA, 4-bit NF4: needs edct-bench[qlora],
# i.e. bitsandbytes) on the tiny model and calibration counterfactuals; the attention-pass memory of
# a model of Qwen3-VL-8B's shape (random bf16 weights built on the GPU, ~17.5 GB, nothing
# downloaded); and both tools on the real Qwen3-VL-8B on a few pairs when a local copy is given:
#
#   EDCT_QWEN3_VL_8B=/models/Qwen3-VL-8B-Instruct bash benchmarks/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${EDCT_PYTHON:-python}
VPY=${EDCT_VLLM_PYTHON:-$PY}
WORK=$(mktemp -d /tmp/edct-gpu-check.XXXXXX)
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
FAILED=0
START=$SECONDS
SERVE_PID=

line() { printf '%-14s %-4s %s\n' "$1" "$2" "$3"; }

check() {  # check NAME SECONDS COMMAND... : one line, the command's last output line as detail
    local name=$1 limit=$2 out
    shift 2
    if out=$(timeout "$limit" "$@" 2>&1); then
        line "$name" ok "$(tail -n 1 <<<"$out")"
    else
        line "$name" FAIL "(exit $?) $(tail -n 3 <<<"$out" | tr '\n' ' ' | cut -c1-300)"
        FAILED=$((FAILED + 1))
    fi
}

stop_server() {
    [ -n "$SERVE_PID" ] || return 0
    kill -TERM "$SERVE_PID" 2>/dev/null
    wait "$SERVE_PID" 2>/dev/null
    SERVE_PID=
}
trap stop_server EXIT

check gpu 60 "$PY" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; \
print(torch.cuda.get_device_name(0), 'CUDA', torch.version.cuda)"
check vllm 120 "$VPY" -c "import torch, vllm; assert torch.cuda.is_available(), 'vLLM env sees no GPU'; \
print('vllm', vllm.__version__)"
check tiny-model 180 "$PY" tests/support/tiny_qwen3_vl.py "$WORK/tiny-qwen3-vl" --head-dim 64

PORT=$("$PY" -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
"$PY" -m edct_task.cli.main serve target "$WORK/tiny-qwen3-vl" --port "$PORT" --python "$VPY" \
    --served-model-name tiny --log "$WORK/vllm.log" -- \
    --dtype float16 --max-model-len 4096 --gpu-memory-utilization 0.3 >"$WORK/serve.out" 2>&1 &
SERVE_PID=$!
T0=$SECONDS
until grep -q '^    base_url:' "$WORK/serve.out" 2>/dev/null; do
    if ! kill -0 "$SERVE_PID" 2>/dev/null || [ $((SECONDS - T0)) -gt 240 ]; then break; fi
    sleep 1
done
if grep -q '^    base_url:' "$WORK/serve.out"; then
    VLLM_PID=$(sed -n 's/.*(pid \([0-9]*\),.*/\1/p' "$WORK/serve.out" | head -n 1)
    line vllm-serve ok "healthy after $((SECONDS - T0)) s at http://127.0.0.1:$PORT/v1 (pid $VLLM_PID)"
    URL=http://127.0.0.1:$PORT/v1
    check edct-run 180 "$PY" benchmarks/gpu_check_run.py --base-url "$URL" --model tiny --out "$WORK/run"
    check batching 180 "$PY" benchmarks/bench_vllm_batching.py --base-url "$URL" --model tiny \
        --requests 64 --new-tokens 64
    stop_server
    LEFT=$(ps -o pid=,stat= -g "$VLLM_PID" 2>/dev/null | awk '$2 !~ /^Z/ {print $1}' | tr '\n' ' ')
    if [ -n "$VLLM_PID" ] && [ -n "$LEFT" ]; then  # zombies awaiting their reaper do not count
        line vllm-stop FAIL "processes left in group $VLLM_PID: $LEFT"
        FAILED=$((FAILED + 1))
    else
        line vllm-stop ok "SIGTERM to edct serve; no process of the server is left"
    fi
else
    line vllm-serve FAIL "$(tail -n 5 "$WORK/serve.out" "$WORK/vllm.log" 2>/dev/null | tr '\n' ' ' | cut -c1-400)"
    FAILED=$((FAILED + 1))
    stop_server
fi

check kontext-cuda 180 env EDCT_TEST_DEVICE=cuda "$PY" -m pytest -q -p no:cacheprovider \
    tests/model_adapters/test_diffusers_editor.py -k "tiny_kontext_edits"
check sam2-cuda 120 env EDCT_TEST_DEVICE=cuda "$PY" -m pytest -q -p no:cacheprovider \
    tests/verification/test_transformers_backends.py -k "sam2_gives_one"

# §4.6: counterfactual pairs of a calibration run, then both tools on CUDA
check cf-pairs 120 "$PY" -c "import sys; from pathlib import Path
from edct_task.config import calibration_config
from edct_task.engine.runner import run
from edct_task.bench_data.export import export_counterfactuals
w = Path(sys.argv[1]); run(calibration_config(n=8, output_dir=w / 'cal').model_copy(update={'progress': False}))
print(export_counterfactuals(w / 'cal', w / 'cf').pairs, 'verified pairs exported')" "$WORK"
check attention-tiny 180 "$PY" -m edct_task.cli.main attention "$WORK/cf" --model "$WORK/tiny-qwen3-vl" \
    --out "$WORK/att-tiny" --device cuda
check finetune-qlora 240 "$PY" -m edct_task.cli.main finetune "$WORK/cf" --model "$WORK/tiny-qwen3-vl" \
    --out "$WORK/ft-tiny" --epochs 2
check attn-mem-8b 300 "$PY" benchmarks/bench_attention_memory.py --shape qwen3-vl-8b \
    --processor "$WORK/tiny-qwen3-vl" --device cuda --image 1600x900
if [ -n "${EDCT_QWEN3_VL_8B:-}" ]; then
    check attention-8b 420 "$PY" -m edct_task.cli.main attention "$WORK/cf" --model "$EDCT_QWEN3_VL_8B" \
        --out "$WORK/att-8b" --max-pairs 4 --layers 7-12 --dtype bfloat16
    check finetune-8b 600 "$PY" -m edct_task.cli.main finetune "$WORK/cf" --model "$EDCT_QWEN3_VL_8B" \
        --out "$WORK/ft-8b" --max-pairs 8 --epochs 1
else
    line attention-8b skip "set EDCT_QWEN3_VL_8B to a local Qwen3-VL-8B-Instruct folder to run both tools on it"
fi

echo "gpu_check: $FAILED failed, $((SECONDS - START)) s, work folder $WORK"
exit "$FAILED"
