"""``edct report`` on lmms-eval 0.7.3 output folders (written by ``support.lmms_output``, which
follows lmms-eval's evaluator.py / evaluator_utils.py / loggers/evaluation_tracker.py and calls
its EvaluationTracker), ``edct run`` folders, for five models; numbers checked against the
files' own values, numpy and scipy."""

from __future__ import annotations

import csv
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from scipy import stats
from support.edct_runs import records, write_edct_run
from support.lmms_output import Bench, EdctTask, Group, write_lmms_output

from edct_task.reporting import figures
from edct_task.reporting.report import FIGURE_STEM, build_report
from edct_task.scoring.metrics import summarise
from edct_task.scoring.results import as_json

MODELS = {  # name → (EDCT level, MMMU acc 0–1, MathVista cot/solution/format 0–100, MMLU-Pro subtasks)
    "org/alpha-vl": (0.9, 0.52, (61.0, 58.0, 55.0), (0.40, 0.50)),
    "org/beta-vl": (0.6, 0.47, (48.5, 50.0, 46.0), (0.35, 0.45)),
    "org/gamma-vl": (0.3, 0.44, (40.0, 41.0, 39.0), None),
}
MATHVISTA_N = (1000, 1000, 1000)


def _edct_group(level: float, *, offset: int = 0) -> Group:
    recs = records(level, n=20, offset=offset)
    return Group(
        "edct_bench",
        [
            EdctTask(f"edct_bench_{d}", [r for r in recs if r.sample.domain == d])
            for d in ("okvqa", "drivelm", "3dsr")
        ],
        aggregate=[(m, "none") for m in ("ccs_binary", "ccs_graded", "ac_k1", "ef_k1", "ac_k2", "ef_k2")],
    )


def _mathvista(values) -> Group:
    # tasks/mathvista/mathvista_testmini.yaml: a group with no aggregate_metric_list
    subs = [
        Bench(f"mathvista_testmini_{v}", "llm_as_judge_eval", val, n)
        for v, val, n in zip(("cot", "solution", "format"), values, MATHVISTA_N, strict=True)
    ]
    return Group("mathvista_testmini", subs, aggregate=None)


def _mmlu_pro(values) -> Group:
    # tasks/mmlu_pro/_mmlu_pro.yaml: exact_match (mean → numeric stderr), three filters, group aggregates
    subs = [
        Bench(
            f"mmlu_pro_{s}",
            "exact_match",
            v,
            100 + 50 * i,
            stderr=0.03,
            filter="flexible-extract",
            alias=s,
            other_filters={"custom-extract": v - 0.05, "strict-match": v - 0.1},
        )
        for i, (s, v) in enumerate(zip(("biology", "law"), values, strict=True))
    ]
    return Group(
        "mmlu_pro",
        subs,
        aggregate=[("exact_match", f) for f in ("flexible-extract", "custom-extract", "strict-match")],
    )


@pytest.fixture
def outputs(tmp_path):
    root = tmp_path / "lmms_out"
    files = {}
    for name, (level, mmmu, mathvista, mmlu_pro) in MODELS.items():
        args = f"pretrained={name},device_map=cpu"
        # EDCT in its own run, other benchmarks in another (as users run them side by side)
        files[name, "edct"] = write_lmms_output(
            root,
            model="qwen3_vl",
            model_args=args,
            tasks=[_edct_group(level)],
            date="2026-12-01T08:00:00.000000",
        )
        others = [Bench("mmmu_val", "mmmu_acc", mmmu, 900), _mathvista(mathvista)]
        if mmlu_pro:
            others.append(_mmlu_pro(mmlu_pro))
        files[name, "other"] = write_lmms_output(
            root, model="qwen3_vl", model_args=args, tasks=others, date="2026-12-01T09:00:00.000000"
        )
    # a model with benchmarks only (no EDCT run)
    files["delta", "other"] = write_lmms_output(
        root,
        model="qwen3_vl",
        model_args="pretrained=org/delta-vl",
        tasks=[Bench("mmmu_val", "mmmu_acc", 0.39, 900)],
        date="2026-12-01T10:00:00.000000",
    )
    # a model with no pretrained= argument: lmms-eval writes into the output path itself
    files["ref", "edct"] = write_lmms_output(
        root,
        model="edct_reference",
        model_args="behavior=faithful",
        tasks=[
            EdctTask("edct_calibration", records(1.0, n=10, domains=("knowledge", "driving"))),
            Bench("chartqa", "relaxed_overall", 71.5, 50),
        ],
        date="2026-12-01T11:00:00.000000",
    )
    return root, files


