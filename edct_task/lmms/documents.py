"""lmms-eval documents of the EDCT tasks: ``process_docs`` hooks, images and samples.

Every EDCT task uses the EDCT-Bench dataset format (``edct_task.bench_data.format``): the
calibration world's documents are generated from an index file, the EDCT-Bench domains are read
from the dataset the task YAML names or from ``$EDCT_BENCH_DATA``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import contextvars
import functools
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from PIL.Image import DecompressionBombError

from edct_task.bench_data.format import BenchDataError
from edct_task.core.errors import ConfigError
from edct_task.core.records import SampleInput, SampleRecord

ENV_DATA = "EDCT_BENCH_DATA"
"""Local path (``datasets.save_to_disk``) or hub id of the EDCT-Bench dataset (issue 6 format)."""
STUB_COLUMN = "edct_stub"
"""Column of the placeholder file the ``edct_bench_*`` YAMLs load before ``process_docs``."""


class TaskLoadError(SystemExit):
    """An EDCT task cannot load (bad ``$EDCT_CONFIG``, no dataset, …): one message, exit code 2.

    A ``SystemExit`` on purpose: lmms-eval retries ``process_docs`` five times on any
    ``Exception`` (tenacity) and then prints a traceback and exits 0; a user error must stop the
    run at once, say what to fix, and fail.
    """

    def __init__(self, message: str) -> None:
        super().__init__(2)
        self.message = message

    def __str__(self) -> str:
        return self.message


P = ParamSpec("P")
T = TypeVar("T")


def fails_task_load(fn: Callable[P, T]) -> Callable[P, T]:
    """``process_docs`` hooks: a user error becomes ``TaskLoadError`` (printed once, exit 2)."""

    @functools.wraps(fn)
    def hook(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return fn(*args, **kwargs)
        except (ConfigError, BenchDataError, ValueError, OSError) as exc:
            message = f"edct: the EDCT task cannot load: {exc}"
            print(message, file=sys.stderr, flush=True)
            raise TaskLoadError(message) from None

    return hook


@dataclass
class DocumentScope:
    """What ``edct run --model`` tells the EDCT ``process_docs`` hooks while lmms-eval builds its
    tasks (``document_scope``): the run's image store and roles — the hooks use them instead of
    building their own settings from ``$EDCT_CONFIG`` (``lmms.settings.settings``) — and how many
    documents of each task it will use (``limit``; None: all). ``calibration_docs`` then builds
    only the first ``limit`` documents (the same documents, byte for byte), taking those
    ``ahead`` built already, and records how many its task has (``rows``), so the results still
    count every document of the task."""

    images: Any
    """The run's ``ImageStore``."""
    roles: Mapping[str, Any]
    """The run's role specs (``RunConfig.role_specs()``): the EDCT-Bench hooks refuse
    calibration-only ones on real photographs, as they do with ``$EDCT_CONFIG``'s."""
    limit: int | None = None
    ahead: RenderAhead | None = None
    """Calibration documents built before lmms-eval asked for them (``RenderAhead``)."""
    _rows: list[tuple[Any, int]] = field(default_factory=list)

    def built(self, docs: Any, rows: int) -> Any:
        """Note that ``docs`` (what a hook returns) stands for a task of ``rows`` documents."""
        self._rows.append((docs, rows))
        return docs

    def rows(self, docs: Any) -> int:
        """The task's number of documents: ``rows`` for documents a hook built in part, else
        ``len(docs)``."""
        return next((n for built, n in self._rows if built is docs), len(docs))


_SCOPE: contextvars.ContextVar[DocumentScope | None] = contextvars.ContextVar("edct_documents", default=None)


@contextlib.contextmanager
def document_scope(scope: DocumentScope) -> Iterator[DocumentScope]:
    """``scope`` for the hooks called inside the block (lmms-eval builds tasks on the caller's thread)."""
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)


def _engine_ready() -> Any:
    """Build the hooks' roles and stage cache now, so a bad ``$EDCT_CONFIG`` fails at task load."""
    from edct_task.lmms.settings import settings

    return settings()


def _doc_features() -> Any:
    """Calibration documents use the EDCT-Bench dataset format (one schema for every task)."""
    from edct_task.bench_data.format import features

    return features()


