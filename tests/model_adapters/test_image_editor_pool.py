"""``openai-images`` over several servers (``base_urls``): the rotation, dead-endpoint removal,
cool-down and health check of ``openai-chat``, against two loopback servers speaking OpenAI's
``/v1/images/edits`` (as vLLM-Omni and SGLang's diffusion server do), one of them failing."""

from __future__ import annotations

import numpy as np
import pytest
from support.hang_guard import hang_limit
from support.loopback import CalibrationWorld, Loopback

from edct_task.calibration import SceneEditor, generate_samples
from model_adapters import openai_images
from model_adapters.errors import OptionsError

KEY = "sk-omni-key-0a1b2c3d4e5f"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def world() -> CalibrationWorld:
    return CalibrationWorld("faithful")


@pytest.fixture(scope="module")
def cases():
    """Calibration images with an instruction the scene editor can apply (recolour the ball)."""
    from edct_task.calibration.scenes import scene_of

    out = []
    for sample in generate_samples(n=12, seed=0):
        ball = next((o for o in scene_of(sample.image).objects if o.category == "ball"), None)
        if ball is None:
            continue
        colour = "white" if ball.colour != "white" else "orange"
        change = f"recolour the ball from {ball.colour} to {colour}"
        instruction = (
            f"Keep: everything else.\nChange: {change}\nHow: match the lighting.\nConstraints: none."
        )
        out.append((sample.image, instruction))
    assert len(out) >= 3
    return out


def _editor(urls, monkeypatch, clock, **extra):
    monkeypatch.setenv("OMNI_KEY", KEY)
    options = {
        "model": "Qwen/Qwen-Image-Edit",
        "base_urls": urls,
        "api_key_env": "OMNI_KEY",
        "timeout_s": hang_limit(5.0),  # a hang guard: the down server refuses at once, none stalls
        "backoff_base_s": 0.0,
        "backoff_max_s": 0.0,
        "dead_after": 2,
        "cooldown_s": 60,
        **extra,
    }
    return openai_images.from_options(options, sleep=lambda s: None, clock=clock)


def test_edits_spread_over_two_servers_and_avoid_the_failing_one(world, cases, monkeypatch) -> None:
    clock = Clock()
    with Loopback(world, api_key=KEY) as good, Loopback(world, api_key=KEY, down=True) as bad:
        editor = _editor([bad.url + "/v1", good.url + "/v1"], monkeypatch, clock)
        reference = SceneEditor()
        for i in range(8):
            image, instruction = cases[i % len(cases)]
            edited = editor.edit(image, instruction, seed=i)
            expected = reference.edit(image, instruction, seed=0)
            assert np.array_equal(np.asarray(edited), np.asarray(expected))  # every edit succeeds
        stats = {s["endpoint"]: s for s in editor.usage()["endpoints"]}
        dead, live = stats[bad.url + "/v1"], stats[good.url + "/v1"]
        # the failing server got attempts until it failed dead_after times, then none
        assert dead["errors"] == dead["requests"] == 2 and not dead["alive"] and dead["removals"] == 1
        assert live["requests"] == 8 and live["errors"] == 0 and live["alive"]
        assert good.requests["/v1/images/edits"] == 8
        usage = editor.usage()
        assert usage["edits"] == 8 and usage["failures"] == 0 and usage["retries"] == 2

        # still down after the cool-down: the health check fails, it stays out of rotation
        dropped = bad.requests["/v1/images/edits"]  # the attempts it dropped (recorded, then closed)
        clock.now += 61
        editor.edit(*cases[0], seed=100)
        assert bad.requests["/v1/models"] == 1 and bad.requests["/v1/images/edits"] == dropped
        # back up: after the next cool-down the health check (with the key) returns it to rotation
        bad.down = False
        clock.now += 61
        for i in range(4):
            editor.edit(*cases[i % len(cases)], seed=200 + i)
        assert bad.requests["/v1/models"] == 2 and bad.requests["/v1/images/edits"] > dropped
        assert bad.headers_seen[-1]["Authorization"] == f"Bearer {KEY}"
        stats = {s["endpoint"]: s for s in editor.usage()["endpoints"]}
        assert stats[bad.url + "/v1"]["alive"]
        editor.close()


def test_a_refusal_does_not_count_against_the_server(world, cases, monkeypatch) -> None:
    from model_adapters.errors import EditRefused

    clock = Clock()
    with Loopback(world, api_key=KEY, moderate=1.0) as one, Loopback(world, api_key=KEY, moderate=1.0) as two:
        editor = _editor([one.url + "/v1", two.url + "/v1"], monkeypatch, clock)
        for i in range(6):
            with pytest.raises(EditRefused, match="safety system"):
                editor.edit(*cases[0], seed=i)
        assert all(s["alive"] and s["removals"] == 0 for s in editor.usage()["endpoints"])
        assert one.requests["/v1/images/edits"] == two.requests["/v1/images/edits"] == 3


def test_identity_is_the_same_for_one_or_several_servers(monkeypatch) -> None:
    monkeypatch.setenv("OMNI_KEY", KEY)
    one = openai_images.from_options({"model": "m", "base_url": "http://a:1/v1", "api_key_env": "OMNI_KEY"})
    many = _editor(["http://a:1/v1", "http://b:2/v1"], monkeypatch, Clock(), model="m")
    assert one.identity() == many.identity()
    assert "endpoints" not in one.usage() and len(many.usage()["endpoints"]) == 2


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"base_url": "http://a/v1", "base_urls": ["http://b/v1"]}, "one of base_url or base_urls"),
        ({"base_urls": []}, "non-empty list"),
        ({"base_urls": ["http://a/v1", "http://a/v1"]}, "twice"),
        ({"base_urls": ["http://u:p@a/v1"]}, "credentials"),
        ({"base_urls": ["http://a/v1"], "dead_after": 0}, "dead_after"),
        ({"base_url": "http://a/v1", "cooldown_s": 5}, "applies to base_urls"),
    ],
)
def test_bad_pool_options_are_refused(options, message) -> None:
    with pytest.raises(OptionsError, match=message):
        openai_images.from_options({"model": "m", "api_key_env": None, **options})
