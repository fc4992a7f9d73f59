"""The dispatcher: cache first, identical requests of a round sent once, failures as values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edct_task.config import calibration_config
from edct_task.core.requests import AskLLM, Failure
from edct_task.engine.dispatch import Dispatcher
from edct_task.engine.driver import Limits, build_dispatcher
from edct_task.engine.protocol import ProtocolConfig
from edct_task.engine.stage_cache import ImageStore, StageCache
from edct_task.roles import build_roles
from model_adapters.contracts import Completion
from model_adapters.errors import RateLimited
from verification.check import GateParams


class _Counting:
    name = "counting"

    def __init__(self, fail: bool = False) -> None:
        self.prompts: list[str] = []
        self.fail = fail

    def identity(self) -> dict[str, Any]:
        return {"backend": "counting"}

    def complete(self, prompt: str, params: Any) -> Completion:
        self.prompts.append(prompt)
        if self.fail:
            raise RateLimited("429 from the test server", retry_after=1.0)
        return Completion(f"reply to {prompt}")


def _dispatcher(tmp_path: Path, extractor: _Counting) -> Dispatcher:
    roles = build_roles(calibration_config().role_specs())
    roles.extractor = extractor
    return build_dispatcher(
        roles,
        ImageStore(tmp_path),
        StageCache(tmp_path),
        protocol=ProtocolConfig(),
        gate=GateParams(),
        limits=Limits(),
    )


def _ask(prompt: str) -> AskLLM:
    return AskLLM(role="extractor", prompt=prompt, template="extract_concepts@v1", purpose="concepts")


def test_identical_requests_in_a_round_are_sent_once_and_then_cached(tmp_path: Path) -> None:
    model = _Counting()
    d = _dispatcher(tmp_path, model)
    replies = d.resolve([_ask("a"), _ask("b"), _ask("a")])
    assert replies == [Completion("reply to a"), Completion("reply to b"), Completion("reply to a")]
    assert sorted(model.prompts) == ["a", "b"]
    assert d.stats.calls == {"concepts": 2} and d.stats.cache_hits == {"concepts": 1}
    assert d.resolve([_ask("a")]) == [Completion("reply to a")] and len(model.prompts) == 2  # from the cache
    d.close()


def test_backend_errors_become_failures_and_are_not_cached(tmp_path: Path) -> None:
    d = _dispatcher(tmp_path, _Counting(fail=True))
    (reply,) = d.resolve([_ask("a")])
    assert reply == Failure("rate_limited", "429 from the test server")
    assert d.stats.failures == {"concepts": 1}
    d.close()
    again = _Counting()
    d = _dispatcher(tmp_path, again)
    assert d.resolve([_ask("a")]) == [Completion("reply to a")] and again.prompts == ["a"]
    d.close()
