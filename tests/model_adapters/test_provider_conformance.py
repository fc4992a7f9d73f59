"""The adapters against their providers' own definitions (SDK code and docs), each test naming the
source of the shape it asserts; the loopback servers model those shapes (tests/support/loopback.py).
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import httpx2
import openai
import pytest
import yaml
from support.backends import build
from support.hang_guard import hang_limit, scaled, wait_for
from support.loopback import UNTIL_CLOSED, CalibrationWorld, Loopback

from edct_task.calibration import generate_samples
from edct_task.cli.main import main
from edct_task.config import calibration_config
from model_adapters import bfl_editor, openai_chat, openai_images, openrouter_images
from model_adapters.contracts import GenerationParams
from model_adapters.errors import OptionsError, PermanentBackendError, ProviderStop
from model_adapters.remote_editor import SubmitUncertain

KEY = "sk-conformance-key-4b8e1f0a2c"
PRESETS = Path(openai_images.__file__).parent / "presets"


class Sleeps:
    def __call__(self, seconds: float) -> None:
        pass


@pytest.fixture(scope="module")
def world() -> CalibrationWorld:
    return CalibrationWorld("faithful")


@pytest.fixture(scope="module")
def case():
    from edct_task.calibration.scenes import scene_of

    sample = generate_samples(n=3, seed=0)[0]
    ball = next(o for o in scene_of(sample.image).objects if o.category == "ball")
    new = "white" if ball.colour != "white" else "orange"
    return sample.image, (
        f"Keep: everything else.\nChange: recolour the ball from {ball.colour} to {new}\n"
        "How: match the lighting.\nConstraints: no new objects."
    )


def _bfl(url: str, monkeypatch, **options):
    monkeypatch.setenv("LOOPBACK_EDITOR_KEY", KEY)
    opts = {"model": "flux-2-pro", "base_url": url, "api_key_env": "LOOPBACK_EDITOR_KEY"}
    opts["timeout_s"] = hang_limit(5.0)  # a hang guard: a BFL submit that timed out is never re-sent
    return bfl_editor.from_options(
        {**opts, "backoff_base_s": 0.0, "poll_interval_s": 0.0, **options}, sleep=Sleeps()
    )


# -- 1. default model ids, per the installed SDK -----------------------------------------------------
def test_the_default_image_model_is_current_in_the_installed_sdk() -> None:
    """Source: openai ``types/image_model.py`` ("Deprecated values": gpt-image-1 shut down
    2026-10-23, dall-e-2/3 retired 2026-05-12) and the ``images.edit`` docstring's model list."""
    retired = openai_images.retired_image_models()
    assert {"gpt-image-1", "dall-e-2", "dall-e-3"} <= retired  # the SDK still says so
    assert openai_images.DEFAULT_MODEL not in retired
    edit_doc = Path(inspect.getfile(openai.resources.images)).read_text(encoding="utf-8")
    listed = edit_doc.split("model: The GPT image model to use for image editing", 1)[1].split(").")[0]
    assert f"`{openai_images.DEFAULT_MODEL}`" in listed
    for preset in PRESETS.glob("*.yaml"):  # no shipped preset names a retired image model
        roles = yaml.safe_load(preset.read_text()).get("roles", {})
        assert all(r.get("model") not in retired for r in roles.values() if isinstance(r, dict)), preset