def test_lmms_layout_is_lmms_evals(outputs):
    root, files = outputs
    assert files["org/alpha-vl", "edct"].parent == root / "org__alpha-vl"  # sanitize_model_name
    assert files["ref", "edct"].parent == root  # no pretrained=: no model folder
    raw = json.loads(files["org/alpha-vl", "other"].read_text())
    assert raw["results"]["mathvista_testmini"][" "] == " "
    assert raw["results"]["mmmu_val"]["mmmu_acc_stderr,none"] == "N/A"
    assert raw["results"]["mathvista_testmini_cot"]["alias"] == " - mathvista_testmini_cot"
    edct = json.loads(files["org/alpha-vl", "edct"].read_text())["results"]["edct_bench_okvqa"]
    assert isinstance(edct["ccs_binary_stderr,none"], float)
    assert not [k for k in edct if "_ci_" in k] and edct["edct,none"] == {}


def test_report_numbers_scales_and_sources(outputs, tmp_path):
    root, files = outputs
    out = tmp_path / "report"
    report = build_report([root], out)
    by_name = {m["name"]: m for m in report["models"]}
    assert set(by_name) == {*MODELS, "org/delta-vl", "edct_reference(behavior=faithful)"}

    for name, (level, mmmu, mathvista, mmlu_pro) in MODELS.items():
        m = by_name[name]
        raw = json.loads(files[name, "edct"].read_text())["results"]
        recs = records(level, n=20)
        # Table 1: the pooled numbers, from the EDCT run folder the logged samples name
        expected = as_json(summarise(recs, seed=0))["overall"]
        for metric in ("ccs_binary", "ccs_graded", "ac_k1", "ef_k2"):
            got = m["edct"][metric]
            assert got["estimate"] == pytest.approx(expected["metrics"][metric]["estimate"], abs=1e-12)
            assert (got["low"], got["high"]) == (
                expected["metrics"][metric]["low"],
                expected["metrics"][metric]["high"],
            )
            assert "lmms_out_edct" in got["source"] and "_samples_edct_bench_okvqa.jsonl" in got["source"]
        assert m["counts"]["excluded"] == 3 and m["counts"]["scored"] == 57
        # Table 3: each domain equals the run's own per-task result in the lmms-eval results file
        for d in ("okvqa", "drivelm", "3dsr"):
            for metric in ("ccs_binary", "ccs_graded"):
                assert m["per_domain"][d][metric]["estimate"] == pytest.approx(
                    raw[f"edct_bench_{d}"][f"{metric},none"], abs=1e-12
                )
        # other benchmarks: normalised, original scale and source kept
        b = m["benchmarks"]
        assert b["mmmu_val"]["score"] == mmmu and b["mmmu_val"]["scale"] == "0-1"
        assert (
            str(files[name, "other"]) in b["mmmu_val"]["source"]
            and b["mmmu_val"]["metric"] == "mmmu_acc,none"
        )
        mv = b["mathvista_testmini"]
        assert mv["score"] == pytest.approx(np.average(mathvista, weights=MATHVISTA_N) / 100)
        assert mv["raw_score"] == pytest.approx(np.average(mathvista, weights=MATHVISTA_N))
        assert mv["scale"] == "0-100" and mv["judge"] == "unknown" and "no score of its own" in mv["note"]
        if mmlu_pro:
            assert b["mmlu_pro"]["metric"] == "exact_match,flexible-extract"
            assert b["mmlu_pro"]["score"] == pytest.approx(np.average(mmlu_pro, weights=[100, 150]))
        else:
            assert "mmlu_pro" not in b

    delta = by_name["org/delta-vl"]
    assert "no EDCT run for this model" in delta["flags"] and delta["edct"] == {}
    ref = by_name["edct_reference(behavior=faithful)"]
    assert ref["edct"]["ccs_binary"]["estimate"] == 1.0
    assert any("chartqa: seen for this model only" in f for f in ref["flags"])
    assert ref["benchmarks"]["chartqa"]["scale"] == "0-100"
    assert ref["benchmarks"]["chartqa"]["scale_source"] == "inferred from the value"

    # correlations equal scipy's on the same numbers
    corr = {(c["benchmark"], c["metric"]): c for c in report["correlations"]}
    for task in ("mmmu_val", "mathvista_testmini"):
        c = corr[task, "ccs_binary"]
        names = c["models"]
        xs = [by_name[n]["benchmarks"][task]["score"] for n in names]
        ys = [by_name[n]["edct"]["ccs_binary"]["estimate"] for n in names]
        assert c["n_models"] == 3 == len(names)
        assert c["spearman"] == pytest.approx(stats.spearmanr(xs, ys).statistic)
        assert c["kendall"] == pytest.approx(stats.kendalltau(xs, ys).statistic)
    assert corr["mmlu_pro", "ccs_binary"]["spearman"] is None  # two models: not enough
    assert corr["mmlu_pro", "ccs_binary"]["n_models"] == 2

    # tables on disk: Markdown, CSV, LaTeX for each; CSV holds the same numbers. Tables 2 and 5
    # have no rows here (one setup per model, one run per setup): not written, and the notes say so
    for name in ("table1", "table3", "ccs_vs_benchmarks"):
        for suffix in (".md", ".csv", ".tex"):
            assert (out / f"{name}{suffix}").is_file()
    for name in ("table2", "table5"):
        assert not list(out.glob(f"{name}.*")) and name not in report["tables"]
    md = (out / "report.md").read_text()
    assert "Table 2 not written: No model was given runs under more than one setup." in md
    assert "Table 5 not written" in md and "### Table 2" not in md
    assert (
        "\\toprule" in (out / "table1.tex").read_text() and "\\bottomrule" in (out / "table1.tex").read_text()
    )
    rows = list(csv.DictReader((out / "table1.csv").open()))
    alpha = next(r for r in rows if r["model"] == "org/alpha-vl")
    assert float(alpha["ccs_binary_estimate"]) == pytest.approx(
        by_name["org/alpha-vl"]["edct"]["ccs_binary"]["estimate"], abs=1e-12
    )
    assert next(r for r in rows if r["model"] == "org/delta-vl")["flags"].startswith("no EDCT run")
    md = (out / "report.md").read_text()
    assert "Table 1" in md and "Table 3" in md and "org/delta-vl" in md


