"""A run folder is never overwritten by another run (``run.workspace.claim_setup``, ``claim``),
and the user errors of ``edct run`` name the flag the user typed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from edct_task.cli.main import main, quiet_loguru
from edct_task.config import calibration_config, load_config
from edct_task.core.errors import ConfigError
from edct_task.lmms import settings as lmms_settings
from edct_task.lmms.tasks import unknown_tasks
from edct_task.run.workspace import SETUP_NAME, claim, first_difference

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "calibration.yaml"


def _run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["run", "--config", str(EXAMPLE), "--no-progress", "--set", "data.n=3", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_run_of_another_setup_is_refused_and_the_same_setup_resumes(tmp_path, capsys):
    folder = tmp_path / "run"
    code, _, _ = _run(capsys, "--output", str(folder))
    assert code == 0
    first = (folder / "results.json").read_bytes()
    samples = (folder / "samples.jsonl").read_bytes()
    # another target behaviour into the same folder: one line, naming the difference and the fix
    code, out, err = _run(capsys, "--output", str(folder), "--set", "roles.target.behavior=prior")
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "\\n" not in lines[0], err
    assert 'holds a run of another setup (backends.target.behavior: "faithful" there, "prior" here)' in err
    assert "--output" in err and f"remove {folder}" in err
    assert (folder / "results.json").read_bytes() == first  # the first run is untouched
    assert (folder / "samples.jsonl").read_bytes() == samples
    # the same setup again: resumed, nothing recomputed
    code, out, _ = _run(capsys, "--output", str(folder))
    assert code == 0
    assert "resumed: " in out and " calls reused from the stage cache, 0 new" in out
    again = json.loads((folder / "results.json").read_text())
    assert again["results"] == json.loads(first)["results"]
    assert sum(again["calls"]["calls"].values()) == 0
    # more items of the same setup extend the run (which items is not the setup)
    code, out, _ = _run(capsys, "--output", str(folder), "--set", "data.n=4")
    assert code == 0 and ", 0 new" not in out


def test_a_protocol_change_is_another_setup_too(tmp_path, capsys):
    folder = tmp_path / "run"
    assert _run(capsys, "--output", str(folder))[0] == 0
    code, _, err = _run(capsys, "--output", str(folder), "--set", "protocol.k=1")
    assert code == 2 and "protocol.k: 2 there, 1 here" in err


def test_two_setups_sharing_a_cache_keep_their_records_apart(tmp_path, capsys):
    """A shared cache_dir never answers one setup with the other's records: each run equals its
    own run on a fresh cache."""
    shared = tmp_path / "shared-cache"
    results = {}
    for behavior in ("faithful", "prior", "faithful"):
        for cache in (shared, tmp_path / f"fresh-{behavior}"):
            out = tmp_path / f"{cache.name}-{behavior}-{len(results)}"
            code, _, _ = _run(
                capsys,
                "--output",
                str(out),
                "--set",
                f"roles.target.behavior={behavior}",
                "--set",
                f"cache_dir={cache}",
            )
            assert code == 0
            run = json.loads((out / "results.json").read_text())
            results[(cache == shared, behavior, len(results))] = run
    by = {}
    for (is_shared, behavior, _), r in results.items():
        by.setdefault((is_shared, behavior), []).append(r["results"])
    assert by[(True, "faithful")][0] == by[(False, "faithful")][0]
    assert by[(True, "prior")][0] == by[(False, "prior")][0]
    assert by[(True, "faithful")][0] != by[(True, "prior")][0]


def test_first_difference_names_the_path_and_counts_the_rest():
    a = {"backends": {"target": {"behavior": "faithful"}, "judge": [{"v": 1}]}, "protocol": {"k": 2}}
    b = {"backends": {"target": {"behavior": "prior"}, "judge": [{"v": 2}]}, "protocol": {"k": 2}}
    assert first_difference(a, a) is None
    assert first_difference(a, b) == ("backends.judge[0].v", 1, 2, 1)
    assert first_difference({"x": 1}, {"y": 1})[0] == "x"


def test_the_loop_path_claims_its_run_folder_and_checks_its_setup(tmp_path, monkeypatch):
    monkeypatch.delenv("EDCT_CONFIG", raising=False)
    monkeypatch.setenv(lmms_settings.ENV_WORK_DIR, str(tmp_path / "work"))
    monkeypatch.setenv(lmms_settings.ENV_OUTPUT_DIR, str(tmp_path / "out"))
    # a live run holds the folder: refused, naming how to choose another
    in_use = r"another edct run is using .*EDCT_OUTPUT_DIR"
    with claim(tmp_path / "out"), pytest.raises(ConfigError, match=in_use):
        lmms_settings.build_settings(calibration_config(n=2))
    lmms_settings.build_settings(calibration_config(n=2)).close()
    assert (tmp_path / "out" / SETUP_NAME).exists()
    # the same folder with another protocol: refused before any call
    with pytest.raises(ConfigError, match=r"holds a run of another setup \(protocol\.k: 2 there, 3 here\)"):
        other = calibration_config(n=2)
        lmms_settings.build_settings(
            other.model_copy(update={"protocol": other.protocol.model_copy(update={"k": 3})})
        )
    settings = lmms_settings.build_settings(calibration_config(n=2))  # the same setup: taken
    try:  # and held while it is open
        with pytest.raises(ConfigError, match="another edct run is using"), claim(tmp_path / "out"):
            pass
    finally:
        settings.close()


def test_user_errors_name_the_flag_and_the_rule_on_one_line(capsys):
    code = main(["run", "--model", "edct_reference", "--tasks", "edct_calibration", "--limit", "0"])
    err = capsys.readouterr().err
    assert code == 2 and err == "edct: configuration error: --limit: must be at least 1\n"
    code, _, err = _run(capsys, "--set", "data.n=0")
    assert code == 2 and err == "edct: configuration error: --set data.n: must be at least 1\n"
    code, _, err = _run(capsys, "--shard", "3/2")
    assert code == 2 and err.startswith("edct: configuration error: --shard: shard '3/2': I must be 0")


def test_a_task_typo_is_answered_at_once_with_the_close_matches(monkeypatch):
    monkeypatch.setitem(sys.modules, "lmms_eval.tasks", None)  # lmms-eval's task index is never built
    assert unknown_tasks(["edct_calibraton", "edct_bnch"], "m") == (
        "unknown task edct_calibraton (did you mean edct_calibration?); "
        "unknown task edct_bnch (did you mean edct_bench?)"
    )


def test_yaml_off_is_the_word_off(tmp_path):
    """`structured: off` as the docs write it (unquoted): YAML 1.1 read it as false and the option
    refused it; booleans are YAML 1.2's (true/false), and boolean fields still take the words."""
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["roles"]["judge"] = {"backend": "openai-chat", "model": "m", "base_url": "http://localhost:1/v1"}
    text = yaml.safe_dump(raw).replace("model: m", "model: m\n    structured: off")
    text += "progress: no\n"
    path = tmp_path / "c.yaml"
    path.write_text(text)
    config = load_config(path)
    assert config.roles["judge"].model_extra["structured"] == "off"
    assert config.progress is False


def test_lmms_evals_debug_lines_are_hidden_unless_verbose(capsys):
    from loguru import logger

    quiet_loguru(verbose=False)
    logger.debug("index line")
    logger.info("info line")
    logger.warning("a warning")
    err = capsys.readouterr().err
    assert "index line" not in err and "info line" not in err and "a warning" in err
    quiet_loguru(verbose=True)
    logger.debug("index line")
    assert "index line" in capsys.readouterr().err
    quiet_loguru(verbose=False)
