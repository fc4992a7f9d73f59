"""Structured output on the real vLLM server (CPU build), through the openai-chat backend (issue 18).

The server's model has random weights, so only the schema makes its reply readable: with a schema
of enums the reply is a complete JSON verdict whatever the weights; with the judge's own schema
(free-text reasons first) the random model never closes its string, so the reply is cut at the
token limit, and the parser reads it as ``truncated``, never as a verdict.
"""

from __future__ import annotations

import json

import pytest
from support.hang_guard import hang_limit

from edct_task import parsing
from edct_task.reply_schemas import reply_schema
from model_adapters.contracts import GenerationParams, ReplySchema
from model_adapters.openai_chat import OpenAIText, client_from_options

pytestmark = pytest.mark.vllm

ENUMS_ONLY = ReplySchema(
    name="edct_binary_scores",
    schema=json.dumps(
        {
            "type": "object",
            "properties": {
                "ac": {"type": "integer", "enum": [0, 1]},
                "ef": {"type": "integer", "enum": [0, 1]},
            },
            "required": ["ac", "ef"],
            "additionalProperties": False,
        }
    ),
)


def _judge(vllm_server, structured: str) -> OpenAIText:
    options = {
        "model": vllm_server.model,
        "base_url": vllm_server.url,
        "structured": structured,
        "timeout_s": hang_limit(300),
    }
    return OpenAIText(client_from_options(options))


def test_vllm_constrains_the_reply_to_the_schema(vllm_server) -> None:
    """Greedy decoding of random weights under the schema: every reply is the schema's JSON, or a
    prefix of it when the model spent its tokens on the whitespace JSON allows between fields (then
    ``finish_reason`` is ``length`` and the parser says truncated)."""
    judge = _judge(vllm_server, "json_schema")
    params = GenerationParams(max_new_tokens=200, reply_schema=ENUMS_ONLY)
    prompts = ["Scores?", *(f"Judge step {i}. Reply with AC and EF." for i in range(3))]
    verdicts = [f'{{"ac":{ac},"ef":{ef}}}' for ac in (0, 1) for ef in (0, 1)]
    complete = 0
    for prompt in prompts:
        reply = judge.complete(prompt, params)
        compact = "".join(reply.text.split())
        assert any(v.startswith(compact) for v in verdicts), reply.text[:200]
        parsed = parsing.parse_binary_judgement(reply.text, finish_reason=reply.finish_reason)
        if reply.finish_reason == "length":
            assert isinstance(parsed, parsing.Unparsed) and parsed.kind == "truncated"
            continue
        verdict = json.loads(reply.text)
        assert reply.finish_reason == "stop" and isinstance(parsed, parsing.Parsed)
        assert (parsed.value.ac, parsed.value.ef) == (verdict["ac"], verdict["ef"])
        complete += 1
    assert complete >= 1
    assert not judge.client.schema_rejected


def test_the_judge_schema_is_accepted_and_a_cut_reply_is_truncated(vllm_server) -> None:
    judge = _judge(vllm_server, "json_schema")
    params = GenerationParams(max_new_tokens=24, reply_schema=reply_schema("judge_graded@v1"))
    reply = judge.complete("REASON: ...\nSCORE: ...", params)
    assert reply.text.replace(" ", "").startswith('{"reason":"')  # the schema's first property, in order
    assert reply.finish_reason == "length"
    parsed = parsing.parse_graded_judgement(reply.text, finish_reason=reply.finish_reason)
    assert isinstance(parsed, parsing.Unparsed) and parsed.kind == "truncated"


def test_auto_uses_vllm_structured_output(vllm_server) -> None:
    judge = _judge(vllm_server, "auto")
    reply = judge.complete("Scores?", GenerationParams(max_new_tokens=64, reply_schema=ENUMS_ONLY))
    assert set(json.loads(reply.text)) == {"ac", "ef"} and not judge.client.schema_rejected
