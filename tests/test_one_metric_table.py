"""One metric table: ``edct_task.scoring.metrics`` is the only product module that names a metric.

Every output iterates the table (``metrics()``): ``results.json``, the console and report tables,
the leaderboard's Markdown/HTML/JSON/CSV, the Hub eval-results files, the audit view and
lmms-eval's ``process_results``. On the old main the literal ``ccs_binary`` was in 22 product files
and a new metric touched 12 of them, six silently when forgotten (board columns, console table,
paper tables, eval-results text, rederive). The task YAMLs cannot iterate a table, so their metric
lists are checked against it here instead.
"""

from __future__ import annotations

import ast
import csv
import importlib.util
import io
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from support.edct_runs import records, write_edct_run

from edct_task.core.records import SampleScores
from edct_task.scoring import metrics as table
from edct_task.scoring.metrics import BUILTIN, Metric, extra_metric, metric_names

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("edct_task", "model_adapters", "verification", "task_configs")
THE_TABLE = "edct_task/scoring/metrics.py"
TASK_YAMLS = {
    "task_configs/_edct_template_yaml": "metric_list, checked against the table below",
    "task_configs/edct_bench.yaml": "aggregate_metric_list, checked against the table below",
}


def _pattern() -> re.Pattern[str]:
    """A shipped metric's name, or the stem an f-string builds one from (``f"ac_k{k}"``)."""
    names = [re.escape(n) for n in metric_names()]
    stems = sorted({re.escape(re.sub(r"\d+$", "", n)) for n in metric_names() if n[-1].isdigit()})
    whole = "(?:" + "|".join(names) + r")(?![A-Za-z0-9])"
    built = "(?:" + "|".join(stems) + r")\{"
    return re.compile(r"(?<![A-Za-z0-9])(?:" + whole + "|" + built + ")")


NAME = _pattern()
QUOTED = re.compile(r"\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'")


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


LINE_END = re.compile(r".*?(?:\r\n|\r|\n)|.+\Z", re.S)
"""A line as ``ast`` counts them (``\r\n``, ``\r`` or ``\n``; never the other breaks of
``str.splitlines``), with its end."""


def _segments(source: str):
    """``ast.get_source_segment`` without its cost: it splits the whole source again on every call
    (every literal of a long module: seconds), so the lines are encoded once here."""
    lines = [m.group().encode("utf-8") for m in LINE_END.finditer(source)]

    def segment(node: ast.expr) -> str:
        first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
        start, end = node.col_offset, node.end_col_offset
        if first == last:
            return lines[first][start:end].decode("utf-8")
        middle = b"".join(lines[first + 1 : last])
        return (lines[first][start:] + middle + lines[last][:end]).decode("utf-8")

    return segment


def python_literals(source: str) -> list[tuple[int, str]]:
    """(line, source text) of every string literal (f-strings whole) but docstrings, that names a metric."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    segment = _segments(source)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr) or (
            isinstance(node, ast.Constant) and isinstance(node.value, str)
        ):
            if id(node) in docs:
                continue
            text = segment(node)
            if NAME.search(text):
                found.append((node.lineno, text))
    return sorted(set(found))


def quoted_literals(source: str) -> list[tuple[int, str]]:
    """(line, literal) of every quoted string naming a metric, comments aside (JavaScript)."""
    found = []
    for number, line in enumerate(source.splitlines(), 1):
        if line.lstrip().startswith(("//", "*", "/*")):
            continue
        found += [(number, m.group()) for m in QUOTED.finditer(line) if NAME.search(m.group())]
    return found


def yaml_names(source: str) -> list[tuple[int, str]]:
    """(line, line) of every YAML line naming a metric, comments aside (values are unquoted)."""
    return [
        (number, line.strip())
        for number, line in enumerate(source.splitlines(), 1)
        if NAME.search(line.split("#", 1)[0])
    ]


def _offenders() -> list[str]:
    out = []
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*")):
            rel = path.relative_to(ROOT).as_posix()
            if not path.is_file() or rel == THE_TABLE or rel in TASK_YAMLS or "__pycache__" in rel:
                continue
            if path.suffix == ".py":
                hits = python_literals(path.read_text(encoding="utf-8"))
            elif path.suffix == ".js":
                hits = quoted_literals(path.read_text(encoding="utf-8"))
            elif path.suffix == ".yaml" or path.name.endswith("_yaml"):
                hits = yaml_names(path.read_text(encoding="utf-8"))
            else:
                continue
            out += [f"{rel}:{n}: {text}" for n, text in hits]
    return out


def test_no_product_file_but_the_table_names_a_metric() -> None:
    assert _offenders() == []


def test_the_pattern_sees_the_old_spellings() -> None:
    """The spellings the old main had are caught (so the test above can fail); docstrings are not."""
    old_python = [
        'for m in ("ccs_binary", "ccs_graded", "ac_k1", "ef_k1", "ac_k2", "ef_k2"):\n    pass\n',
        '_METRICS = (("CCS_binary", "ccs_binary"), ("AC k=1", "ac_k1"))\n',
        'def ac_name(k):\n    return f"ac_k{k}"\n',
        'out = {"submitted_ccs_binary": claim}\n',
        'choices = ("ccs_binary", "ccs_graded")\n',
        "b = metrics.get('ccs_graded')\n",
        'key = f"{m},none" if m != "ef_k2" else ""\n',
    ]
    for line in old_python:
        assert python_literals(line), line
    assert python_literals('"""Ranked by ccs_binary."""\nx = 1\n') == []
    assert python_literals("x = scores.ccs_binary\n") == []  # a SampleScores field, not a name
    assert quoted_literals('  ["ccs_binary", "ccs_graded"].filter(function (k) { return k; })')
    assert quoted_literals('    {key: "ccs_binary", label: "CCS binary", sortable: true},')
    assert yaml_names("  - {metric: ac_k1, aggregation: mean}  # AC")
    assert yaml_names("# ccs_binary in a comment") == []


def _yaml(path: Path) -> dict:
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))
    return yaml.load(path.read_text(encoding="utf-8"), Loader=Loader)


def test_the_task_yamls_list_exactly_the_tables_metrics() -> None:
    """lmms-eval reads its aggregation from the YAML (it cannot iterate the table): each shipped row
    is a ``mean`` with the row's direction, in table order, and the group averages each of them."""
    task = _yaml(ROOT / "task_configs/_edct_template_yaml")["metric_list"]
    rows = [m for m in task if m["aggregation"] == "mean"]
    assert rows == [
        {"metric": m.name, "aggregation": "mean", "higher_is_better": m.higher_is_better} for m in BUILTIN
    ]
    assert [m["metric"] for m in task[: len(BUILTIN)]] == [m.name for m in BUILTIN]
    group = _yaml(ROOT / "task_configs/edct_bench.yaml")["aggregate_metric_list"]
    assert [m["metric"] for m in group if m["aggregation"] == "mean"] == [m.name for m in BUILTIN]


