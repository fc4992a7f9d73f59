"""The OpenAI-compatible chat backend against loopback servers backed by the calibration world."""

from __future__ import annotations

import email.utils
import random

import httpx
import numpy as np
import pytest
from support.loopback import CalibrationWorld, FaultPlan, Loopback, image_from_uri

from edct_task.calibration import ReferenceVLM, generate_samples
from model_adapters.contracts import ChatMessage, GenerationParams
from model_adapters.endpoints import EndpointPool, redact_url
from model_adapters.errors import (
    BadInput,
    OptionsError,
    PermanentBackendError,
    RateLimited,
    Timeout,
    TransientBackendError,
)
from model_adapters.factories import FACTORIES
from model_adapters.images import data_uri, png_bytes
from model_adapters.openai_chat import OpenAIText, OpenAIVisionChat, client_from_options
from model_adapters.retry import RetryPolicy, retry_after_seconds
from model_adapters.transport import Scrubber

PARAMS = GenerationParams(max_new_tokens=4096, seed=3)


class Sleeps:
    """An injectable sleep that records the waits instead of waiting."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def world() -> CalibrationWorld:
    return CalibrationWorld("faithful")


@pytest.fixture(scope="module")
def samples():
    return generate_samples(n=6, seed=0)


def _options(url: str | list[str], **extra):
    opts = {"model": "loopback-vlm", "timeout_s": 5.0, "backoff_base_s": 0.01}
    opts.update({"base_urls": url} if isinstance(url, list) else {"base_url": url})
    opts.update(extra)
    return opts


def _text(url, sleep=None, clock=None, **extra) -> OpenAIText:
    kw = {"sleep": sleep or Sleeps(), "rng": random.Random(0)}
    if clock is not None:
        kw["clock"] = clock
    return OpenAIText(client_from_options(_options(url, **extra), **kw))


def _vlm(url, sleep=None, **extra) -> OpenAIVisionChat:
    return OpenAIVisionChat(
        client_from_options(_options(url, **extra), sleep=sleep or Sleeps(), rng=random.Random(0))
    )


def _conversations(samples) -> list[list[ChatMessage]]:
    convs = []
    for s in samples:
        first = [ChatMessage("user", s.question, (s.image,))]
        convs.append(first)
        convs.append(
            [
                *first,
                ChatMessage("assistant", "A guess."),
                ChatMessage("user", "Why? List the visual features that led to your answer."),
            ]
        )
    return convs


# -- wire format --------------------------------------------------------------------------------


def test_image_travels_as_lossless_png_data_uri(samples) -> None:
    image = samples[0].image
    uri = data_uri(image)
    assert uri.startswith("data:image/png;base64,")
    back = image_from_uri(uri)
    assert np.array_equal(np.asarray(back), np.asarray(image))
    assert back.info["edct_scene"] == image.info["edct_scene"]  # project metadata travels


def test_target_replies_match_the_in_process_reference(world, samples) -> None:
    convs = _conversations(samples)
    expected = ReferenceVLM("faithful").generate(convs, PARAMS)
    with Loopback(world) as server:
        vlm = _vlm(server.url + "/v1")
        got = vlm.generate(convs, PARAMS)
        body = server.bodies[0]
    assert got == expected
    assert body["max_tokens"] == 4096 and body["seed"] == 3 and body["temperature"] == 0.0
    assert vlm.usage()["images"] == len(convs) and vlm.usage()["requests"] == len(convs)


def test_request_fields_follow_options(world) -> None:
    with Loopback(world) as server:
        llm = _text(
            server.url + "/v1",
            max_tokens_field="max_completion_tokens",
            max_tokens_cap=1000,
            omit=["temperature", "top_p"],
            extra_body={"chat_template_kwargs": {"enable_thinking": True}},
        )
        llm.complete("Say something.", GenerationParams(max_new_tokens=8192))
        body = server.bodies[0]
    assert body["max_completion_tokens"] == 1000 and "max_tokens" not in body
    assert "temperature" not in body and "top_p" not in body and body["seed"] == 0
    assert body["chat_template_kwargs"] == {"enable_thinking": True}
    ident = llm.identity()
    assert ident["extra_body"] == {"chat_template_kwargs": {"enable_thinking": True}}
    assert ident["max_tokens_cap"] == 1000 and ident["model"] == "loopback-vlm"


def test_reasoning_content_is_kept_as_a_think_block(world) -> None:
    prompt = "hello"
    with Loopback(world, reasoning=True) as server:
        reply = _text(server.url + "/v1").complete(prompt, PARAMS)
    plain = world.complete(prompt, PARAMS)
    assert reply.startswith("<think>The user wants an answer.")
    assert reply.endswith("</think>\n" + plain)


def test_a_failing_conversation_fails_alone(world, samples) -> None:
    convs = _conversations(samples[:2])
    convs.insert(1, [ChatMessage("user", "What is this?", (samples[0].image,))])  # not a calibration question
    with Loopback(world) as server:
        out = _vlm(server.url + "/v1").generate(convs, PARAMS)
    assert isinstance(out[1], PermanentBackendError) and "HTTP 400" in str(out[1])
    assert all(isinstance(o, str) for i, o in enumerate(out) if i != 1)


# -- retries ------------------------------------------------------------------------------------


def test_retry_after_is_honoured(world) -> None:
    sleeps = Sleeps()
    faults = FaultPlan(
        rate=1.0, kinds=("rate_limited",), max_consecutive=2, retry_after="7", retry_after_ms=None
    )
    with Loopback(world, faults=faults) as server:
        llm = _text(server.url + "/v1", sleep=sleeps)
        reply = llm.complete("hi", PARAMS)
    assert reply == world.complete("hi", PARAMS)
    assert len(sleeps.waits) == 2 and all(w >= 7.0 for w in sleeps.waits)
    usage = llm.usage()
    assert usage["retries"] == 2 and usage["errors"] == {"rate_limited": 2} and usage["requests"] == 1


def test_every_fault_kind_is_retried_until_success(world, samples) -> None:
    convs = _conversations(samples)
    expected = ReferenceVLM("faithful").generate(convs, PARAMS)
    faults = FaultPlan(rate=0.6, max_consecutive=2, stall_s=1.0)
    with Loopback(world, faults=faults) as server:
        vlm = _vlm(server.url + "/v1", timeout_s=0.4, concurrency=4)
        got = vlm.generate(convs, PARAMS)
        llm = _text(server.url + "/v1", timeout_s=0.4)
        texts = [llm.complete(f"prompt {i}", PARAMS) for i in range(12)]
    assert got == expected
    assert texts == [world.complete(f"prompt {i}", PARAMS) for i in range(12)]
    seen = set(vlm.usage()["errors"]) | set(llm.usage()["errors"])
    assert seen == {"rate_limited", "transient", "timeout", "malformed_reply"}  # dropped → transient
    assert set(faults.injected) == {"rate_limited", "server_error", "timeout", "malformed", "dropped"}


def test_exhausted_retries_raise_the_last_error(world) -> None:
    sleeps = Sleeps()
    faults = FaultPlan(rate=1.0, kinds=("server_error",), max_consecutive=10)
    with Loopback(world, faults=faults) as server:
        llm = _text(server.url + "/v1", sleep=sleeps, max_retries=3)
        with pytest.raises(TransientBackendError, match="HTTP 500"):
            llm.complete("hi", PARAMS)
    assert len(sleeps.waits) == 3 and llm.usage()["failures"] == 1


def test_client_errors_are_not_retried(world, samples) -> None:
    sleeps = Sleeps()
    with Loopback(world) as server:
        vlm = _vlm(server.url + "/v1", sleep=sleeps)
        out = vlm.generate([[ChatMessage("user", "What is this?", (samples[0].image,))]], PARAMS)
    assert isinstance(out[0], PermanentBackendError) and sleeps.waits == []


def test_backoff_is_exponential_with_jitter_and_a_cap() -> None:
    class Fixed(random.Random):
        def random(self) -> float:
            return 1.0

    full = RetryPolicy(base_delay=1.0, max_delay=10.0, jitter=0.0)
    assert [full.delay(n) for n in range(6)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    jittered = RetryPolicy(base_delay=1.0, max_delay=10.0, jitter=0.5, rng=Fixed())
    assert jittered.delay(2) == 2.0  # the lowest point of [2, 4]
    spread = RetryPolicy(base_delay=1.0, jitter=0.5, rng=random.Random(1))
    waits = {round(spread.delay(3), 6) for _ in range(20)}
    assert len(waits) > 10 and all(4.0 <= w <= 8.0 for w in waits)
    assert full.delay(0, RateLimited("slow down", retry_after=30.0)) == 30.0


def test_a_very_long_retry_after_is_not_waited_for() -> None:
    sleeps = Sleeps()
    policy = RetryPolicy(max_retry_after=60.0, sleep=sleeps)

    def attempt() -> str:
        raise RateLimited("quota", retry_after=3600.0)

    with pytest.raises(RateLimited):
        policy.call(attempt)
    assert sleeps.waits == []


def test_retry_after_header_forms() -> None:
    assert retry_after_seconds({"Retry-After": "12"}) == 12.0
    assert retry_after_seconds({"retry-after-ms": "250", "Retry-After": "1"}) == 0.25
    date = email.utils.formatdate(1_000_030.0, usegmt=True)
    assert retry_after_seconds({"Retry-After": date}, now=lambda: 1_000_000.0) == 30.0
    assert retry_after_seconds({"Retry-After": "soon"}) is None
    assert retry_after_seconds({}) is None


# -- secrets ------------------------------------------------------------------------------------


def test_key_from_environment_is_sent_and_never_shown(world, monkeypatch) -> None:
    key = "sk-loopback-0123456789abcdef"
    monkeypatch.setenv("LOOPBACK_KEY", key)
    monkeypatch.setenv("WRONG_KEY", "sk-wrong-key-9876543210")
    with Loopback(world, api_key=key) as server:
        good = _text(server.url + "/v1", api_key_env="LOOPBACK_KEY")
        good.complete("hi", PARAMS)
        assert server.headers_seen[-1]["Authorization"] == f"Bearer {key}"
        bad = _text(server.url + "/v1", api_key_env="WRONG_KEY")
        with pytest.raises(PermanentBackendError) as info:
            bad.complete("hi", PARAMS)
    message = str(info.value)
    assert "HTTP 401" in message and "WRONG_KEY" in message
    assert "sk-wrong" not in message and "9876543210" not in message
    assert key not in repr(good.identity()) + repr(good.usage())


def test_scrubber_removes_key_shaped_text() -> None:
    scrub = Scrubber(["hunter2-secret"])
    text = scrub("key hunter2-secret, Bearer abc.def, sk-proj-AAAAAAAAAA and AIzaSyA1234567890abc")
    assert "hunter2" not in text and "abc.def" not in text and "sk-proj" not in text and "AIza" not in text


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"base_url": "http://x/v1"}, "needs model"),
        ({"model": "m"}, "exactly one of base_url or base_urls"),
        ({"model": "m", "base_url": "http://x/v1", "base_urls": ["http://y/v1"]}, "exactly one"),
        ({"model": "m", "base_url": "https://user:pw@x/v1"}, "must not carry credentials"),
        ({"model": "m", "base_url": "https://x/v1?key=abc"}, "must not carry credentials"),
        (
            {"model": "m", "base_url": "http://x/v1", "headers": {"Authorization": "Bearer a"}},
            "look like credentials",
        ),
        ({"model": "m", "base_url": "http://x/v1", "api_key_env": "NOT_SET_ANYWHERE_42"}, "is not set"),
        (
            {"model": "m", "base_url": "http://x/v1", "api_key_env": "sk-literal-key"},
            "must name an environment",
        ),
        ({"model": "m", "base_url": "http://x/v1", "temprature": 0.2}, "does not take option"),
        ({"model": "m", "base_url": "http://x/v1", "prices": {"input": 1}}, "unknown field"),
    ],
)
def test_bad_options_fail_at_start_up(options, message) -> None:
    with pytest.raises(OptionsError, match=message):
        FACTORIES["text"]["openai-chat"](options)


def test_identity_is_endpoint_independent() -> None:
    a = FACTORIES["target"]["openai-chat"]({"model": "m", "base_url": "http://a:1/v1", "revision": "abc"})
    b = FACTORIES["target"]["openai-chat"](
        {
            "model": "m",
            "base_urls": ["http://b:2/v1", "http://c:3/v1"],
            "revision": "abc",
            "concurrency": 3,
            "timeout_s": 9,
        }
    )
    assert (
        a.identity()
        == b.identity()
        == {
            "backend": "openai-chat",
            "model": "m",
            "revision": "abc",
            "max_tokens_field": "max_tokens",
            "max_tokens_cap": None,
            "omit": [],
            "extra_body": {},
        }
    )
    assert redact_url("https://u:p@host:8000/v1/?key=1#x") == "https://host:8000/v1"


# -- accounting ---------------------------------------------------------------------------------


def test_tokens_and_cost_from_a_price_table(world) -> None:
    with Loopback(world) as server:
        llm = _text(server.url + "/v1", prices={"input_per_million": 2.0, "output_per_million": 10.0})
        for i in range(3):
            llm.complete(f"prompt number {i}", PARAMS)
    u = llm.usage()
    assert u["requests"] == 3 and u["prompt_tokens"] > 0 and u["completion_tokens"] > 0
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
    assert u["cost_usd"] == pytest.approx((u["prompt_tokens"] * 2 + u["completion_tokens"] * 10) / 1e6)
    assert u["cost_source"] == "price_table" and u["backend"] == "openai-chat"


def test_reported_cost_wins_over_the_price_table(world) -> None:
    with Loopback(world, report_cost=True) as server:
        llm = _text(server.url + "/v1", prices={"input_per_million": 2.0})
        llm.complete("a", PARAMS)
        llm.complete("b", PARAMS)
    assert llm.usage()["cost_usd"] == pytest.approx(0.002) and llm.usage()["cost_source"] == "reported"


# -- several endpoints --------------------------------------------------------------------------


def test_pool_picks_the_endpoint_with_least_outstanding_work() -> None:
    pool = EndpointPool(["http://a/v1", "http://b/v1", "http://c/v1"])
    first, second, third = pool.acquire(), pool.acquire(), pool.acquire()
    assert {first.label, second.label, third.label} == {"http://a/v1", "http://b/v1", "http://c/v1"}
    pool.release(second, "ok")
    assert pool.acquire() is second  # the only one with nothing in flight
    pool.release(first, "ok")
    pool.release(third, "ok")
    fourth = pool.acquire()
    assert fourth in (first, third)  # fewest served among idle ones


def test_dead_endpoint_leaves_and_returns_after_a_health_check() -> None:
    clock = Clock()
    healthy = {"http://a/v1": True}
    pool = EndpointPool(
        ["http://a/v1", "http://b/v1"],
        dead_after=2,
        cooldown_s=30,
        clock=clock,
        health=lambda e: healthy.get(e.label, True),
    )
    a = next(e for e in pool.endpoints if e.label == "http://a/v1")
    for _ in range(2):
        ep = pool.acquire()
        pool.acquire()  # keep both busy so both are used
        pool.release(a, "down")
        pool.release(ep if ep is not a else pool.endpoints[1], "ok")
    assert not a.alive and a.removals == 1
    assert all(pool.acquire() is not a for _ in range(5))
    clock.now += 31
    healthy["http://a/v1"] = False
    pool.acquire()
    assert not a.alive  # failed its health check: another cool-down
    clock.now += 31
    healthy["http://a/v1"] = True
    pool.acquire()
    assert a.alive


def test_the_last_live_endpoint_is_never_removed() -> None:
    pool = EndpointPool(["http://only/v1"], dead_after=1)
    ep = pool.acquire()
    pool.release(ep, "down")
    assert ep.alive and pool.acquire() is ep


def test_requests_spread_across_servers_and_avoid_a_dead_one(world) -> None:
    clock = Clock()
    with Loopback(world) as one, Loopback(world) as two, Loopback(world, down=True) as dead:
        llm = _text(
            [one.url + "/v1", two.url + "/v1", dead.url + "/v1"],
            clock=clock,
            dead_after=2,
            cooldown_s=60,
            concurrency=4,
        )
        replies = llm.client.map(lambda i: llm.complete(f"p{i}", PARAMS), list(range(40)))
        assert all(isinstance(r, str) for r in replies)
        served = {s["endpoint"]: s for s in llm.usage()["endpoints"]}
        assert one.requests["/v1/chat/completions"] > 5 and two.requests["/v1/chat/completions"] > 5
        assert not served[dead.url + "/v1"]["alive"] and served[dead.url + "/v1"]["removals"] == 1
        dead.down = False
        clock.now += 61
        llm.complete("after recovery", PARAMS)
        for i in range(6):
            llm.complete(f"q{i}", PARAMS)
        assert dead.requests["/v1/models"] == 1  # the health check
        assert dead.requests["/v1/chat/completions"] >= 1
    assert llm.usage()["failures"] == 0


def test_transport_errors_map_into_the_hierarchy() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if "timeout" in request.url.path:
            raise httpx.ReadTimeout("slow", request=request)
        raise httpx.ConnectError("refused", request=request)

    from model_adapters.transport import map_transport_error

    req = httpx.Request("GET", "http://x/timeout")
    transport = httpx.MockTransport(handler)
    with httpx.Client(transport=transport) as c:
        for path, kind in (("/timeout", Timeout), ("/refused", TransientBackendError)):
            with pytest.raises(httpx.HTTPError) as info:
                c.get("http://x" + path)
            assert isinstance(map_transport_error(info.value, "call", Scrubber()), kind)
    assert req.url.path == "/timeout"


def test_empty_prompt_and_empty_image_are_bad_input(world) -> None:
    from PIL import Image

    with pytest.raises(BadInput):
        png_bytes(Image.new("RGB", (0, 0)))
    with Loopback(world) as server, pytest.raises(BadInput):
        _text(server.url + "/v1").complete("   ", PARAMS)