@pytest.mark.parametrize("model", ["gpt-image-1", "dall-e-2"])
def test_a_retired_image_model_is_refused_in_one_line(model, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with pytest.raises(OptionsError, match=re.escape(f"{model} is shut down or retired")):
        openai_images.from_options({"model": model})


def test_the_loopback_refuses_a_retired_model_like_the_api(world, case, monkeypatch) -> None:
    """Model-id validation at the server (OpenAI's error object, ``model_not_found``)."""
    image, instruction = case
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    editor = openai_images.from_options({"model": "gpt-image-1.5", "base_url": "http://127.0.0.1:9/v1"})
    with Loopback(world) as server:
        editor.base_url = server.url + "/v1"
        editor.model = "gpt-image-1"  # what the old default sent
        with pytest.raises(PermanentBackendError, match=r"model_not_found|does not exist"):
            editor.edit(image, instruction, seed=0)


def test_input_fidelity_only_for_models_that_take_it(monkeypatch) -> None:
    """Source: ``images.edit`` docstring, ``input_fidelity``: high/low on gpt-image-1.5, low on
    gpt-image-1-mini, "For gpt-image-2, omit this parameter"."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    ok = openai_images.from_options({"model": "gpt-image-1.5", "input_fidelity": "high"})
    assert ok.form["input_fidelity"] == "high"
    assert "input_fidelity" not in openai_images.from_options({}).form
    for model, value in (
        ("gpt-image-2", "high"),
        ("gpt-image-2.5-sunburst", "low"),
        ("gpt-image-1-mini", "high"),
    ):
        with pytest.raises(OptionsError, match="does not take input_fidelity"):
            openai_images.from_options({"model": model, "input_fidelity": value})


# -- max_tokens_field per family ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("model", "field"),
    [
        ("o3", "max_completion_tokens"),
        ("o4-mini", "max_completion_tokens"),
        ("gpt-5.2", "max_completion_tokens"),
        ("gpt-4.1", "max_tokens"),
        ("openai/o3", "max_tokens"),  # OpenRouter's id: the router takes max_tokens
        ("Qwen/Qwen3-VL-8B-Instruct", "max_tokens"),
    ],
)
def test_max_tokens_field_follows_the_model_family(model, field, world) -> None:
    """Source: openai ``chat/completions/completions.py`` ``max_tokens``: "deprecated in favor of
    max_completion_tokens, and is not compatible with o-series models"."""
    with Loopback(world) as server:
        client = openai_chat.client_from_options({"model": model, "base_url": server.url + "/v1"})
        client.create([{"role": "user", "content": "hello"}], GenerationParams(max_new_tokens=7))
        body = server.bodies[0]
    assert body[field] == 7 and len({"max_tokens", "max_completion_tokens"} & set(body)) == 1
    assert client.settings.identity("openai-chat")["max_tokens_field"] == field


# -- OpenRouter: modalities per model kind, require_parameters with a schema ---------------------
def test_openrouter_modalities_follow_the_model_kind(monkeypatch) -> None:
    """Source: openrouter.ai/docs image generation: image-only models (Flux, Sourceful) take
    ``modalities: ["image"]``, text-and-image models (Gemini) ``["image", "text"]``."""
    monkeypatch.setenv("OPENROUTER_API_KEY", KEY)
    flux = openrouter_images.from_options({"model": "black-forest-labs/flux.2-pro"})
    gemini = openrouter_images.from_options({"model": "google/gemini-3-pro-image-preview"})
    assert flux.modalities == ["image"] and flux.identity()["modalities"] == ["image"]
    assert gemini.modalities == ["image", "text"]


def test_openrouter_structured_requests_require_the_parameters(monkeypatch) -> None:
    """Source: openrouter.ai/docs structured outputs / provider routing:
    ``provider: {require_parameters: true}`` so only providers honouring ``response_format`` answer."""
    from edct_task.reply_schemas import reply_schema

    seen: list[dict] = []

    def reply(request: httpx2.Request) -> httpx2.Response:
        seen.append(json.loads(request.content))
        message = {"role": "assistant", "content": '{"concepts": ["ball"]}'}
        return httpx2.Response(
            200, json={"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                       "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]},
        )  # fmt: skip

    monkeypatch.setenv("OPENROUTER_API_KEY", KEY)
    options = {
        "model": "qwen/qwen3-vl-8b",
        "base_url": "https://openrouter.ai/api/v1",
        "api_key_env": "OPENROUTER_API_KEY",
    }
    client = openai_chat.client_from_options(options, transport=httpx2.MockTransport(reply))
    params = GenerationParams(max_new_tokens=50, reply_schema=reply_schema("extract_concepts"))
    client.chat([{"role": "user", "content": "x"}], params, structured=True)
    client.chat([{"role": "user", "content": "x"}], GenerationParams(max_new_tokens=50), structured=True)
    assert seen[0]["provider"] == {"require_parameters": True} and "response_format" in seen[0]
    assert "provider" not in seen[1]
    assert client.settings.identity("openai-chat")["require_parameters"] is True


