"""``edct run`` end to end with every model role behind loopback servers speaking the real protocols.

The servers are backed by the calibration world, so the scores must equal those of the in-process
reference backends — with about 20% of the calls failing on the way (429 with Retry-After, 500,
stalls past the client's timeout, malformed JSON, dropped connections) — and the API key must
not appear in any file the run writes.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.hang_guard import hang_limit, scaled
from support.loopback import CHAT_FAULTS, UNTIL_CLOSED, CalibrationWorld, FaultPlan, Loopback

from edct_task.config import calibration_config, config_from_dict
from edct_task.run.runner import run

N = int(__import__("os").environ.get("EDCT_E2E_N", "100"))
BEHAVIOR = "mixed:0.5"
KEY = "sk-loopback-e2e-7f3a9c1d5b2e8f40"


pytestmark = pytest.mark.slow  # whole runs on loopback servers with faults: make test, not make test-fast


def _config(out: Path, roles: dict | None = None, cache_from: Path | None = None):
    """The calibration run; ``cache_from`` seeds the stage cache with another run's (verification
    results are keyed on image content and the detector, not on the chat backends, so they are
    reused when the edited images are byte-identical — which the equality of scores then shows)."""
    raw = calibration_config(BEHAVIOR, n=N, output_dir=out).model_dump(mode="json")
    if cache_from is not None:
        shutil.copytree(cache_from, out / "cache")
    raw["progress"] = False
    raw["bootstrap_resamples"] = 500
    raw["limits"]["target_concurrency"] = 2
    if roles:
        raw["roles"].update(roles)
    return config_from_dict(raw)


def _chat(urls: list[str], model: str) -> dict:
    return {
        "backend": "openai-chat",
        "model": model,
        "base_urls": urls,
        "api_key_env": "EDCT_LOOPBACK_KEY",
        # a stalled reply (UNTIL_CLOSED) times out; a normal one does not, and the odd one a busy
        # machine slows past this is retried like a fault (max_retries)
        "timeout_s": scaled(2.0),
        "max_retries": 6,  # the openai client's backoff: 0.5 s doubling, or the server's Retry-After
        "concurrency": 8,
        "dead_after": 6,  # random faults are not a dead server: keep both in rotation
        "cooldown_s": 0.2,
        "prices": {"input_per_million": 1.0, "output_per_million": 2.0},
    }


def _essentials(record) -> dict:
    steps = [
        {
            "verified": s.verified,
            "image": s.image,
            "attempts": [(a.image, a.failure) for a in s.attempts],
            "requery": s.requery.model_dump() if s.requery else None,
            "binary": (s.binary.ac, s.binary.ef) if s.binary else None,
            "graded": s.graded.score if s.graded else None,
        }
        for s in record.steps
    ]
    return {
        "status": record.status,
        "reason": record.reason,
        "baseline": record.baseline.model_dump() if record.baseline else None,
        "concepts": record.concepts.concepts if record.concepts else None,
        "scores": record.scores.model_dump() if record.scores else None,
        "steps": steps,
    }


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return run(_config(tmp_path_factory.mktemp("reference")))


def test_loopback_run_with_faults_matches_the_in_process_run(reference, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("EDCT_LOOPBACK_KEY", KEY)
    world = CalibrationWorld(BEHAVIOR)
    faults = FaultPlan(rate=0.2, max_consecutive=2, stall_s=UNTIL_CLOSED)
    with (
        Loopback(world, faults=faults, api_key=KEY, reasoning=True) as a,
        Loopback(world, faults=faults, api_key=KEY, reasoning=True) as b,
    ):
        urls = [a.url + "/v1", b.url + "/v1"]
        roles = {
            "target": _chat(urls, "loopback-vlm"),
            "extractor": _chat(urls, "loopback-llm"),
            "judge": _chat(urls, "loopback-llm"),
            "edit_parser": _chat(urls, "loopback-llm"),
        }
        outcome = run(_config(tmp_path / "loopback", roles, reference.output_dir / "cache"))
        served = (a.requests["/v1/chat/completions"], b.requests["/v1/chat/completions"])

    assert outcome.results["results"] == reference.results["results"]
    assert [_essentials(r) for r in outcome.records] == [_essentials(r) for r in reference.records]
    assert sum(faults.injected.values()) > 0.1 * sum(served)  # the faults really happened
    assert set(faults.injected) == {"rate_limited", "server_error", "timeout", "malformed", "dropped"}
    assert min(served) > 0.25 * sum(served)  # both servers did their share
    assert not outcome.results["calls"]["failures"]
    usage = outcome.results["usage"]["roles"]
    assert set(usage) == {"target", "extractor", "judge", "edit_parser"}
    for role in usage.values():  # every failed attempt was retried, every request answered
        assert role["requests"] > 0 and role["failures"] == 0 and role["prompt_tokens"] > 0
        assert (
            role["attempts"]
            == role["requests"] + role["retries"]
            == role["requests"] + sum(role["errors"].values())
        )
    # every injected fault is a failed attempt (a loaded machine may add a timeout of its own)
    assert sum(sum(role["errors"].values()) for role in usage.values()) >= sum(faults.injected.values())

    # the key is in no file the run wrote (results, samples, images, cache, logs)
    needle = KEY.encode()
    written = [p for p in (tmp_path / "loopback").rglob("*") if p.is_file()]
    assert written and not [p for p in written if needle in p.read_bytes()]
    assert "EDCT_LOOPBACK_KEY" in (tmp_path / "loopback" / "results.json").read_text()  # the name is fine


N_EDIT = 30


def _editor_role(kind: str, url: str) -> dict:
    common = {
        "api_key_env": "EDCT_LOOPBACK_KEY",
        "backoff_base_s": 0.001,
        "backoff_max_s": 0.01,
        # a stalled reply (UNTIL_CLOSED) times out; a normal one does not, and the odd one a busy
        # machine slows past this is retried like a fault (the editors' max_retries)
        "timeout_s": scaled(2.0),
        "concurrency": 8,
    }
    if kind == "bfl":
        return {
            "backend": "bfl",
            "model": "flux-2-max",
            "base_url": url,
            "poll_interval_s": 0.001,
            "poll_max_interval_s": 0.002,
            **common,
            # no stalls here (_editor_faults), and a submit that timed out is never re-sent: the
            # timeout only guards against a hang
            "timeout_s": hang_limit(10.0),
        }
    if kind == "openai-images":
        return {"backend": "openai-images", "model": "gpt-image-1.5", "base_url": url + "/v1", **common}
    chat = {k: v for k, v in common.items() if not k.startswith("backoff_")}  # the client backs off
    return {
        "backend": "openrouter-image",
        "model": "google/gemini-3-pro-image-preview",
        "base_url": url + "/v1",
        **chat,
    }


def _editor_faults(kind: str) -> tuple[str, ...]:
    """The faults a retry recovers from. A BFL submit is paid: after a 5xx, a stall or a dropped
    reply it may have been accepted, so it is never re-sent (BFL's official client,
    ``src/bfl/_transport.py``); only a 429 is retried. The loopback injects faults on POSTs."""
    return ("rate_limited",) if kind == "bfl" else CHAT_FAULTS


@pytest.mark.parametrize("kind", ["bfl", "openai-images", "openrouter-image"])
def test_http_editors_with_faults_give_the_reference_records(kind, reference, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("EDCT_LOOPBACK_KEY", KEY)
    faults = FaultPlan(rate=0.2, max_consecutive=2, stall_s=UNTIL_CLOSED, kinds=_editor_faults(kind))
    with Loopback(CalibrationWorld(BEHAVIOR), faults=faults, api_key=KEY) as server:
        config = _config(
            tmp_path / kind, {"editor": _editor_role(kind, server.url)}, reference.output_dir / "cache"
        )
        config.data.limit = N_EDIT
        outcome = run(config)
    assert [_essentials(r) for r in outcome.records] == [_essentials(r) for r in reference.records[:N_EDIT]]
    assert outcome.results["calls"]["calls"]["edit"] > 0 and sum(faults.injected.values()) > 0
    needle = KEY.encode()
    assert not [p for p in (tmp_path / kind).rglob("*") if p.is_file() and needle in p.read_bytes()]


def test_moderated_edits_are_recorded_failures_with_their_reason(reference, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("EDCT_LOOPBACK_KEY", KEY)
    with Loopback(CalibrationWorld(BEHAVIOR), api_key=KEY, moderate=0.3) as server:
        config = _config(tmp_path / "moderated", {"editor": _editor_role("bfl", server.url)})
        config.data.limit = 20
        outcome = run(config)
    failures = [a.failure for r in outcome.records for s in r.steps for a in s.attempts if a.failure]
    refused = [f for f in failures if "edit_refused: BFL flux-2-max: Request Moderated" in f]
    assert refused, failures
    assert outcome.results["calls"]["failures"].get("edit", 0) >= len(refused)


def test_moderated_first_attempts_and_faults_end_with_the_reference_scores(
    reference, tmp_path, monkeypatch
) -> None:
    """BFL with ~20% random faults plus ~30% of first attempts moderated: every moderated edit is
    recorded as a refusal and retried with a new seed, and the run ends with the reference scores."""
    monkeypatch.setenv("EDCT_LOOPBACK_KEY", KEY)
    faults = FaultPlan(rate=0.2, max_consecutive=2, stall_s=UNTIL_CLOSED, kinds=_editor_faults("bfl"))
    world = CalibrationWorld(BEHAVIOR)
    with Loopback(
        world, faults=faults, api_key=KEY, moderate=0.3, moderate_first_attempts_only=True
    ) as server:
        config = _config(
            tmp_path / "moderated-retry",
            {"editor": _editor_role("bfl", server.url)},
            reference.output_dir / "cache",
        )
        config.data.limit = N_EDIT
        outcome = run(config)
    refused = [
        a
        for r in outcome.records
        for s in r.steps
        for a in s.attempts
        if a.failure and "Request Moderated" in a.failure
    ]
    assert refused and all(a.attempt == 0 for a in refused)
    expected = reference.records[:N_EDIT]
    assert [r.status for r in outcome.records] == [r.status for r in expected]
    assert [r.scores for r in outcome.records] == [r.scores for r in expected]
    needle = KEY.encode()
    assert not [
        p for p in (tmp_path / "moderated-retry").rglob("*") if p.is_file() and needle in p.read_bytes()
    ]
