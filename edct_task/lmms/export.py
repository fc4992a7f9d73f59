"""lmms-eval's results files of a finished EDCT run, written by lmms-eval itself.

``edct run --model … --tasks …`` writes the ordinary EDCT run folder (``results.json``,
``samples.jsonl``, ``images/``); this module then exports it as lmms-eval's ``*_results.json``
and sample logs (``<output>/lmms``), so tools that read lmms-eval's output and ``edct report``'s
side-by-side with other benchmarks read the run. Nothing of lmms-eval's evaluator is copied:
lmms-eval's own ``simple_evaluate`` runs the EDCT tasks on a replay model, the task hooks answer
each document with its finished record (``Replay``), and lmms-eval's ``process_results``,
aggregations, group consolidation and ``EvaluationTracker`` produce the files.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from edct_task.core.errors import UserError
from edct_task.core.records import SampleRecord
from edct_task.lmms import state
from edct_task.lmms.tasks import requested_tasks, task_folders, tasks_of_records
from edct_task.run.log import RunLog
from edct_task.run.outputs import RUN_KEY


def doc_of(record: SampleRecord) -> dict[str, Any]:
    """The lmms-eval document of a record's item (the EDCT-Bench row format, without the image)."""
    s = record.sample
    meta = {k: v for k, v in s.metadata.items() if k not in ("source", "source_id")}
    return {
        "id": s.id,
        "domain": s.domain,
        "question": s.question,
        "system_prompt": s.system_prompt or "",
        "source": s.metadata.get("source", ""),
        "source_id": s.metadata.get("source_id", ""),
        "metadata": json.dumps(meta, sort_keys=True),
        "image": None,
    }


def replay_model() -> Any:
    """The model of an export: no model at all. lmms-eval's loop asks it once per document, and
    the task hooks answer the document with its finished record."""
    from lmms_eval.api.model import lmms

    class ReplayModel(lmms):  # type: ignore[misc]
        is_simple = True

        def __init__(self) -> None:
            super().__init__()
            self.device = "cpu"

        def generate_until(self, requests: list[Any]) -> list[str]:
            return ["" for _ in requests]

        def loglikelihood(self, requests: list[Any]) -> list[tuple[float, bool]]:
            raise NotImplementedError("an export replays finished records only")

        def generate_until_multi_round(self, requests: list[Any]) -> list[str]:
            raise NotImplementedError("an export replays finished records only")

    return ReplayModel()


def export(
    log: RunLog,
    records: Sequence[SampleRecord],
    run_dir: Path,
    output_path: Path,
    *,
    tasks: str,
    log_samples: bool = True,
    bootstrap_iters: int = 100_000,
) -> dict[str, Any]:
    """Write lmms-eval's results (and, with ``log_samples``, sample logs) of the run ``log`` /
    ``records`` under ``output_path``; lmms-eval's results dict."""
    from lmms_eval.evaluator import simple_evaluate
    from lmms_eval.loggers import EvaluationTracker
    from lmms_eval.tasks import TaskManager
    from lmms_eval.utils import get_datetime_str

    target = dict(log.config.backends.get("target") or {})
    domains = sorted({r.sample.domain for r in records})
    per_task = tasks_of_records(tasks, domains)
    docs = {
        task: [doc_of(r) for r in records if r.sample.domain in wanted] for task, wanted in per_task.items()
    }
    docs = {task: rows for task, rows in docs.items() if rows}
    names = requested_tasks(tasks) if len(docs) == len(per_task) else list(docs)
    replay = state.Replay(docs, {r.sample.id: r for r in records}, str(run_dir.resolve()))
    manager = TaskManager("WARNING", include_path=task_folders(), include_defaults=False)
    with state.replaying(replay):
        results = simple_evaluate(
            model=replay_model(),
            tasks=names,
            task_manager=manager,
            log_samples=log_samples,
            bootstrap_iters=bootstrap_iters,
            verbosity="WARNING",
        )
    samples = results.pop("samples", None)
    results["config"].update(model=target.get("model", "?"), model_args=target.get("model_args", ""))
    results[RUN_KEY] = {"run_dir": replay.run_dir}  # the run folder: the one EDCT format
    tracker = EvaluationTracker(output_path=str(output_path))
    tracker.general_config_tracker.log_experiment_args(
        model_source=str(target.get("model", "edct")),
        model_args=str(target.get("model_args", "")),
        system_instruction=None,
        chat_template=None,
        fewshot_as_multiturn=False,
    )
    tracker.save_results_aggregated(
        results=results, samples=samples if log_samples else None, datetime_str=get_datetime_str()
    )
    if log_samples and samples:
        for task_name in results["configs"]:
            tracker.save_results_samples(task_name=task_name, samples=samples[task_name])
    logged = {t: len(samples[t]) for t in results["configs"]} if log_samples and samples else {}
    written_whole(tracker, logged)
    return results


class ExportWriteError(OSError):
    """lmms-eval's files of an export did not read back whole (a full disk: its tracker logs the
    write error and goes on)."""


