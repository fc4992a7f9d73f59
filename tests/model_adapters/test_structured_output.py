"""``structured: auto | json_schema | off`` for openai-chat text roles (issue 18, item 1).

Against the loopback server: with ``json_schema`` every extractor, edit-parser and judge request
carries its reply kind's JSON schema as ``response_format``, the replies are JSON objects and the
run's scores equal the in-process calibration run's; ``auto`` against a server that rejects the
schema falls back to text (the same scores); ``off`` never sends one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.loopback import CalibrationWorld, Loopback

from edct_task.config import calibration_config, config_from_dict
from edct_task.reply_schemas import SCHEMAS, reply_schema
from edct_task.run.runner import run
from model_adapters.contracts import GenerationParams
from model_adapters.errors import BackendError, OptionsError
from model_adapters.openai_chat import OpenAIText, client_from_options

N = 8
BEHAVIOR = "mixed:0.5"
SCHEMA_NAMES = {
    "edct_concepts",
    "edct_edit_instructions",
    "edct_edit_target",
    "edct_binary_verdict",
    "edct_graded_verdict",
}


def _config(out: Path, roles: dict | None = None):
    raw = calibration_config(BEHAVIOR, n=N, output_dir=out).model_dump(mode="json")
    raw["progress"] = False
    raw["bootstrap_resamples"] = 200
    if roles:
        raw["roles"].update(roles)
    return config_from_dict(raw)


def _text_roles(url: str, structured: str) -> dict:
    role = {"backend": "openai-chat", "model": "loopback-llm", "base_url": url, "structured": structured}
    return {"extractor": role, "judge": role, "edit_parser": role}


def _scores(outcome) -> list:
    return [
        (r.status, r.scores.model_dump() if r.scores else None, [s.graded.score for s in r.steps if s.graded])
        for r in outcome.records
    ]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return run(_config(tmp_path_factory.mktemp("reference")))


def test_json_schema_sends_each_reply_kind_its_schema_and_keeps_the_scores(reference, tmp_path) -> None:
    with Loopback(CalibrationWorld(BEHAVIOR)) as server:
        outcome = run(_config(tmp_path / "structured", _text_roles(server.url + "/v1", "json_schema")))
        bodies = list(server.bodies)
    assert _scores(outcome) == _scores(reference)
    formats = [b["response_format"] for b in bodies if "response_format" in b]
    assert len(formats) == len(bodies) > 0  # every text request; the target is in-process here
    assert {f["json_schema"]["name"] for f in formats} == SCHEMA_NAMES
    for f in formats:
        assert f["type"] == "json_schema" and f["json_schema"]["strict"] is True
    binary = next(f for f in formats if f["json_schema"]["name"] == "edct_binary_verdict")
    assert list(binary["json_schema"]["schema"]["properties"]) == ["ac_reason", "ef_reason", "ac", "ef"]
    judged = [s for r in outcome.records for s in r.steps if s.binary is not None and s.binary.raw]
    assert judged
    for step in judged:  # the judge answered in the schema's JSON, and it was read
        assert set(json.loads(step.binary.raw)) == {"ac_reason", "ef_reason", "ac", "ef"}
        assert (step.binary.ac, step.binary.ef) == tuple(json.loads(step.binary.raw)[k] for k in ("ac", "ef"))
        assert step.binary.ac_reason == json.loads(step.binary.raw)["ac_reason"]


def test_auto_falls_back_to_text_on_a_server_without_structured_output(reference, tmp_path, caplog) -> None:
    with Loopback(CalibrationWorld(BEHAVIOR), structured=False) as server:
        outcome = run(_config(tmp_path / "auto", _text_roles(server.url + "/v1", "auto")))
        bodies = list(server.bodies)
    assert _scores(outcome) == _scores(reference)
    assert not outcome.results["calls"]["failures"]
    with_schema = [i for i, b in enumerate(bodies) if "response_format" in b]
    # each role's client learns once (requests already in flight may also carry it), then sends text
    assert 1 <= len(with_schema) <= 3 * 16 and len(bodies) > len(with_schema) + 20
    assert "response_format" not in bodies[-1]
    assert "falls back to text" in caplog.text


def test_off_never_sends_a_schema(tmp_path) -> None:
    with Loopback(CalibrationWorld(BEHAVIOR)) as server:
        config = _config(tmp_path / "off", _text_roles(server.url + "/v1", "off"))
        config.data.limit = 2
        run(config)
        bodies = list(server.bodies)
    assert bodies and not any("response_format" in b for b in bodies)


def test_json_schema_on_a_server_without_it_fails_the_call() -> None:
    params = GenerationParams(reply_schema=reply_schema("judge_graded@v1"))
    with Loopback(CalibrationWorld(BEHAVIOR), structured=False) as server:
        options = {
            "model": "m",
            "base_url": server.url + "/v1",
            "structured": "json_schema",
            "max_retries": 0,
        }
        model = OpenAIText(client_from_options(options))
        with pytest.raises(BackendError, match="response_format"):
            model.complete("Rate this.", params)
        auto = OpenAIText(client_from_options({**options, "structured": "auto"}))
        assert auto.complete("Rate this.", params).text.startswith("echo: ")
        assert auto.client.schema_rejected


def test_structured_option_is_validated_and_part_of_the_identity() -> None:
    with pytest.raises(OptionsError, match="structured must be one of auto, json_schema, off"):
        client_from_options({"model": "m", "base_url": "http://a:1/v1", "structured": "yes"})
    client = client_from_options({"model": "m", "base_url": "http://a:1/v1"})
    assert client.settings.identity("openai-chat")["structured"] == "auto"


def test_every_schema_is_strict_and_lists_reasons_first() -> None:
    for name, schema in SCHEMAS.items():
        assert schema["additionalProperties"] is False and schema["required"] == list(schema["properties"])
        assert reply_schema(f"{name}@v1") is not None
    assert reply_schema("answer_why@v1") is None
    assert list(SCHEMAS["judge_graded"]["properties"]) == ["reason", "score"]