# -- 2. a paid call is made once --------------------------------------------------------------------
@pytest.mark.parametrize("then", ["server_error", "read_timeout"])
def test_a_bfl_submit_that_may_have_been_accepted_is_never_sent_twice(then, world, case, monkeypatch) -> None:
    """Source: black-forest-labs/blackforest ``src/bfl/_transport.py``: a 5xx on a POST submit
    "might mean the server already created (and billed) the job"; a read timeout "can fire after
    the server accepted (and billed) the job". The loopback creates and bills the job first."""
    image, instruction = case
    with Loopback(world, api_key=KEY, bfl_accept_then=then) as server:
        server.faults.stall_s = UNTIL_CLOSED  # a read timeout fires, however busy the machine
        timeout = {"timeout_s": scaled(0.5)} if then == "read_timeout" else {}
        editor = _bfl(server.url, monkeypatch, **timeout)
        with pytest.raises(SubmitUncertain, match="may have accepted"):
            editor.edit(image, instruction, seed=3)
        # the job is billed before the reply, which a busy machine may make late for the timeout
        assert wait_for(lambda: server.bfl_billed == 3.0, 10), server.bfl_billed
        assert server.requests["/v1/flux-2-pro"] == 1
    assert editor.usage()["retries"] == 0 and editor.usage()["failures"] == 1


def test_a_429_submit_is_retried_because_bfl_did_not_take_it(world, case, monkeypatch) -> None:
    from support.loopback import FaultPlan

    image, instruction = case
    faults = FaultPlan(rate=1.0, kinds=("rate_limited",), max_consecutive=1, retry_after_ms=None)
    with Loopback(world, api_key=KEY, faults=faults) as server:
        editor = _bfl(server.url, monkeypatch)
        editor.edit(image, instruction, seed=3)
    assert server.requests["/v1/flux-2-pro"] == 2 and server.bfl_billed == 3.0  # one job billed


def test_task_not_found_resubmits_once_counted_with_its_cost(world, case, monkeypatch) -> None:
    """Source: docs.bfl.ml ``get-result``: an unknown/expired id is HTTP 200 with status
    ``Task not found`` (no 404 is documented); the submit reply carries ``cost`` (credits)."""
    image, instruction = case
    with Loopback(world, api_key=KEY, bfl_lose_jobs=1) as server:
        editor = _bfl(server.url, monkeypatch)
        editor.edit(image, instruction, seed=3)
        assert server.requests["/v1/flux-2-pro"] == 2
    usage = editor.usage()
    assert usage["resubmits"] == 1 and usage["edits"] == 1 and usage["cost_usd"] == pytest.approx(0.06)
    with Loopback(world, api_key=KEY, bfl_lose_jobs=5) as server:
        editor = _bfl(server.url, monkeypatch)
        with pytest.raises(PermanentBackendError, match=r"Task not found.*job_attempts: 2"):
            editor.edit(image, instruction, seed=3)
        assert server.requests["/v1/flux-2-pro"] == 2  # job_attempts bounds the paid submits


def test_an_unknown_status_is_raised_at_once(world, case, monkeypatch) -> None:
    """Source: blackforest ``src/bfl/_jobs.py`` ``_interpret``: only ``Pending`` is in progress; an
    unrecognised status is raised, "never polled to the timeout"."""
    image, instruction = case
    with Loopback(world, api_key=KEY, bfl_status="Processing") as server:
        editor = _bfl(server.url, monkeypatch)
        with pytest.raises(PermanentBackendError, match="unknown status 'Processing'"):
            editor.edit(image, instruction, seed=3)
        assert server.requests["/eu2/v1/get_result"] == 1 and server.requests["/v1/flux-2-pro"] == 1


def test_regional_polling_urls_share_the_key_only_on_bfl_domains() -> None:
    """Source: help.bfl.ai "Which API endpoint should I use?": polling URLs are regional
    (``api.eu2.bfl.ai``); "always use the polling_url returned"."""
    assert bfl_editor._same_site("https://api.eu2.bfl.ai/v1/get_result?id=1", "https://api.bfl.ai")
    assert not bfl_editor._same_site("https://evil.example/v1/get_result", "https://api.bfl.ai")


# -- quota and credits: the role stops at once --------------------------------------------------------
def test_bfl_402_stops_with_the_providers_reason(world, case, monkeypatch) -> None:
    """Source: docs.bfl.ml ``errors.md``: 402 = insufficient credits."""
    image, instruction = case
    with Loopback(world, api_key=KEY, bfl_credits=0) as server:
        editor = _bfl(server.url, monkeypatch)
        with pytest.raises(ProviderStop, match=r"402.*Insufficient credits.*no credits"):
            editor.edit(image, instruction, seed=3)
        assert server.requests["/v1/flux-2-pro"] == 1


