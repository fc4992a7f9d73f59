"""Run configuration: validation, overrides, secrets, role resolution."""

from __future__ import annotations

from pathlib import Path

import pytest

from edct_task.config import calibration_config, config_from_dict, load_config
from edct_task.core.errors import ConfigError
from edct_task.roles import build_roles


def _raw() -> dict:
    return calibration_config("faithful", n=5).model_dump(mode="json")


def test_embedded_default_builds_every_role() -> None:
    roles = build_roles(calibration_config().role_specs())
    assert roles.target.identity()["behavior"] == "faithful"
    assert roles.edit_parser is not None
    assert roles.detector.name


def test_overrides_reach_nested_fields() -> None:
    cfg = config_from_dict(
        _raw(), ["protocol.k=1", "roles.target.behavior=prior", "verification.tau_out=0.25"]
    )
    assert cfg.protocol.k == 1
    assert cfg.role_specs()["target"].options["behavior"] == "prior"
    assert cfg.verification.tau_out == 0.25


def test_literal_secret_in_config_is_refused() -> None:
    raw = _raw()
    raw["roles"]["judge"]["api_key"] = "sk-not-a-real-key"
    with pytest.raises(ConfigError, match=r"roles\.judge\.api_key: secrets may not be written.*api_key_env"):
        config_from_dict(raw)


def test_missing_role_says_how_to_configure_it() -> None:
    raw = _raw()
    del raw["roles"]["judge"]
    with pytest.raises(ConfigError, match=r"(?s)role\(s\) judge not configured.*judge: \{backend: <name>\}"):
        build_roles(config_from_dict(raw).role_specs())


def test_unknown_backend_and_option_are_named() -> None:
    raw = _raw()
    raw["roles"]["editor"] = {"backend": "flux-magic"}
    with pytest.raises(
        ConfigError,
        match=r"(?s)roles.editor: unknown backend 'flux-magic'; editor backends: .*calibration-editor",
    ):
        build_roles(config_from_dict(raw).role_specs())
    raw = _raw()
    raw["roles"]["target"]["temperature"] = 0.7
    with pytest.raises(ConfigError, match=r"does not take option\(s\) temperature"):
        build_roles(config_from_dict(raw).role_specs())


def test_bad_values_and_files_give_specific_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"protocol\.exclusion_policy"):
        config_from_dict(_raw(), ["protocol.exclusion_policy=drop"])
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("roles: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    with pytest.raises(ConfigError, match=r"dotted\.key=value"):
        config_from_dict(_raw(), ["protocol.k"])


def test_no_edit_parser_role_means_rule_based_parsing() -> None:
    raw = _raw()
    del raw["roles"]["edit_parser"]
    cfg = config_from_dict(raw)
    assert cfg.protocol.llm_edit_parser is False
    assert build_roles(cfg.role_specs()).edit_parser is None