@fails_task_load
def calibration_docs(dataset: Any) -> Any:
    """``process_docs`` of ``edct_calibration``: rows ``{index, seed}`` → calibration samples.

    Images are stored in the EDCT image store first, so the PNG bytes in the documents keep the
    scene graph the calibration editor and oracle read (a plain PIL re-encode would drop it).
    Inside a ``document_scope`` only the first ``scope.limit`` rows are built.
    """
    import datasets

    rows = list(dataset)
    if not rows:
        raise ValueError("edct_calibration: the document index is empty")
    seeds = {int(r.get("seed", 0)) for r in rows}
    if len(seeds) != 1:
        raise ValueError(f"edct_calibration: one world seed per index file, got {sorted(seeds)}")
    (seed,) = seeds
    scope = _SCOPE.get()
    used = rows if scope is None or scope.limit is None else rows[: scope.limit]
    images = _engine_ready().images if scope is None else scope.images
    keys = [(int(row["index"]), seed) for row in used]

    def build(index: int, seed: int) -> Doc:
        return calibration_doc(index, seed, images)

    ahead = None if scope is None else scope.ahead
    docs = [build(*key) for key in keys] if ahead is None else ahead.collect(keys, build)
    built = datasets.Dataset.from_list(docs, features=_doc_features())
    return built if scope is None else scope.built(built, len(rows))


Doc = dict[str, Any]
"""One lmms-eval document (a row of the EDCT-Bench dataset format)."""


def calibration_doc(index: int, seed: int, images: Any) -> Doc:
    """Document ``index`` of the calibration world ``seed``, its image stored in ``images`` (the
    document carries the stored PNG, whose text chunks keep the scene graph)."""
    from edct_task.calibration import calibration_sample

    s = calibration_sample(index, seed)
    ref = images.put(s.image)
    return {
        "id": s.id,
        "domain": s.domain,
        "question": s.question,
        "system_prompt": s.system_prompt,
        "source": "calibration",
        "source_id": f"{seed}:{index}",
        "metadata": json.dumps({"expected_answer": str(s.expected_answer)}),
        "image": {"bytes": images.path(ref).read_bytes(), "path": None},
    }


class RenderAhead:
    """Calibration documents built in a worker process before lmms-eval asks for them.

    ``edct run --model … --tasks edct_calibration`` knows the documents it will use (the task's
    index file, the first ``--limit`` rows) before lmms-eval is imported; building them (render,
    PNG, store: ~12 ms CPU each) would otherwise run after that import, one after another, before
    the first model call. A process, not a thread: both the import and the rendering hold the GIL
    most of the time, so a thread only slows the import down by what it saves.

    ``calibration_docs`` collects them (``collect``): the worker's documents from the front of the
    list while the hook builds the ones the worker has not started from the back, so a hook that
    is ready before the worker is done shares the work instead of waiting for it. A row not
    predicted, or one whose build failed in the worker, is built by the hook (a failure is then
    raised where it always was), so the documents are the hook's own either way.
    """

    def __init__(self, work_dir: Path, rows: Sequence[tuple[int, int]]) -> None:
        import multiprocessing

        from edct_task.engine.stage_cache import ImageStore

        # spawn: the caller may have threads (a fork could copy a held lock); nothing is inherited
        self._pool = concurrent.futures.ProcessPoolExecutor(
            1, mp_context=multiprocessing.get_context("spawn")
        )
        images = ImageStore(work_dir)
        self._built = {row: self._pool.submit(calibration_doc, *row, images) for row in rows}
        self.provided = 0
        """Documents the worker built that were collected."""

    def collect(self, rows: Sequence[tuple[int, int]], build: Callable[[int, int], Doc]) -> list[Doc]:
        """The documents of ``rows`` (``(index, seed)``), in order: the worker's where it built or
        is building them, ``build(index, seed)`` for the rest — taken from the back of the list,
        where the worker has not started, while the worker goes on from the front. The worker is
        let go afterwards: a later call builds every document itself."""
        docs: dict[int, Doc] = {}
        front, back = 0, len(rows) - 1
        while front <= back:
            head = self._built.get(rows[front])
            if head is not None and not head.done():  # the worker is on the front: try the back
                tail = self._built.pop(rows[back], None)
                if tail is None or tail.cancel():
                    docs[back] = build(*rows[back])
                    back -= 1
                    continue
                self._built[rows[back]] = tail  # the worker holds both ends: wait for the front
            docs[front] = self._take(rows[front], build)
            front += 1
        self._release()
        return [docs[i] for i in range(len(rows))]

    def _release(self) -> None:
        """Nothing more is asked of the worker: it stops now, in the background (its process
        exits while the run goes on instead of at the run's end)."""
        self._built.clear()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _take(self, row: tuple[int, int], build: Callable[[int, int], Doc]) -> Doc:
        built = self._built.pop(row, None)
        if built is not None and not built.cancel():
            try:
                doc = built.result()
            except Exception:  # built again here, raising what it raises
                pass
            else:
                self.provided += 1
                return doc
        return build(*row)

    def wait(self) -> None:
        """Block until the worker has built (or failed to build) every document not collected yet."""
        concurrent.futures.wait(list(self._built.values()))

    def close(self) -> None:
        """Drop what was not collected and stop the worker (it finishes the document it is on)."""
        self._built.clear()
        self._pool.shutdown(wait=True, cancel_futures=True)


