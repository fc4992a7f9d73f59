"""Every registered backend against the registry's rules (one test per record), and a backend
shipped outside the repository, added at run time through the ``edct_bench.backends`` entry points.

The rules: the identity is JSON and holds no secret; an unknown option is refused by name when the
config is loaded; ``close()`` may be called twice; a paid backend takes the cost ceiling (a
``max_cost_usd`` that is not a positive finite number is refused by name) and stops at it.
A new backend needs a row in ``EXAMPLES``: options it is built with here, without a network.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from edct_task import roles
from edct_task.config import calibration_config, config_from_dict
from edct_task.core.errors import ConfigError
from edct_task.estimate.latency import latency_models
from edct_task.roles import ROLE_KINDS, available_backends, build_backend, record_of
from edct_task.scale.sweep import local_weights
from model_adapters.contracts import ChatMessage, GenerationParams
from model_adapters.cost_ceiling import PaidOptions
from model_adapters.errors import OptionsError, ProviderStop
from verification.backends import BackendRecord

SECRET = "sk-registry-conformance-7f3a9c1e5b"
NOWHERE = "http://127.0.0.1:9"
"""The discard port: nothing answers, and no test here may reach a server."""

EXAMPLES: dict[tuple[str, str], dict[str, Any]] = {
    ("target", "calibration-reference"): {"behavior": "faithful"},
    ("target", "openai-chat"): {"model": "m", "base_url": NOWHERE + "/v1", "api_key_env": "EDCT_REG_KEY"},
    ("target", "lmms-eval"): {"model": "qwen3_vl", "model_args": "pretrained=/nowhere"},
    ("text", "calibration-rules"): {},
    ("text", "openai-chat"): {"model": "m", "base_url": NOWHERE + "/v1", "api_key_env": "EDCT_REG_KEY"},
    ("text", "inspect-role"): {"role": "judge"},
    ("editor", "calibration-editor"): {},
    ("editor", "bfl"): {"model": "flux-2-pro", "base_url": NOWHERE, "api_key_env": "EDCT_REG_KEY"},
    ("editor", "openai-images"): {
        "model": "gpt-image-1.5",
        "base_url": NOWHERE,
        "api_key_env": "EDCT_REG_KEY",
    },
    ("editor", "openrouter-image"): {
        "model": "google/gemini-2.5-flash-image",
        "base_url": NOWHERE + "/v1",
        "api_key_env": "EDCT_REG_KEY",
    },
    ("editor", "diffusers"): {"model": "/nowhere/kontext", "local_files_only": True},
    ("detector", "calibration-oracle"): {},
    ("detector", "opencv-cascade"): {},
    ("detector", "owlv2"): {"model": "/nowhere/owlv2"},
    ("detector", "grounding-dino"): {"model": "/nowhere/grounding-dino"},
    ("detector", "moondream"): {"base_url": NOWHERE, "api_key_env": "EDCT_REG_KEY", "max_retries": 0},
    ("segmenter", "box"): {},
    ("segmenter", "grabcut"): {"iterations": 2},
    ("segmenter", "sam2"): {"model": "/nowhere/sam2"},
}

RECORDS = [record for kind in roles.registry().values() for record in kind.values()]
IDS = [f"{r.kind}/{r.name}" for r in RECORDS]
ROLE_OF_KIND = {"target": "target", "text": "judge", "editor": "editor", "detector": "detector"}


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDCT_REG_KEY", SECRET)


def _built(record: BackendRecord, **extra: Any) -> Any:
    if record in roles.HOST_RECORDS:
        pytest.skip("built only inside an Inspect task: tests/inspect_host/test_model_roles.py builds it")
    if record.local_weights:
        pytest.skip(
            "loads weights: built by its own tests (test_transformers_backends, test_diffusers_editor)"
        )
    return build_backend(record, {**EXAMPLES[(record.kind, record.name)], **extra})


def _config_with(record: BackendRecord, options: dict[str, Any]) -> dict[str, Any]:
    raw = calibration_config(n=2, output_dir=Path("runs/never")).model_dump(mode="json")
    raw["roles"][ROLE_OF_KIND[record.kind]] = {"backend": record.name, **options}
    return raw


def test_every_record_has_an_example_and_every_example_a_record() -> None:
    assert {(r.kind, r.name) for r in RECORDS} == set(EXAMPLES)


@pytest.mark.parametrize("record", RECORDS, ids=IDS)
def test_the_identity_is_json_and_holds_no_secret(record: BackendRecord) -> None:
    backend = _built(record)
    try:
        # a mask provider without identity() is recorded by its name (edct_task.roles)
        identity = backend.identity() if hasattr(backend, "identity") else {"name": backend.name}
        text = json.dumps(identity)
        assert json.loads(text) == identity and SECRET not in text
    finally:
        if hasattr(backend, "close"):
            backend.close()


@pytest.mark.parametrize("record", RECORDS, ids=IDS)
def test_an_unknown_option_is_refused_by_name_when_the_config_is_loaded(record: BackendRecord) -> None:
    options = {**EXAMPLES[(record.kind, record.name)], "edct_no_such_option": 1}
    with pytest.raises(OptionsError, match=r"does not take option\(s\) edct_no_such_option"):
        record.check(options)
    if record.kind in ROLE_OF_KIND:
        with pytest.raises(ConfigError, match="edct_no_such_option"):
            config_from_dict(_config_with(record, options))


@pytest.mark.parametrize("record", RECORDS, ids=IDS)
def test_close_may_be_called_twice(record: BackendRecord) -> None:
    backend = _built(record)
    close = getattr(backend, "close", None)
    if close is None:
        return  # nothing to release (in-process, stateless)
    close()
    close()


@pytest.mark.parametrize("record", RECORDS, ids=IDS)
def test_every_option_is_described_for_the_reference(record: BackendRecord) -> None:
    model = record.options_model()
    assert (model.__doc__ or "").strip(), f"{model.__name__} has no docstring"
    bare = [name for name, field in model.model_fields.items() if not (field.description or "").strip()]
    assert bare == []


PAID = [r for r in RECORDS if r.paid]


def test_the_five_paid_backends_are_marked_paid() -> None:
    assert {r.name for r in PAID} == {"openai-chat", "bfl", "openai-images", "openrouter-image", "moondream"}


def _call(backend: Any, kind: str) -> Any:
    image = Image.new("RGB", (32, 32), "white")
    if kind == "target":
        return backend.generate([[ChatMessage("user", "hi")]], GenerationParams(max_new_tokens=4))
    if kind == "text":
        return backend.complete("hi", GenerationParams(max_new_tokens=4))
    if kind == "editor":
        return backend.edit(image, "recolour the ball", seed=0)
    return backend.locate(image, "ball")


@pytest.mark.parametrize("record", PAID, ids=[f"{r.kind}/{r.name}" for r in PAID])
def test_a_paid_backend_takes_the_ceiling_and_stops_at_it(record: BackendRecord) -> None:
    assert issubclass(record.options_model(), PaidOptions)
    example = EXAMPLES[(record.kind, record.name)]
    for bad in (math.nan, math.inf, -1.0, 0.0):
        with pytest.raises(OptionsError, match="max_cost_usd"):
            record.check({**example, "max_cost_usd": bad, "price_per_call_usd": 0.1})
        with pytest.raises(ConfigError, match="max_cost_usd"):
            config_from_dict(
                _config_with(record, {**example, "max_cost_usd": bad, "price_per_call_usd": 0.1})
            )
    # the next call's price is known: a call that would pass the ceiling is never made (nothing
    # listens at NOWHERE: a call made would fail with a connection error, not ProviderStop)
    backend = _built(record, max_cost_usd=0.5, price_per_call_usd=0.6)
    try:
        with pytest.raises(
            ProviderStop, match=r"max_cost_usd 0.50 reached \(0.00 USD spent, the next call costs 0.60\)"
        ):
            _call(backend, record.kind)
        plain = _built(record)
        assert backend.identity() == plain.identity()  # the ceiling changes no output
        plain.close()
    finally:
        backend.close()
        backend.close()


def test_a_backend_without_a_reported_cost_needs_a_price_for_its_ceiling() -> None:
    for name in ("openai-images", "moondream"):
        record = next(r for r in PAID if r.name == name)
        with pytest.raises(OptionsError, match="max_cost_usd needs price_per_call_usd"):
            record.check({**EXAMPLES[(record.kind, name)], "max_cost_usd": 5})
        record.check({**EXAMPLES[(record.kind, name)], "max_cost_usd": 5, "price_per_call_usd": 0.04})


# -- a backend shipped outside the repository ----------------------------------------------------

ACME = '''
"""Acme's image editor, as its own package would ship it."""

