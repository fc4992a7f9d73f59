"""A key echoed by an endpoint in a *successful* reply never reaches a file the run writes.

The target is an OpenAI-compatible server on 127.0.0.1 that answers every request with the
``Authorization`` header it was sent (a misconfigured proxy does exactly this). The run's
``samples.jsonl``, stage cache, results and everything else under the output folder must hold
``[redacted]`` where the key was, never the key.
"""

from __future__ import annotations

import pytest
from support.echo_server import KEY_ENV, EchoHandler, run_against, serving

from edct_task.engine.redact import Redactor
from model_adapters.contracts import Completion

KEY = "sk-echoed-9c41f0d2b7a35e86"


class _Echo(EchoHandler):
    def message(self, authorization: str) -> dict:
        return {"role": "assistant", "content": f"Answer: yes. Your request said {authorization}."}


@pytest.fixture
def echo_server():
    with serving(_Echo) as url:
        yield url


def test_a_key_echoed_in_a_successful_reply_is_redacted_everywhere(tmp_path, monkeypatch, echo_server):
    monkeypatch.setenv(KEY_ENV, KEY)
    files = run_against(echo_server, tmp_path / "out", n=3)
    assert any(p.name == "samples.jsonl" for p in files)
    samples = (tmp_path / "out" / "samples.jsonl").read_text()
    assert "[redacted]" in samples  # the reply was recorded, the key in it replaced
    leaked = [str(p) for p in files if KEY.encode() in p.read_bytes()]
    assert leaked == []


def test_the_redactor_replaces_every_configured_value_and_leaves_short_ones():
    r = Redactor([KEY, "abc", None, ""])
    reply = r.reply(Completion(f"a {KEY} b {KEY}", reasoning=f"({KEY})"))
    assert reply.text == "a [redacted] b [redacted]" and reply.reasoning == "([redacted])"
    assert r.text("abc stays") == "abc stays"  # too short to be a key; not redacted
