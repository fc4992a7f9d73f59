"""A stranger's sweep file: names that reach the emitted Slurm scripts or the file system, counts
that would allocate without end, and files that are not files (issue 46, point 5)."""

from __future__ import annotations

import json
import os
import resource
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support.hang_guard import hang_limit

from edct_task.cli.main import main
from edct_task.config import calibration_config
from edct_task.core.errors import UserError
from edct_task.scale.sweep import expand

MIXED = {"backend": "calibration-reference", "behavior": "mixed:0.5"}
HOSTILE_NAMES = [
    "a\nb",
    "x$(touch PWNED)",
    "x`touch PWNED`",
    "it's",
    'say "hi"',
    "../../x",
    "/abs",
    "a/b",
    "..",
    ".hidden",
    "",
    "a b",
    "a;touch PWNED",
]


def _sweep(folder: Path, name: str = "sweep.yaml", config: str = "base.yaml", **spec) -> Path:
    raw = calibration_config("faithful", n=6).model_dump(mode="json")
    raw.pop("output_dir")
    (folder / config).write_text(yaml.safe_dump(raw))
    body = {"output": "out", "configs": {"base": config}, "models": {"m": MIXED}, **spec}
    (folder / name).write_text(yaml.safe_dump(body))
    return folder / name


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


@pytest.mark.parametrize("name", HOSTILE_NAMES)
@pytest.mark.parametrize("section", ["models", "configs"])
def test_a_name_that_is_not_one_safe_folder_is_refused(
    tmp_path: Path, capsys, section: str, name: str
) -> None:
    spec = {"models": {name: MIXED}} if section == "models" else {"configs": {name: "base.yaml"}}
    path = _sweep(tmp_path, **spec)
    assert main(["sweep", str(path), "--emit-slurm", str(tmp_path / "slurm")]) == 2
    assert f"{section}: Value error, name" in _one_line(capsys)
    assert not (tmp_path / "slurm").exists() and not (tmp_path / "PWNED").exists()
    assert not any(p.name == "x" for p in tmp_path.parent.iterdir())


def test_every_job_folder_stays_inside_the_sweep_folder(tmp_path: Path) -> None:
    path = _sweep(tmp_path, models={"qwen2.5-vl_7B+a": MIXED, "m": MIXED}, seeds=[0, 1], shards=3)
    root = (tmp_path / "out").resolve()
    for job in expand(path).jobs:
        assert job.output.resolve().is_relative_to(root)


def _argv_printer(folder: Path) -> Path:
    script = folder / "argv.py"
    script.write_text("import json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    return script


def test_hostile_file_and_folder_names_do_not_reach_the_shell(tmp_path: Path, capsys) -> None:
    """A sweep file and option values full of shell syntax: bash runs each array task's command
    with exactly the job's arguments, and nothing injected runs."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a b").mkdir()
    hostile = "x$(touch PWNED)`touch PWNED`';touch PWNED;'\".yaml"
    path = _sweep(
        tmp_path / "sub" / "a b",
        name=hostile,
        config="c$(touch PWNED)';touch PWNED;'\n$(touch PWNED).yaml",
        set=["limits.text_concurrency=2", "protocol.k=1"],
    )
    slurm = tmp_path / "slurm"
    assert main(["sweep", str(path), "--emit-slurm", str(slurm)]) == 0, capsys.readouterr().err
    jobs = expand(path).jobs
    printer = _argv_printer(tmp_path)
    env = {**os.environ, "EDCT": f"{sys.executable} {printer}", "SLURM_ARRAY_TASK_ID": "0"}
    done = subprocess.run(
        ["bash", str(slurm / "jobs.sbatch")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=hang_limit(60),
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == list(jobs[0].argv)
    merge = subprocess.run(
        ["bash", str(slurm / "merge.sbatch")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=hang_limit(60),
    )
    assert merge.returncode == 0, merge.stderr
    assert json.loads(merge.stdout)[:2] == ["sweep", str(path.resolve())]
    for script in ("jobs.sbatch", "merge.sbatch"):
        for line in (slurm / script).read_text().splitlines():
            assert not line.startswith("#SBATCH --job-name=") or (line.isascii() and "$" not in line)
    assert not list(tmp_path.rglob("PWNED"))


@pytest.mark.parametrize("folder", ["slurm\n$(touch PWNED)", "slurm dir", "slurm$(touch PWNED)", "it's"])
def test_a_script_folder_a_directive_cannot_carry_is_refused(tmp_path: Path, capsys, folder: str) -> None:
    path = _sweep(tmp_path)
    assert main(["sweep", str(path), "--emit-slurm", str(tmp_path / folder)]) == 2
    assert "--emit-slurm folder" in _one_line(capsys)
    assert not (tmp_path / folder).exists() and not list(tmp_path.rglob("PWNED"))


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"shards": 1_000_000_000}, "shards"),
        ({"resources": {"num_cpus": float("inf")}}, "resources.num_cpus"),
        ({"resources": {"num_cpus": float("nan")}}, "resources.num_cpus"),
        ({"resources": {"num_gpus": 1e300}}, "resources.num_gpus"),
        ({"resources": {"custom": {"quota": float("inf")}}}, "resources.custom.quota"),
        ({"retries": 10**12}, "retries"),
        ({"seeds": list(range(2000)), "shards": 10}, "models × configs × seeds × shards"),
    ],
)
def test_counts_a_user_types_are_bounded_before_anything_is_built(
    tmp_path: Path, capsys, spec, field
) -> None:
    path = _sweep(tmp_path, **spec)
    assert main(["sweep", str(path), "--emit-slurm", str(tmp_path / "slurm")]) == 2
    assert field in _one_line(capsys)


def test_a_shard_count_is_bounded_where_it_is_typed(tmp_path: Path, capsys) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(calibration_config("faithful", n=6).model_dump(mode="json")))
    argv = ["run", "--config", str(config), "--shard", "0/100000000", "--output", str(tmp_path / "r")]
    assert main(argv) == 2
    assert "--shard" in _one_line(capsys) and not (tmp_path / "r").exists()


def _limited(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _sweep_subprocess(path: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "edct_task.cli.main", "sweep", str(path), "--emit-slurm", str(tmp_path / "s")],
        capture_output=True,
        text=True,
        timeout=hang_limit(60),
        preexec_fn=lambda: _limited(2 << 30),
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )


def test_a_sweep_file_linked_to_dev_zero_is_refused_unread(tmp_path: Path) -> None:
    link = tmp_path / "sweep.yaml"
    link.symlink_to("/dev/zero")
    done = _sweep_subprocess(link, tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-500:]
    assert "symbolic link" in done.stderr or "not a regular file" in done.stderr


def test_a_sweep_file_that_is_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "sweep.yaml"
    os.mkfifo(fifo)
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    try:
        done = _sweep_subprocess(fifo, tmp_path)
    except subprocess.TimeoutExpired:
        pytest.fail("a sweep file that is a FIFO blocked the reader")
    assert done.returncode == 2 and "a FIFO" in done.stderr, done.stderr[-500:]


def test_a_huge_sweep_file_is_refused(tmp_path: Path) -> None:
    path = _sweep(tmp_path)
    with path.open("a") as f:
        f.write("#" + "x" * (2 << 20) + "\n")
    with pytest.raises(UserError, match="larger than"):
        expand(path)
