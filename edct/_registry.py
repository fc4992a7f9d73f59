"""What Inspect registers from edct-bench (the ``inspect_ai`` entry point ``edct``): the EDCT tasks
``edct/<task>``, the reference models ``edct/<behaviour>`` and the hook that writes each task's
EDCT run log when the task ends.

Each registered domain (``bench_data.domains``) is a task ``edct/<Domain.task>``. Task arguments
(``-T``): ``config`` (an EDCT YAML config or a shipped preset: the non-target roles,
protocol and gate; default the calibration roles), ``data`` (EDCT-Bench for the ``edct_bench``
tasks; default ``$EDCT_BENCH_DATA``), ``output_dir`` (the EDCT run folder), ``work_dir`` (stage
cache and images).
"""

from __future__ import annotations

from typing import Any

from inspect_ai import Task, task
from inspect_ai.hooks import Hooks, TaskEnd, hooks
from inspect_ai.model import modelapi
from inspect_ai.util import registry_info

from edct_task.bench_data import domains as registry
from edct_task.inspect.provider import reference_api
from edct_task.inspect.session import finish_run
from edct_task.inspect.tasks import build_task

NAMESPACE = "edct"


def _edct_task(fn: Any) -> Any:
    """``@task`` under ``edct/<name>``: Inspect prefixes an installed package's name itself, and
    nothing for an editable install (then the name is given whole)."""
    registered = task(fn)
    if registry_info(registered).name != f"{NAMESPACE}/{fn.__name__}":
        registered = task(name=f"{NAMESPACE}/{fn.__name__}")(fn)
    return registered


@_edct_task
def edct_calibration(
    config: str | None = None, output_dir: str | None = None, work_dir: str | None = None
) -> Task:
    """The calibration world (known answers: ``--model edct/faithful`` scores CCS 1, ``prior`` 0)."""
    return build_task("edct_calibration", config=config, output_dir=output_dir, work_dir=work_dir)


@_edct_task
def edct_bench(
    config: str | None = None,
    data: str | None = None,
    output_dir: str | None = None,
    work_dir: str | None = None,
) -> Task:
    """EDCT-Bench, every registered domain."""
    domains = [d.name for d in registry.domains()]
    return build_task(
        "edct_bench", domains=domains, config=config, data=data, output_dir=output_dir, work_dir=work_dir
    )


def _domain_task(domain: str, name: str) -> Any:
    """The task ``edct/<name>`` of one registered domain (``Domain.task``)."""

    def one_domain(
        config: str | None = None,
        data: str | None = None,
        output_dir: str | None = None,
        work_dir: str | None = None,
    ) -> Task:
        return build_task(
            name, domains=[domain], config=config, data=data, output_dir=output_dir, work_dir=work_dir
        )

    one_domain.__name__ = one_domain.__qualname__ = name
    one_domain.__doc__ = f"EDCT-Bench, domain {domain}."
    return _edct_task(one_domain)


for _domain in registry.domains():
    globals()[_domain.task] = _domain_task(_domain.name, _domain.task)


@modelapi(name=NAMESPACE)
def reference() -> type:
    return reference_api()


@hooks(name="edct_run_log", description="Writes the EDCT run log (results.json) when an EDCT task ends.")
class RunLogHook(Hooks):
    async def on_task_end(self, data: TaskEnd) -> None:
        import anyio.to_thread

        # off the event loop: the controls' requests of an Inspect model role (``--model-role``)
        # are answered on it
        await anyio.to_thread.run_sync(finish_run, data.log.eval.metadata)
