"""The OpenAI-compatible chat backend against loopback servers backed by the calibration world."""

from __future__ import annotations

import json
import logging

import httpx2
import numpy as np
import pytest
from support.backends import build
from support.hang_guard import hang_limit, scaled
from support.loopback import (
    UNTIL_CLOSED,
    CalibrationWorld,
    FaultPlan,
    Loopback,
    image_from_uri,
    openai_retry_waits,
)

from edct_task.calibration import ReferenceVLM, generate_samples
from model_adapters.contracts import ChatMessage, Completion, GenerationParams, TokenUsage
from model_adapters.endpoints import EndpointPool, redact_url
from model_adapters.errors import (
    BackendError,
    BadInput,
    OptionsError,
    PermanentBackendError,
    RateLimited,
    Timeout,
    TransientBackendError,
)
from model_adapters.images import data_uri, png_bytes
from model_adapters.openai_chat import OpenAIText, OpenAIVisionChat, client_from_options
from model_adapters.transport import MalformedReply, Scrubber

PARAMS = GenerationParams(max_new_tokens=4096, seed=3)


@pytest.fixture
def retry_log(caplog):
    """The openai client's retry log lines (they carry the waits it chose)."""
    caplog.set_level(logging.INFO, logger="openai")
    return caplog


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
    opts = {"model": "loopback-vlm", "timeout_s": hang_limit(5.0)}  # a hang guard: no stall here
    opts.update({"base_urls": url} if isinstance(url, list) else {"base_url": url})
    opts.update(extra)
    return opts


def _text(url, clock=None, transport=None, **extra) -> OpenAIText:
    kw = {"clock": clock} if clock is not None else {}
    return OpenAIText(client_from_options(_options(url, **extra), transport=transport, **kw))


def _vlm(url, **extra) -> OpenAIVisionChat:
    return OpenAIVisionChat(client_from_options(_options(url, **extra)))


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
    assert all(isinstance(c, Completion) for c in got)
    assert [c.text for c in got] == [c.text for c in expected]
    assert all(c.reasoning is None and c.usage.prompt_tokens > 0 for c in got)
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


def test_reasoning_content_is_kept_apart_from_the_text(world) -> None:
    prompt = "hello"
    with Loopback(world, reasoning=True) as server:
        reply = _text(server.url + "/v1").complete(prompt, PARAMS)
    assert reply.text == world.complete(prompt, PARAMS) and "<think>" not in reply.text
    assert reply.reasoning == "The user wants an answer. Let me look at the evidence carefully."


def test_inline_thinking_stays_in_the_text() -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        message = {"role": "assistant", "content": "<think>hm</think>\nAnswer: 4"}
        usage = {
            "prompt_tokens": 9,
            "completion_tokens": 5,
            "completion_tokens_details": {"reasoning_tokens": 2},
        }
        return httpx2.Response(
            200, json={**_REPLY, "choices": [{"index": 0, "message": message}], "usage": usage}
        )

    llm = _text("http://mock/v1", transport=httpx2.MockTransport(handler))
    assert llm.complete("2+2?", PARAMS) == Completion(
        "<think>hm</think>\nAnswer: 4",
        None,
        TokenUsage(prompt_tokens=9, completion_tokens=5, reasoning_tokens=2),
    )
    assert llm.usage()["reasoning_tokens"] == 2


def test_a_failing_conversation_fails_alone(world, samples) -> None:
    convs = _conversations(samples[:2])
    convs.insert(1, [ChatMessage("user", "What is this?", (samples[0].image,))])  # not a calibration question
    with Loopback(world) as server:
        out = _vlm(server.url + "/v1").generate(convs, PARAMS)
    assert isinstance(out[1], PermanentBackendError) and "HTTP 400" in str(out[1])
    assert all(isinstance(o, Completion) for i, o in enumerate(out) if i != 1)


# -- retries ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("retry_after", "retry_after_ms", "wait"),
    [("0.25", None, 0.25), ("30", "150", 0.15)],  # the client prefers retry-after-ms
)
def test_retry_after_is_honoured(world, retry_log, retry_after, retry_after_ms, wait) -> None:
    faults = FaultPlan(
        rate=1.0,
        kinds=("rate_limited",),
        max_consecutive=2,
        retry_after=retry_after,
        retry_after_ms=retry_after_ms,
    )
    with Loopback(world, faults=faults) as server:
        llm = _text(server.url + "/v1")
        reply = llm.complete("hi", PARAMS)
    assert reply.text == world.complete("hi", PARAMS)
    assert openai_retry_waits(retry_log.records) == [wait, wait]  # its own backoff starts at >= 0.375
    usage = llm.usage()
    assert usage["retries"] == 2 and usage["errors"] == {"rate_limited": 2}
    assert usage["requests"] == 1 and usage["attempts"] == 3 and usage["failures"] == 0