def test_figure_labels_every_model_in_every_panel(outputs, tmp_path):
    root, _ = outputs
    out = tmp_path / "report"
    report = build_report([root], out)
    png = Image.open(out / f"{FIGURE_STEM}.png")
    png.load()
    panels = [c for c in report["correlations"] if c["metric"] == "ccs_binary" and c["n_models"] >= 2]
    assert len(panels) == 3  # MMMU, MathVista, MMLU-Pro (chartqa: one model only)
    assert png.size == (int(figures.PANEL_WIDTH * 3 * figures.DPI), int(figures.PANEL_HEIGHT * figures.DPI))
    texts = [
        t.text or "" for t in ET.parse(out / f"{FIGURE_STEM}.svg").iter("{http://www.w3.org/2000/svg}text")
    ]
    for c in panels:  # one label per marker: one or two (binary, graded) per panel the model is in
        for name in c["models"]:
            n_panels = len([p for p in panels if name in p["models"]])
            assert n_panels <= sum(t == name for t in texts) <= 2 * n_panels
    assert "org/delta-vl" not in texts  # it has MMMU but no CCS: shown in the tables, not plotted


def test_table5_mean_sd_is_numpys_and_table2_separates_judges(tmp_path):
    target = {"backend": "openai-chat", "model": "org/alpha-vl"}
    levels = (0.5, 0.6, 0.8)
    for seed, level in enumerate(levels):
        write_edct_run(tmp_path / f"seed{seed}", records(level, n=10, offset=seed), target=target, seed=seed)
    write_edct_run(tmp_path / "other-judge", records(0.4, n=10), target=target, judge="openai-chat")
    out = tmp_path / "report"
    report = build_report([tmp_path / f"seed{s}" for s in range(3)] + [tmp_path / "other-judge"], out)
    rows = list(csv.DictReader((out / "table5.csv").open()))
    assert len(rows) == 1 and rows[0]["runs"] == "3"
    runs = [json.loads((tmp_path / f"seed{s}" / "results.json").read_text()) for s in range(3)]
    for metric in ("ccs_binary", "ccs_graded", "ac_k2"):
        values = np.array([r["results"]["overall"]["metrics"][metric]["estimate"] for r in runs])
        assert float(rows[0][f"{metric}_mean"]) == pytest.approx(values.mean(), abs=1e-12)
        assert float(rows[0][f"{metric}_sd"]) == pytest.approx(values.std(ddof=1), abs=1e-12)
    t2 = list(csv.DictReader((out / "table2.csv").open()))
    assert len(t2) == 2 and len({r["setup_id"] for r in t2}) == 2
    assert any("judge=openai-chat" in r["setup_label"] for r in t2)
    # Table 1 of an edct run is the run's own results.json
    t1 = [float(r["ccs_binary_estimate"]) for r in csv.DictReader((out / "table1.csv").open())]
    assert sorted(t1[:3]) == pytest.approx(
        sorted(r["results"]["overall"]["metrics"]["ccs_binary"]["estimate"] for r in runs), abs=1e-12
    )
    assert len(report["setups"]) == 2


