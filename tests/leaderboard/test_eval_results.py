"""`edct submit --eval-results`: the Hub's `.eval_results/<name>.yaml` files, and reading them back.

The schema is the one documented at https://huggingface.co/docs/hub/eval-results: a list of
entries, each with ``dataset.id`` and ``dataset.task_id`` (required), ``dataset.revision``,
``value`` (required), ``date``, ``source`` (``url`` required when given), ``notes``.
"""

from __future__ import annotations

import json

import yaml
from support.edct_runs import records, write_edct_run

from edct_task.cli.main import main
from edct_task.leaderboard.bundle import read_bundle
from edct_task.leaderboard.eval_results import eval_yaml_problems, read_eval_results, schema_problems
from edct_task.scoring.metrics import metric_names

DOCUMENTED_FULL = """
- dataset:
    id: cais/hle
    task_id: default
    revision: 5503434ddd753f426f4b38109466949a1217c2bb
  value: 20.90
  verifyToken: abc
  date: "2025-01-15"
  source:
    url: https://huggingface.co/spaces/SaylorTwift/smollm3-mmlu-pro
    name: Eval traces
    user: SaylorTwift
  evaluation_framework: hle
  notes: "no-tools"
"""
DOCUMENTED_MINIMAL = """
- dataset:
    id: Idavidrein/gpqa
    task_id: gpqa_diamond
  value: 0.412
"""


def test_the_documented_examples_are_valid_and_broken_ones_are_not():
    assert schema_problems(yaml.safe_load(DOCUMENTED_FULL)) == []
    assert schema_problems(yaml.safe_load(DOCUMENTED_MINIMAL)) == []
    assert schema_problems({"dataset": {}}) == ["the file must hold a non-empty list of entries"]
    broken = [
        {"dataset": {"id": "x"}, "value": "high", "source": {"name": "n"}, "colour": 1},
    ]
    problems = schema_problems(broken)
    assert "entry 0: unknown field(s) colour" in problems
    assert "entry 0: dataset.task_id is required (a string)" in problems
    assert "entry 0: value is required (a number)" in problems
    assert "entry 0: source needs a url" in problems


def test_submit_writes_one_valid_file_per_metric_and_the_board_reads_them_apart(tmp_path, capsys):
    write_edct_run(tmp_path / "run", records(0.6, n=8), target={"backend": "openai-chat", "model": "org/a"})
    repo = tmp_path / "org-a"
    bundle = tmp_path / "a.edct.zip"
    args = ["submit", str(tmp_path / "run"), "--out", str(bundle), "--eval-results", str(repo)]
    assert main([*args, "--dataset-id", "edct/edct-bench", "--source-url", "https://example.org/a"]) == 0
    meta = read_bundle(bundle).meta
    files = sorted((repo / ".eval_results").glob("*.yaml"))
    assert len(files) == len(metric_names())
    by_task = {}
    for f in files:
        data = yaml.safe_load(f.read_text())
        assert schema_problems(data) == [], f
        (entry,) = data
        assert set(entry) <= {"dataset", "value", "date", "source", "evaluation_framework", "notes"}
        assert entry["evaluation_framework"] == "edct-bench"  # the same as the benchmark's eval.yaml
        by_task[entry["dataset"]["task_id"]] = entry
        assert f.name.startswith(f"edct_{entry['dataset']['task_id']}_")  # one file per metric and setup
    assert set(by_task) == set(metric_names())
    ccs = by_task["ccs_binary"]
    assert ccs["dataset"]["id"] == "edct/edct-bench" and "revision" not in ccs["dataset"]
    assert ccs["value"] == round(meta["claimed"]["overall"]["metrics"]["ccs_binary"]["estimate"], 6)
    assert ccs["date"] == meta["created"]
    assert ccs["source"] == {"url": "https://example.org/a", "name": f"EDCT bundle {meta['digest'][:12]}"}
    assert "judge=calibration-rules" in ccs["notes"] and "(24 samples)" in ccs["notes"]
    assert meta["digest"][:12] in ccs["notes"]

    out = tmp_path / "board"
    (repo / ".eval_results" / "broken.yaml").write_text("- value: 1\n")
    assert main(["leaderboard", str(bundle), "--eval-results", str(repo), "--out", str(out)]) == 0
    board = json.loads((out / "leaderboard.json").read_text())
    assert sum(len(t["entries"]) for t in board["tracks"]) == 1  # only the bundle is ranked
    assert len(board["unverified"]) == len(metric_names())
    assert {u["model"] for u in board["unverified"]} == {"org-a"}
    assert [r["code"] for r in board["rejected"]] == ["eval_results"]
    md = (out / "leaderboard.md").read_text()
    assert "## Unverified entries" in md
    entries, rejected = read_eval_results([repo / ".eval_results" / files[0].name])
    assert len(entries) == 1 and rejected == []


