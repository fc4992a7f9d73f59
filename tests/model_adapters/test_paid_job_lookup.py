"""A paid submit whose outcome is unknown is looked up, not re-sent (issue 46, point 5): a BFL job
accepted and billed whose later replies were lost is polled by the rerun, never submitted again;
a submit whose reply never came is not re-sent by the rerun either."""

from __future__ import annotations

import numpy as np
import pytest
from support.hang_guard import hang_limit
from support.loopback import CalibrationWorld, Loopback

from edct_task.calibration import SceneEditor, generate_samples
from edct_task.roles import RoleSpec, build_roles
from model_adapters import bfl_editor
from model_adapters.errors import BackendError
from model_adapters.remote_editor import SubmitUncertain

KEY = "sk-editor-key-5c1e0a7d93b2"
SUBMIT = "/v1/flux-2-max"


@pytest.fixture(scope="module")
def world() -> CalibrationWorld:
    return CalibrationWorld("faithful")


@pytest.fixture(scope="module")
def case():
    from edct_task.calibration.scenes import scene_of

    sample = generate_samples(n=3, seed=0)[0]
    ball = next(o for o in scene_of(sample.image).objects if o.category == "ball")
    instruction = (
        f"Keep: everything else.\nChange: recolour the ball from {ball.colour} to "
        f"{'white' if ball.colour != 'white' else 'orange'}\nHow: match the lighting.\n"
        "Constraints: no new objects."
    )
    return sample.image, instruction


def _editor(url: str, monkeypatch, journal, sleep=lambda s: None):
    monkeypatch.setenv("LOOPBACK_EDITOR_KEY", KEY)
    options = {
        "model": "flux-2-max",
        "base_url": url,
        "api_key_env": "LOOPBACK_EDITOR_KEY",
        "timeout_s": hang_limit(5.0),
        "backoff_base_s": 0.01,
        "max_retries": 1,
        "job_journal": str(journal),
    }
    return bfl_editor.from_options(options, sleep=sleep)


def test_a_job_whose_replies_were_lost_is_polled_by_the_rerun_not_paid_again(
    world, case, monkeypatch, tmp_path
) -> None:
    image, instruction = case
    journal = tmp_path / "cache" / "paid_jobs" / "bfl.jsonl"
    with Loopback(world, api_key=KEY) as server:

        def cut_off(_seconds: float) -> None:
            server.down = True  # the submit was accepted and billed; every later reply is lost

        first = _editor(server.url, monkeypatch, journal, sleep=cut_off)
        with pytest.raises(BackendError):
            first.edit(image, instruction, seed=5)
        assert server.requests[SUBMIT] == 1 and server.bfl_billed == server.bfl_cost
        server.down = False
        rerun = _editor(server.url, monkeypatch, journal)
        got = rerun.edit(image, instruction, seed=5)
        assert server.requests[SUBMIT] == 1 and server.bfl_billed == server.bfl_cost  # looked up, not paid
        assert rerun.usage()["lookups"] == 1
        other = rerun.edit(image, instruction, seed=6)  # another request is submitted as usual
        assert server.requests[SUBMIT] == 2 and other.size == image.size
    expected = SceneEditor().edit(image, instruction, seed=5)
    assert got.size == expected.size and np.array_equal(np.asarray(got), np.asarray(expected))


def test_a_job_bfl_no_longer_knows_is_submitted_again(world, case, monkeypatch, tmp_path) -> None:
    image, instruction = case
    journal = tmp_path / "bfl.jsonl"
    with Loopback(world, api_key=KEY) as server:

        def cut_off(_seconds: float) -> None:
            server.down = True

        with pytest.raises(BackendError):
            _editor(server.url, monkeypatch, journal, sleep=cut_off).edit(image, instruction, seed=5)
        server.down = False
        server.bfl_jobs.clear()  # BFL forgot the job: "Task not found"
        got = _editor(server.url, monkeypatch, journal).edit(image, instruction, seed=5)
        assert server.requests[SUBMIT] == 2 and got.size == image.size


def test_a_submit_whose_reply_never_came_is_not_re_sent_by_the_rerun(
    world, case, monkeypatch, tmp_path
) -> None:
    image, instruction = case
    journal = tmp_path / "bfl.jsonl"
    with Loopback(world, api_key=KEY) as server:
        server.bfl_accept_then = "server_error"  # accepted and billed, then a 502
        with pytest.raises(SubmitUncertain):
            _editor(server.url, monkeypatch, journal).edit(image, instruction, seed=5)
        server.bfl_accept_then = None
        with pytest.raises(SubmitUncertain, match=r"not re-sent: remove its line from .*bfl\.jsonl"):
            _editor(server.url, monkeypatch, journal).edit(image, instruction, seed=5)
        assert server.requests[SUBMIT] == 1 and server.bfl_billed == server.bfl_cost


def test_edct_run_keeps_the_journal_in_its_cache_folder(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("LOOPBACK_EDITOR_KEY", KEY)
    spec = {
        "extractor": RoleSpec("calibration-rules", {}),
        "judge": RoleSpec("calibration-rules", {}),
        "detector": RoleSpec("calibration-oracle", {}),
        "editor": RoleSpec("bfl", {"model": "flux-2-max", "api_key_env": "LOOPBACK_EDITOR_KEY"}),
    }
    with build_roles(spec, require_target=False, journal_dir=tmp_path / "cache") as roles:
        assert roles.editor.journal.path == tmp_path / "cache" / "paid_jobs" / "bfl.jsonl"
    with build_roles(spec, require_target=False) as roles:
        assert roles.editor.journal is None
