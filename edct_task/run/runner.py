"""``edct run``: configuration in, output folder out.

The output folder holds ``results.json`` (scores with CIs, counts, the resolved configuration
without secrets, prompt versions, package versions, call statistics), ``samples.jsonl`` (one
``SampleRecord`` per line) and ``images/<sample folder>/`` (``run_outputs.sample_folder``: the
original and every edit attempt).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edct_task import prompts
from edct_task.config import DataSection, RunConfig
from edct_task.controls import control_domains, draw
from edct_task.core.errors import ConfigError
from edct_task.core.records import MULTI_TURN, ControlRecord, SampleInput, SampleRecord
from edct_task.engine.controls import ControlFeed, ControlItem
from edct_task.engine.dispatch import Dispatcher, Progress
from edct_task.engine.driver import build_dispatcher, run_samples
from edct_task.engine.files import atomic_write, place
from edct_task.engine.handlers import PixelCache
from edct_task.engine.stage_cache import ImageStore, StageCache
from edct_task.engine.storage import storage_error
from edct_task.roles import (
    CALIBRATION_SOURCE,
    PanelSpec,
    Roles,
    RoleSpec,
    build_roles,
    refuse_calibration_roles,
)
from edct_task.run.log import RunData, RunLog, RunSetup, run_versions
from edct_task.run.outputs import CONTROLS_FILE, RESULTS_FILE, SAMPLES_FILE, image_files
from edct_task.run.sharding import Shard, gather_run, item_id, shard_from_env, take_slice
from edct_task.run.workspace import check_writable, claim, claim_setup
from edct_task.scoring.controls import summarise_controls
from edct_task.scoring.health import judge_health
from edct_task.scoring.metrics import judge_agreement, summarise
from model_adapters.usage import role_usage

logger = logging.getLogger(__name__)


@dataclass
class RunOutcome:
    records: list[SampleRecord]
    results: dict[str, Any]
    """``results.json`` as JSON data (``log`` dumped)."""
    output_dir: Path
    shard: Shard | None = None
    """Set in a multi-process run; on ranks other than 0, ``records`` are this rank's share and
    ``results`` is empty, ``log`` None (rank 0 writes the output folder)."""
    reused: int = 0
    """Calls this process answered from stage-cache entries of earlier runs (a resumed run)."""
    log: RunLog | None = None
    """The typed run log (None on ranks other than 0)."""


def load_samples(data: DataSection, images: ImageStore) -> Sequence[SampleInput | SampleRecord]:
    """The benchmark items, images put in the store; a row that cannot be read is its error record.

    The calibration world's scenes are rendered as they are drawn (``CalibrationItems``), so a
    run's first requests go out while the rest render; a dataset's rows are all read here.
    """
    if data.source == "dataset":
        from edct_task.bench_data import bench_samples

        return bench_samples(
            data.path,
            images,
            max_pixels=data.max_pixels,
            domains=data.domains,
            limit=data.limit,
            limit_per_domain=data.limit_per_domain,
        )
    n = data.n if data.limit is None else min(data.n, data.limit)  # sample i does not depend on n
    return CalibrationItems(n, data.seed, images)


class CalibrationItems(Sequence[SampleInput]):
    """Samples 0 … n-1 of the calibration world ``seed``: their ids known at once, their scenes
    rendered (and put in the store) as they are drawn.

    Iterating renders in two threads (rendering and PNG encoding release the GIL) after the first
    scene, rendered in the iterating thread (what rendering imports is imported there only); an
    index renders that one sample. A loop that stops early cancels the renders not yet started.
    """

    def __init__(self, n: int, seed: int, images: ImageStore) -> None:
        from edct_task.calibration.samples import calibration_id

        self.ids = [calibration_id(i) for i in range(n)]
        self._seed, self._images = seed, images

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index: int) -> SampleInput:  # type: ignore[override]
        from edct_task.calibration.samples import calibration_sample

        s = calibration_sample(range(len(self))[index], self._seed)
        return SampleInput(
            id=s.id,
            domain=s.domain,
            question=s.question,
            image=self._images.put(s.image),
            system_prompt=s.system_prompt,
            metadata={"source": CALIBRATION_SOURCE, "expected_answer": str(s.expected_answer)},
        )

    def __iter__(self) -> Iterator[SampleInput]:
        from concurrent.futures import ThreadPoolExecutor

        if not self.ids:
            return
        yield self[0]
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="edct-render") as pool:
            yield from pool.map(self.__getitem__, range(1, len(self)))


def check_data_named(data: DataSection) -> None:
    """A dataset run names its data (``data.path`` or ``$EDCT_BENCH_DATA``), or stops at once."""
    import os

    from edct_task.bench_data.format import ENV_DATA, BenchDataError

    if data.source == "dataset" and not (data.path or os.environ.get(ENV_DATA)):
        raise BenchDataError(
            f"no EDCT-Bench data named: set {ENV_DATA} to the folder written by `edct build-bench` "
            "(or a hub id), or set data.path in the config (--set data.path=DIR)"
        )


def run(config: RunConfig, *, on_started: Callable[[], None] | None = None) -> RunOutcome:
    """Run EDCT as configured and write the output folder; every backend is closed at the end.

    ``on_started`` is called once the backends are built, as the samples start: the caller's
    chance to prepare what follows the run while the run waits on its models.

    The output and cache folders are checked for writability first; the output folder is locked
    for the run; a full or read-only disk mid-run raises ``StorageError`` (finished calls stay in
    the stage cache, a rerun resumes). The stage cache is opened before any backend is built, so
    a cache folder of another schema version stops the run (``CacheSchemaError``) first.
    """
    out_dir, cache_dir = config.output_dir, config.resolved_cache_dir
    check_data_named(config.data)  # before any folder is made
    check_writable(out_dir, "output folder", "--output / output_dir")
    check_writable(cache_dir, "cache folder", "cache_dir")
    shard = shard_from_env()  # torchrun / accelerate: this process's share of the documents
    if shard is not None and config.data.shard is not None:
        raise ConfigError("--shard (data.shard) runs one slice as its own job: start it without torchrun")
    with claim(out_dir) if shard is None or shard.is_main else contextlib.nullcontext():
        try:
            return _run(config, out_dir, cache_dir, shard, on_started)
        except Exception as exc:
            stop = storage_error(exc)
            if stop is None:
                raise
            raise stop from exc


def _run(
    config: RunConfig,
    out_dir: Path,
    cache_dir: Path,
    shard: Shard | None = None,
    on_started: Callable[[], None] | None = None,
) -> RunOutcome:
    protocol = config.protocol
    images = ImageStore(cache_dir)
    started = time.perf_counter()
    # the cache (its schema) and the data are checked before any backend is built
    with StageCache(cache_dir) as cache:
        samples = load_samples(config.data, images)
        if isinstance(samples, CalibrationItems):  # nothing to refuse; ids known before rendering
            order = {sid: i for i, sid in enumerate(samples.ids)}
        else:
            refuse_calibration_roles(  # before any backend is built
                config.role_specs(),
                f"the dataset {config.data.path or '$EDCT_BENCH_DATA'}",
                ((s.sample if isinstance(s, SampleRecord) else s).metadata.get("source") for s in samples),
            )
            order = {item_id(s): i for i, s in enumerate(samples)}
        # the controls are drawn from the domains of every item, as the unsharded run draws them
        calibration = isinstance(samples, CalibrationItems)
        domains = (
            [] if calibration else [(s.sample if isinstance(s, SampleRecord) else s).domain for s in samples]
        )
        manifest = None
        if config.data.shard is not None or shard is not None:  # a slice of every item, rendered
            samples, manifest = take_slice(config.data.shard, list(samples))  # `--shard I/N`
            if shard is not None:
                samples = shard.take(samples)
        inputs: Sequence[SampleInput]
        unreadable: list[SampleRecord]
        if isinstance(samples, CalibrationItems):  # drawn lazily; a calibration scene always renders
            inputs, unreadable = samples, []
        else:
            inputs = [s for s in samples if isinstance(s, SampleInput)]
            unreadable = [s for s in samples if isinstance(s, SampleRecord)]
        with compose(config, cache, images, run_name=out_dir.name) as engine:
            roles, dispatcher = engine.roles, engine.dispatcher
            if shard is None or shard.is_main:  # before the first call: a folder of another setup is refused
                claim_setup(out_dir, run_setup(config, roles.identities()), "--output / output_dir")
            progress = next((o for o in dispatcher.observers if isinstance(o, Progress)), None)
            if progress is not None:
                progress.expect(len(inputs))
            if on_started is not None:
                on_started()
            # one slice sends the controls: rank 0 of a torchrun group, slice 0 of `--shard I/N`
            sends = (shard is None or shard.is_main) and (manifest is None or manifest.index == 0)
            items = draw_controls(config, domains, calibration) if sends else []
            feed = ControlFeed(items, protocol, dispatcher, len(inputs))

            def finished(record: SampleRecord) -> None:
                feed.sample_done(record)
                if progress is not None:
                    progress.sample_done(record)

            done = run_samples(inputs, protocol, dispatcher, config.limits, on_record=finished)
            controls = feed.finish()
            records = stamp_rendering(
                sorted([*done, *unreadable], key=lambda r: order[r.sample.id]), roles.target
            )
            usage = role_usage(roles.by_role())
            identities = roles.identities()
    calls = dispatcher.stats.as_dict()
    if shard is not None:
        gathered = gather_run(shard, records, usage, calls, order)
        if gathered is None:  # rank 0 writes the one output folder
            return RunOutcome(records, {}, out_dir, shard, dispatcher.reused)
        records, usage, calls = gathered
    elapsed = time.perf_counter() - started
    log = run_log(
        config,
        records,
        data=RunData.recorded(config.data, manifest),
        backends=identities,
        usage=usage,
        calls=calls,
        wall_seconds=elapsed,
        controls=controls,
    )
    results = log.model_dump(mode="json")
    write_outputs(out_dir, records, log, images, controls)
    return RunOutcome(records, results, out_dir, shard, dispatcher.reused, log)


def run_setup(
    config: RunConfig, backends: dict[str, Any], data: dict[str, Any] | None = None
) -> dict[str, Any]:
    """What the records of a run folder depend on (``workspace.claim_setup``): the backends'
    identities (what changes their output, as in cache keys), the protocol, the gate, the prompt
    versions and where the items come from (``data``; default the config's source, path and seed).
    Not which items or how many (``limit``, ``n``, ``shard``, domains): a rerun with more items
    extends the same run."""
    if data is None:
        d = config.data
        data = {"source": d.source, "path": d.path, "seed": d.seed if d.source == "calibration" else None}
    return {
        "backends": backends,
        "protocol": config.protocol.model_dump(mode="json"),
        "verification": config.verification.model_dump(mode="json"),
        "prompt_versions": prompts.prompt_versions(),
        "data": data,
    }


def draw_controls(config: RunConfig, sample_domains: Sequence[str], calibration: bool) -> list[ControlItem]:
    """The run's known-answer controls (``edct_task.controls.draw``): from the calibration world for
    a calibration run, else from the domains of its samples, ``protocol.controls`` per role."""
    protocol = config.protocol
    domains = control_domains(sample_domains, calibration)
    return draw(domains, protocol.controls, seed=protocol.seed, k=protocol.k)


def run_log(
    config: RunConfig,
    records: list[SampleRecord],
    *,
    data: RunData,
    backends: dict[str, Any],
    usage: dict[str, Any],
    calls: dict[str, Any],
    wall_seconds: float,
    controls: Sequence[ControlRecord],
    roles: dict[str, Any] | None = None,
) -> RunLog:
    """The run log (``results.json``) of finished ``records``: setup, scores with CIs, health, and
    the known-answer controls' tally (``scoring.controls``)."""
    protocol = config.protocol
    return RunLog(
        created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        versions=run_versions(),
        prompt_versions=prompts.prompt_versions(),
        config=RunSetup(
            data=data,
            protocol=protocol,
            verification=config.verification,
            limits=config.limits,
            roles=roles if roles is not None else {r: s.as_dict() for r, s in config.role_specs().items()},
            backends=backends,
            bootstrap_resamples=config.bootstrap_resamples,
        ),
        results=summarise(records, seed=protocol.seed, n_resamples=config.bootstrap_resamples),
        judge_agreement=judge_agreement(records),
        judge_health=judge_health(records),
        controls=summarise_controls(controls, bar=protocol.control_bar, requested=protocol.controls),
        usage=usage,
        calls=calls,
        wall_seconds=round(wall_seconds, 3),
    )


def stamp_rendering(records: list[SampleRecord], target: Any) -> list[SampleRecord]:
    """The records with the rendering the target received (``SampleRecord.target_rendering``):
    a backend that renders conversations as one quoted turn says so (``rendering``)."""
    rendering = getattr(target, "rendering", MULTI_TURN)
    if rendering == MULTI_TURN:
        return records
    return [r.model_copy(update={"target_rendering": rendering}) for r in records]


@dataclass
class Engine:
    """The live parts of one run: backends, image store, stage cache, dispatcher."""

    roles: Roles
    images: ImageStore
    cache: StageCache
    dispatcher: Dispatcher
    pixels: PixelCache


@contextlib.contextmanager
def compose(
    config: RunConfig,
    cache: StageCache,
    images: ImageStore,
    *,
    run_name: str = "",
    require_target: bool = True,
    progress: bool | None = None,
    specs: Mapping[str, RoleSpec | PanelSpec] | None = None,
) -> Iterator[Engine]:
    """The one composition root: the configured roles (or ``specs``) and the dispatcher over
    ``cache`` (with the call log, progress and the gate as configured); everything is closed on
    exit. The lmms-eval hooks call it with ``require_target=False`` (lmms-eval's loop answers the
    target's requests), a board that re-judges with the roles it re-runs (``leaderboard.rejudge``)."""
    specs = config.role_specs() if specs is None else dict(specs)
    if not require_target:
        specs = {r: s for r, s in specs.items() if r != "target"}
    pixels = PixelCache(images)
    with build_roles(specs, require_target=require_target, journal_dir=cache.root) as roles:
        dispatcher = build_dispatcher(
            roles,
            images,
            cache,
            protocol=config.protocol,
            gate=config.verification,
            limits=config.limits,
            call_log=config.call_log,
            progress=config.progress if progress is None else progress,
            run_name=run_name,
            pixels=pixels,
        )
        with dispatcher:
            yield Engine(roles, images, cache, dispatcher, pixels)


def write_outputs(
    out_dir: Path,
    records: list[SampleRecord],
    log: RunLog,
    images: ImageStore,
    controls: Sequence[ControlRecord],
) -> None:
    """samples.jsonl, controls.jsonl (the known-answer controls' replies), the chain images
    (``outputs.image_files``) and, last, results.json (the run log), each atomically: a folder with
    ``results.json`` holds everything it names, and a run stopped while writing (a full disk)
    leaves no ``results.json``, so it never looks finished. A previous run's ``results.json`` is
    removed first, for the same reason."""
    (out_dir / RESULTS_FILE).unlink(missing_ok=True)
    atomic_write(out_dir / SAMPLES_FILE, "".join(r.model_dump_json() + "\n" for r in records))
    atomic_write(out_dir / CONTROLS_FILE, "".join(c.model_dump_json() + "\n" for c in controls))
    place_images(out_dir, records, images)
    atomic_write(out_dir / RESULTS_FILE, log.to_json())


def place_images(out_dir: Path, records: list[SampleRecord], images: ImageStore) -> None:
    """The records' images (``outputs.image_files``) into ``out_dir``, hard-linked or copied from
    the image store; an image the store no longer holds is named in one warning."""
    lost: list[str] = []
    for r in records:
        for name, ref in image_files(r).items():
            if not images.intact(ref):  # checked against its id (once per process: usually already)
                lost.append(name)
                continue
            target = out_dir / name
            target.parent.mkdir(parents=True, exist_ok=True)
            place(images.path(ref), target)
    if lost:
        logger.warning(
            "%d image(s) of the records are no longer in the image store %s and were not written "
            "(first: %s); rerun the same command to recompute them",
            len(lost),
            images.images_dir,
            lost[0],
        )