def test_eval_results_needs_a_dataset_id(tmp_path, capsys):
    write_edct_run(tmp_path / "run", records(0.6, n=4))
    args = ["submit", str(tmp_path / "run"), "--out", str(tmp_path / "a.edct.zip")]
    assert main([*args, "--eval-results", str(tmp_path / "repo")]) == 2
    assert "--eval-results needs --dataset-id" in capsys.readouterr().err
    assert main([*args, "--dataset-id", "x/y"]) == 2
    assert "go with --eval-results DIR" in capsys.readouterr().err


# hub-docs docs/hub/eval-results.md, "Registering a Benchmark": the documented eval.yaml example.
DOCUMENTED_EVAL_YAML = """
name: Humanity's Last Exam
description: >
  Humanity's Last Exam (HLE) is a multi-modal benchmark at the frontier of human knowledge.
evaluation_framework: inspect-ai
tasks:
  - id: hle
    config: default
    split: test
"""


def test_the_documented_eval_yaml_is_valid_and_broken_ones_are_not():
    assert eval_yaml_problems(yaml.safe_load(DOCUMENTED_EVAL_YAML)) == []
    broken = {"name": "x", "tasks": [{"id": "a", "config": "default"}, {"id": "a", "split": "t", "x": 1}]}
    problems = eval_yaml_problems(broken)
    assert "description is required (a non-empty string)" in problems
    assert "task 0: split is required (a string)" in problems and "task ids must be distinct" in problems
    assert eval_yaml_problems({"name": "x"})[-1] == "tasks is required (a non-empty list)"


def test_hub_benchmark_writes_the_benchmark_that_submitted_results_name(tmp_path, capsys):
    """The eval.yaml validates against the documented schema, and its task ids are exactly the
    ``task_id``s ``edct submit --eval-results`` writes (so the files reach its leaderboard)."""
    out = tmp_path / "edct-bench"
    assert main(["hub-benchmark", str(out), "--dataset-id", "edct/edct-bench", "--split", "test"]) == 0
    spec = yaml.safe_load((out / "eval.yaml").read_text())
    assert eval_yaml_problems(spec) == [] and spec["evaluation_framework"] == "edct-bench"
    write_edct_run(tmp_path / "run", records(0.6, n=4))
    repo = tmp_path / "model-repo"
    args = [
        "submit",
        str(tmp_path / "run"),
        "--out",
        str(tmp_path / "a.edct.zip"),
        "--eval-results",
        str(repo),
    ]
    assert main([*args, "--dataset-id", "edct/edct-bench"]) == 0
    entries = [yaml.safe_load(f.read_text())[0] for f in (repo / ".eval_results").glob("*.yaml")]
    assert sorted(e["dataset"]["task_id"] for e in entries) == sorted(t["id"] for t in spec["tasks"])
    assert {e["evaluation_framework"] for e in entries} == {spec["evaluation_framework"]}
    card = (out / "README.md").read_text()
    assert card.startswith("---\npretty_name: EDCT-Bench\n") and "dataset.id: edct/edct-bench" in card
    capsys.readouterr()
    assert main(["hub-benchmark", str(out), "--dataset-id", "not an id"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
