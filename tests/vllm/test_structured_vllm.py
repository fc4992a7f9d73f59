"""Structured output on the real vLLM server (CPU build), through the openai-chat backend (issue 18).

The server's model has random weights, so only the schema makes its reply readable: with a schema
of enums the reply is a complete JSON verdict whatever the weights; with the judge's own schema
(free-text reasons first) the random model never closes its string, so the reply is cut at the
token limit, and the parser reads it as ``truncated``, never as a verdict.
"""

from __future__ import annotations

import json

import pytest

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
        "timeout_s": 300,
    }
    return OpenAIText(client_from_options(options))


def test_vllm_constrains_the_reply_to_the_schema(vllm_server) -> None:
    judge = _judge(vllm_server, "json_schema")
    params = GenerationParams(max_new_tokens=64, reply_schema=ENUMS_ONLY)
    replies = [judge.complete(f"Judge step {i}. Reply with AC and EF.", params) for i in range(3)]
    for reply in replies:
        verdict = json.loads(reply.text)  # a random model, yet valid JSON of the schema
        assert set(verdict) == {"ac", "ef"} and {verdict["ac"], verdict["ef"]} <= {0, 1}
        assert reply.finish_reason == "stop"
        parsed = parsing.parse_binary_judgement(reply.text, finish_reason=reply.finish_reason)
        assert isinstance(parsed, parsing.Parsed)
        assert (parsed.value.ac, parsed.value.ef) == (verdict["ac"], verdict["ef"])
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
