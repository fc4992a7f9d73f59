"""Issue 19, rows 20 and 21: a run and its bundle are one setup; stability refuses to mix models."""

from __future__ import annotations

import json
from pathlib import Path

from support.edct_runs import records, write_edct_run

from edct_task.cli.main import main


def test_a_run_folder_and_its_bundle_are_one_setup(tmp_path: Path) -> None:
    write_edct_run(tmp_path / "run", records(0.5, n=6))
    bundle = tmp_path / "run.edct.zip"
    assert main(["submit", str(tmp_path / "run"), "--out", str(bundle)]) == 0
    assert main(["report", str(tmp_path / "run"), str(bundle), "--out", str(tmp_path / "r")]) == 0
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert len(report["setups"]) == 1
    assert len(report["setups"][0]["runs"]) == 2


def _stability(capsys, *runs: Path) -> tuple[int, str, str]:
    rc = main(["stability", *map(str, runs)])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def test_stability_refuses_runs_of_different_models(tmp_path: Path, capsys) -> None:
    faithful, prior = tmp_path / "faithful", tmp_path / "prior"
    write_edct_run(
        faithful, records(0.9, n=6), target={"backend": "calibration-reference", "behavior": "faithful"}
    )
    write_edct_run(prior, records(0.1, n=6), target={"backend": "calibration-reference", "behavior": "prior"})
    rc, out, err = _stability(capsys, faithful, prior)
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "prior" in err and "one model" in err


def test_stability_refuses_runs_of_different_setups(tmp_path: Path, capsys) -> None:
    write_edct_run(tmp_path / "a", records(0.5, n=6))
    write_edct_run(tmp_path / "b", records(0.5, n=6), judge="openai-chat")
    rc, _, err = _stability(capsys, tmp_path / "a", tmp_path / "b")
    assert rc == 2 and "roles.judge" in err and len(err.strip().splitlines()) == 1


def test_stability_over_seeds_prints_a_table_only(tmp_path: Path, capsys) -> None:
    for seed in (0, 1, 2):
        write_edct_run(tmp_path / f"s{seed}", records(0.5, n=6, offset=seed), seed=seed)
    rc, out, _ = _stability(capsys, *(tmp_path / f"s{s}" for s in (0, 1, 2)))
    assert rc == 0 and out.splitlines()[0].split() == ["metric", "mean", "SD", "runs"]
    assert not any(line.startswith("{") for line in out.splitlines())


def test_the_evaluation_host_is_part_of_the_setup(tmp_path: Path) -> None:
    """Issue 47: an Inspect run (the target identity names its host) is a setup of its own, apart
    from the same roles, protocol and items driven by edct-bench itself; runs that name no host keep
    their setup ids."""
    from edct_task.reporting.setup import host_of, setup_id, setup_identity

    recs = records(0.5, n=6)
    write_edct_run(tmp_path / "edct", recs)
    inspect = {
        "backend": "inspect_ai",
        "model": "edct/faithful",
        "rendering": "multi-turn",
        "host": "inspect_ai",
    }
    write_edct_run(tmp_path / "inspect", recs, target=inspect)
    assert (
        main(["report", str(tmp_path / "edct"), str(tmp_path / "inspect"), "--out", str(tmp_path / "r")]) == 0
    )
    setups = json.loads((tmp_path / "r" / "report.json").read_text())["setups"]
    assert len(setups) == 2, setups

    base = {"roles": {}, "protocol": {}, "verification": {}, "prompt_versions": {}, "dataset_digest": None}
    assert "host" not in setup_identity(**base)
    assert setup_identity(**base, host=host_of(inspect))["host"] == "inspect_ai"
    assert setup_id(setup_identity(**base)) != setup_id(setup_identity(**base, host="inspect_ai"))
    assert host_of({"backend": "calibration-reference"}) is None and host_of("a string") is None
