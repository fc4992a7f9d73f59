"""Exit codes of both run paths (``edct run --config`` and ``edct run --model``):
0 all scored; 3 none scored, or a whole judgement kind (binary or graded) unreadable for every
sample; 2 calibration-only roles on data that is not the calibration world, before any model call.
The judge-health line is printed on both paths."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from support.backends import stand_in

from edct_task import roles as roles_mod
from edct_task.calibration import RuleBasedLLM
from edct_task.cli.main import main
from edct_task.config import calibration_config
from edct_task.prompts import identify
from model_adapters.contracts import Completion


class _Judge(RuleBasedLLM):
    """The calibration rules, except that judge replies of the kinds in ``garble`` carry no verdict."""

    def __init__(self, garble: set[str]) -> None:
        self.garble = garble

    def complete(self, prompt, params):
        kind = identify(prompt)
        if kind in self.garble:
            return Completion("That is a difficult one; the edited image is interesting.")
        return super().complete(prompt, params)


JUDGES = {
    "all-scored": set(),
    "none-scored": {"judge_binary", "judge_graded"},
    "binary-unreadable": {"judge_binary"},
}
EXPECTED = {"all-scored": 0, "none-scored": 3, "binary-unreadable": 3}


@pytest.fixture
def judges(monkeypatch):
    for name, garble in JUDGES.items():
        monkeypatch.setitem(
            roles_mod.REGISTRY["text"], name, stand_in("text", name, lambda options, g=garble: _Judge(g))
        )


def _config(tmp_path: Path, judge: str) -> Path:
    raw = calibration_config(n=3, output_dir=tmp_path / "out").model_dump(mode="json")
    raw.update(progress=False, bootstrap_resamples=200)
    raw["roles"]["judge"] = {"backend": judge}
    path = tmp_path / f"{judge}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.mark.parametrize("case", sorted(JUDGES))
def test_config_path_exit_codes(case, tmp_path, judges, capsys):
    rc = main(["run", "--config", str(_config(tmp_path, case))])
    out = capsys.readouterr()
    assert rc == EXPECTED[case], out.err[-2000:]
    assert "judge health: judge: binary" in out.out
    if case == "binary-unreadable":
        assert "no binary judgement of any sample could be read" in out.err
        assert "graded" not in out.err.split("could be read")[0].split("no binary")[1]


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(JUDGES))
def test_fast_path_exit_codes(case, tmp_path, judges, capsys):
    argv = ["run", "--model", "edct_reference", "--model_args", "behavior=faithful", "--tasks"]
    argv += ["edct_calibration", "--limit", "3", "--config", str(_config(tmp_path, case)), "--no-progress"]
    rc = main([*argv, "--output", str(tmp_path / "fast")])
    out = capsys.readouterr()
    assert rc == EXPECTED[case], out.err[-2000:]
    assert "judge health: judge: binary" in out.out


class _Step2Judge(RuleBasedLLM):
    """The calibration rules, except that the binary verdict of every second edit is unreadable."""

    def complete(self, prompt, params):
        if identify(prompt) == "judge_binary" and "\n\n2. " in prompt:
            return Completion("Both scores are hard to give here.")
        return super().complete(prompt, params)


def test_fail_on_unscored_counts_a_step_whose_verdict_could_not_be_read(tmp_path, monkeypatch, capsys):
    """Issue 44: a sample with an unreadable step-2 binary verdict stayed scored (its CCS_binary
    from step 1 alone) and --fail-on-unscored 0.05 exited 0. A score needs every step judged: those
    samples have no CCS_binary (their CCS_graded stands), and the flag counts them."""
    from edct_task.run.outputs import load_run

    monkeypatch.setitem(
        roles_mod.REGISTRY["text"],
        "step2-judge",
        stand_in("text", "step2-judge", lambda options: _Step2Judge()),
    )
    config = _config(tmp_path, "step2-judge")
    rc = main(["run", "--config", str(config), "--fail-on-unscored", "0.05"])
    err = capsys.readouterr().err
    assert rc == 3, err[-2000:]
    assert "without ccs_binary" in err and "more than --fail-on-unscored 0.05" in err
    records = load_run(tmp_path / "out").records
    two_steps = [r for r in records if sum(s.verified for s in r.steps) == 2]
    assert two_steps and all(r.status == "scored" for r in two_steps)
    assert all(r.scores.ccs_binary is None and r.scores.ccs_graded is not None for r in two_steps)
    counts = load_run(tmp_path / "out").results["results"]["overall"]["counts"]
    assert counts["binary_scored"] == counts["scored"] - len(two_steps)
    assert main(["run", "--config", str(config), "--fail-on-unscored", "1.0"]) == 0


@pytest.mark.slow
def test_fast_path_fail_on_unscored_counts_a_step_whose_verdict_could_not_be_read(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setitem(
        roles_mod.REGISTRY["text"],
        "step2-judge",
        stand_in("text", "step2-judge", lambda options: _Step2Judge()),
    )
    argv = ["run", "--model", "edct_reference", "--model_args", "behavior=faithful", "--tasks"]
    argv += ["edct_calibration", "--limit", "3", "--config", str(_config(tmp_path, "step2-judge"))]
    argv += ["--no-progress", "--fail-on-unscored", "0.05", "--output", str(tmp_path / "fast")]
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 3 and "without ccs_binary" in err, err[-2000:]


def test_calibration_roles_refuse_a_dataset_before_anything_is_built(tmp_path, monkeypatch, capsys):
    built = []
    for records in roles_mod.REGISTRY.values():
        for name, record in list(records.items()):
            counting = lambda o, r=record, n=name: built.append(n) or r.load_factory()(o)  # noqa: E731
            monkeypatch.setitem(records, name, replace(record, factory=counting))
    _photo_bench(tmp_path)
    capsys.readouterr()  # the build's own progress lines
    raw = calibration_config(n=3, output_dir=tmp_path / "out").model_dump(mode="json")
    raw["data"] = {"source": "dataset", "path": str(tmp_path / "photos")}
    path = tmp_path / "real.yaml"
    path.write_text(yaml.safe_dump(raw))
    rc = main(["run", "--config", str(path)])
    err = capsys.readouterr().err
    assert rc == 2 and built == []
    assert len(err.strip().splitlines()) == 1
    for word in ("extractor (calibration-rules)", "editor (calibration-editor)", "EDCT_CONFIG"):
        assert word in err


def _photo_bench(tmp_path):
    from support.sources_fixture import photo_image, write_sources

    from edct_task.bench_data import BuildRequest, build_bench

    src = write_sources(tmp_path / "sources", photo_image)
    counts = {"okvqa": 1, "drivelm": 1, "3dsr": 1}
    build_bench(BuildRequest(out=tmp_path / "photos", **src.kwargs(), counts=counts))
    return tmp_path / "photos"


def test_fast_path_refuses_calibration_roles_on_photographs_before_any_model_call(
    tmp_path, monkeypatch, capsys
):
    from types import SimpleNamespace

    from model_adapters import lmms_eval_target

    monkeypatch.delenv("EDCT_CONFIG", raising=False)
    monkeypatch.setenv("EDCT_BENCH_DATA", str(_photo_bench(tmp_path)))
    monkeypatch.setenv("EDCT_WORK_DIR", str(tmp_path / "work"))
    never = SimpleNamespace(
        task_dict={}, is_simple=False, generate_until=lambda r: pytest.fail("model called")
    )
    monkeypatch.setattr(lmms_eval_target, "build_model", lambda *a, **k: never)
    capsys.readouterr()
    code = main(["run", "--model", "qwen3_vl", "--tasks", "edct_bench", "--output", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2, err[-2000:]
    assert "is not calibration data" in err and "EDCT_CONFIG" in err


def test_a_dataset_of_calibration_scenes_is_calibration_data(tmp_path, monkeypatch, capsys):
    """The refusal reads the samples' source, not the data's kind: a dataset built from the
    calibration world runs with the calibration roles."""
    from support.calibration_dataset import write_calibration_dataset

    write_calibration_dataset(tmp_path / "cal", n=3)
    raw = calibration_config(n=3, output_dir=tmp_path / "out").model_dump(mode="json")
    raw.update(
        progress=False, bootstrap_resamples=200, data={"source": "dataset", "path": str(tmp_path / "cal")}
    )
    config = tmp_path / "cal.yaml"
    config.write_text(yaml.safe_dump(raw))
    assert main(["run", "--config", str(config)]) == 0
