"""The real vLLM server as ``edct serve`` started it: its recipe flags are accepted and in effect,
and images reach the model's processor as it expects (prompt tokens follow the image size)."""

from __future__ import annotations

import base64
import io

import httpx
import numpy as np
import pytest
from PIL import Image
from support.hang_guard import hang_limit

from model_adapters.vllm_serve import recipe

pytestmark = pytest.mark.vllm

PATCH = 32  # Qwen3-VL: 16 px patches, 2x2 merged into one visual token
RECIPE_MAX_PIXELS = 1605632  # model_adapters.vllm_serve.recipe for Qwen-VL targets


def _png_uri(width: int, height: int) -> str:
    rng = np.random.default_rng(width * 7919 + height)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8)).save(buf, "PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _prompt_tokens(url: str, model: str, width: int, height: int) -> int:
    body = {
        "model": model,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": _png_uri(width, height)}},
                    {"type": "text", "text": "What colour is the square?"},
                ],
            }
        ],
        "max_tokens": 4,
        "temperature": 0,
    }
    reply = httpx.post(f"{url}/chat/completions", json=body, timeout=hang_limit(120))
    assert reply.status_code == 200, reply.text
    data = reply.json()
    assert data["usage"]["completion_tokens"] == 4  # the tiny model never stops early
    return data["usage"]["prompt_tokens"]


def test_edct_serve_started_vllm_with_the_target_recipe(vllm_server) -> None:
    lines = vllm_server.lines
    assert lines[-4:] == [
        "  target:",
        "    backend: openai-chat",
        f"    model: {vllm_server.model}",
        f"    base_url: {vllm_server.url}",
    ]
    command = next(line for line in lines if line.startswith("# command: "))
    assert "-m vllm.entrypoints.openai.api_server" in command
    assert "--limit-mm-per-prompt" in command and "--mm-processor-kwargs" in command
    assert "--max-model-len 4096" in command and "32768" not in command  # our flag replaced the recipe's
    models = httpx.get(f"{vllm_server.url}/models", timeout=hang_limit(30)).json()
    assert [m["id"] for m in models["data"]] == [vllm_server.model]
    assert models["data"][0]["max_model_len"] == 4096
    log = vllm_server.log.read_text(errors="replace")
    assert "Application startup complete" in log


def test_prompt_tokens_follow_the_image_size(vllm_server) -> None:
    """One visual token per 32x32 pixels, after the processor's own resizing: small images are
    scaled up to its minimum (65,536 pixels), large ones down to the recipe's max_pixels."""
    url, model = vllm_server.url, vllm_server.model
    model_dir_name = vllm_server.lines[1]  # the '# command:' line names the model folder
    base = _prompt_tokens(url, model, 256, 256)
    text = base - (256 // PATCH) * (256 // PATCH)
    sizes = {(512, 256): 16 * 8, (512, 512): 16 * 16, (1024, 768): 32 * 24, (64, 64): 8 * 8}
    got = {size: _prompt_tokens(url, model, *size) - text for size in sizes}
    assert got == sizes
    # 2048x1024 = 2,097,152 pixels is over the cap: resized to 1792x896 -> 56 x 28 tokens, not 64 x 32
    assert f'"max_pixels": {RECIPE_MAX_PIXELS}' in " ".join(recipe("target", model_dir_name))
    assert _prompt_tokens(url, model, 2048, 1024) - text == 56 * 28
    assert text > 0