from pydantic import Field

from model_adapters.cost_ceiling import PaidOptions
from verification.backends import BackendRecord, Latency


class AcmeOptions(PaidOptions):
    """``acme-edit``: Acme's hosted editor."""

    model: str = Field("acme-1", description="Acme's model id.")


class AcmeEditor:
    backend = "acme-edit"

    def __init__(self, model):
        self.name = f"acme-edit:{model}"
        self.model = model
        self.edits = 0
        self.closed = 0

    def identity(self):
        return {"backend": self.backend, "model": self.model}

    def edit(self, image, instruction, *, seed):
        self.edits += 1
        return image

    def usage(self):
        return {"backend": self.backend, "edits": self.edits, "cost_usd": round(0.4 * self.edits, 6)}

    def close(self):
        self.closed += 1


def build(options):
    return AcmeEditor(options.get("model", "acme-1"))


RECORD = BackendRecord(
    "editor", "acme-edit", "acme_edit:build", AcmeOptions,
    Latency(7.0, sd=1.0, note="Acme's editor, 7 s per edit"), paid=True, local_weights=True,
)
'''


def _ship(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry_points: str) -> None:
    """An installed distribution on ``sys.path`` (its module and its ``dist-info``), and a fresh
    registry that has not read the entry points yet."""
    (tmp_path / "acme_edit.py").write_text(ACME)
    info = tmp_path / "acme_edit-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-edit\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(roles, "REGISTRY", {kind: dict(records) for kind, records in roles.REGISTRY.items()})
    monkeypatch.setattr(roles, "_entry_points_loaded", False)


def test_a_paid_editor_shipped_outside_the_repo_is_a_backend_like_any_other(tmp_path, monkeypatch) -> None:
    _ship(tmp_path, monkeypatch, "[edct_bench.backends]\nacme-edit = acme_edit:RECORD\n")
    # listed
    assert "acme-edit" in available_backends()["editor"]
    record = record_of("editor", "acme-edit")
    assert record is not None and record.paid
    # its options checked when the config is loaded, by name
    raw = calibration_config(n=2, output_dir=tmp_path / "run").model_dump(mode="json")
    raw["roles"]["editor"] = {"backend": "acme-edit", "colour": "red"}
    with pytest.raises(
        ConfigError, match=r"roles.editor: backend 'acme-edit' does not take option\(s\) colour"
    ):
        config_from_dict(raw)
    raw["roles"]["editor"] = {"backend": "acme-edit", "max_cost_usd": -1}
    with pytest.raises(ConfigError, match="max_cost_usd"):
        config_from_dict(raw)
    # the ceiling stops it: from its reported cost (0.4 USD an edit) at the first call after the
    # ceiling is reached, and before the call that would pass it when the price is known
    image = Image.new("RGB", (8, 8))
    editor = build_backend(record, {"max_cost_usd": 1.0})
    for seed in range(3):
        editor.edit(image, "x", seed=seed)
    with pytest.raises(ProviderStop, match=r"acme-edit:acme-1: max_cost_usd 1.00 reached \(1.20 USD spent\)"):
        editor.edit(image, "x", seed=3)
    assert editor.inner.edits == 3
    editor.close()
    editor.close()
    assert editor.inner.closed == 2
    priced = build_backend(record, {"max_cost_usd": 1.0, "price_per_call_usd": 0.4})
    priced.edit(image, "x", seed=0)
    priced.edit(image, "x", seed=1)
    with pytest.raises(ProviderStop, match=r"the next call costs 0\.40"):
        priced.edit(image, "x", seed=2)
    assert priced.inner.edits == 2
    # edct estimate assumes its latency
    times = latency_models({"editor": ("acme-edit", {})})
    assert times["editor"].seconds == 7.0 and times["editor"].sd == 1.0
    assert times["editor"].source == "default (Acme's editor, 7 s per edit)"
    # a sweep job using it asks for a GPU (it loads weights), unless it runs on the CPU
    raw["roles"]["editor"] = {"backend": "acme-edit", "max_cost_usd": 3}
    assert local_weights(config_from_dict(raw)) == ["editor"]
    # and a run builds it behind its ceiling
    with roles.build_roles(config_from_dict(raw).role_specs()) as live:
        assert live.editor.max_cost_usd == 3 and live.editor.inner.name == "acme-edit:acme-1"


def test_a_bad_entry_point_is_one_line_naming_it(tmp_path, monkeypatch) -> None:
    _ship(tmp_path, monkeypatch, "[edct_bench.backends]\nbroken = acme_missing:RECORD\n")
    with pytest.raises(ConfigError) as caught:
        available_backends()
    message = str(caught.value)
    assert "\n" not in message
    assert "entry point broken = acme_missing:RECORD (group edct_bench.backends)" in message
    assert "ModuleNotFoundError" in message


def test_the_calibration_only_backends_are_marked() -> None:
    only = {r.name for r in RECORDS if r.calibration_only}
    assert only == {"calibration-rules", "calibration-editor", "calibration-oracle"}
    assert all(ROLE_KINDS[role] in roles.KINDS for role in ROLE_KINDS)