def test_openai_insufficient_quota_is_not_retried(world, case, monkeypatch) -> None:
    """Source: OpenAI's 429 ``insufficient_quota`` ("You exceeded your current quota"); the openai
    client retries every other 429 by itself (``_base_client._should_retry``, ``x-should-retry``)."""
    image, instruction = case
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with Loopback(world, quota_exhausted=True) as server:
        chat = openai_chat.client_from_options(
            {"model": "gpt-4.1", "base_url": server.url + "/v1", "api_key_env": "OPENAI_API_KEY"}
        )
        with pytest.raises(ProviderStop, match="insufficient_quota"):
            chat.create([{"role": "user", "content": "x"}], GenerationParams(max_new_tokens=5))
        editor = openai_images.from_options(
            {"model": "gpt-image-1.5", "base_url": server.url + "/v1", "backoff_base_s": 0.0}
        )
        with pytest.raises(ProviderStop, match="quota is exhausted"):
            editor.edit(image, instruction, seed=0)
        assert server.requests["/v1/chat/completions"] == 1 and server.requests["/v1/images/edits"] == 1


def test_the_cost_ceiling_stops_new_paid_calls(world, case, monkeypatch) -> None:
    image, instruction = case
    with Loopback(world, api_key=KEY) as server:
        monkeypatch.setenv("LOOPBACK_EDITOR_KEY", KEY)
        options = {"model": "flux-2-pro", "base_url": server.url, "api_key_env": "LOOPBACK_EDITOR_KEY"}
        options.update(backoff_base_s=0.0, poll_interval_s=0.0, max_cost_usd=0.05)  # 0.03 USD a job
        editor = build("editor", "bfl", options)
        editor.edit(image, instruction, seed=1)
        editor.edit(image, instruction, seed=2)
        with pytest.raises(ProviderStop, match=r"max_cost_usd 0.05 reached"):
            editor.edit(image, instruction, seed=3)
        assert server.requests["/v1/flux-2-pro"] == 2


# -- the run: one line, its exit code, nothing lost --------------------------------------------------
def _run_config(tmp: Path, url: str, out: str, **bfl) -> Path:
    raw = calibration_config("faithful", n=6, output_dir=tmp / out).model_dump(mode="json")
    raw["cache_dir"] = str(tmp / "cache")
    raw["progress"] = False
    raw["bootstrap_resamples"] = 100
    raw["roles"]["editor"] = {
        "backend": "bfl", "model": "flux-2-pro", "base_url": url, "api_key_env": "LOOPBACK_EDITOR_KEY",
        "poll_interval_s": 0.0, "backoff_base_s": 0.0, **bfl,
    }  # fmt: skip
    path = tmp / f"{out}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.mark.slow
@pytest.mark.parametrize("stop", ["max_cost_usd", "no_credits"])
def test_a_run_stops_in_one_line_exit_3_and_resumes_losing_nothing(
    stop, world, tmp_path, monkeypatch, capsys
) -> None:
    monkeypatch.setenv("LOOPBACK_EDITOR_KEY", KEY)
    with Loopback(world, api_key=KEY) as server:
        assert main(["run", "--config", str(_run_config(tmp_path, server.url, "full"))]) == 0
        full = server.requests["/v1/flux-2-pro"]
    assert full > 3
    tmp = tmp_path / "stopped"
    tmp.mkdir()
    with Loopback(world, api_key=KEY) as server:
        options = {"max_cost_usd": 0.03 * (full // 2)} if stop == "max_cost_usd" else {}
        if stop == "no_credits":  # the account pays for half the edits
            server.bfl_credits = full // 2
        config = _run_config(tmp, server.url, "run", **options)
        capsys.readouterr()
        code = main(["run", "--config", str(config)])
        err = capsys.readouterr().err.strip().splitlines()
        accepted_first = round(server.bfl_billed / server.bfl_cost)  # jobs BFL took (and billed)
    assert code == 3 and len(err) == 1 and err[0].startswith("edct: stopped, ")
    assert ("max_cost_usd" if stop == "max_cost_usd" else "no credits") in err[0] and "Traceback" not in err[
        0
    ]
    with Loopback(world, api_key=KEY) as server:  # the rerun (credits back, ceiling lifted) resumes
        config = _run_config(tmp, server.url, "run")
        assert main(["run", "--config", str(config)]) == 0
        rest = server.requests["/v1/flux-2-pro"]
    assert accepted_first + rest == full  # no paid edit made twice, none lost
