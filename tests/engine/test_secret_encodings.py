"""A key an endpoint echoes is redacted in every encoding an echo can take, before samples, cache,
audit and bundle: base64 (any alignment, either alphabet), upper- or lower-cased, percent-encoded,
with zero-width characters between its characters, and split across ``content`` and
``reasoning`` (issue 46, point 5)."""

from __future__ import annotations

import base64

import pytest
from support.echo_server import KEY_ENV, EchoHandler, run_against, serving

from edct_task.engine.redact import Redactor
from model_adapters.contracts import Completion

KEY = "sk-proj-Zq81vXa0bT4mLw9eR2cY"


def _percent(text: str, upper: bool) -> str:
    return "".join(("%{:02X}" if upper else "%{:02x}").format(b) for b in text.encode())


ENCODINGS = {
    "upper": lambda k: k.upper(),
    "lower": lambda k: k.lower(),
    "percent": lambda k: _percent(k, upper=True),
    "percent_lower_some": lambda k: k[:5] + _percent(k[5:12], upper=False) + k[12:],
    "zero_width": lambda k: "\u200b".join(k),
    "soft_hyphen": lambda k: "\u00ad".join(k),
    "base64_alone": lambda k: base64.b64encode(k.encode()).decode(),
    "base64_bearer": lambda k: base64.b64encode(f"Authorization: Bearer {k}".encode()).decode(),
    "base64_offset_1": lambda k: base64.b64encode(f"x{k}!".encode()).decode(),
    "base64_offset_2": lambda k: base64.b64encode(f"xy{k}?!".encode()).decode(),
    "base64_urlsafe": lambda k: base64.urlsafe_b64encode(f"B {k}".encode()).decode(),
}


def _leaks(text: str) -> list[str]:
    """Which independent decodings of ``text`` still hold the key."""
    found = []
    plain = text.replace("\u200b", "").replace("\u00ad", "")
    if KEY.lower() in plain.lower():
        found.append("plain")
    import urllib.parse

    if KEY.lower() in urllib.parse.unquote(plain).lower():
        found.append("percent")
    for word in plain.replace('"', " ").replace("\\", " ").split():
        for skip in range(4):
            chunk = word[skip:]
            chunk = chunk[: len(chunk) - len(chunk) % 4]
            for decode in (base64.b64decode, base64.urlsafe_b64decode):
                try:
                    if KEY.encode() in decode(chunk):
                        found.append("base64")
                except ValueError:
                    pass
    return found


@pytest.mark.parametrize("name", sorted(ENCODINGS))
def test_every_encoding_of_the_key_is_redacted(name: str) -> None:
    echoed = f"Sure. Config: {ENCODINGS[name](KEY)} (end)"
    assert _leaks(echoed), "the test's own decoder must see the key"
    out = Redactor([KEY]).text(echoed)
    assert "[redacted]" in out and _leaks(out) == [], out
    assert out.startswith("Sure. Config: ") and out.endswith(" (end)")


@pytest.mark.parametrize("cut", [4, 9, 14, len(KEY) - 4])
@pytest.mark.parametrize("order", ["text_first", "reasoning_first"])
def test_a_key_split_between_text_and_reasoning_is_redacted_on_both_sides(cut: int, order: str) -> None:
    head, tail = KEY[:cut], KEY[cut:]
    text, reasoning = (
        (f"Answer: yes. {head}", f"{tail} was the key")
        if order == "text_first"
        else (
            f"{tail} done",
            f"thinking about {head}",
        )
    )
    reply = Redactor([KEY]).reply(Completion(text, reasoning=reasoning))
    assert head not in reply.text + reply.reasoning and tail not in reply.text + reply.reasoning
    assert "[redacted]" in reply.text and "[redacted]" in reply.reasoning


def test_ordinary_text_is_left_alone() -> None:
    r = Redactor([KEY])
    text = "The sk- prefix and proj are ordinary words; Zq8 too. bWFueSB3b3Jkcw=="
    assert r.text(text) == text
    reply = r.reply(Completion("The answer is sk-pro", reasoning="I see a red car"))
    assert reply.text == "The answer is sk-pro" and reply.reasoning == "I see a red car"


class _Echo(EchoHandler):
    """Echoes the request's key in every encoding at once, and cut between content and reasoning."""

    def message(self, authorization: str) -> dict:
        key = authorization.removeprefix("Bearer ")
        forms = " ".join(f(key) for f in ENCODINGS.values())
        content = f"Answer: yes. {forms} {key[12:]}"
        return {"role": "assistant", "content": content, "reasoning_content": f"I recall {key[:12]}"}


@pytest.fixture
def echo_server():
    with serving(_Echo) as url:
        yield url


def test_no_encoding_of_an_echoed_key_reaches_a_file_of_the_run(tmp_path, monkeypatch, echo_server) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    files = run_against(echo_server, tmp_path / "out", n=2)
    samples = (tmp_path / "out" / "samples.jsonl").read_text()
    assert "[redacted]" in samples
    leaked = {}
    for p in files:
        text = p.read_bytes().decode("utf-8", "replace")
        text = text.encode().decode("unicode_escape", "replace") if "\\u" in text else text
        if found := _leaks(text):
            leaked[str(p)] = found
    assert leaked == {}
