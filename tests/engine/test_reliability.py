"""Issue 10's defects, one test each: one bad item costs one item, unreadable rows become records,
folders are checked and owned, a full disk stops the run cleanly, and failure shows in the exit code."""

from __future__ import annotations

import io
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock, Timeout
from PIL import Image
from support.backends import stand_in
from support.calibration_dataset import scene_png, write_calibration_dataset

from edct_task import roles as roles_mod
from edct_task.calibration import ReferenceVLM, generate_samples
from edct_task.cli.main import main
from edct_task.config import calibration_config, config_from_dict
from edct_task.engine import stage_cache
from edct_task.roles import RoleSpec
from edct_task.run.runner import run
from edct_task.run.workspace import LOCK_NAME, claim
from model_adapters.contracts import Completion
from model_adapters.errors import RateLimited


def _config(tmp_path: Path, name: str, n: int = 6, **roles: Any) -> Any:
    raw = calibration_config("faithful", n=n, output_dir=tmp_path / name).model_dump(mode="json")
    raw.update(progress=False, bootstrap_resamples=200)
    raw["roles"].update(roles)
    return config_from_dict(raw)


class _PickyBatchVLM(ReferenceVLM):
    """Like a real processor: one image under 40 rows fails the whole batch call."""

    def generate(self, conversations, params):
        for conversation in conversations:
            for m in conversation:
                if any(img.height < 40 for img in m.images):
                    raise ValueError("image must be taller than 40 rows")
        return super().generate(conversations, params)


def test_one_bad_image_costs_one_sample_not_its_batch(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setitem(
        roles_mod.REGISTRY["target"],
        "picky",
        stand_in("target", "picky", lambda options: _PickyBatchVLM("faithful")),
    )
    good = tmp_path / "good"
    write_calibration_dataset(good, 5, {})
    tiny = io.BytesIO()
    Image.new("RGB", (1, 1)).save(tiny, format="PNG")
    mixed = tmp_path / "mixed"
    write_calibration_dataset(mixed, 6, {5: tiny.getvalue()})

    def cfg(name: str, data: Path) -> Any:
        raw = _config(tmp_path, name, target={"backend": "picky"}).model_dump(mode="json")
        raw["data"] = {"source": "dataset", "path": str(data)}
        return config_from_dict(raw)

    clean = run(cfg("clean", good)).records
    records = run(cfg("with-bad", mixed)).records
    assert [r.status for r in records[:5]] == [r.status for r in clean] == ["scored"] * 5
    assert [r.scores for r in records[:5]] == [r.scores for r in clean]
    assert records[5].status == "error" and "taller than 40 rows" in records[5].reason


def test_a_truncated_image_is_that_rows_recorded_failure(tmp_path: Path) -> None:
    data = tmp_path / "bench"
    write_calibration_dataset(data, 4, {2: scene_png(generate_samples(n=1, seed=0)[0].image)[:300]})
    raw = _config(tmp_path, "out").model_dump(mode="json")
    raw["data"] = {"source": "dataset", "path": str(data)}
    records = run(config_from_dict(raw)).records
    assert [r.status for r in records] == ["scored", "scored", "error", "scored"]
    assert records[2].reason.startswith(f"row {records[2].sample.id}: image cannot be decoded")


def test_header_values_are_never_recorded() -> None:
    spec = RoleSpec(
        "openai-chat", {"model": "m", "headers": {"Ocp-Apim-Subscription-Key": "s3cr3t", "X-Auth": "t"}}
    )
    written = str(spec.as_dict())
    assert "s3cr3t" not in written and "'t'" not in written
    assert "Ocp-Apim-Subscription-Key" in written and "X-Auth" in written


def test_an_output_folder_that_cannot_be_written_fails_before_any_work(tmp_path: Path, capsys) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    rc = main(["demo", "-n", "2", "--no-progress", "--output", str(blocker / "out")])
    err = capsys.readouterr().err
    assert rc == 2 and "is not writable" in err and "Traceback" not in err


def _run_argv(tmp_path: Path, out: Path, n: int) -> list[str]:
    import yaml

    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(_config(tmp_path, "unused", n=n).model_dump(mode="json")))
    return ["run", "--config", str(path), "--output", str(out)]