def test_rows_are_checked_when_made() -> None:
    def value(s: SampleScores) -> float | None:
        return s.ccs_binary

    with pytest.raises(ValueError, match="interval kind 'jackknife'"):
        Metric("x", "X", value, "jackknife", "score", "d")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="lower-case"):
        Metric("CCS Strict", "X", value, "bootstrap", "score", "d")
    with pytest.raises(ValueError, match="in the table already"):
        table.register_metric(BUILTIN[0])


# --- a metric added at run time reaches every output ------------------------------------------


def _example() -> ModuleType:
    """``docs/examples/metric_ccs_strict.py``: the worked example of docs/extending-metric.md."""
    spec = importlib.util.spec_from_file_location("metric_ccs_strict", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


EXAMPLE = ROOT / "docs/examples/metric_ccs_strict.py"
STRICT: Metric = _example().CCS_STRICT
_strict = STRICT.value


def test_a_bootstrap_row_takes_the_runs_seed_and_resamples() -> None:
    """A registered metric without known bounds gets the percentile bootstrap, seeded by the run."""
    from edct_task.scoring.metrics import summarise
    from edct_task.scoring.statistics import BOOTSTRAP_METHOD, bootstrap_ci

    def steps(s: SampleScores) -> int:
        return sum(a is not None for a in s.ac)

    recs = records(0.5, n=8)
    row = Metric("judged_steps", "steps", steps, "bootstrap", "rate", "judged steps per sample")
    with extra_metric(row):
        got = summarise(recs, seed=3, n_resamples=500).overall.metrics["judged_steps"]
    values = [steps(r.scores) for r in recs if r.status == "scored" and r.scores is not None]
    want = bootstrap_ci(values, n_resamples=500, seed=3)
    assert max(values) > 1 and got.method == BOOTSTRAP_METHOD
    assert (got.estimate, got.low, got.high, got.n) == (want.estimate, want.low, want.high, len(values))


def test_a_metric_row_added_at_run_time_reaches_every_output(tmp_path: Path) -> None:
    from edct_task.cli.main import main
    from edct_task.leaderboard.bundle import read_bundle
    from edct_task.leaderboard.eval_results import benchmark_card, benchmark_eval_yaml
    from edct_task.lmms.results import metric_names as lmms_metric_names
    from edct_task.lmms.results import record_results
    from edct_task.run.outputs import load_run
    from edct_task.scoring.metrics import summarise
    from edct_task.scoring.table import score_table

    recs = records(0.5, n=8)
    scored = [r for r in recs if r.status == "scored"]
    expected = sum(_strict(r.scores) for r in scored) / len(scored)  # type: ignore[arg-type,misc]
    assert 0 < expected < 1

    with extra_metric(STRICT):
        assert metric_names()[-1] == "ccs_strict"
        # results.json (written as the runner writes it, from summarise)
        write_edct_run(tmp_path / "run", recs, target={"backend": "openai-chat", "model": "org/a"})
        on_disk = json.loads((tmp_path / "run" / "results.json").read_text())
        strict = on_disk["results"]["overall"]["metrics"]["ccs_strict"]
        assert strict["estimate"] == pytest.approx(expected) and strict["n"] == len(scored)
        assert strict["low"] < strict["estimate"] < strict["high"]
        assert all("ccs_strict" in b["metrics"] for b in on_disk["results"]["per_domain"].values())
        # existing keys unchanged, new key last
        assert list(on_disk["results"]["overall"]["metrics"]) == [*(m.name for m in BUILTIN), "ccs_strict"]

        # console table
        typed = load_run(tmp_path / "run").log
        assert typed is not None
        console = score_table(typed.results)
        assert "CCS_strict" in console and f"{expected:.3f}" in console

        # report (Markdown and the CSV of Table 1)
        assert main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "report")]) == 0
        report_md = (tmp_path / "report" / "report.md").read_text()
        assert "CCS_strict" in report_md
        table1 = next((tmp_path / "report").rglob("table1*.csv"))
        assert "ccs_strict_estimate" in table1.read_text().splitlines()[0]

        # bundle + Hub eval-results (one file per metric) + the benchmark's eval.yaml and card
        bundle = tmp_path / "a.edct.zip"
        repo = tmp_path / "org-a"
        args = ["submit", str(tmp_path / "run"), "--out", str(bundle), "--eval-results", str(repo)]
        assert main([*args, "--dataset-id", "edct/edct-bench"]) == 0
        assert read_bundle(bundle).meta["claimed"]["overall"]["metrics"]["ccs_strict"]["n"] == len(scored)
        (file,) = (repo / ".eval_results").glob("edct_ccs_strict_*.yaml")
        (entry,) = yaml.safe_load(file.read_text())
        assert entry["dataset"]["task_id"] == "ccs_strict" and entry["value"] == round(expected, 6)
        eval_yaml = benchmark_eval_yaml(name="EDCT")
        assert "ccs_strict" in [t["id"] for t in eval_yaml["tasks"]]
        assert STRICT.description in benchmark_card("edct/edct-bench", eval_yaml)

        # leaderboard: JSON, CSV, Markdown, HTML (the board recomputes the row from the records)
        out = tmp_path / "board"
        assert main(["leaderboard", str(bundle), "--out", str(out)]) == 0
        board = json.loads((out / "leaderboard.json").read_text())
        (ranked,) = board["tracks"][0]["entries"]
        assert ranked["ccs_strict"]["estimate"] == pytest.approx(expected)
        rows = list(csv.DictReader(io.StringIO((out / "leaderboard.csv").read_text())))
        assert float(rows[0]["ccs_strict_estimate"]) == pytest.approx(expected)
        md = (out / "leaderboard.md").read_text()
        header = next(line for line in md.splitlines() if line.startswith("| Rank |"))
        assert "| CCS_strict |" in header
        assert header.count("|") == next(line for line in md.splitlines() if line.startswith("| ---")).count(
            "|"
        )
        assert "<th>CCS_strict</th>" in (out / "leaderboard.html").read_text()

        # lmms-eval: process_results returns the row's per-sample value; the hooks' metric list has it
        per_doc = [record_results(r, "") for r in scored]
        assert [d["ccs_strict"] for d in per_doc] == [_strict(r.scores) for r in scored]  # type: ignore[arg-type]
        assert "ccs_strict" in lmms_metric_names()

    # the row is gone again after the block: the outputs are back to the shipped table
    assert "ccs_strict" not in metric_names()
    assert "CCS_strict" not in score_table(summarise(recs))


