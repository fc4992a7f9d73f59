"""A thinking model's reply: the answer is read after its reasoning, the attention there too."""

from __future__ import annotations

from edct_task.attention.probe import thought_of
from edct_task.parsing import strip_thinking


def test_the_thought_ends_at_the_last_closing_tag_and_the_answer_follows_it() -> None:
    reply = "<think>The ball is white. A racket lies next to the ball.</think>Table tennis."
    assert thought_of(reply) == "<think>The ball is white. A racket lies next to the ball.</think>"
    assert thought_of(reply) + strip_thinking(reply) == reply
    assert thought_of("<THINKING>a</THINKING> b </think>Go.") == "<THINKING>a</THINKING> b </think>"
    assert thought_of("Tennis.") == "" and strip_thinking("Tennis.") == "Tennis."
    assert thought_of("<think>cut off at the token limit") == ""  # no answer to read attention for
