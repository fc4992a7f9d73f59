"""``edct run``: configuration in, output folder out.

The output folder holds ``results.json`` (scores with CIs, counts, the resolved configuration
without secrets, prompt versions, package versions, call statistics), ``samples.jsonl`` (one
``SampleRecord`` per line) and ``images/<sample folder>/`` (``run_outputs.sample_folder``: the
original and every edit attempt).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import shutil
import time
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from edct_task import __version__, prompts
from edct_task.config import DataSection, RunConfig
from edct_task.engine.lockstep import Dispatcher, run_lockstep
from edct_task.engine.records import SCHEMA_VERSION, SampleInput, SampleRecord
from edct_task.engine.stage_cache import ImageStore, StageCache
from edct_task.roles import Roles, build_roles
from edct_task.run_outputs import RESULTS_FILE, SAMPLES_FILE, image_files
from edct_task.scoring.metrics import judge_agreement, summarise
from model_adapters.usage import role_usage

RESULTS_SCHEMA_VERSION = 1


@dataclass
class RunOutcome:
    records: list[SampleRecord]
    results: dict[str, Any]
    output_dir: Path


def load_samples(data: DataSection, images: ImageStore) -> list[SampleInput]:
    """The benchmark items, images put in the store."""
    if data.source == "dataset":
        from edct_task.bench_data import bench_samples

        items = bench_samples(data.path, images)
        return items[: data.limit] if data.limit else items
    from edct_task.calibration import generate_samples

    out = []
    for s in generate_samples(n=data.n, seed=data.seed):
        out.append(
            SampleInput(
                id=s.id,
                domain=s.domain,
                question=s.question,
                image=images.put(s.image),
                system_prompt=s.system_prompt,
                metadata={"source": "calibration", "expected_answer": str(s.expected_answer)},
            )
        )
    return out[: data.limit] if data.limit else out


def _versions() -> dict[str, str]:
    out = {"edct-bench": __version__, "python": platform.python_version()}
    for dist in ("lmms-eval", "transformers", "torch", "opencv-python-headless", "numpy"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return out


def run(config: RunConfig) -> RunOutcome:
    """Run EDCT as configured and write the output folder."""
    roles = build_roles(config.role_specs())
    protocol = config.protocol_config()
    gate = config.gate_params()
    limits = config.limits_config()
    out_dir = config.output_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    cache_dir = config.resolved_cache_dir
    images = ImageStore(cache_dir)
    started = time.perf_counter()
    with StageCache(cache_dir) as cache:
        samples = load_samples(config.data, images)
        dispatcher = Dispatcher(
            roles,
            images,
            cache,
            protocol=protocol,
            gate=gate,
            limits=limits,
            call_log=config.call_log,
            progress=config.progress,
        )
        try:
            records = run_lockstep(samples, protocol, dispatcher, window=limits.window)
        finally:
            dispatcher.close()
    elapsed = time.perf_counter() - started

    summary = summarise(records, seed=protocol.seed, n_resamples=config.bootstrap_resamples)
    results = {
        "schema_version": RESULTS_SCHEMA_VERSION,
        "record_schema_version": SCHEMA_VERSION,
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "versions": _versions(),
        "prompt_versions": prompts.prompt_versions(),
        "config": {
            "data": config.data.model_dump(mode="json"),
            "protocol": asdict(protocol),
            "verification": gate.model_dump(mode="json"),
            "limits": asdict(limits),
            "roles": {role: spec.as_dict() for role, spec in config.role_specs().items()},
            "backends": dispatcher.identities,
        },
        "results": summary,
        "judge_agreement": judge_agreement(records),
        "usage": role_usage(_backends(roles)),
        "calls": dispatcher.stats.as_dict(),
        "wall_seconds": round(elapsed, 3),
    }
    write_outputs(out_dir, records, results, images)
    return RunOutcome(records, results, out_dir)


def _backends(roles: Roles) -> dict[str, Any]:
    """Role name → backend, for token/cost accounting (panel judges as judge0, judge1, …)."""
    out: dict[str, Any] = {"target": roles.target, "extractor": roles.extractor, "editor": roles.editor}
    if roles.edit_parser is not None:
        out["edit_parser"] = roles.edit_parser
    if len(roles.judges) == 1:
        out["judge"] = roles.judge
    else:
        out.update({f"judge{i}": judge for i, judge in enumerate(roles.judges)})
    return out


def write_outputs(
    out_dir: Path, records: list[SampleRecord], results: dict[str, Any], images: ImageStore
) -> None:
    """results.json, samples.jsonl and the chain images (``run_outputs.image_files``), atomically."""
    _atomic_text(out_dir / RESULTS_FILE, json.dumps(results, indent=2, sort_keys=False) + "\n")
    _atomic_text(out_dir / SAMPLES_FILE, "".join(r.model_dump_json() + "\n" for r in records))
    for r in records:
        for name, ref in image_files(r).items():
            target = out_dir / name
            target.parent.mkdir(parents=True, exist_ok=True)
            _place(images.path(ref), target)


def _place(src: Path, dst: Path) -> None:
    if dst.exists():
        dst.unlink()
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def _atomic_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