def calibration_rows(limit: int | None) -> list[tuple[int, int]]:
    """``(index, seed)`` of the first ``limit`` rows (all: None) of the shipped calibration index."""
    from task_configs import CALIBRATION_INDEX, TASK_DIR

    rows = []
    for line in (TASK_DIR / CALIBRATION_INDEX).read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            rows.append((int(row["index"]), int(row.get("seed", 0))))
        if limit is not None and len(rows) >= limit:
            break
    return rows


def _bench_docs(dataset: Any, domain: str) -> Any:
    """Documents of one EDCT-Bench domain: the loaded dataset, or ``$EDCT_BENCH_DATA``.

    The data is found first, then the roles are checked (calibration-only backends refuse real
    photos) before anything is built."""
    from edct_task.lmms.settings import hook_config
    from edct_task.roles import refuse_calibration_roles

    if STUB_COLUMN not in dataset.column_names:
        loaded = dataset  # the user's YAML named the dataset itself (dataset_path / dataset_kwargs)
    else:
        loaded = load_bench_dataset(os.environ.get(ENV_DATA))
    if "domain" not in loaded.column_names:
        raise ValueError(f"EDCT-Bench dataset has no 'domain' column (columns: {loaded.column_names})")
    selected = loaded.filter(lambda d: d == domain, input_columns="domain")
    if len(selected) == 0:
        domains = sorted(set(loaded["domain"]))
        raise ValueError(f"EDCT-Bench dataset has no '{domain}' documents (domains present: {domains})")
    sources = selected["source"] if "source" in selected.column_names else [None]
    scope = _SCOPE.get()
    specs = hook_config().role_specs() if scope is None else scope.roles
    refuse_calibration_roles(
        {r: s for r, s in specs.items() if r != "target"}, f"the EDCT-Bench task ({domain})", sources
    )
    if scope is None:
        _engine_ready()
    return selected


def load_bench_dataset(location: str | None) -> Any:
    """The EDCT-Bench dataset from a ``save_to_disk`` folder or a hub id (split ``test`` or the only one)."""
    import datasets

    if not location:
        raise ValueError(
            f"EDCT-Bench data not configured: set {ENV_DATA} to the dataset built by `edct build-bench` "
            f"(a local folder or a hub id), e.g.\n  export {ENV_DATA}=/data/edct-bench\n"
            "or include the task YAML in your own and set dataset_path "
            "(+ dataset_kwargs: {load_from_disk: true}). "
            "The calibration world needs no data: --tasks edct_calibration."
        )
    local = Path(location).exists()
    loaded = datasets.load_from_disk(location) if local else datasets.load_dataset(location)
    if isinstance(loaded, datasets.DatasetDict):
        split = "test" if "test" in loaded else next(iter(loaded))
        loaded = loaded[split]
    return loaded


@fails_task_load
def okvqa_docs(dataset: Any) -> Any:
    return _bench_docs(dataset, "okvqa")


@fails_task_load
def drivelm_docs(dataset: Any) -> Any:
    return _bench_docs(dataset, "drivelm")


@fails_task_load
def threedsr_docs(dataset: Any) -> Any:
    return _bench_docs(dataset, "3dsr")


def _metadata(doc: dict[str, Any]) -> dict[str, str]:
    raw = doc.get("metadata")
    if isinstance(raw, str) and raw:
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            raw = {"metadata": raw}
    out = {k: str(v) for k, v in (raw or {}).items()} if isinstance(raw, dict) else {}
    for key in ("source", "source_id"):
        if doc.get(key):
            out[key] = str(doc[key])
    return out


