"""Everything ``edct report`` reads, turned into EDCT runs and benchmark scores per model.

Inputs, in any mix: lmms-eval output folders (results files of our tasks and of other
benchmarks, with their logged samples), ``edct run`` output folders (``results.json`` +
``samples.jsonl``) and leaderboard bundles (``edct submit``). Models are identified as lmms-eval
records them (model name + model args) unless ``--label PATH=NAME`` names every result under PATH.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edct_task.core.errors import UserError
from edct_task.core.records import SampleRecord
from edct_task.reporting.benchmarks import BenchmarkScore, benchmark_score, is_edct_task
from edct_task.reporting.setup import dataset_manifest, host_of, setup_id, setup_identity, target_rendering
from edct_task.run.lmms_results import ResultsFile, ResultsFileError, find_results_files, read_results_file
from edct_task.run.log import partial_label
from edct_task.run.outputs import (
    RESULTS_FILE,
    RUN_KEY,
    RunReadError,
    exported_run,
    find_files,
    load_named_run,
    load_run,
    logged_runs,
)
from edct_task.scoring.metrics import metric_names, summarise
from edct_task.scoring.results import Counts, MetricValue, Results, ScoreBlock

BUNDLE_SUFFIX = ".edct.zip"
"""Bundles inside an input folder are found by this suffix; a file given directly may be any zip."""
DEFAULT_RESAMPLES = 10_000
"""Bootstrap resamples when the run does not record its own (the ``edct run`` default)."""
TOLERANCE = 1e-9


class ReportInputError(UserError, ValueError):
    """An input path that cannot be read (the message names it and says what was expected)."""


@dataclass
class EdctRun:
    """One EDCT result of one model: scores with CIs, per domain, its setup, and where it came from."""

    model_key: str
    model_name: str
    task: str
    """The benchmark: lmms-eval task/group (edct_bench, edct_calibration) or ``calibration``/``dataset``."""
    summary: Results
    """``overall`` and ``per_domain`` scores (``scoring.results``; a results table read without its
    sample records has ``overall`` only, without intervals)."""
    setup: dict[str, Any]
    seed: int | None
    kind: str
    """``edct-run``, ``lmms-eval`` or ``bundle``."""
    source: str
    metric_source: str
    """Where the overall numbers come from (file and key, or the recomputation)."""
    records: list[SampleRecord] = field(repr=False, default_factory=list)
    flags: list[str] = field(default_factory=list)
    run_dir: str | None = field(default=None, repr=False)
    """lmms-eval runs: the EDCT run folder their logs name (the export's, the loop's)."""
    controls: dict[str, Any] | None = None
    """The run's known-answer controls block (``results.json``'s ``controls``,
    ``scoring.controls.summarise_controls``); None for a run made before controls and for lmms-eval
    results (they do not carry it): "controls: not run", which is not the same as unreliable."""
    partial: str | None = None
    """``run.log.partial_label``: the run is an ``edct merge --allow-missing`` of some slices only."""

    @property
    def setup_id(self) -> str:
        return setup_id(self.setup)

    @property
    def unreliable(self) -> list[str]:
        """Why the run cannot be trusted (``scoring.controls.unreliable_reasons``); empty when its
        controls passed, were off, or were not run."""
        from edct_task.scoring.controls import unreliable_reasons

        return unreliable_reasons(self.controls)


@dataclass
class ModelResults:
    """Everything found for one model."""

    key: str
    name: str
    edct: list[EdctRun] = field(default_factory=list)
    benchmarks: dict[str, BenchmarkScore] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)


@dataclass
class Collection:
    models: dict[str, ModelResults] = field(default_factory=dict)
    inputs: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def model(self, key: str, name: str) -> ModelResults:
        if key not in self.models:
            self.models[key] = ModelResults(key, name)
        return self.models[key]


# ----------------------------------------------------------------------------- edct run folders


def _target_identity(spec: Mapping[str, Any]) -> tuple[str, str]:
    """(key, display name) of an ``edct run`` target role spec; an ``lmms-eval`` target is named as
    lmms-eval names the model in its results files, so its other benchmarks join it."""
    if spec.get("backend") == "lmms-eval" and spec.get("model"):
        from edct_task.run.lmms_results import model_name_from_args

        model, model_args = str(spec["model"]), str(spec.get("model_args") or "")
        key = f"{model}({model_args})" if model_args else model
        return key, model_name_from_args(model_args) or key
    args = ",".join(f"{k}={v}" for k, v in sorted(spec.items()) if k != "backend")
    key = f"{spec.get('backend', 'target')}({args})" if args else str(spec.get("backend", "target"))
    name = str(spec["model"]) if spec.get("model") else key
    return key, name


def edct_run_from_results(
    results: dict[str, Any], records: list[SampleRecord], *, source: str, kind: str
) -> EdctRun:
    """An EdctRun from an ``edct run`` results.json (its own numbers) and its records.

    The results are checked for shape first (``run_checks.check_results``); numbers that the
    records do not give (recomputed with the run's own seed) are flagged."""
    from edct_task.run.checks import check_results

    try:
        where = f"{source}/{RESULTS_FILE}" if kind == "edct-run" else source
        check_results(where, results)
        config = results["config"]
        summary = Results.model_validate(results["results"])  # its shape was checked just now
        target = config["roles"]["target"]
    except RunReadError as exc:
        raise ReportInputError(str(exc)) from None
    except (KeyError, TypeError):
        raise ReportInputError(
            f"{source}: not an `edct run` results.json (needs config.roles.target and results)"
        ) from None
    key, name = _target_identity(target if isinstance(target, Mapping) else {"backend": str(target)})
    setup = setup_identity(
        roles=config.get("roles", {}),
        protocol=config.get("protocol", {}),
        verification=config.get("verification", {}),
        prompt_versions=results.get("prompt_versions", {}),
        dataset_digest=dataset_manifest(records)["digest"] if records else None,
        rendering=target_rendering(records),
        host=host_of(target),
    )
    data = config.get("data", {})
    flags = [] if records else [f"{source}: no sample records; dataset identity unknown"]
    if records:
        flags += claim_flags(summary, records, seed=config.get("protocol", {}).get("seed"), source=source)
    return EdctRun(
        model_key=key,
        model_name=name,
        task=str(data.get("source", "edct")),
        summary=summary,
        setup=setup,
        seed=config.get("protocol", {}).get("seed"),
        kind=kind,
        source=source,
        metric_source=f"{source}: results.overall / results.per_domain (the run's own numbers)",
        records=records,
        flags=flags,
        controls=results.get("controls") if isinstance(results.get("controls"), dict) else None,
        partial=partial_label(results),
    )


def claim_flags(summary: Results, records: list[SampleRecord], *, seed: Any, source: str) -> list[str]:
    """Flags for the overall and per-domain estimates a results file claims that its own records
    do not give (estimates do not depend on the bootstrap, so a few resamples suffice)."""
    mine = summarise(records, seed=int(seed or 0), n_resamples=100)
    blocks = [("overall", summary.overall, mine.overall)]
    blocks += [(f"domain {d}", summary.per_domain.get(d), block) for d, block in mine.per_domain.items()]
    flags = []
    for where, claimed, own in blocks:
        for m in metric_names():
            value = None if claimed is None else claimed.estimate(m)
            est = own.estimate(m)
            if (value is None) != (est is None) or (value is not None and abs(value - est) > TOLERANCE):
                flags.append(f"{source}: {where} {m} is {value} in results.json but the records give {est}")
    return flags


def read_edct_run(folder: Path) -> EdctRun:
    """An ``edct run`` output folder, read through ``edct_task.run.outputs.load_run``."""
    try:
        loaded = load_run(folder)
    except RunReadError as exc:
        raise ReportInputError(str(exc)) from None
    return edct_run_from_results(loaded.results, loaded.records, source=str(folder), kind="edct-run")


# ----------------------------------------------------------------------------- lmms-eval files


def _edct_leaves(results: ResultsFile, name: str) -> list[str]:
    entry = results.tasks[name]
    if not entry.subtasks:
        return [name]
    return [leaf for sub in entry.subtasks if sub in results.tasks for leaf in _edct_leaves(results, sub)]


def _claimed(results: ResultsFile, task: str) -> dict[str, float | None]:
    entry = results.tasks[task]
    return {m: entry.metrics[f"{m},none"].value for m in metric_names() if f"{m},none" in entry.metrics}


def edct_runs_from_lmms(results: ResultsFile, model_key: str, model_name: str) -> list[EdctRun]:
    """The EDCT runs of an lmms-eval results file: one per EDCT run folder its EDCT tasks' logged
    samples name (else the one an export's ``edct.run_dir`` names), read as that run folder and
    flagged wherever lmms-eval's own per-task values disagree with its records; a top-level EDCT
    task whose logs name no run folder is the results file's own numbers, without intervals.
    A run folder named but not readable (moved, deleted, a link) is one ``ReportInputError``."""
    try:
        return _runs_from_lmms(results, model_key, model_name)
    except RunReadError as exc:
        raise ReportInputError(str(exc)) from None


def _runs_from_lmms(results: ResultsFile, model_key: str, model_name: str) -> list[EdctRun]:
    samples_files = results.samples_files()
    logged: dict[str, dict[str, list[str]]] = {}  # run folder → leaf task → logged sample ids
    tops: dict[str, list[str]] = {}  # run folder → its top-level tasks
    out = []
    for top in results.top_level():
        if not is_edct_task(results.tasks[top]):
            continue
        named: dict[str, dict[str, list[str]]] = {}
        for leaf in [t for t in _edct_leaves(results, top) if t in samples_files]:
            for run_dir, ids in logged_runs(samples_files[leaf]).items():
                named.setdefault(run_dir, {})[leaf] = ids
        if not named and (exported := exported_run(results.path)) is not None:
            named[exported] = {}  # an export without --log_samples: its results file names the run
        if not named:
            out.append(_unlogged_run(results, top, model_key, model_name))
        for run_dir, by_leaf in named.items():
            logged.setdefault(run_dir, {}).update(by_leaf)
            tops.setdefault(run_dir, []).append(top)
    for run_dir, by_leaf in logged.items():
        logs = [samples_files[leaf] for leaf in by_leaf]
        out.append(_named_run(results, run_dir, tops[run_dir], by_leaf, logs, model_key, model_name))
    return out


def _named_run(
    results: ResultsFile,
    run_dir: str,
    tops: list[str],
    by_leaf: dict[str, list[str]],
    logs: list[Path],
    model_key: str,
    model_name: str,
) -> EdctRun:
    """The run folder ``run_dir`` that the results file's tasks ``tops`` name, as lmms-eval's run
    of the model; ``by_leaf``: the sample ids each leaf task logged, in the sample logs ``logs``."""
    loaded = load_named_run(run_dir, results.path)
    run = edct_run_from_results(loaded.results, loaded.records, source=run_dir, kind="edct-run")
    for leaf, ids in by_leaf.items():
        run.flags += _leaf_flags(results, leaf, ids, loaded.records, seed=int(run.seed or 0))
    run.model_key, run.model_name = model_key, model_name
    run.task = ", ".join(tops)
    run.kind = "lmms-eval"
    run.source = str(results.path)
    run.run_dir = run_dir
    named_in = ", ".join(log.name for log in logs) or f"{RUN_KEY}.run_dir"
    run.metric_source = (
        f"the EDCT run folder {run_dir} that {results.path.name} names ({named_in}): its results.json, "
        "checked against its sample records"
    )
    return run


def _leaf_flags(
    results: ResultsFile, leaf: str, ids: list[str], records: list[SampleRecord], *, seed: int
) -> list[str]:
    """Where lmms-eval's value of one leaf task is not what the run folder's records of the
    samples that leaf logged give (estimates do not depend on the bootstrap: a few resamples)."""
    wanted = set(ids)
    mine = [r for r in records if r.sample.id in wanted]
    missing = len(wanted - {r.sample.id for r in mine})
    flags = []
    if missing:
        flags.append(f"{results.path}: {missing} sample(s) logged for {leaf} are not in the run folder")
    own = summarise(mine, seed=seed, n_resamples=100).overall
    for m, v in _claimed(results, leaf).items():
        est = own.estimate(m)
        if (v is None) != (est is None) or (v is not None and est is not None and abs(v - est) > TOLERANCE):
            flags.append(
                f"{results.path}: {leaf} {m} is {v} in the results file but the records of the "
                f"run folder it names give {est}"
            )
    return flags


def _unlogged_run(results: ResultsFile, top: str, model_key: str, model_name: str) -> EdctRun:
    """A top-level EDCT task whose logs name no run folder: the results file's own numbers,
    without intervals, domains or setup."""
    entry = results.tasks[top]
    metrics = {
        m: MetricValue(estimate=v.value, low=None, high=None, n=None, method=None)
        for m in metric_names()
        if (v := entry.metrics.get(f"{m},none")) is not None
    }
    counts = Counts(
        **{
            c[2:]: int(v.value)
            for c in ("n_scored", "n_excluded", "n_unscored", "n_error")
            if (v := entry.metrics.get(f"{c},none")) is not None and v.value is not None
        }
    )
    return EdctRun(
        model_key=model_key,
        model_name=model_name,
        task=top,
        summary=Results(overall=ScoreBlock(metrics=metrics, counts=counts)),
        setup=setup_identity(
            roles={},
            protocol={},
            verification={},
            prompt_versions={},
            dataset_digest=None,
            rendering=target_rendering([]),
        ),
        seed=None,
        kind="lmms-eval",
        source=str(results.path),
        metric_source=f"{results.path}: results[{top!r}][<metric>,none]",
        flags=[
            f"{results.path}: no logged samples of {top} name an EDCT run folder: CIs and domains "
            "unavailable (run lmms-eval with --log_samples)",
            f"{results.path}: no EDCT setup recorded (the run folder is unknown)",
        ],
    )


# ----------------------------------------------------------------------------- collection


def _label_for(path: Path, labels: Mapping[Path, str]) -> str | None:
    resolved = path.resolve()
    best: tuple[int, str] | None = None
    for root, name in labels.items():
        root = root.resolve()
        if resolved == root or root in resolved.parents:
            depth = len(root.parts)
            if best is None or depth > best[0]:
                best = (depth, name)
    return best[1] if best else None


def _is_bundle(path: Path) -> bool:
    return path.is_file() and path.name.endswith(".zip")


BundleReader = Callable[[Path], EdctRun]
"""Reads one leaderboard bundle as a run (``edct_task.leaderboard.bundle``, given by the caller:
the report sits below the leaderboard)."""


def collect(
    paths: Sequence[Path],
    labels: Mapping[Path, str] | None = None,
    *,
    read_bundle: BundleReader | None = None,
) -> Collection:
    """Read every input; models keyed by identity (or label). Bundles need ``read_bundle``."""
    labels = dict(labels or {})
    out = Collection()
    for path in paths:
        if not path.exists():
            raise ReportInputError(
                f"{path} does not exist (pass lmms-eval output folders, `edct run` folders or bundles)"
            )
        found = 0
        if _is_bundle(path):
            _add_run(out, _bundle_run(path, read_bundle), _label_for(path, labels))
            out.inputs.append({"path": str(path), "kind": "bundle"})
            continue
        if path.is_dir():
            found_logs = find_files(path, "", RESULTS_FILE)
            edct_folders = sorted({p.parent for p in found_logs if p.name == RESULTS_FILE})
        else:
            edct_folders = [path.parent] if path.name == RESULTS_FILE else []
        for folder in edct_folders:
            _add_run(out, read_edct_run(folder), _label_for(folder, labels))
            out.inputs.append({"path": str(folder), "kind": "edct-run"})
            found += 1
        for file in find_results_files(path):
            try:
                results = read_results_file(file)
            except ResultsFileError as exc:
                raise ReportInputError(str(exc)) from None
            label = _label_for(file, labels)
            key = label or results.model_key
            name = label or results.model_name
            model = out.model(key, name)
            for run in edct_runs_from_lmms(results, key, name):
                model.edct.append(run)
            for top in results.top_level():
                if is_edct_task(results.tasks[top]):
                    continue
                score = benchmark_score(results, top)
                if score is None:
                    model.flags.append(f"{file}: {top} has no numeric score")
                    continue
                if top in model.benchmarks:
                    model.flags.append(
                        f"{top}: several results; using {file} (also {model.benchmarks[top].source})"
                    )
                model.benchmarks[top] = score
            out.inputs.append({"path": str(file), "kind": "lmms-eval"})
            found += 1
        for bundle_file in sorted(path.rglob(f"*{BUNDLE_SUFFIX}")) if path.is_dir() else []:
            _add_run(out, _bundle_run(bundle_file, read_bundle), _label_for(bundle_file, labels))
            out.inputs.append({"path": str(bundle_file), "kind": "bundle"})
            found += 1
        if not found:
            raise ReportInputError(
                f"{path}: found no lmms-eval *_results.json, no `edct run` results.json and no bundle"
            )
    _drop_twins(out)
    _flag(out)
    return out


def _drop_twins(out: Collection) -> None:
    """One run, read once: lmms-eval results written with an EDCT run folder that is read too (the
    export of ``edct run --model``, the loop path's ``<output_path>/edct``), or that another
    lmms-eval results file names too, are that run again; what lmms-eval's values say against it
    (flags naming the results file) stays with the run that is kept."""
    kept = {Path(r.source).resolve(): r for m in out.models.values() for r in m.edct if r.kind == "edct-run"}
    for model in out.models.values():
        runs = []
        for r in model.edct:
            folder = Path(r.run_dir).resolve() if r.run_dir else None
            twin = kept.get(folder) if folder is not None else None
            if twin is None:
                runs.append(r)
                if folder is not None:
                    kept[folder] = r
            else:
                twin.flags += [f for f in r.flags if f.startswith(r.source) and f not in twin.flags]
        model.edct = runs
    for key in [k for k, m in out.models.items() if not m.edct and not m.benchmarks]:
        del out.models[key]


def _bundle_run(path: Path, read_bundle: BundleReader | None) -> EdctRun:
    if read_bundle is None:
        raise ReportInputError(f"{path} is a bundle; this caller reads runs and lmms-eval output only")
    return read_bundle(path)


def _add_run(out: Collection, run: EdctRun, label: str | None) -> None:
    if label:
        run.model_key = run.model_name = label
    out.model(run.model_key, run.model_name).edct.append(run)


def _flag(out: Collection) -> None:
    seen: dict[str, int] = {}
    for m in out.models.values():
        for task in m.benchmarks:
            seen[task] = seen.get(task, 0) + 1
    for m in out.models.values():
        if not m.edct:
            m.flags.append("no EDCT run for this model")
        for task in m.benchmarks:
            if seen[task] == 1 and len(out.models) > 1:
                m.flags.append(f"{task}: seen for this model only")
