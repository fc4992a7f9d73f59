"""HTTP image editors (BFL, OpenAI images.edit, OpenRouter image output) against loopback servers."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from support.backends import build
from support.hang_guard import hang_limit
from support.loopback import CalibrationWorld, FaultPlan, Loopback, openai_retry_waits

from edct_task.calibration import SceneEditor, generate_samples
from edct_task.roles import available_backends
from model_adapters import bfl_editor, openai_images, openrouter_images
from model_adapters.errors import EditRefused, OptionsError, PermanentBackendError
from model_adapters.images import RESIZE_INFO_KEY

KEY = "sk-editor-key-5c1e0a7d93b2"
KINDS = ("bfl", "openai-images", "openrouter-image")


class Sleeps:
    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture(scope="module")
def world() -> CalibrationWorld:
    return CalibrationWorld("faithful")


@pytest.fixture(scope="module")
def case():
    """A calibration image and an instruction the scene editor can apply."""
    from edct_task.calibration.scenes import scene_of

    sample = generate_samples(n=3, seed=0)[0]
    scene = scene_of(sample.image)
    ball = next(o for o in scene.objects if o.category == "ball")
    instruction = (
        f"Keep: everything else.\nChange: recolour the ball from {ball.colour} to "
        f"{'white' if ball.colour != 'white' else 'orange'}\nHow: match the lighting.\n"
        "Constraints: no new objects."
    )
    return sample.image, instruction


def _editor(kind: str, url: str, monkeypatch, sleeps: Sleeps | None = None, **extra):
    monkeypatch.setenv("LOOPBACK_EDITOR_KEY", KEY)
    sleep = sleeps or Sleeps()
    # a hang guard: nothing here stalls, and a BFL submit that timed out is never re-sent
    common = {"api_key_env": "LOOPBACK_EDITOR_KEY", "timeout_s": hang_limit(5.0), **extra}
    if kind != "openrouter-image":  # the chat client backs off by itself
        common["backoff_base_s"] = 0.01
    if kind == "bfl":
        return bfl_editor.from_options({"model": "flux-2-max", "base_url": url, **common}, sleep=sleep)
    if kind == "openai-images":
        return openai_images.from_options(
            {"model": "gpt-image-1.5", "base_url": url + "/v1", **common}, sleep=sleep
        )
    return openrouter_images.from_options(
        {"model": "google/gemini-3-pro-image-preview", "base_url": url + "/v1", **common}
    )


def _same(a, b) -> bool:
    return a.size == b.size and np.array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("kind", KINDS)
def test_edit_over_the_wire_equals_the_in_process_editor(kind, world, case, monkeypatch) -> None:
    image, instruction = case
    expected = SceneEditor().edit(image, instruction, seed=5)
    with Loopback(world, api_key=KEY) as server:
        editor = _editor(kind, server.url, monkeypatch)
        got = editor.edit(image, instruction, seed=5)
    assert _same(got, expected) and got.info["edct_scene"] == expected.info["edct_scene"]
    assert RESIZE_INFO_KEY not in got.info
    usage = editor.usage()
    assert usage["edits"] == 1 and usage["refused"] == 0 and usage["resized"] == 0
    assert KEY not in repr(editor.identity())


@pytest.mark.parametrize("kind", KINDS)
def test_transient_faults_are_retried(kind, world, case, monkeypatch, caplog) -> None:
    image, instruction = case
    faults = FaultPlan(
        rate=1.0,
        kinds=("rate_limited", "server_error"),
        max_consecutive=2,
        retry_after="0.3",
        retry_after_ms=None,
    )
    sleeps = Sleeps()
    caplog.set_level(logging.INFO, logger="openai")
    with Loopback(world, api_key=KEY, faults=faults) as server:
        editor = _editor(kind, server.url, monkeypatch, sleeps)
        got = editor.edit(image, instruction, seed=5)
    assert _same(got, SceneEditor().edit(image, instruction, seed=5))
    assert sum(faults.injected.values()) == 2 and editor.usage()["retries"] == 2
    waits = openai_retry_waits(caplog.records) if kind == "openrouter-image" else sleeps.waits
    if "rate_limited" in faults.injected:
        assert 0.3 in waits  # the server's Retry-After (the backoff alone is shorter or, chat, longer)


@pytest.mark.parametrize("kind", KINDS)
def test_moderation_is_a_refusal_with_its_reason(kind, world, case, monkeypatch) -> None:
    image, instruction = case
    with Loopback(world, api_key=KEY, moderate=1.0) as server:
        editor = _editor(kind, server.url, monkeypatch)
        with pytest.raises(EditRefused) as info:
            editor.edit(image, instruction, seed=5)
    reason = str(info.value)
    assert {
        "bfl": "Request Moderated",
        "openai-images": "safety system",
        "openrouter-image": "content policy",
    }[kind] in reason
    assert KEY not in reason and editor.usage()["refused"] == 1


@pytest.mark.parametrize("kind", KINDS)
def test_a_resized_output_comes_back_at_the_original_size(kind, case, monkeypatch) -> None:
    image, instruction = case
    with Loopback(CalibrationWorld("faithful", resize_to=(512, 384)), api_key=KEY) as server:
        editor = _editor(kind, server.url, monkeypatch)
        got = editor.edit(image, instruction, seed=5)
    assert got.size == image.size
    assert got.info[RESIZE_INFO_KEY] == "512x384" and "edct_scene" in got.info
    assert editor.usage()["resized"] == 1


def test_bfl_polls_then_downloads_the_signed_url_without_the_key(world, case, monkeypatch) -> None:
    image, instruction = case
    sleeps = Sleeps()
    with Loopback(world, api_key=KEY) as server:
        editor = _editor("bfl", server.url, monkeypatch, sleeps, poll_interval_s=0.5, poll_max_interval_s=0.6)
        editor.edit(image, instruction, seed=5)
        submit, *polls, redirect, download = server.headers_seen
    assert submit["x-key"] == KEY and all(p["x-key"] == KEY for p in polls)
    for hop in (redirect, download):  # the delivery URL redirects (307); followed without the key
        assert "x-key" not in hop and "Authorization" not in hop
    assert server.requests["/eu2/v1/get_result"] == 2 == editor.usage()["polls"]  # the regional URL, as given
    hops = [p.split("/")[1] for p in server.requests if not p.startswith(("/v1/", "/eu2/"))]
    assert sorted(hops) == ["delivery", "redirect"] and server.requests["/v1/get_result"] == 0
    assert sleeps.waits == [0.5, 0.6]  # the poll interval grows up to its cap
    body = server.bodies  # (chat bodies only: none here)
    assert body == []


def test_bfl_job_error_fails_without_a_second_paid_submit(world, case, monkeypatch) -> None:
    """BFL's ``Error`` is the job's failure (official client ``_jobs.py``: ``BFLTaskError``); the
    job was billed, so it is not submitted again (the old adapter resubmitted it)."""
    image, _ = case
    impossible = "Keep: all.\nChange: remove the giraffe.\nHow: -\nConstraints: -"
    with Loopback(world, api_key=KEY) as server:
        editor = _editor("bfl", server.url, monkeypatch)
        with pytest.raises(PermanentBackendError, match=r"failed \(Error\)"):
            editor.edit(image, impossible, seed=1)
    assert server.requests["/v1/flux-2-max"] == 1 and editor.usage()["failures"] == 1


def test_bfl_sends_the_size_for_flux2_models(world, case, monkeypatch) -> None:
    image, instruction = case
    seen = {}

    class Caller(bfl_editor.HttpCaller):
        def request_json(self, method, url, what, **kw):
            if method == "POST":
                seen.update(kw["json"])
            return super().request_json(method, url, what, **kw)

    with Loopback(world, api_key=KEY) as server:
        editor = _editor("bfl", server.url, monkeypatch, extra={"safety_tolerance": 2})
        editor.caller.__class__ = Caller
        editor.edit(image, instruction, seed=9)
    assert (
        (seen["width"], seen["height"]) == (384, 288) and seen["seed"] == 9 and seen["safety_tolerance"] == 2
    )
    assert seen["prompt_upsampling"] is False  # FLUX.2 defaults it to true: BFL would rewrite the edit
    assert editor.identity() == {
        "backend": "bfl",
        "model": "flux-2-max",
        "send_size": True,
        "prompt_upsampling": False,
        "extra": {"safety_tolerance": 2, "prompt_upsampling": False},
    }


def test_openrouter_request_asks_for_image_output(world, case, monkeypatch) -> None:
    image, instruction = case
    with Loopback(world, api_key=KEY, report_cost=True) as server:
        editor = _editor("openrouter-image", server.url, monkeypatch, image_config={"aspect_ratio": "4:3"})
        editor.edit(image, instruction, seed=2)
        body = server.bodies[0]
    assert body["modalities"] == ["image", "text"] and body["image_config"] == {"aspect_ratio": "4:3"}
    assert body["seed"] == 2 and body["max_tokens"] == 8192
    assert editor.usage()["cost_usd"] == pytest.approx(0.001)


@pytest.mark.parametrize("kind", KINDS)
def test_editor_factories_are_registered_and_check_options(kind, monkeypatch) -> None:
    assert kind in available_backends()["editor"]
    monkeypatch.delenv("BFL_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    with pytest.raises(OptionsError, match="not set"):
        build("editor", kind, {"model": "m"})
    monkeypatch.setenv("SOME_KEY", "x")
    with pytest.raises(OptionsError, match="does not take"):
        build("editor", kind, {"model": "m", "api_key_env": "SOME_KEY", "colour": "red"})