def test_a_very_long_retry_after_is_not_waited_for(world, retry_log) -> None:
    faults = FaultPlan(rate=1.0, kinds=("rate_limited",), retry_after="3600", retry_after_ms=None)
    with Loopback(world, faults=faults) as server:
        llm = _text(server.url + "/v1")
        with pytest.raises(RateLimited) as info:
            llm.complete("hi", PARAMS)
    assert info.value.retry_after == 3600.0 and "HTTP 429" in str(info.value)
    assert openai_retry_waits(retry_log.records) == [] and llm.usage()["attempts"] == 1


def test_every_fault_kind_is_retried_until_success(world, samples) -> None:
    convs = _conversations(samples)
    expected = ReferenceVLM("faithful").generate(convs, PARAMS)
    faults = FaultPlan(rate=0.6, max_consecutive=2, stall_s=UNTIL_CLOSED)
    # a stall always times out; a normal reply does not, or (a busy machine) is retried like a fault:
    # max_retries (6) outlasts the two faults a request meets
    timeout_s = scaled(0.4)
    with Loopback(world, faults=faults) as server:
        vlm = _vlm(server.url + "/v1", timeout_s=timeout_s, concurrency=4)
        got = vlm.generate(convs, PARAMS)
        llm = _text(server.url + "/v1", timeout_s=timeout_s, concurrency=4)
        texts = llm.client.map(lambda i: llm.complete(f"prompt {i}", PARAMS).text, list(range(12)))
    assert [c.text for c in got] == [c.text for c in expected]
    assert texts == [world.complete(f"prompt {i}", PARAMS) for i in range(12)]
    seen = set(vlm.usage()["errors"]) | set(llm.usage()["errors"])
    assert seen == {"rate_limited", "transient", "timeout", "malformed_reply"}  # dropped → transient
    assert set(faults.injected) == {"rate_limited", "server_error", "timeout", "malformed", "dropped"}
    for usage in (vlm.usage(), llm.usage()):
        assert (
            usage["attempts"]
            == usage["requests"] + usage["retries"]
            == usage["requests"] + sum(usage["errors"].values())
        )


def test_exhausted_retries_raise_the_last_error(world, retry_log) -> None:
    faults = FaultPlan(rate=1.0, kinds=("server_error",), max_consecutive=10)
    with Loopback(world, faults=faults) as server:
        llm = _text(server.url + "/v1", max_retries=2)
        with pytest.raises(TransientBackendError, match="HTTP 500: internal server error"):
            llm.complete("hi", PARAMS)
    assert len(openai_retry_waits(retry_log.records)) == 2
    usage = llm.usage()
    assert (usage["requests"], usage["attempts"], usage["failures"]) == (1, 3, 1)
    assert usage["errors"] == {"transient": 3}


def test_client_errors_are_not_retried(world, samples, retry_log) -> None:
    with Loopback(world) as server:
        vlm = _vlm(server.url + "/v1")
        out = vlm.generate([[ChatMessage("user", "What is this?", (samples[0].image,))]], PARAMS)
    assert isinstance(out[0], PermanentBackendError) and openai_retry_waits(retry_log.records) == []
    usage = vlm.usage()  # a failed request is still a request (results.json showed requests 0)
    assert (usage["requests"], usage["attempts"], usage["failures"], usage["retries"]) == (1, 1, 1, 0)


