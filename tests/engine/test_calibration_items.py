"""The calibration world's items are rendered as the driver draws them: ids at once, the first
requests out while later scenes still render, a loop that stops early renders no more."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from support.backends import stand_in
from support.hang_guard import hang_limit

from edct_task import roles as roles_mod
from edct_task.calibration import ReferenceVLM, calibration_sample
from edct_task.calibration import samples as calibration_samples
from edct_task.config import calibration_config, config_from_dict
from edct_task.engine.stage_cache import ImageStore
from edct_task.run.runner import CalibrationItems, load_samples, run


def test_ids_are_known_before_rendering_and_match_the_rendered_samples(tmp_path: Path) -> None:
    data = calibration_config(n=7).data.model_copy(update={"seed": 3})
    items = load_samples(data, ImageStore(tmp_path))
    assert isinstance(items, CalibrationItems) and len(items) == 7
    assert items.ids == [calibration_sample(i, 3).id for i in range(7)]
    drawn = list(items)
    assert [s.id for s in drawn] == items.ids
    assert drawn[4] == items[4] == items[-3]  # an index renders the same sample again
    expected = str(calibration_sample(0, 3).expected_answer)
    assert drawn[0].metadata == {"source": "calibration", "expected_answer": expected}


def _slow_scenes(
    monkeypatch: pytest.MonkeyPatch,
    events: list[str],
    delay: float,
    gate: tuple[int, threading.Event] | None = None,
) -> None:
    """Every scene takes ``delay`` longer to render; scene ``gate[0]`` also waits for ``gate[1]``
    (at most a hang guard's time: then it renders, late)."""
    real = calibration_samples.calibration_sample

    def slow(index: int, seed: int = 0):
        time.sleep(delay)
        if gate is not None and index == gate[0]:
            gate[1].wait(hang_limit(10))
        sample = real(index, seed)
        events.append(f"rendered {index}")
        return sample

    monkeypatch.setattr(calibration_samples, "calibration_sample", slow)


def test_a_loop_that_stops_early_renders_no_more(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    _slow_scenes(monkeypatch, events, 0.05)
    drawn = iter(CalibrationItems(100, 0, ImageStore(tmp_path)))
    first = [next(drawn), next(drawn)]
    drawn.close()  # type: ignore[attr-defined]
    settled = len(events)
    # closed: no render thread is left to render more
    assert not [t.name for t in threading.enumerate() if t.name.startswith("edct-render")]
    # the renders not yet started were cancelled: a few ran (two threads render ahead, more while
    # a busy machine keeps this thread waiting), not the 98 scenes still queued
    assert len(events) == settled < 50
    assert [s.id for s in first] == [calibration_sample(i).id for i in range(2)]


def test_the_first_target_call_goes_out_before_the_last_scene_renders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[str] = []
    lock = threading.Lock()
    asked = threading.Event()

    class Watched(ReferenceVLM):
        def generate(self, conversations, params):
            with lock:
                events.append("target")
            asked.set()
            return super().generate(conversations, params)

    monkeypatch.setitem(
        roles_mod.REGISTRY["target"], "watched", stand_in("target", "watched", lambda o: Watched("faithful"))
    )
    # the last scene renders once a target call went out (or, if none goes out before every scene
    # is rendered, a hang guard's time later: then the order below fails)
    _slow_scenes(monkeypatch, events, 0.08, gate=(11, asked))
    raw = calibration_config("faithful", n=12, output_dir=tmp_path / "run").model_dump(mode="json")
    raw.update(progress=False, bootstrap_resamples=200)
    raw["roles"]["target"] = {"backend": "watched"}
    outcome = run(config_from_dict(raw))
    assert [r.sample.id for r in outcome.records] == [calibration_sample(i).id for i in range(12)]
    assert all(r.status == "scored" for r in outcome.records)
    assert events.index("target") < events.index("rendered 11")
