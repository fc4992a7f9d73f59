"""The pipelined schedule gives the lockstep schedule's records, batches target requests, keeps
every pool's limit, and resumes without repeating a finished call."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest
from support.backends import stand_in
from support.hang_guard import hang_limit

from edct_task import roles as roles_mod
from edct_task.calibration import ReferenceVLM
from edct_task.config import calibration_config, config_from_dict
from edct_task.run.runner import run


def _config(tmp: Path, name: str, behavior: str, schedule: str, n: int = 24, **extra: Any) -> Any:
    raw = calibration_config(behavior, n=n, output_dir=tmp / name).model_dump(mode="json")
    raw.update(progress=False, bootstrap_resamples=500, call_log=str(tmp / f"{name}.calls.jsonl"))
    raw["limits"] = {"schedule": schedule, "target_batch_size": 8, **extra}
    return config_from_dict(raw)


@pytest.mark.slow
@pytest.mark.parametrize("behavior", ["faithful", "prior", "mixed:0.5"])
def test_pipelined_and_lockstep_write_identical_samples(tmp_path: Path, behavior: str) -> None:
    lock = run(_config(tmp_path, "lockstep", behavior, "lockstep"))
    pipe = run(_config(tmp_path, "pipelined", behavior, "pipelined"))
    a = (tmp_path / "lockstep" / "samples.jsonl").read_text()
    b = (tmp_path / "pipelined" / "samples.jsonl").read_text()
    assert a == b
    assert lock.results["results"] == pipe.results["results"]
    assert lock.results["calls"]["calls"] == pipe.results["calls"]["calls"]


def _set_event() -> threading.Event:
    event = threading.Event()
    event.set()
    return event


class _Watched(ReferenceVLM):
    """Counts batch sizes and the most calls in flight at once; a call is busy until ``busy_until``
    is set (at most a hang guard's time), then 50 ms more."""

    sizes: ClassVar[list[int]] = []
    inflight: ClassVar[int] = 0
    most: ClassVar[int] = 0
    lock: ClassVar[threading.Lock] = threading.Lock()
    busy_until: ClassVar[threading.Event] = _set_event()

    def generate(self, conversations, params):
        cls = type(self)
        with cls.lock:
            cls.sizes.append(len(conversations))
            cls.inflight += 1
            cls.most = max(cls.most, cls.inflight)
        cls.busy_until.wait(hang_limit(10))
        time.sleep(0.05)
        try:
            return super().generate(conversations, params)
        finally:
            with cls.lock:
                cls.inflight -= 1


def test_target_requests_go_in_batches_within_the_concurrency_limit(tmp_path: Path, monkeypatch) -> None:
    from edct_task.engine import dispatch

    _Watched.sizes, _Watched.most = [], 0
    monkeypatch.setattr(_Watched, "busy_until", threading.Event())
    issued = {"target": 0}

    def count(self, stage: str) -> None:
        """The model's two slots stay busy until a full batch waits behind them (whatever the load)."""
        if stage == "target":
            issued["target"] += 1
            with _Watched.lock:
                waiting = issued["target"] - sum(_Watched.sizes)
                if (len(_Watched.sizes) == 2 and waiting >= 8) or issued["target"] >= 24:
                    _Watched.busy_until.set()

    monkeypatch.setattr(dispatch.CallStats, "issued", count)
    monkeypatch.setitem(
        roles_mod.REGISTRY["target"], "watched", stand_in("target", "watched", lambda o: _Watched("faithful"))
    )
    raw = _config(tmp_path, "p", "faithful", "pipelined", n=24, target_concurrency=2).model_dump(mode="json")
    raw["roles"]["target"] = {"backend": "watched"}
    outcome = run(config_from_dict(raw))
    assert all(r.status == "scored" for r in outcome.records)
    assert _Watched.busy_until.is_set()
    assert max(_Watched.sizes) == 8  # full batches form while the model is busy
    assert sum(_Watched.sizes) == outcome.results["calls"]["calls"]["target"]
    assert _Watched.most <= 2


@pytest.mark.slow
def test_pipelined_resume_repeats_no_finished_call(tmp_path: Path, monkeypatch) -> None:
    from edct_task.engine import stage_cache

    original = stage_cache.StageCache.put
    count = {"n": 0}

    def stop_midway(self, key, value, *, stage, meta=None):
        count["n"] += 1
        if count["n"] == 60:
            raise KeyboardInterrupt  # the run stops as on Ctrl-C, with 59 calls committed
        return original(self, key, value, stage=stage, meta=meta)

    monkeypatch.setattr(stage_cache.StageCache, "put", stop_midway)
    cfg = _config(tmp_path, "r", "mixed:0.5", "pipelined")
    with pytest.raises(KeyboardInterrupt):
        run(cfg)
    monkeypatch.setattr(stage_cache.StageCache, "put", original)
    log = tmp_path / "r.calls.jsonl"
    first = [json.loads(line)["key"] for line in log.read_text().splitlines()]
    run(cfg)
    second = [json.loads(line)["key"] for line in log.read_text().splitlines()][len(first) :]
    assert not set(first) & set(second)
    reference = run(_config(tmp_path, "ref", "mixed:0.5", "lockstep"))
    assert (tmp_path / "r" / "samples.jsonl").read_text() == (tmp_path / "ref" / "samples.jsonl").read_text()
    assert reference.results["results"]["overall"]["counts"]["total"] == 24


def test_a_failing_observer_stops_the_run_instead_of_hanging_it(tmp_path: Path, monkeypatch) -> None:
    from edct_task.engine import dispatch

    def broken(self, stage, how, seconds, key, cpu=0.0, local_cpu=0.0):
        if how == "call" and stage == "edit":
            raise RuntimeError("observer bug")

    monkeypatch.setattr(dispatch.CallStats, "answered", broken)
    with pytest.raises(RuntimeError, match="observer bug"):
        run(_config(tmp_path, "p", "faithful", "pipelined", n=6))


def test_samples_answered_while_later_samples_are_drawn_move_on_before_the_last_draw(monkeypatch) -> None:
    """Drawing a sample takes time (its image is decoded then): a
    sample whose reply came back meanwhile sends its next request at once, not after every
    sample has been drawn."""
    import time as _time

    from edct_task.core.records import SampleInput, SampleRecord
    from edct_task.core.requests import AskTarget, Message
    from edct_task.engine import drive
    from edct_task.engine.dispatch import Concurrency, Dispatcher
    from edct_task.engine.pipeline import run_pipelined
    from edct_task.engine.protocol import ProtocolConfig

    events: list[str] = []

    def two_questions(sample, _config):
        for turn in ("first", "second"):
            events.append(f"{sample.id} {turn}")
            yield (AskTarget((Message("user", turn),), f"{sample.id}.{turn}"),)
        return SampleRecord(sample=sample, status="error", reason="a stub protocol")

    class Echo:
        pool, batch_size = "target", 1

        def stage(self, request):
            return "target"

        def key(self, request):
            return {"purpose": request.purpose}

        def call(self, batch):
            return ["ok" for _ in batch]

    from edct_task.engine import runtime

    replied = threading.Event()  # a reply is in the driver's queue
    put = runtime._ThreadQueue.put

    def put_and_tell(self, item, *args, **kwargs):
        put(self, item, *args, **kwargs)
        replied.set()

    monkeypatch.setattr(runtime._ThreadQueue, "put", put_and_tell)

    def drawn(n: int):
        for i in range(n):
            if i == 6:  # s0's reply came back while s1..s5 were drawn (whatever the machine's load)
                replied.wait(hang_limit(10))
            _time.sleep(0.05)  # decoding the document's image
            events.append(f"drew s{i}")
            yield SampleInput(id=f"s{i}", domain="d", question="q?", image="0" * 64)

    monkeypatch.setattr(drive, "sample_protocol", two_questions)
    with Dispatcher({AskTarget: Echo()}, None, concurrency=Concurrency(target=1)) as dispatcher:
        records = run_pipelined(drawn(8), ProtocolConfig(), dispatcher)
    assert [r.sample.id for r in records] == [f"s{i}" for i in range(8)]
    assert events.index("s0 second") < events.index("drew s7")