def test_a_second_run_on_a_folder_in_use_is_refused(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    out.mkdir()
    argv = _run_argv(tmp_path, out, 2)
    with claim(out):  # a run in this process
        rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2 and "another edct run is using the output folder" in err
    # a run in another process, holding the folder's lock file until the test lets go (closes its
    # stdin or kills it): however slow the machine, the lock is held while the test needs it
    code = f"import sys; from filelock import FileLock; l = FileLock({str(out / LOCK_NAME)!r}); l.acquire()"
    holder = subprocess.Popen(
        [sys.executable, "-c", code + "; print('held', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        probe = FileLock(str(out / LOCK_NAME))
        try:
            probe.acquire(timeout=0)
        except Timeout:
            pass
        else:  # the filesystem lets two processes hold one file lock: nothing to test here
            probe.release()
            pytest.skip(f"{tmp_path} does not enforce file locks between processes")
        assert main(argv) == 2
    finally:
        holder.kill()
        holder.communicate()  # reaped, its pipes closed
    assert "another edct run" in capsys.readouterr().err
    assert not (out / "results.json").exists()
    assert main(argv) == 0  # free again


def test_a_full_disk_stops_the_run_with_one_line_and_resume_finishes_it(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    original = stage_cache.StageCache.put
    calls = {"n": 0}

    def filling(self, key, value, *, stage, meta=None):
        calls["n"] += 1
        if calls["n"] > 20:
            raise sqlite3.OperationalError("database or disk is full")
        return original(self, key, value, stage=stage, meta=meta)

    monkeypatch.setattr(stage_cache.StageCache, "put", filling)
    argv = _run_argv(tmp_path, tmp_path / "out", 4)
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 1 and "Traceback" not in err
    assert err.count("\n") == 1 and "Finished calls are safe in the stage cache" in err
    monkeypatch.setattr(stage_cache.StageCache, "put", original)
    assert main(argv) == 0
    assert (tmp_path / "out" / "results.json").is_file()


class _DownJudge:
    name = "down"

    def identity(self) -> dict[str, Any]:
        return {"backend": "down"}

    def complete(self, prompt: str, params: Any) -> Completion:
        raise RateLimited("429 Too Many Requests")


def test_a_run_where_every_judge_call_failed_exits_3_with_a_summary(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    monkeypatch.setitem(
        roles_mod.REGISTRY["text"], "down", stand_in("text", "down", lambda options: _DownJudge())
    )
    path = tmp_path / "config.yaml"
    raw = _config(tmp_path, "out", n=3, judge={"backend": "down"}).model_dump(mode="json")
    import yaml

    path.write_text(yaml.safe_dump(raw))
    rc = main(["run", "--config", str(path)])
    err = capsys.readouterr().err
    assert rc == 3
    assert "edct: not scored: 3 unscored (rate_limited)" in err
    assert main(["run", "--config", str(path), "--fail-on-unscored", "1.0"]) == 0


@pytest.mark.parametrize("limit, expected", [(0.5, 3), (0.7, 0)])
def test_fail_on_unscored_compares_the_fraction(limit: float, expected: int) -> None:
    from edct_task.cli.run import finish
    from edct_task.core.records import SampleInput, SampleRecord

    s = SampleInput(id="a", domain="d", question="q", image="")
    records = [SampleRecord(sample=s, status="scored")] * 2 + [
        SampleRecord(sample=s, status="error", reason="x")
    ] * 3
    assert finish(records, limit) == expected


def test_a_dead_target_server_is_named_with_its_cause_on_the_console(tmp_path: Path, capsys) -> None:
    import socket

    import yaml

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    target = {
        "backend": "openai-chat",
        "model": "m",
        "base_url": f"http://127.0.0.1:{port}/v1",
        "max_retries": 0,
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(_config(tmp_path, "out", n=2, target=target).model_dump(mode="json")))
    rc = main(["run", "--config", str(path)])
    err = capsys.readouterr().err
    assert rc == 3
    line = next(x for x in err.splitlines() if x.startswith("edct: not scored:"))
    assert "2 error (target failed at baseline)" in line
    assert "Connection refused" in line or "connection failed" in line, line
