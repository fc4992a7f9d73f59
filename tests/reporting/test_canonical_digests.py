"""One canonical JSON (``core.canonical``) under every digest: stage-cache keys, the setup id, the
dataset manifest and a bundle's seal are the SHA-256 of the same text, pinned here byte for byte."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
from support.edct_runs import records

from edct_task.core.canonical import canonical_json
from edct_task.engine.stage_cache import fingerprint
from edct_task.leaderboard.bundle import bundle_digest
from edct_task.reporting.setup import dataset_manifest, setup_id, setup_identity

ROOT = Path(__file__).resolve().parents[2]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


SETUP = setup_identity(
    roles={"target": {"backend": "x"}, "judge": {"backend": "openai", "model": "qwen3-235b", "t": 0.1 + 0.2}},
    protocol={"k": 2, "seed": 7, "retries": 1, "graded": True},
    verification={"tau_in": 0.1, "tau_out": 0.3, "note": "café ☕"},
    prompt_versions={"judge_binary": "v2", "answer_why": "v1"},
    dataset_digest="d" * 64,
)
SETUP_TEXT = (
    '{"dataset_digest":"' + "d" * 64 + '","prompt_versions":{"answer_why":"v1","judge_binary":"v2"},'
    '"protocol":{"graded":true,"k":2,"retries":1},'
    '"roles":{"judge":{"backend":"openai","model":"qwen3-235b","t":0.30000000000000004}},'
    '"verification":{"note":"café ☕","tau_in":0.1,"tau_out":0.3}}'
)


def test_the_setup_id_is_the_digest_of_the_canonical_text() -> None:
    assert canonical_json(SETUP) == SETUP_TEXT
    assert setup_id(SETUP) == _sha(SETUP_TEXT)[:12]
    # the stage cache's key of the same object is the full digest of the same text
    assert fingerprint(SETUP) == _sha(SETUP_TEXT)


def test_the_dataset_manifest_digest_is_taken_over_the_canonical_list() -> None:
    recs = records(1.0, n=2, domains=("okvqa",), excluded=0)
    manifest = dataset_manifest(list(reversed(recs)))
    entries = [
        f'{{"domain":"okvqa","id":"{sid}","image":"{_sha(sid)}",'
        f'"question_sha256":"{_sha(f"What about {sid}?")}"}}'
        for sid in ("okvqa-000", "okvqa-001")
    ]
    assert manifest["n"] == 2 and [e["id"] for e in manifest["samples"]] == ["okvqa-000", "okvqa-001"]
    assert manifest["digest"] == _sha("[" + ",".join(entries) + "]")


def test_the_bundle_seal_leaves_out_its_own_digest() -> None:
    meta = {"format": "edct-bundle", "claimed": {"ccs": 0.5}, "digest": "ignored"}
    assert bundle_digest(meta) == _sha('{"claimed":{"ccs":0.5},"format":"edct-bundle"}')


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        ({"a": {1: "x"}}, TypeError, r"value\['a'\]: key 1 is int; JSON object keys must be str"),
        ([{"t": float("nan")}], ValueError, r"value\[0\]\['t'\]: nan is not allowed"),
        ({"s": {1}}, TypeError, r"value\['s'\]: set is not JSON-serialisable"),
    ],
)
def test_what_json_would_change_silently_is_refused(value: object, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        canonical_json(value)


def test_there_is_one_canonical_json_in_the_product() -> None:
    defs = [
        f"{p.relative_to(ROOT)}:{n}"
        for pkg in ("edct_task", "verification", "model_adapters")
        for p in sorted((ROOT / pkg).rglob("*.py"))
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if re.match(r"\s*def canonical_json\b", line)
    ]
    assert [d.split(":")[0] for d in defs] == ["edct_task/core/canonical.py"], defs
