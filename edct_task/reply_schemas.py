"""The JSON schema of each text-LLM reply kind, for servers that constrain output to a schema.

Sent as OpenAI's ``response_format: {"type": "json_schema", ...}`` (OpenAI, OpenRouter and vLLM's
structured outputs accept it) by ``openai-chat`` roles whose ``structured`` option is not ``off``.
Each schema is strict (every property required, no others) and lists the reasons before the
scores, so a model that writes in order reasons first. The parsers in ``edct_task.parsing`` read
these objects like any other JSON reply.
"""

from __future__ import annotations

import json
from typing import Any

from model_adapters.contracts import ReplySchema


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


_TEXT = {"type": "string"}

SCHEMAS: dict[str, dict[str, Any]] = {
    "extract_concepts": _object({"concepts": {"type": "array", "items": _TEXT}}),
    "edit_instructions": _object(
        {
            "edits": {
                "type": "array",
                "items": _object(
                    {"concept": _TEXT, "keep": _TEXT, "change": _TEXT, "how": _TEXT, "constraints": _TEXT}
                ),
            }
        }
    ),
    "edit_parse": _object({"type": {"type": "string", "enum": ["ADD", "MODIFY", "REMOVE"]}, "target": _TEXT}),
    "judge_binary": _object(
        {
            "ac_reason": _TEXT,
            "ef_reason": _TEXT,
            "ac": {"type": "integer", "enum": [0, 1]},
            "ef": {"type": "integer", "enum": [0, 1]},
        }
    ),
    "judge_graded": _object({"reason": _TEXT, "score": {"type": "integer", "enum": [1, 2, 3, 4, 5]}}),
}
"""Prompt template name → JSON schema of its reply."""

_NAMES = {
    "extract_concepts": "edct_concepts",
    "edit_instructions": "edct_edit_instructions",
    "edit_parse": "edct_edit_target",
    "judge_binary": "edct_binary_verdict",
    "judge_graded": "edct_graded_verdict",
}


def reply_schema(template: str) -> ReplySchema | None:
    """The schema for a prompt template (``judge_binary`` or ``judge_binary@v1``); None if it has none."""
    name = template.split("@", 1)[0]
    if name not in SCHEMAS:
        return None
    return ReplySchema(name=_NAMES[name], schema=json.dumps(SCHEMAS[name], separators=(",", ":")))


__all__ = ["SCHEMAS", "reply_schema"]