class ChosenRows:
    """The first ``used`` documents of a task's ``eval_docs``, each read when a driver draws it.

    Reading a row of a datasets ``Dataset`` decodes its image (the ``Image`` feature decodes
    on access). ``edct run --model`` reads each row once, as its sample is drawn (``draw``), so the
    first target batch goes out while the later rows are decoded, and keeps it for scoring and the
    sample log (``doc``). What must see every row before the first model call reads the rows
    without their image columns (``rows_without_images``): nothing is decoded for it."""

    def __init__(self, docs: Any, used: int) -> None:
        self.docs, self.used = docs, used
        self._drawn: dict[int, Doc] = {}
        self._light: Any = None

    def draw(self, doc_id: int) -> Doc:
        """Row ``doc_id``, read (its image decoded, for a ``Dataset``) and kept; what decoding
        raises is raised."""
        doc = self.docs[doc_id]
        self._drawn[doc_id] = doc
        return doc

    def doc(self, doc_id: int) -> Doc:
        """Row ``doc_id`` as drawn; a row whose reading failed (its image could not be decoded) or
        that was never drawn is read without its image columns."""
        if doc_id in self._drawn:
            return self._drawn[doc_id]
        return self._without_images()[doc_id]

    def rows_without_images(self) -> Iterator[Doc]:
        light = self._without_images()
        return (light[i] for i in range(self.used))

    def _without_images(self) -> Any:
        if self._light is None:
            self._light = without_images(self.docs)
        return self._light


def without_images(docs: Any) -> Any:
    """``docs`` (a datasets ``Dataset``) without its image columns, so reading a row decodes
    nothing; anything else (a list of rows) as it is."""
    features = getattr(docs, "features", None)
    if features is None or not hasattr(docs, "remove_columns"):
        return docs
    import datasets

    def is_image(feature: Any) -> bool:
        inner = getattr(feature, "feature", None)  # a list of images
        return isinstance(feature, datasets.Image) or isinstance(inner, datasets.Image)

    images = [name for name, feature in features.items() if is_image(feature)]
    return docs.remove_columns(images) if images else docs


def doc_source(doc: dict[str, Any]) -> str | None:
    """The ``source`` its sample will carry (``sample_of``), read without decoding the image."""
    return _metadata(doc).get("source")


def sample_of(doc: dict[str, Any], image_ref: str, notes: dict[str, str] | None = None) -> SampleInput:
    """The protocol's view of one lmms-eval document (``notes``: what decoding its image recorded,
    e.g. the EXIF orientation applied)."""
    return SampleInput(
        id=str(doc["id"]),
        domain=str(doc["domain"]),
        question=str(doc["question"]),
        image=image_ref,
        system_prompt=doc.get("system_prompt") or None,
        metadata={**_metadata(doc), **(notes or {})},
    )


def doc_image(doc: dict[str, Any]) -> Any:
    """The document's image as the model and the image store see it: decoded with the pixel
    budget, bombs refused, EXIF orientation applied (``bench_data.image_decode``)."""
    return doc_image_and_notes(doc)[0]


def doc_image_and_notes(doc: dict[str, Any]) -> tuple[Any, dict[str, str]]:
    """:func:`doc_image` and what to record with the sample (``exif_orientation``)."""
    image = doc["image"]
    if isinstance(image, dict):  # undecoded datasets Image
        from edct_task.bench_data.format import decode_row_image

        return decode_row_image(image)
    return image, {}


IMAGE_ERRORS = (OSError, ValueError, SyntaxError, DecompressionBombError)
"""What decoding a document's image raises for a bad image (``ImageRefused`` is a ValueError; a
datasets ``Image`` column decoding a bomb raises PIL's ``DecompressionBombError``)."""


def unreadable_record(doc: dict[str, Any], exc: BaseException) -> SampleRecord:
    """The ``error`` record of a document whose image cannot be used, with the reason."""
    from edct_task.bench_data.image_decode import ImageRefused

    what = (
        f"image refused: {exc}"
        if isinstance(exc, ImageRefused)
        else (f"image cannot be decoded ({type(exc).__name__}: {exc})")
    )
    return SampleRecord(sample=sample_of(doc, ""), status="error", reason=f"row {doc['id']}: {what}")


def doc_to_visual(doc: dict[str, Any]) -> list[Any]:
    """The document's image; none for a bad image (its record says why, see ``hooks.doc_to_text``)."""
    try:
        return [doc_image(doc)]
    except IMAGE_ERRORS:
        return []


def doc_to_target(doc: dict[str, Any]) -> str:
    """EDCT has no gold answer; the log shows the question instead."""
    return str(doc.get("question", ""))