_REPLY = {"id": "x", "object": "chat.completion", "created": 0, "model": "m"}
_OK = {**_REPLY, "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}]}


@pytest.mark.parametrize(
    ("reply", "error", "text"),
    [
        (httpx2.ReadTimeout("slow"), Timeout, "timed out"),
        (httpx2.ConnectError("refused"), TransientBackendError, "connection failed (ConnectError: refused)"),
        (httpx2.RemoteProtocolError("dropped"), TransientBackendError, "RemoteProtocolError"),
        (httpx2.Response(429, headers={"retry-after": "600"}), RateLimited, "HTTP 429"),
        (
            httpx2.Response(503, json={"error": {"message": "overloaded"}}),
            TransientBackendError,
            "overloaded",
        ),
        (httpx2.Response(401, json={"error": {"message": "bad key"}}), PermanentBackendError, "$MOCK_KEY"),
        (httpx2.Response(403), PermanentBackendError, "HTTP 403"),
        (httpx2.Response(400, json={"error": {"message": "no"}}), PermanentBackendError, "HTTP 400: no"),
        (httpx2.Response(413), BadInput, "HTTP 413"),
        (httpx2.Response(200, content=b'{"choices": [{"mess'), MalformedReply, "not valid JSON (19 bytes)"),
        (httpx2.Response(200, json={**_REPLY, "choices": []}), MalformedReply, "no choices"),
        (
            httpx2.Response(200, json={"error": {"code": 429, "message": "upstream busy"}}),
            RateLimited,
            "busy",
        ),
        (httpx2.Response(200, json={"error": "boom"}), TransientBackendError, "HTTP 502: boom"),
    ],
)
def test_client_errors_map_into_the_hierarchy_at_one_boundary(reply, error, text, monkeypatch) -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        if isinstance(reply, Exception):
            raise reply
        return reply

    monkeypatch.setenv("MOCK_KEY", "sk-mock-0123456789")
    llm = _text(
        "http://mock/v1", transport=httpx2.MockTransport(handler), max_retries=0, api_key_env="MOCK_KEY"
    )
    with pytest.raises(BackendError) as info:
        llm.complete("hi", PARAMS)
    assert type(info.value) is error and text in str(info.value)
    assert llm.usage()["errors"] == {error.kind: 1}


# -- secrets ------------------------------------------------------------------------------------


def test_key_from_environment_is_sent_and_never_shown(world, monkeypatch) -> None:
    key = "sk-loopback-0123456789abcdef"
    monkeypatch.setenv("LOOPBACK_KEY", key)
    monkeypatch.setenv("WRONG_KEY", "sk-wrong-key-9876543210")
    with Loopback(world, api_key=key) as server:
        good = _text(server.url + "/v1", api_key_env="LOOPBACK_KEY")
        good.complete("hi", PARAMS)
        sent = {k.lower(): v for k, v in server.headers_seen[-1].items()}
        assert sent["authorization"] == f"Bearer {key}"
        bad = _text(server.url + "/v1", api_key_env="WRONG_KEY")
        with pytest.raises(PermanentBackendError) as info:
            bad.complete("hi", PARAMS)
    message = str(info.value)
    assert "HTTP 401" in message and "WRONG_KEY" in message
    assert "sk-wrong" not in message and "9876543210" not in message
    assert key not in repr(good.identity()) + repr(good.usage())


def test_nothing_from_the_environment_reaches_the_server_unasked(world, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-ambient-openai-key-000")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-ambient")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-ambient")
    monkeypatch.setenv("OPENAI_CUSTOM_HEADERS", "X-Ambient: 1\nAuthorization: Bearer sk-ambient-header-111")
    monkeypatch.setenv("MINE", "sk-mine-0123456789")
    with Loopback(world) as server:
        _text(server.url + "/v1").complete("hi", PARAMS)  # no api_key_env: no key at all
        _text(server.url + "/v1", api_key_env="MINE", headers={"X-Title": "edct"}).complete("hi", PARAMS)
        anonymous, keyed = ({k.lower(): v for k, v in h.items()} for h in server.headers_seen)
    assert "authorization" not in anonymous and keyed["authorization"] == "Bearer sk-mine-0123456789"
    for headers in (anonymous, keyed):
        assert not {"openai-organization", "openai-project", "x-ambient"} & set(headers)
        assert "ambient" not in json.dumps(headers)
    assert keyed["x-title"] == "edct"


def test_header_values_are_scrubbed_from_messages(world, monkeypatch) -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        echoed = request.headers["x-tenant"]
        return httpx2.Response(400, json={"error": {"message": f"unknown tenant {echoed}"}})

    llm = _text("http://mock/v1", transport=httpx2.MockTransport(handler), headers={"X-Tenant": "acme-4711"})
    with pytest.raises(PermanentBackendError) as info:
        llm.complete("hi", PARAMS)
    assert "unknown tenant [redacted]" in str(info.value)
    assert "acme-4711" not in repr(llm.identity()) + repr(llm.usage())


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
        ({"model": "m", "base_url": "http://x/v1", "backoff_base_s": 1}, "openai client backs off by itself"),
    ],
)
def test_bad_options_fail_at_start_up(options, message) -> None:
    with pytest.raises(OptionsError, match=message):
        build("text", "openai-chat", options)


