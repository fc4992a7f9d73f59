"""lmms-eval documents of the EDCT tasks: ``process_docs`` hooks, images and samples.

Every EDCT task uses the EDCT-Bench dataset format (``edct_task.bench_data.format``): the
calibration world's documents are generated from an index file, the EDCT-Bench domains are read
from the dataset the task YAML names or from ``$EDCT_BENCH_DATA``.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from PIL.Image import DecompressionBombError

from edct_task.bench_data.format import ENV_DATA, BenchDataError
from edct_task.core.errors import ConfigError
from edct_task.core.records import SampleInput, SampleRecord
from edct_task.lmms import state

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
    """``process_docs`` of ``edct_calibration``: rows ``{index, seed}`` → calibration documents.

    Images are stored in the EDCT image store first, so the PNG bytes in the documents keep the
    scene graph the calibration editor and oracle read (a plain PIL re-encode would drop it).
    During an export (``state.replay``) the documents are the run's items, without images.
    """
    import datasets

    replay = state.replay()
    if replay is not None:
        return datasets.Dataset.from_list(replay.docs.get("edct_calibration", []), features=_doc_features())
    rows = list(dataset)
    if not rows:
        raise ValueError("edct_calibration: the document index is empty")
    seeds = {int(r.get("seed", 0)) for r in rows}
    if len(seeds) != 1:
        raise ValueError(f"edct_calibration: one world seed per index file, got {sorted(seeds)}")
    (seed,) = seeds
    images = _engine_ready().images
    docs = [calibration_doc(int(row["index"]), seed, images) for row in rows]
    return datasets.Dataset.from_list(docs, features=_doc_features())


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


def _bench_docs(dataset: Any, task: str, domain: str) -> Any:
    """Documents of one EDCT-Bench domain: the loaded dataset, or ``$EDCT_BENCH_DATA``.

    The data is found first, then the roles are checked (calibration-only backends refuse real
    photos) before anything is built. During an export, the run's items of the domain."""
    import datasets

    from edct_task.bench_data.format import load_bench
    from edct_task.lmms.settings import hook_config
    from edct_task.roles import refuse_calibration_roles

    replay = state.replay()
    if replay is not None:
        return datasets.Dataset.from_list(replay.docs.get(task, []), features=_doc_features())
    loaded = dataset if STUB_COLUMN not in dataset.column_names else load_bench(os.environ.get(ENV_DATA))
    if "domain" not in loaded.column_names:
        raise ValueError(f"EDCT-Bench dataset has no 'domain' column (columns: {loaded.column_names})")
    selected = loaded.filter(lambda d: d == domain, input_columns="domain")
    if len(selected) == 0:
        domains = sorted(set(loaded["domain"]))
        raise ValueError(f"EDCT-Bench dataset has no '{domain}' documents (domains present: {domains})")
    sources = selected["source"] if "source" in selected.column_names else [None]
    specs = hook_config().role_specs()
    refuse_calibration_roles(
        {r: s for r, s in specs.items() if r != "target"}, f"the EDCT-Bench task ({domain})", sources
    )
    _engine_ready()
    return selected


def __getattr__(name: str) -> Any:
    """``docs_<domain>``: the ``process_docs`` hook of every registered domain's task YAML
    (``Domain.hook``), made from its record when lmms-eval asks for it by name."""
    from edct_task.bench_data.domain import HOOK_PREFIX
    from edct_task.bench_data.domains import domain as registered

    record = registered(name[len(HOOK_PREFIX) :]) if name.startswith(HOOK_PREFIX) else None
    if record is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

    @fails_task_load
    def hook(dataset: Any) -> Any:
        return _bench_docs(dataset, record.task, record.name)

    hook.__name__ = hook.__qualname__ = name
    hook.__doc__ = f"``process_docs`` of ``{record.task}``: the {record.label} documents."
    return hook


def sample_of(doc: dict[str, Any], image_ref: str, notes: dict[str, str] | None = None) -> SampleInput:
    """The protocol's view of one lmms-eval document, read as every EDCT-Bench row is
    (``bench_data.format.row_fields``); ``notes``: what decoding its image recorded."""
    from edct_task.bench_data.format import row_fields

    fields = row_fields(doc)
    return SampleInput(image=image_ref, **{**fields, "metadata": {**fields["metadata"], **(notes or {})}})


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