def _doc_lines() -> list[list[str]]:
    """The example's command lines as docs/extending-metric.md writes them (bash blocks)."""
    text = (ROOT / "docs/extending-metric.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    return [shlex.split(line) for b in blocks for line in b.splitlines() if line.strip()]


@pytest.mark.slow
def test_the_guides_commands_run_and_show_the_row(tmp_path: Path) -> None:
    lines = _doc_lines()
    commands = ("run", "report", "submit", "leaderboard")
    example = "docs/examples/metric_ccs_strict.py"
    assert [words[:3] for words in lines] == [["python", example, c] for c in commands]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    for words in lines:
        args = [str(ROOT / w) if w.startswith("docs/examples/") else w for w in words[1:]]
        small = ["--set", "data.n=6", "--no-progress"] if words[2] == "run" else []
        done = subprocess.run(
            [sys.executable, *args, *small], cwd=tmp_path, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, f"{' '.join(words)}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        if words[2] == "run":
            assert "CCS_strict" in done.stdout
    metrics = json.loads((tmp_path / "runs/strict/results.json").read_text())["results"]["overall"]["metrics"]
    assert metrics["ccs_strict"]["method"] == "wilson" and metrics["ccs_strict"]["n"] > 0
    assert "CCS_strict" in (tmp_path / "report-strict/report.md").read_text()
    assert list((tmp_path / "hub-strict/.eval_results").glob("edct_ccs_strict_*.yaml"))
    for suffix in ("json", "csv", "md", "html"):
        assert "strict" in (tmp_path / f"board-strict/leaderboard.{suffix}").read_text().lower()
