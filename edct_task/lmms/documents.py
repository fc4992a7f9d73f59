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
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from edct_task.bench_data.format import BenchDataError
from edct_task.engine.records import SampleInput
from edct_task.roles import ConfigError

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


def _engine_ready() -> Any:
    """Build the hooks' roles and stage cache now, so a bad ``$EDCT_CONFIG`` fails at task load."""
    from edct_task.lmms.hooks import settings

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
    """
    import datasets

    from edct_task.calibration import generate_samples

    rows = list(dataset)
    if not rows:
        raise ValueError("edct_calibration: the document index is empty")
    seeds = {int(r.get("seed", 0)) for r in rows}
    if len(seeds) != 1:
        raise ValueError(f"edct_calibration: one world seed per index file, got {sorted(seeds)}")
    (seed,) = seeds
    indices = [int(r["index"]) for r in rows]
    samples = generate_samples(n=max(indices) + 1, seed=seed)
    images = _engine_ready().images
    docs = []
    for i in indices:
        s = samples[i]
        ref = images.put(s.image)
        docs.append(
            {
                "id": s.id,
                "domain": s.domain,
                "question": s.question,
                "system_prompt": s.system_prompt,
                "source": "calibration",
                "source_id": f"{seed}:{i}",
                "metadata": json.dumps({"expected_answer": str(s.expected_answer)}),
                "image": {"bytes": images.path(ref).read_bytes(), "path": None},
            }
        )
    return datasets.Dataset.from_list(docs, features=_doc_features())


def _bench_docs(dataset: Any, domain: str) -> Any:
    """Documents of one EDCT-Bench domain: the loaded dataset, or ``$EDCT_BENCH_DATA``."""
    if STUB_COLUMN in dataset.column_names and not os.environ.get(ENV_DATA):
        load_bench_dataset(None)  # says what to set, before anything is built or any folder made
    _engine_ready()
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


def sample_of(doc: dict[str, Any], image_ref: str) -> SampleInput:
    """The protocol's view of one lmms-eval document."""
    return SampleInput(
        id=str(doc["id"]),
        domain=str(doc["domain"]),
        question=str(doc["question"]),
        image=image_ref,
        system_prompt=doc.get("system_prompt") or None,
        metadata=_metadata(doc),
    )


def doc_image(doc: dict[str, Any]) -> Any:
    image = doc["image"]
    if isinstance(image, dict):  # undecoded datasets Image
        import io

        from PIL import Image

        image = Image.open(io.BytesIO(image["bytes"])) if image.get("bytes") else Image.open(image["path"])
        image.load()
    return image


def doc_to_visual(doc: dict[str, Any]) -> list[Any]:
    return [doc_image(doc)]


def doc_to_target(doc: dict[str, Any]) -> str:
    """EDCT has no gold answer; the log shows the question instead."""
    return str(doc.get("question", ""))
