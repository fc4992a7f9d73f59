"""Issue 34: hostile configs and ``--set`` values cost one line (exit 2), never a traceback or
minutes of CPU; a key put by mistake in ``api_key_env`` or ``base_url`` is never echoed."""

from __future__ import annotations

import os
import time

import pytest
import yaml
from support.hang_guard import cpu_budget

from edct_task.cli.main import main
from edct_task.config import calibration_config, config_from_dict, load_config
from edct_task.core.errors import ConfigError
from edct_task.roles import build_roles

KEY = "sk-live-4f9a1c7e2b8d6035"


def _valid(tmp_path) -> dict:
    return calibration_config(n=4, output_dir=tmp_path / "out").model_dump(mode="json")


BOMB = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9)
)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("data: {n: " + "9" * 5000 + "}\n", r"Exceeds the limit \(4300 digits\)"),
        ("data: {n: " + "9" * 30 + "}\n", "data.n: the number is out of range"),
        ("data: {seed: 2026-02-30}\n", "day is out of range for month"),
        ("data: {source: calibration}\nnotes: \xff\xfe\n", "byte 35 is not UTF-8"),
        (BOMB, "once its aliases are expanded"),
        ("roles: [" * 5000 + "]" * 5000, "not valid YAML|nested too deeply"),
    ],
)
def test_a_hostile_config_is_one_line(tmp_path, capsys, text, reason):
    """Before: tracebacks, and 208 CPU-s for the 1.1 KB alias file in ``edct estimate``."""
    path = tmp_path / "bad.yaml"
    path.write_bytes(text.encode("latin-1"))
    start = time.process_time()
    assert main(["estimate", "--config", str(path)]) == 2
    # CPU seconds, not wall (load does not inflate them; a slower CPU does: cpu_budget); generous:
    # the bound is 100,000 expanded values
    assert time.process_time() - start < cpu_budget(30)
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert __import__("re").search(reason, err), err


def test_a_fifo_config_is_refused_not_waited_on(tmp_path, capsys):
    os.mkfifo(tmp_path / "fifo.yaml")
    assert main(["estimate", "--config", str(tmp_path / "fifo.yaml")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    with pytest.raises(ConfigError, match="is a FIFO, not a regular file"):
        load_config(tmp_path / "fifo.yaml")


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("data.n=" + "9" * 5000, "--set data.n: a value cannot be read"),
        ("data.seed=2026-02-30", "--set data.seed: a value cannot be read"),
        ("data.n=[unclosed", "--set data.n line 1: not valid YAML"),
        ("data.n=" + "9" * 25, "data.n: the number is out of range"),
    ],
)
def test_a_bad_set_value_is_one_line(tmp_path, capsys, value, reason):
    path = tmp_path / "ok.yaml"
    path.write_text(yaml.safe_dump(_valid(tmp_path)))
    assert main(["estimate", "--config", str(path), "--set", value]) == 2
    err = capsys.readouterr().err
    assert reason in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_key_in_api_key_env_is_never_echoed(tmp_path):
    raw = _valid(tmp_path)
    raw["roles"]["judge"] = {"backend": "openai-chat", "model": "m", "api_key_env": KEY}
    with pytest.raises(ConfigError) as exc:
        build_roles(config_from_dict(raw).role_specs())
    assert KEY not in str(exc.value) and "must name an environment variable" in str(exc.value)


def test_a_key_in_a_base_url_with_an_uppercase_scheme_is_never_echoed(tmp_path, monkeypatch):
    monkeypatch.setenv("EDCT_T_KEY", "x" * 20)
    raw = _valid(tmp_path)
    raw["roles"]["judge"] = {
        "backend": "openai-chat",
        "model": "m",
        "base_url": f"HTTPS://user:{KEY}@127.0.0.1:9/v1",
        "api_key_env": "EDCT_T_KEY",
    }
    with pytest.raises(ConfigError) as exc:
        build_roles(config_from_dict(raw).role_specs())
    assert KEY not in str(exc.value) and "must not carry credentials" in str(exc.value)