def test_label_names_every_result_under_a_path(outputs, tmp_path):
    root, _ = outputs
    out = tmp_path / "report"
    report = build_report([root], out, {root / "org__alpha-vl": "Alpha (ours)"})
    by_name = {m["name"]: m for m in report["models"]}
    assert "org/alpha-vl" not in by_name
    alpha = by_name["Alpha (ours)"]
    assert alpha["edct"]["ccs_binary"]["estimate"] is not None and "mmmu_val" in alpha["benchmarks"]


def test_without_logged_samples_the_estimates_are_shown_and_flagged(tmp_path):
    root = tmp_path / "out"
    file = write_lmms_output(
        root,
        model="qwen3_vl",
        model_args="pretrained=org/solo-vl",
        tasks=[_edct_group(0.6)],
        log_samples=False,
    )
    raw = json.loads(file.read_text())["results"]["edct_bench"]
    report = build_report([root], tmp_path / "report")
    (model,) = report["models"]
    assert model["edct"]["ccs_binary"]["estimate"] == raw["ccs_binary,none"]  # lmms-eval's group value
    assert model["edct"]["ccs_binary"]["low"] is None
    assert any("no logged samples" in f and "--log_samples" in f for f in model["runs"][0]["flags"])
    assert "CIs and domains unavailable" in (tmp_path / "report" / "table1.md").read_text()


def _rewrite_run_folder(results_file, recs) -> str:
    """Write other records into the EDCT run folder the logged samples of ``results_file`` name
    (its results.json and samples.jsonl agree with each other, not with lmms-eval's logs)."""
    (line,) = (results_file.parent).glob("*_samples_edct_calibration.jsonl")
    run_dir = json.loads(line.read_text().splitlines()[0])["edct"]["run_dir"]
    write_edct_run(
        Path(run_dir), recs, target={"backend": "lmms-eval", "model": "edct_reference"}, resamples=10_000
    )
    return run_dir


def test_lmms_output_is_read_through_the_run_folder_its_logs_name(tmp_path):
    """The numbers follow the run folder, not the records in lmms-eval's logged responses; where
    lmms-eval's own per-task value disagrees with the run folder's records, the run is flagged."""
    recs = records(1.0, n=10, domains=("knowledge",), excluded=0)
    file = write_lmms_output(
        tmp_path / "out", model="edct_reference", model_args="", tasks=[EdctTask("edct_calibration", recs)]
    )
    report = build_report([tmp_path / "out"], tmp_path / "r1")
    assert report["models"][0]["edct"]["ccs_binary"]["estimate"] == 1.0
    assert report["models"][0]["runs"][0]["flags"] == []

    other = records(0.5, n=10, domains=("knowledge",), excluded=0)  # the same ids, other verdicts
    run_dir = _rewrite_run_folder(file, other)
    report = build_report([tmp_path / "out"], tmp_path / "r2")
    (model,) = report["models"]
    expected = summarise(other, seed=0).overall.estimate("ccs_binary")
    assert expected < 1.0 and model["edct"]["ccs_binary"]["estimate"] == pytest.approx(expected, abs=1e-12)
    assert run_dir in model["edct"]["ccs_binary"]["source"]
    flags = " ".join(model["runs"][0]["flags"])
    assert "edct_calibration ccs_binary is 1.0 in the results file but the records of the run folder" in flags

    _rewrite_run_folder(file, other[:6])  # samples lmms-eval logged that the run folder lacks
    (model,) = build_report([tmp_path / "out"], tmp_path / "r3")["models"]
    flags = " ".join(model["runs"][0]["flags"])
    assert "4 sample(s) logged for edct_calibration are not in the run folder" in flags


