"""A sweep as Slurm scripts: an sbatch job array (array task i runs job i's ``edct run``), a merge
job that runs after every array task succeeded, and ``submit.sh`` that submits both.

The scripts call ``$EDCT`` (default ``edct``: the command of the environment the job starts in).
The array's ``--gres=gpu:1`` is set when any job asks for a GPU (one array, one resource shape);
``--cpus-per-task`` is the sweep's ``resources.num_cpus``.

Nothing a user named reaches a script unquoted: every word of a command is ``shlex.quote``-d, a
job's comment holds only its checked name (``sweep.NAME_PATTERN``), the job name is the sweep
file's stem reduced to safe characters, and the log folder of the ``#SBATCH --output`` directives
(which sbatch reads without shell quoting) is refused when it holds a character such a line cannot
carry (a space, a quote, ``$``, a backslash or a control character such as a newline).
"""

from __future__ import annotations

import math
import re
import shlex
from pathlib import Path

from edct_task.core.errors import ConfigError
from edct_task.scale.sweep import NAME_PATTERN, Sweep

JOBS_SCRIPT = "jobs.sbatch"
MERGE_SCRIPT = "merge.sbatch"
SUBMIT_SCRIPT = "submit.sh"


UNSAFE_IN_DIRECTIVE = re.compile(r"[\s'\"`$\\\x00-\x1f\x7f]")


def _directive_path(path: Path) -> str:
    """``path`` as the value of an ``#SBATCH`` line, or ``ConfigError`` naming the folder."""
    text = str(path)
    if UNSAFE_IN_DIRECTIVE.search(text):
        raise ConfigError(
            f"--emit-slurm folder {text!r}: a #SBATCH line cannot carry spaces, quotes, '$', '\\' or "
            "control characters; choose a folder whose path has none"
        )
    return text


def _job_name(sweep: Sweep) -> str:
    """``edct-<sweep file stem>``, every character outside ``[A-Za-z0-9._-]`` replaced by ``_``."""
    return "edct-" + re.sub(r"[^A-Za-z0-9._-]", "_", sweep.path.stem)[:64]


def _comment(name: str) -> str:
    for part in name.split("/"):
        if not NAME_PATTERN.fullmatch(part):
            raise ConfigError(f"job name {name!r} is not a checked sweep name")  # expand() checks them
    return f"# {name}"


def _command(argv: tuple[str, ...] | list[str]) -> str:
    """``$EDCT`` unquoted, so ``EDCT="python -m edct_task.cli.main"`` works too."""
    return "$EDCT " + " ".join(shlex.quote(a) for a in argv)


def jobs_script(sweep: Sweep, logs: Path, max_parallel: int | None = None) -> str:
    jobs = sweep.jobs
    gpu = any(j.num_gpus > 0 for j in jobs)
    throttle = f"%{max_parallel}" if max_parallel else ""
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name={_job_name(sweep)}",
        f"#SBATCH --array=0-{len(jobs) - 1}{throttle}",
        f"#SBATCH --cpus-per-task={max(1, math.ceil(sweep.spec.resources.num_cpus))}",
        *(["#SBATCH --gres=gpu:1"] if gpu else []),
        f"#SBATCH --output={_directive_path(logs)}/%x-%A_%a.out",
        "# one array task per job of the sweep; a rerun of a task resumes from its own stage cache",
        "set -euo pipefail",
        'EDCT="${EDCT:-edct}"',
        'case "$SLURM_ARRAY_TASK_ID" in',
    ]
    for i, job in enumerate(jobs):
        lines += [f"  {i})  {_comment(job.name)}", f"    {_command(job.argv)} ;;"]
    lines += ['  *) echo "no job $SLURM_ARRAY_TASK_ID in this sweep" >&2; exit 2 ;;', "esac", ""]
    return "\n".join(lines)


def merge_script(sweep: Sweep, sweep_file: Path, logs: Path) -> str:
    return "\n".join(
        [
            "#!/bin/bash",
            f"#SBATCH --job-name={_job_name(sweep)}-merge",
            "#SBATCH --cpus-per-task=1",
            f"#SBATCH --output={_directive_path(logs)}/%x-%j.out",
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
    """Write the three scripts into ``folder``; their paths. Nothing is written when a script
    cannot be made safe (``ConfigError``, one line)."""
    if max_parallel is not None and max_parallel < 1:
        raise ConfigError("--max-parallel must be at least 1")
    logs = folder.resolve() / "logs"
    scripts = (
        (JOBS_SCRIPT, jobs_script(sweep, logs, max_parallel)),
        (MERGE_SCRIPT, merge_script(sweep, sweep_file.resolve(), logs)),
        (SUBMIT_SCRIPT, submit_script(folder.resolve())),
    )
    folder.mkdir(parents=True, exist_ok=True)
    logs.mkdir(exist_ok=True)
    written = []
    for name, text in scripts:
        path = folder / name
        path.write_text(text, encoding="utf-8")
        path.chmod(0o755)
        written.append(path)
    return written
