"""A sweep as Slurm scripts: an sbatch job array (array task i runs job i's ``edct run``), a merge
job that runs after every array task succeeded, and ``submit.sh`` that submits both.

The scripts call ``$EDCT`` (default ``edct``: the command of the environment the job starts in).
The array's ``--gres=gpu:1`` is set when any job asks for a GPU (one array, one resource shape);
``--cpus-per-task`` is the sweep's ``resources.num_cpus``.
"""

from __future__ import annotations

import math
import shlex
from pathlib import Path

from edct_task.scale.sweep import Sweep

JOBS_SCRIPT = "jobs.sbatch"
MERGE_SCRIPT = "merge.sbatch"
SUBMIT_SCRIPT = "submit.sh"


def _command(argv: tuple[str, ...] | list[str]) -> str:
    """``$EDCT`` unquoted, so ``EDCT="python -m edct_task.cli.main"`` works too."""
    return "$EDCT " + " ".join(shlex.quote(a) for a in argv)


def jobs_script(sweep: Sweep, logs: Path, max_parallel: int | None = None) -> str:
    jobs = sweep.jobs
    gpu = any(j.num_gpus > 0 for j in jobs)
    throttle = f"%{max_parallel}" if max_parallel else ""
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name=edct-{sweep.path.stem}",
        f"#SBATCH --array=0-{len(jobs) - 1}{throttle}",
        f"#SBATCH --cpus-per-task={max(1, math.ceil(sweep.spec.resources.num_cpus))}",
        *(["#SBATCH --gres=gpu:1"] if gpu else []),
        f"#SBATCH --output={logs}/%x-%A_%a.out",
        "# one array task per job of the sweep; a rerun of a task resumes from its own stage cache",
        "set -euo pipefail",
        'EDCT="${EDCT:-edct}"',
        'case "$SLURM_ARRAY_TASK_ID" in',
    ]
    for i, job in enumerate(jobs):
        lines += [f"  {i})  # {job.name}", f"    {_command(job.argv)} ;;"]
    lines += ['  *) echo "no job $SLURM_ARRAY_TASK_ID in this sweep" >&2; exit 2 ;;', "esac", ""]
    return "\n".join(lines)


def merge_script(sweep: Sweep, sweep_file: Path, logs: Path) -> str:
    return "\n".join(
        [
            "#!/bin/bash",
            f"#SBATCH --job-name=edct-{sweep.path.stem}-merge",
            "#SBATCH --cpus-per-task=1",
            f"#SBATCH --output={logs}/%x-%j.out",
            "# after every array task succeeded: each run's shards merged, every model's CCS printed",
            "set -euo pipefail",
            'EDCT="${EDCT:-edct}"',
            _command(["sweep", str(sweep_file), "--merge-only", "--output", str(sweep.root)]),
            "",
        ]
    )


def submit_script(folder: Path) -> str:
    return "\n".join(
        [
            "#!/bin/bash",
            "# submits the job array, then the merge as a job that starts when every array task succeeded",
            "set -euo pipefail",
            f"jobs=$(sbatch --parsable {shlex.quote(str(folder / JOBS_SCRIPT))})",
            f'sbatch --dependency="afterok:${{jobs%%;*}}" {shlex.quote(str(folder / MERGE_SCRIPT))}',
            "",
        ]
    )


def emit(sweep: Sweep, sweep_file: Path, folder: Path, max_parallel: int | None = None) -> list[Path]:
    """Write the three scripts into ``folder``; their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    logs = folder / "logs"
    logs.mkdir(exist_ok=True)
    written = []
    for name, text in (
        (JOBS_SCRIPT, jobs_script(sweep, logs.resolve(), max_parallel)),
        (MERGE_SCRIPT, merge_script(sweep, sweep_file.resolve(), logs.resolve())),
        (SUBMIT_SCRIPT, submit_script(folder.resolve())),
    ):
        path = folder / name
        path.write_text(text, encoding="utf-8")
        path.chmod(0o755)
        written.append(path)
    return written
