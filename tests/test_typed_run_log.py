"""The run log is typed down to the interval and the count (issue 45), and older run folders still read.

``RunLog.results`` is ``scoring.results.Results`` (``overall`` / ``per_domain`` blocks of
``MetricValue`` and ``Counts``); ``RunSetup`` holds the ``ProtocolConfig``, ``GateParams``,
``Limits`` and a ``RunData`` whose ``shard`` is a ``ShardManifest``. Version 2 leaves the unset
keys out of ``config.data``; a version-1 folder (built here from the version-1 layout: every
``data:`` key, nulls included, and ``schema_version`` 1) is upgraded as it is read.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.edct_runs import records, write_edct_run

from edct_task.cli.main import main
from edct_task.engine.driver import Limits
from edct_task.engine.protocol import ProtocolConfig
from edct_task.run.log import RUN_LOG_SCHEMA_VERSION, RunData, RunLogError, parse_run_log
from edct_task.run.outputs import load_run
from edct_task.run.sharding import Shard, ShardManifest
from edct_task.scoring.metrics import metric_names, summarise
from edct_task.scoring.results import Counts, MetricValue, Results
from verification.gate import GateParams


def _v1(payload: dict) -> dict:
    """``payload`` (a version-2 results.json) in the version-1 layout: schema_version 1 and the
    ``data:`` section with every key of the config's DataSection, unset ones as null."""
    data = {"source": "calibration", "path": None, "n": 4, "seed": 0, "limit": None, "max_pixels": 40_000_000}
    data.update(payload["config"]["data"])
    return {**payload, "schema_version": 1, "config": {**payload["config"], "data": data}}


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list]:
    folder = tmp_path_factory.mktemp("typed") / "run"
    recs = records(0.5, n=8)
    write_edct_run(folder, recs, controls=[])  # a run of this version (it has a controls block)
    return folder, recs


def test_the_run_log_is_typed_to_the_interval_and_the_count(run_folder) -> None:
    folder, recs = run_folder
    log = load_run(folder).log
    assert log is not None and log.schema_version == RUN_LOG_SCHEMA_VERSION == 2
    assert isinstance(log.results, Results)
    assert isinstance(log.config.protocol, ProtocolConfig)
    assert isinstance(log.config.verification, GateParams)
    assert isinstance(log.config.limits, Limits)
    assert isinstance(log.config.data, RunData) and log.config.data.shard is None
    overall = log.results.overall
    assert list(overall.metrics) == list(metric_names())
    assert all(isinstance(v, MetricValue) for v in overall.metrics.values())
    assert isinstance(overall.counts, Counts) and overall.counts.total == len(recs)
    scored = [r for r in recs if r.status == "scored"]
    assert overall.counts.scored == len(scored) == overall.counts.of_status("scored")
    assert overall.metrics["ccs_binary"].n == len(scored)
    assert overall.estimate("ccs_binary") == pytest.approx(
        sum(r.scores.ccs_binary for r in scored) / len(scored)  # type: ignore[union-attr,misc]
    )
    # the typed results are what summarise gives, and they round-trip through the JSON file
    assert log.results == summarise(recs, seed=0, n_resamples=2000)
    assert [name for name, _ in log.results.blocks()] == ["overall", *sorted(log.results.per_domain)]


def test_version_2_leaves_unset_data_keys_out(run_folder) -> None:
    folder, _ = run_folder
    data = json.loads((folder / "results.json").read_text())["config"]["data"]
    assert None not in data.values() and "shard" not in data and data["source"] == "calibration"


def test_a_version_1_run_folder_still_reads(run_folder, tmp_path: Path) -> None:
    folder, _ = run_folder
    old = tmp_path / "old"
    old.mkdir()
    payload = json.loads((folder / "results.json").read_text())
    v1 = _v1(payload)
    assert v1["config"]["data"]["path"] is None  # the old layout's nulls are there
    (old / "results.json").write_text(json.dumps(v1, indent=2))
    (old / "samples.jsonl").write_text((folder / "samples.jsonl").read_text())
    loaded = load_run(old)
    assert loaded.log is not None and loaded.log.schema_version == 2
    assert loaded.log.results == load_run(folder).log.results  # type: ignore[union-attr]
    assert loaded.log.config.data == load_run(folder).log.config.data  # type: ignore[union-attr]
    # the tools read it as they read a new folder
    assert main(["report", str(old), "--out", str(tmp_path / "report")]) == 0
    assert "CCS_binary" in (tmp_path / "report" / "report.md").read_text()


def test_a_version_1_run_made_before_controls_reads_as_none_drawn(tmp_path: Path) -> None:
    """Version 1 had no ``protocol.controls`` before the controls existed: such a run drew none
    (0), not the typed protocol's default (16) that would make the board ask for them."""
    write_edct_run(tmp_path / "old", records(0.5, n=4))  # the helper's run made before controls
    raw = json.loads((tmp_path / "old" / "results.json").read_text())
    assert raw["schema_version"] == 1 and "controls" not in raw["config"]["protocol"]
    log = load_run(tmp_path / "old").log
    assert log is not None and log.config.protocol.controls == 0 and log.controls is None


def test_an_unknown_version_is_refused_naming_the_versions_read() -> None:
    with pytest.raises(RunLogError, match=r"results schema version 3; this edct-bench reads versions 1, 2"):
        parse_run_log({"schema_version": 3}, "x/results.json")
    with pytest.raises(RunLogError, match="results schema version True"):
        parse_run_log({"schema_version": True}, "x/results.json")


def test_a_typed_section_refuses_a_wrong_value_by_its_path(run_folder) -> None:
    folder, _ = run_folder
    payload = json.loads((folder / "results.json").read_text())
    payload["results"]["overall"]["counts"]["scored"] = "many"
    with pytest.raises(RunLogError, match=r"results\.overall\.counts\.scored"):
        parse_run_log(payload, "x/results.json")
    payload = json.loads((folder / "results.json").read_text())
    payload["config"]["protocol"]["k"] = 0
    with pytest.raises(RunLogError, match=r"config\.protocol\.k"):
        parse_run_log(payload, "x/results.json")


def test_the_shard_manifest_is_a_typed_slice() -> None:
    manifest = ShardManifest(index=1, count=3, items=10, items_sha256="ab", positions=[2, 5, 9])
    assert manifest.shard == Shard(1, 3)
    data = RunData(source="calibration", n=10, seed=0, shard=manifest)
    assert RunData.model_validate(data.model_dump(mode="json")).shard == manifest
    with pytest.raises(ValueError, match="I must be 0"):
        ShardManifest(index=3, count=3, items=10, items_sha256="ab", positions=[])
    with pytest.raises(ValueError, match="ascending document positions below 10"):
        ShardManifest(index=0, count=3, items=10, items_sha256="ab", positions=[5, 2])
    with pytest.raises(ValueError, match="ascending document positions below 10"):
        ShardManifest(index=0, count=3, items=10, items_sha256="ab", positions=[10])
