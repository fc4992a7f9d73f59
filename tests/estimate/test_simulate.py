"""The real pipelined driver on a virtual clock: one sample takes exactly its critical path,
a throughput-bound run takes its bottleneck's busy time, and failures and verification
rejections cost what they cost in a real run."""

from __future__ import annotations

import pytest

from edct_task.engine.driver import Limits
from edct_task.engine.protocol import ProtocolConfig
from edct_task.estimate.latency import CallTime
from edct_task.estimate.simulate import simulate


def _times(**seconds: float) -> dict[str, CallTime]:
    base = {"target": 0.0, "extractor": 0.0, "judge": 0.0, "edit_parser": 0.0, "editor": 0.0, "detector": 0.0}
    return {role: CallTime(s) for role, s in {**base, **seconds}.items()}


def test_one_sample_takes_its_critical_path() -> None:
    times = _times(target=1.0, extractor=2.0, edit_parser=0.5, editor=5.0, detector=0.25, judge=3.0)
    sim = simulate(1, ProtocolConfig(k=2), Limits(), times, verify_pass_rate=1.0)
    window = Limits().batch_window_s
    # 6 target calls (each waits the batch window), concepts + instructions, per edit the edit
    # (its parser and the previous step's judges beside it) and its check, the last judges
    expected = 6 * (1.0 + window) + 2 * 2.0 + 2 * 5.0 + 2 * 0.25 + 3.0
    assert sim.wall_s == pytest.approx(expected)
    assert sim.statuses == {"scored": 1}
    assert sim.roles["judge"].calls == 4  # binary + graded for each of the 2 steps
    assert sim.roles["target"].items == 6


def test_a_throughput_bound_run_takes_the_bottleneck_busy_time() -> None:
    limits = Limits(editor_concurrency=2)
    sim = simulate(50, ProtocolConfig(k=2), limits, _times(editor=10.0), verify_pass_rate=1.0)
    edits = 50 * 2
    assert sim.roles["editor"].calls == edits
    assert edits * 10.0 / 2 <= sim.wall_s <= edits * 10.0 / 2 + 10.0  # + the last sample's tail
    assert sim.bottleneck() == "edit" and sim.busy_fraction()["edit"] > 0.97
    wider = simulate(
        50,
        ProtocolConfig(k=2),
        limits.model_copy(update={"editor_concurrency": 8}),
        _times(editor=10.0),
        verify_pass_rate=1.0,
    )
    assert wider.wall_s == pytest.approx(sim.wall_s / 4, rel=0.1)


def test_rejected_edits_are_retried_and_failed_edits_cost_the_sample() -> None:
    cfg = ProtocolConfig(k=2, edit_attempts=2)
    rejected = simulate(20, cfg, Limits(), _times(editor=1.0), verify_pass_rate=0.0)
    assert rejected.statuses == {"excluded": 20}
    assert rejected.roles["editor"].calls == 20 * 2  # the first edit and its retry, then the sample stops
    failing = {**_times(), "editor": CallTime(1.0, failure_rate=1.0)}
    failed = simulate(20, cfg, Limits(), failing, verify_pass_rate=1.0)
    assert failed.statuses == {"excluded": 20}
    assert "detector" not in failed.roles  # nothing to verify
    assert failed.roles["editor"].failures == 40


def test_retries_on_the_wire_add_their_latency() -> None:
    plain = simulate(1, ProtocolConfig(), Limits(), _times(editor=4.0), verify_pass_rate=1.0)
    retried = {**_times(), "editor": CallTime(4.0, retry_rate=1.0, retry_wait_s=1.0)}
    slow = simulate(1, ProtocolConfig(), Limits(), retried, verify_pass_rate=1.0)
    assert slow.wall_s == pytest.approx(plain.wall_s + 2 * (4.0 + 1.0))


@pytest.mark.slow
def test_a_thousand_samples_simulate_without_sleeping() -> None:
    sim = simulate(1000, ProtocolConfig(), Limits(), _times(target=2.0, judge=10.0, editor=20.0))
    # 20 s edits at concurrency 8 over ~2.3 attempts a sample: the editor bounds the run
    assert sim.wall_s > 1000 * 2 * 20.0 / 8 and sim.bottleneck() == "edit"


def test_more_editor_threads_do_not_speed_up_one_locked_pipeline() -> None:
    locked = {**_times(), "editor": CallTime(10.0, serial=True)}
    one = simulate(10, ProtocolConfig(k=2), Limits(editor_concurrency=1), locked, verify_pass_rate=1.0)
    eight = simulate(10, ProtocolConfig(k=2), Limits(editor_concurrency=8), locked, verify_pass_rate=1.0)
    assert one.wall_s == pytest.approx(eight.wall_s, rel=0.02)
    assert eight.wall_s >= 10 * 2 * 10.0


def test_requests_a_run_answered_from_its_cache_need_no_call() -> None:
    cfg = ProtocolConfig(k=2)
    cold = simulate(30, cfg, Limits(), _times(judge=1.0), verify_pass_rate=1.0)
    warm = simulate(30, cfg, Limits(), _times(judge=1.0), verify_pass_rate=1.0, hit_rates={"judge": 1.0})
    assert cold.roles["judge"].calls == 30 * 4 and "judge" not in warm.roles
    assert warm.statuses == cold.statuses == {"scored": 30}
    half = simulate(200, cfg, Limits(), _times(), verify_pass_rate=1.0, hit_rates={"edit_parse": 0.5})
    assert 0.4 < half.roles["edit_parser"].calls / (200 * 2) < 0.6
