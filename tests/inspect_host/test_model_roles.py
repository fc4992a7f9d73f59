"""Inspect's ``--model-role judge=…`` / ``extractor=…``: EDCT's requests of that role (the samples'
and the known-answer controls') are answered by Inspect's model for the role, and the run
folder's setup identity says so; without it the roles come from the EDCT config.

The Inspect models here are a provider registered in this module, ``standin/<policy>``: the stand-in
judges (``support.stand_in_judges``) behind Inspect's ``ModelAPI``, counting every call."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.hang_guard import hang_limit
from support.inspect_extra import require_inspect
from support.stand_in_judges import StandIn

require_inspect()

from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.model import GenerateConfig, ModelAPI, ModelOutput, modelapi  # noqa: E402

from edct_task import prompts  # noqa: E402
from edct_task.config import calibration_config  # noqa: E402
from edct_task.core.errors import ConfigError  # noqa: E402
from edct_task.roles import RoleSpec, build_roles  # noqa: E402
from edct_task.run.outputs import load_run  # noqa: E402
from model_adapters.contracts import GenerationParams  # noqa: E402

pytestmark = pytest.mark.slow  # four Inspect runs of the calibration task (one by its CLI): > 30 s

LIMIT = 10
CALLS: dict[str, list[str]] = {}
"""Every prompt each ``standin/<policy>`` model was sent, by policy."""


@modelapi(name="standin")
def standin() -> type:
    class StandInAPI(ModelAPI):
        def __init__(
            self,
            model_name: str,
            base_url: str | None = None,
            api_key: str | None = None,
            config: GenerateConfig = GenerateConfig(),  # noqa: B008 (Inspect's signature)
            **model_args: Any,
        ) -> None:
            super().__init__(model_name, base_url, api_key, [], config)
            self.model = StandIn(model_name)

        async def generate(self, input: list[Any], tools: Any, tool_choice: Any, config: Any) -> Any:
            prompt = input[-1].text
            CALLS.setdefault(self.model_name, []).append(prompt)
            reply = self.model.complete(prompt, GenerationParams())
            return ModelOutput.from_content(model=self.model_name, content=reply.text)

    return StandInAPI


def run_inspect(tmp: Path, name: str, target: str, roles: dict[str, str] | None) -> Any:
    """The calibration task in process, ``roles`` as ``--model-role``; the loaded EDCT run folder."""
    out = tmp / name
    (log,) = inspect_eval(
        "edct/edct_calibration",
        model=f"edct/{target}",
        model_roles=roles,
        limit=LIMIT,
        log_dir=str(tmp / f"logs-{name}"),
        task_args={"output_dir": str(out), "work_dir": str(tmp / f"work-{name}")},
        display="none",
    )
    assert log.status == "success", log.error
    return load_run(out)


def judge_calls(run: Any) -> int:
    """The judge requests of a run's samples and controls (each one call: nothing is cached twice)."""
    samples = sum((s.binary is not None) + (s.graded is not None) for r in run.records for s in r.steps)
    return samples + sum(c.role.startswith("judge") for c in run.controls)


def test_a_bad_inspect_judge_answers_every_judge_request_and_its_controls_flag_it(tmp_path: Path) -> None:
    CALLS.clear()
    run = run_inspect(tmp_path, "always-1", "prior", {"judge": "standin/always-1"})
    overall = run.results["results"]["overall"]["metrics"]["ccs_binary"]
    assert overall["estimate"] == pytest.approx(1.0)  # the prior target (true CCS 0) scored perfect …
    controls = run.results["controls"]
    binary = controls["roles"]["judge_binary"]["judge"]
    assert binary["n"] == 16 and binary["below_bar"], binary  # … and the controls flag the judge
    assert any(line.startswith("binary judge: ") for line in controls["unreliable"])
    # every judge request (samples and controls) went to the Inspect model, nothing else did
    sent = CALLS["always-1"]
    assert len(sent) == judge_calls(run) > 32
    assert all(prompts.match_template(p)[0].startswith("judge_") for p in sent)
    roles = run.results["config"]["roles"]  # the setup identity names the Inspect model
    assert roles["judge"] == {
        "backend": "inspect-role",
        "role": "judge",
        "member": 0,
        "model": "standin/always-1",
    }
    assert roles["extractor"] == {"backend": "calibration-rules"}  # not bound: the config's


def test_the_extractor_and_judge_roles_from_inspect_give_the_config_roles_scores(tmp_path: Path) -> None:
    CALLS.clear()
    bound = run_inspect(
        tmp_path, "bound", "prior", {"judge": "standin/calibration", "extractor": "standin/calibration"}
    )
    config = run_inspect(tmp_path, "config", "prior", None)
    per_item = {r.sample.id: (r.status, r.scores.ccs_binary if r.scores else None) for r in bound.records}
    assert per_item == {
        r.sample.id: (r.status, r.scores.ccs_binary if r.scores else None) for r in config.records
    }
    assert bound.results["controls"]["unreliable"] == [] and all(c.correct for c in bound.controls)
    sent = CALLS["calibration"]
    extractor = [p for p in sent if not prompts.match_template(p)[0].startswith("judge_")]
    assert len(sent) - len(extractor) == judge_calls(bound)
    assert len(extractor) >= 16 + LIMIT  # the extractor's controls and at least one request a sample
    assert sum(c.role == "extractor" for c in bound.controls) == 16
    assert bound.results["config"]["roles"]["extractor"]["model"] == "standin/calibration"
    assert config.results["config"]["roles"]["judge"] == {"backend": "calibration-rules"}


def test_the_backend_outside_an_inspect_task_is_one_config_error() -> None:
    spec = calibration_config().role_specs()
    specs = {**spec, "judge": RoleSpec("inspect-role", {"role": "judge"})}
    with pytest.raises(
        ConfigError, match=r"^roles\.judge \(backend 'inspect-role'\): Inspect model role 'judge' "
    ):
        build_roles(specs, require_target=False)


def test_the_cli_model_roles_answer_offline_and_are_recorded(tmp_path: Path) -> None:
    """``inspect eval … --model-role judge=edct/rules --model-role extractor=edct/rules``: the
    calibration rules as Inspect models give the faithful target its known CCS_binary 1.000."""
    out = tmp_path / "run"
    cmd = [
        sys.executable, "-m", "inspect_ai", "eval", "edct/edct_calibration", "--model", "edct/faithful",
        "--model-role", "judge=edct/rules", "--model-role", "extractor=edct/rules", "--limit", "5",
        "-T", f"output_dir={out}", "-T", f"work_dir={tmp_path / 'work'}", "--log-dir", str(tmp_path / "logs"),
        "--display", "plain",
    ]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=hang_limit(300))
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = load_run(out)
    assert run.results["results"]["overall"]["metrics"]["ccs_binary"]["estimate"] == pytest.approx(1.0)
    roles = run.results["config"]["roles"]
    for role in ("judge", "extractor"):
        assert roles[role] == {"backend": "inspect-role", "role": role, "member": 0, "model": "edct/rules"}
    assert run.results["controls"]["unreliable"] == [] and all(c.correct for c in run.controls)