def written_whole(tracker: Any, sample_lines: dict[str, int]) -> None:
    """Read back what ``tracker`` wrote: the results file must parse and each task's sample log hold
    ``sample_lines`` lines; else the files of this export are removed and ``ExportWriteError`` raised
    (lmms-eval's ``EvaluationTracker`` swallows a failed write and leaves empty or cut files)."""
    folder = Path(tracker.output_path) / tracker.general_config_tracker.model_name_sanitized
    date_id = getattr(tracker, "date_id", None)
    files = [folder / f"{date_id}_results.json"] + [
        folder / f"{date_id}_samples_{task}.jsonl" for task in sample_lines
    ]
    try:
        if date_id is None:
            raise ValueError("no results file was written")
        json.loads(files[0].read_text(encoding="utf-8"))
        for task, n in sample_lines.items():
            with (folder / f"{date_id}_samples_{task}.jsonl").open(encoding="utf-8") as f:
                lines = [json.loads(line) for line in f]
            if len(lines) != n:
                raise ValueError(f"the {task} sample log holds {len(lines)} of {n} lines")
    except (OSError, ValueError) as exc:
        for path in files:
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)
        why = " ".join(str(exc).split()) or type(exc).__name__
        raise ExportWriteError(
            f"lmms-eval's files could not be written whole under {folder} ({why}; is the disk full?)"
        ) from None


# ----------------------------------------------------------------------------- the export's process


class ExportFailed(UserError):
    """lmms-eval's export of a finished run failed (the EDCT run folder itself is complete)."""


class ExportProcess:
    """:func:`export` of a finished run folder in a child process, for ``edct run --model``.

    :meth:`start` (called as the run's samples start) launches ``python -m edct_task.lmms.export``,
    which imports lmms-eval's evaluator (seconds of ``evaluate``, ``datasets`` and transformers)
    on another core while the run waits on its models, instead of after the run or competing with
    it for this process's interpreter. :meth:`export` then hands
    it the finished run folder, which it reads with ``load_run`` like every other reader, and
    returns the tables it printed; lmms-eval's own warnings reach this process's stderr.
    """

    def __init__(self) -> None:
        self._proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        if self._proc is None:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", __name__],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                encoding="utf-8",  # the tables' arrows, whatever the locale says
                env={**os.environ, "PYTHONIOENCODING": "utf-8"},
            )

    def export(self, run_dir: Path, output_path: Path, *, tasks: str, log_samples: bool) -> str:
        """The tables of lmms-eval's results, written under ``output_path``; ``ExportFailed`` (one
        line: why) when lmms-eval could not write them."""
        self.start()
        assert self._proc is not None
        job = {
            "run_dir": str(run_dir),
            "output_path": str(output_path),
            "tasks": tasks,
            "log_samples": log_samples,
        }
        out, _ = self._proc.communicate(json.dumps(job) + "\n")
        if self._proc.returncode != 0:
            last = (out.strip().splitlines() or [""])[-1]
            why = last.removeprefix(_FAILED) if last.startswith(_FAILED) else f"exit {self._proc.returncode}"
            raise ExportFailed(
                f"lmms-eval's export of {run_dir} to {output_path} failed: {why} "
                f"(the EDCT run folder is complete: `edct report {run_dir}` reads it)"
            )
        return out

    def close(self) -> None:
        """Stop the child if it is still waiting (the run failed before its export)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()


_FAILED = "edct-export-failed: "
"""The child's last line when its export failed (followed by why)."""


def serve() -> int:
    """The child of :class:`ExportProcess`: import, wait for the job, export, print the tables."""
    import signal

    # Ctrl-C reaches the whole process group: the parent stops this child (closes its stdin or
    # kills it), so the child never prints a KeyboardInterrupt traceback of its own
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(Exception):  # what the export calls; if it cannot import, the export says why
        import lmms_eval.evaluator
        import lmms_eval.loggers  # noqa: F401
    line = sys.stdin.readline()
    if not line.strip():  # the run ended without an export
        return 0
    try:
        from lmms_eval.utils import make_table

        from edct_task.run.outputs import load_run

        job = json.loads(line)
        run_dir = Path(job["run_dir"])
        run = load_run(run_dir)
        if run.log is None:
            raise ValueError(f"{run_dir} is not an `edct run` folder")
        results = export(
            run.log,
            run.records,
            run_dir,
            Path(job["output_path"]),
            tasks=job["tasks"],
            log_samples=job["log_samples"],
        )
    except Exception as exc:
        print(f"{_FAILED}{type(exc).__name__}: {' '.join(str(exc).split())}", flush=True)
        return 1
    print(make_table(results))
    if "groups" in results:
        print(make_table(results, "groups"))
    return 0


if __name__ == "__main__":
    from edct_task.core.exit import exit_promptly
    from edct_task.lmms import export as this  # the module the task hooks read, not __main__

    exit_promptly(this.serve())  # less the teardown of torch & co (≈ 1 s the parent would wait)