def test_identity_is_endpoint_independent() -> None:
    a = build("target", "openai-chat", {"model": "m", "base_url": "http://a:1/v1", "revision": "abc"})
    b = build(
        "target",
        "openai-chat",
        {
            "model": "m",
            "base_urls": ["http://b:2/v1", "http://c:3/v1"],
            "revision": "abc",
            "concurrency": 3,
            "timeout_s": 9,
        },
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
            "structured": "auto",
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
    pool.release(second, None)
    assert pool.acquire() is second  # the only one with nothing in flight
    pool.release(first, None)
    pool.release(third, None)
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
        pool.release(a, "timeout")
        pool.release(ep if ep is not a else pool.endpoints[1], None)
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
    pool.release(ep, "transient")
    assert ep.alive and pool.acquire() is ep


def test_requests_spread_across_servers_and_avoid_a_dead_one(world, monkeypatch) -> None:
    clock = Clock()
    key = "sk-cluster-key-42424242"
    monkeypatch.setenv("CLUSTER_KEY", key)
    with (
        Loopback(world, api_key=key) as one,
        Loopback(world, api_key=key) as two,
        Loopback(world, api_key=key, down=True) as dead,
    ):
        llm = _text(
            [one.url + "/v1", two.url + "/v1", dead.url + "/v1"],
            clock=clock,
            dead_after=2,
            cooldown_s=60,
            concurrency=4,
            api_key_env="CLUSTER_KEY",
        )
        replies = llm.client.map(lambda i: llm.complete(f"p{i}", PARAMS), list(range(40)))
        assert all(isinstance(r, Completion) for r in replies)
        served = {s["endpoint"]: s for s in llm.usage()["endpoints"]}
        assert one.requests["/v1/chat/completions"] > 5 and two.requests["/v1/chat/completions"] > 5
        assert not served[dead.url + "/v1"]["alive"] and served[dead.url + "/v1"]["removals"] == 1
        dead.down = False
        clock.now += 61
        refused = dead.requests["/v1/chat/completions"]  # the attempts it dropped while down
        llm.complete("after recovery", PARAMS)
        for i in range(6):
            llm.complete(f"q{i}", PARAMS)
        assert dead.requests["/v1/models"] == 1  # the health check (it needs the key)
        assert dead.requests["/v1/chat/completions"] > refused
        assert {s["endpoint"]: s for s in llm.usage()["endpoints"]}[dead.url + "/v1"]["alive"]
    assert llm.usage()["failures"] == 0


def test_a_retry_goes_to_another_endpoint_with_its_own_host_header(retry_log) -> None:
    seen: list[tuple[str, str]] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append((str(request.url), request.headers["host"]))
        if request.url.host == "down":
            raise httpx2.ConnectError("refused")
        return httpx2.Response(200, json=_OK)

    llm = _text(["http://down:8000/v1", "http://up:9000/api/v1"], transport=httpx2.MockTransport(handler))
    assert llm.complete("hi", PARAMS).text == "ok"
    assert seen == [
        ("http://down:8000/v1/chat/completions", "down:8000"),
        ("http://up:9000/api/v1/chat/completions", "up:9000"),
    ]
    assert len(openai_retry_waits(retry_log.records)) == 1
    down, up = llm.usage()["endpoints"]
    assert (down["requests"], down["errors"], up["requests"], up["errors"]) == (1, 1, 1, 0)


def test_empty_prompt_and_empty_image_are_bad_input(world) -> None:
    from PIL import Image

    with pytest.raises(BadInput):
        png_bytes(Image.new("RGB", (0, 0)))
    with Loopback(world) as server, pytest.raises(BadInput):
        _text(server.url + "/v1").complete("   ", PARAMS)


def test_completion_carries_the_finish_reason_and_a_refusal_is_a_content_filter(world) -> None:
    from openai.types.chat import ChatCompletion

    from model_adapters.openai_wire import completion_of

    with Loopback(world) as server:
        reply = OpenAIText(client_from_options(_options(server.url + "/v1"))).complete("Hello?", PARAMS)
    assert reply.finish_reason == "stop"

    def chat(message: dict, finish: str) -> ChatCompletion:
        return ChatCompletion.model_validate(
            {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            }
        )

    cut = completion_of(chat({"role": "assistant", "content": "AC: 1\nEF:"}, "length"))
    assert (cut.text, cut.finish_reason) == ("AC: 1\nEF:", "length")
    refused = completion_of(chat({"role": "assistant", "content": None, "refusal": "I can't help."}, "stop"))
    assert (refused.text, refused.finish_reason) == ("I can't help.", "content_filter")
