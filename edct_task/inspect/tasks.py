"""The Inspect tasks: their datasets, solver and scorer over one EDCT run (``session``).

``edct_calibration`` is the calibration world of the task index every host runs (each scene
rendered when its sample starts: ``--limit 30`` renders 30); ``edct_bench`` and its domain tasks
read EDCT-Bench (``-T data=…``, else ``$EDCT_BENCH_DATA``) as ``edct run`` does, calibration-only
roles refused on real photographs before any backend is built.
"""

from __future__ import annotations

from typing import Any

from edct_task.core.records import SampleInput, SampleRecord
from edct_task.inspect.scorer import edct_scorer
from edct_task.inspect.session import RUN_KEY, cache_dir_of, open_run, task_config
from edct_task.inspect.solver import edct_solver


def build_task(
    name: str,
    *,
    domains: list[str] | None = None,
    config: str | None = None,
    data: str | None = None,
    output_dir: str | None = None,
    work_dir: str | None = None,
) -> Any:
    """The Inspect ``Task`` ``name``: calibration when ``domains`` is None, else those EDCT-Bench
    domains. A bad config or missing data stops the run with one line: Inspect's own
    ``PrerequisiteError``, which its command line prints without a traceback."""
    from inspect_ai import Task
    from inspect_ai._util.error import PrerequisiteError

    from edct_task.bench_data.format import BenchDataError
    from edct_task.core.errors import ConfigError

    try:
        return Task(**task_parts(name, domains, config, data, output_dir, work_dir))
    except (ConfigError, BenchDataError, ValueError, OSError) as exc:
        raise PrerequisiteError(f"edct: the EDCT task {name} cannot load: {exc}") from None


def task_parts(
    name: str,
    domains: list[str] | None,
    config: str | None,
    data: str | None,
    output_dir: str | None,
    work_dir: str | None,
) -> dict[str, Any]:
    """The ``Task`` arguments: dataset, solver and scorer over a new run."""
    run_config = task_config(config)
    dataset = (
        calibration_dataset()
        if domains is None
        else bench_dataset(run_config, name, domains, data, cache_dir_of(run_config, work_dir))
    )
    run = open_run(run_config, name, output_dir, work_dir)
    return {
        "dataset": dataset,
        "solver": edct_solver(run),
        "scorer": edct_scorer(run),
        "metadata": {RUN_KEY: str(run.folder.path)},
        "name": name,
    }


def calibration_dataset() -> list[Any]:
    """The ``edct_calibration`` index's scenes as Inspect samples (rendered by the solver)."""
    from inspect_ai.dataset import Sample

    from edct_task.calibration.samples import calibration_id
    from task_configs import calibration_index

    n, seed = calibration_index()
    return [
        Sample(
            id=calibration_id(i),
            input=f"EDCT calibration scene {i} (world seed {seed})",
            metadata={"edct_index": i, "edct_seed": seed},
        )
        for i in range(n)
    ]


def bench_dataset(config: Any, name: str, domains: list[str], data: str | None, cache_dir: Any) -> list[Any]:
    """EDCT-Bench rows of ``domains`` as Inspect samples, images put in the run's image store; a
    row whose image cannot be read is its error record (the solver records it as it is)."""
    from inspect_ai.dataset import Sample

    from edct_task.bench_data import bench_samples
    from edct_task.engine.stage_cache import ImageStore
    from edct_task.roles import refuse_calibration_roles
    from edct_task.run.runner import check_data_named

    check_data_named(config.data.model_copy(update={"source": "dataset", "path": data or config.data.path}))
    items = bench_samples(
        data or config.data.path, ImageStore(cache_dir), max_pixels=config.data.max_pixels, domains=domains
    )
    inputs = [i.sample if isinstance(i, SampleRecord) else i for i in items]
    specs = {r: s for r, s in config.role_specs().items() if r != "target"}
    refuse_calibration_roles(specs, f"the EDCT-Bench task {name}", (s.metadata.get("source") for s in inputs))
    return [
        Sample(
            id=s.id,
            input=s.question,
            metadata={"edct_record": i.model_dump(mode="json")}
            if isinstance(i, SampleRecord)
            else {"edct_input": i.model_dump(mode="json")},
        )
        for i, s in zip(items, inputs, strict=True)
        if isinstance(s, SampleInput)
    ]
