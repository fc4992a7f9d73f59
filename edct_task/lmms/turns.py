"""One EDCT target request as the single user turn lmms-eval's loop sends, and back.

lmms-eval's agentic loop sends every round as a fresh single user turn, so the answer → why
history of a conversation is quoted in the text (``model_adapters.lmms_eval_target.render_quoted``);
``parse_turn`` inverts it (the reference model uses it). Rounds after the first end with a short
image tag (the image's content id) so that every round of a document has a distinct text:
lmms-eval's response cache hashes text, not images.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from edct_task.core.requests import AskTarget
from edct_task.engine.drive import SampleRun
from edct_task.engine.protocol import ProtocolConfig
from edct_task.lmms.documents import sample_of
from model_adapters.lmms_eval_target import history_marks, render_quoted

_HISTORY_HEAD, _HISTORY_ANSWER = history_marks()
_TAG_PREFIX = "[image "


def image_tag(ref: str) -> str:
    return f"{_TAG_PREFIX}{ref[:12]}]"


def _unquote(block: str) -> str:
    return "\n".join(line[2:] if line.startswith("> ") else line.lstrip(">") for line in block.split("\n"))


def parse_turn(text: str, system_prompts: Iterable[str] = ()) -> list[tuple[str, str]]:
    """Invert ``render_quoted``: ``[(role, text), …]`` (images are not part of the text).

    ``system_prompts`` are the system prompts that may lead the text (they are not marked).
    """
    body = text
    out: list[tuple[str, str]] = []
    for sp in system_prompts:
        if sp and body.startswith(sp + "\n\n"):
            out.append(("system", sp))
            body = body[len(sp) + 2 :]
            break
    lines = body.split("\n")
    if lines and lines[-1].startswith(_TAG_PREFIX) and body.endswith("]"):
        body = body[: body.rfind("\n\n" + lines[-1])] if ("\n\n" + lines[-1]) in body else body
    if body.startswith(_HISTORY_HEAD + "\n"):
        rest = body[len(_HISTORY_HEAD) + 1 :]
        q_block, _, rest = rest.partition("\n" + _HISTORY_ANSWER + "\n")
        a_lines: list[str] = []
        tail = rest.split("\n")
        while tail and tail[0].startswith(">"):
            a_lines.append(tail.pop(0))
        ask = "\n".join(tail).lstrip("\n")
        out += [("user", _unquote(q_block)), ("assistant", _unquote("\n".join(a_lines))), ("user", ask)]
    else:
        out.append(("user", body))
    return out


def first_turn_text(doc: dict[str, Any]) -> str:
    """The first round's text: the protocol's own first target request for the document (lmms-eval
    asks for it before there is a round to carry state in; the session that round 1 builds runs
    the same protocol from the start, so its first request is this one)."""
    run = SampleRun(sample_of(doc, ""), ProtocolConfig())
    try:
        requests = run.start() or ()
    finally:
        run.close()
    first = next(r for r in requests if isinstance(r, AskTarget))
    return turn_text(first, first=True)


def target_images(request: AskTarget) -> list[str]:
    return [ref for m in request.conversation for ref in m.images]


def turn_text(request: AskTarget, *, first: bool) -> str:
    """The single-turn text of a target request; every round but the first carries an image tag."""
    refs = target_images(request)
    return render_quoted(request.conversation, tag=None if first or not refs else image_tag(refs[-1]))