def test_a_run_folder_read_directly_and_via_lmms_evals_logs_is_one_run(tmp_path):
    recs = records(0.8, n=10, domains=("knowledge",), excluded=0)
    write_lmms_output(
        tmp_path / "out",
        model="edct_reference",
        model_args="",
        tasks=[EdctTask("edct_calibration", recs)],
        run_dir=tmp_path / "out" / "edct",  # lmms-eval's loop: <output_path>/edct
    )
    report = build_report([tmp_path / "out"], tmp_path / "r")
    (model,) = report["models"]
    assert len(model["runs"]) == 1 and model["runs"][0]["kind"] == "edct-run"
    assert model["runs"][0]["flags"] == []
    # lmms-eval's own value, changed: the one run kept says so
    (file,) = (tmp_path / "out").glob("*_results.json")
    raw = json.loads(file.read_text())
    raw["results"]["edct_calibration"]["ccs_binary,none"] = 0.25
    file.write_text(json.dumps(raw))
    (model,) = build_report([tmp_path / "out"], tmp_path / "r2")["models"]
    (run,) = model["runs"]
    assert run["kind"] == "edct-run" and len(run["flags"]) == 1
    assert run["flags"][0].startswith(f"{file}: edct_calibration ccs_binary is 0.25 in the results file")


def test_a_logged_run_folder_that_is_gone_is_one_line(tmp_path, capsys):
    import shutil

    from support.cli_errors import one_line_exit_2

    recs = records(1.0, n=4, domains=("knowledge",), excluded=0)
    file = write_lmms_output(
        tmp_path / "out", model="edct_reference", model_args="", tasks=[EdctTask("edct_calibration", recs)]
    )
    (line,) = file.parent.glob("*_samples_edct_calibration.jsonl")
    run_dir = json.loads(line.read_text().splitlines()[0])["edct"]["run_dir"]
    shutil.rmtree(run_dir)
    err = one_line_exit_2(
        capsys, ["report", str(tmp_path / "out"), "--out", str(tmp_path / "r")], run_dir, "does not exist"
    )
    assert "pass the run folder itself" in err


def test_lmms_output_of_edct_bench_0_2_0_still_reads(tmp_path):
    """0.2.0 logged a digest under ``edct`` (the run folder at ``setup.run_dir``), not ``run_dir``."""
    recs = records(0.5, n=10, domains=("knowledge",), excluded=0)
    file = write_lmms_output(
        tmp_path / "out", model="edct_reference", model_args="", tasks=[EdctTask("edct_calibration", recs)]
    )
    (line,) = file.parent.glob("*_samples_edct_calibration.jsonl")
    rows = [json.loads(x) for x in line.read_text().splitlines()]
    for row in rows:
        named = row["edct"]
        row["edct"] = {
            "id": named["id"],
            "domain": "knowledge",
            "steps": [],
            "setup": {"run_dir": named["run_dir"]},
        }
    line.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = build_report([tmp_path / "out"], tmp_path / "r")
    (model,) = report["models"]
    assert model["edct"]["ccs_binary"]["estimate"] == pytest.approx(
        summarise(recs, seed=0).overall.estimate("ccs_binary"), abs=1e-12
    )
    (run,) = model["runs"]
    assert run["flags"] == [] and run["kind"] == "lmms-eval"
    assert rows[0]["edct"]["setup"]["run_dir"] in run["metric_source"]
