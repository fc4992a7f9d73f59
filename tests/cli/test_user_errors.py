"""Every user error exits 2 with one message naming the key and what to write, never a traceback,
and before any backend is built."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from edct_task import roles as roles_mod
from edct_task.cli.main import main
from edct_task.config import calibration_config


@pytest.fixture
def config_file(tmp_path: Path):
    def write(mutate) -> Path:
        raw = calibration_config(n=4, output_dir=tmp_path / "out").model_dump(mode="json")
        raw["progress"] = False
        mutate(raw)
        path = tmp_path / "config.yaml"
        path.write_text(yaml.safe_dump(raw))
        return path

    return write


def _run(argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str]:
    rc = main(argv)
    err = capsys.readouterr().err
    return rc, err


CASES = {
    "k=0": (lambda c: c["protocol"].update(k=0), "protocol.k"),
    "edit_attempts=0": (lambda c: c["protocol"].update(edit_attempts=0), "protocol.edit_attempts"),
    "unknown gate key": (lambda c: c["verification"].update(tau_inn=0.5), "verification.tau_inn"),
    "gate value not a number": (lambda c: c["verification"].update(tau_in="high"), "verification.tau_in"),
    "unknown top-level key": (lambda c: c.update(protocl={"k": 1}), "protocl"),
    "sneaky behaviour": (lambda c: c["roles"]["target"].update(behavior="sneaky"), "roles.target"),
    "mixed out of range": (lambda c: c["roles"]["target"].update(behavior="mixed:1.7"), "roles.target"),
    "unknown backend": (lambda c: c["roles"]["judge"].update(backend="gpt-judge"), "roles.judge"),
    "unknown option": (lambda c: c["roles"]["editor"].update(strength=2), "roles.editor"),
    "missing role": (lambda c: c["roles"].pop("detector"), "detector"),
    "nested secret": (
        lambda c: c["roles"]["judge"].update(extra_body={"nested": {"password": "hunter2"}}),
        "roles.judge.extra_body.nested.password",
    ),
    "env var not set": (
        lambda c: c["roles"]["judge"].update(
            backend="openai-chat", model="m", api_key_env="EDCT_TEST_UNSET_KEY"
        ),
        "EDCT_TEST_UNSET_KEY",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_configs_exit_2_with_one_message_before_any_backend_is_built(
    case: str, config_file, capsys, monkeypatch
) -> None:
    built: list[str] = []
    for kind, records in roles_mod.REGISTRY.items():
        for name, record in list(records.items()):

            def counting(options, _r=record, _n=name):
                built.append(_n)
                return _r.load_factory()(options)

            monkeypatch.setitem(roles_mod.REGISTRY[kind], name, replace(record, factory=counting))
    monkeypatch.delenv("EDCT_TEST_UNSET_KEY", raising=False)
    mutate, named = CASES[case]
    rc, err = _run(["run", "--config", str(config_file(mutate))], capsys)
    assert rc == 2, err
    assert "Traceback" not in err and err.startswith("edct: configuration error:")
    assert named in err
    if case not in ("sneaky behaviour", "mixed out of range", "unknown option"):
        assert built == []  # caught before any backend was built


@pytest.mark.parametrize(
    "argv, named",
    [
        (["demo", "--behavior", "bogus", "-n", "2", "--no-progress"], "bogus"),
        (["demo", "-n", "2", "--no-progress", "--set", "protocol.k=0"], "protocol.k"),
        (["run", "--config", "/nonexistent/edct.yaml"], "does not exist"),
        (["stability", "/nonexistent/run"], "does not exist"),
    ],
)
def test_cli_user_errors(argv: list[str], named: str, capsys, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    rc, err = _run(argv, capsys)
    assert rc == 2 and "Traceback" not in err and named in err


def test_bad_yaml_names_the_file(tmp_path: Path, capsys) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("roles: [unclosed\n")
    rc, err = _run(["run", "--config", str(path)], capsys)
    assert rc == 2 and str(path) in err and "not valid YAML" in err


def test_an_unreadable_data_path_fails_before_any_backend_is_built(config_file, capsys, monkeypatch) -> None:
    built: list[str] = []
    for kind, records in roles_mod.REGISTRY.items():
        for name, record in list(records.items()):
            counting = lambda o, _r=record, _n=name: built.append(_n) or _r.load_factory()(o)  # noqa: E731
            monkeypatch.setitem(roles_mod.REGISTRY[kind], name, replace(record, factory=counting))
    path = config_file(lambda c: c.update(data={"source": "dataset", "path": "/nonexistent/edct-bench"}))
    rc, err = _run(["run", "--config", str(path)], capsys)
    assert rc == 2 and err.startswith("edct: data error:") and "/nonexistent/edct-bench" in err
    assert "Traceback" not in err and built == []


def test_a_model_that_cannot_be_loaded_is_one_line_exit_2(config_file, capsys, tmp_path) -> None:
    """A detector whose weights are not there (a wrong folder, not cached while offline, gated)."""
    missing = "edct-test/owlv2-not-in-any-cache"  # HF_HUB_OFFLINE=1: not downloadable, not cached
    path = config_file(lambda c: c["roles"].update(detector={"backend": "owlv2", "model": missing}))
    rc, err = _run(["run", "--config", str(path)], capsys)
    assert rc == 2 and "Traceback" not in err, err
    (line,) = err.strip().splitlines()  # transformers' message spans two lines: one here
    assert line.startswith("edct: configuration error: roles.detector (backend 'owlv2'): ")
    assert "offline" in line  # (the detector factory names the backend, transformers the cause)
