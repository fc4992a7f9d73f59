"""What a finished run left on disk, read back: records, results and image files.

Two kinds of run are read:

``edct``
    an ``edct run`` / ``edct demo`` output folder: ``results.json``, ``samples.jsonl`` (one
    ``SampleRecord`` per line) and ``images/<sample folder>/`` (``sample_folder`` names it).
``lmms``
    an lmms-eval output folder written with ``--log_samples`` by the ``lmms-eval`` CLI or
    ``edct run --model``: ``[<model>/]<date>_results.json`` and ``<date>_samples_<task>.jsonl``,
    whose final responses are the sample records and whose ``edct`` entry names the image store.

The tools that turn runs into reports, bundles and audit pages read runs only through
``load_run``; they never re-run a model.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from edct_task.core.records import SampleRecord
from edct_task.run.checks import (
    RunReadError,
    decode_utf8,
    parse_json_line,
    parse_record,
    parse_records,
    read_json_object,
)
from edct_task.run.log import RunLog, parse_run_log

RESULTS_FILE = "results.json"
SAMPLES_FILE = "samples.jsonl"
IMAGES_DIR = "images"


__all__ = [
    "IMAGES_DIR",
    "RESULTS_FILE",
    "SAMPLES_FILE",
    "LoadedRun",
    "RunReadError",
    "image_files",
    "load_run",
]


def sample_folder(sample_id: str) -> str:
    """The folder of one sample's images: a readable slug plus a digest of the exact id.

    Injective and safe: ids that sanitise alike (``x/y`` and ``x_y``), ``..`` and ``''`` each get
    their own folder inside ``images/``, and no id can name a path outside it.
    """
    slug = "".join(c if c.isalnum() or c in "-_" else "_" for c in sample_id)[:48] or "_"
    return f"{slug}-{hashlib.sha256(sample_id.encode('utf-8')).hexdigest()[:12]}"


def image_files(record: SampleRecord) -> dict[str, str]:
    """``relative file name → image ref`` of one sample: the original, every edit attempt and the
    gate's maps of every checked attempt (``_maps.png``, see ``verification.gate_maps``)."""
    folder = f"{IMAGES_DIR}/{sample_folder(record.sample.id)}"
    out = {f"{folder}/original.png": record.sample.image} if record.sample.image else {}
    for step in record.steps:
        for a in step.attempts:
            if a.image:
                out[f"{folder}/step{step.index}_attempt{a.attempt + 1}.png"] = a.image
            if a.check is not None and a.check.maps:
                out[f"{folder}/step{step.index}_attempt{a.attempt + 1}_maps.png"] = a.check.maps
    return out


@dataclass
class LoadedRun:
    """One run as read from disk."""

    path: Path
    kind: Literal["edct", "lmms"]
    records: list[SampleRecord]
    results: dict[str, Any]
    """``results.json`` of an ``edct`` run; lmms-eval's aggregated results file of an ``lmms`` run."""
    tasks: dict[str, list[SampleRecord]] = field(default_factory=dict)
    """lmms runs: records per lmms-eval task; edct runs: empty."""
    log: RunLog | None = None
    """edct runs: ``results.json`` as the typed run log."""
    _images: dict[str, Path] = field(default_factory=dict, repr=False)

    def image_path(self, ref: str | None) -> Path | None:
        """The file holding image ``ref``, or None when the run did not keep it."""
        if not ref:
            return None
        path = self._images.get(ref)
        return path if path is not None and path.is_file() else None


def load_run(path: Path | str) -> LoadedRun:
    """Read an ``edct run`` folder or an lmms-eval output folder (see the module docstring).

    Raises
    ------
    RunReadError
        When ``path`` is neither, or a file in it cannot be parsed; the message names the file.
    """
    root = Path(path)
    if (root / RESULTS_FILE).is_file() and (root / SAMPLES_FILE).is_file():
        return _load_edct(root)
    if root.is_dir() and any(_lmms_sample_files(root)):
        return _load_lmms(root)
    raise RunReadError(
        f"{root} is not a run folder: expected {RESULTS_FILE} + {SAMPLES_FILE} (an `edct run` output) "
        "or lmms-eval output with logged samples (*_samples_<task>.jsonl; run lmms-eval with --log_samples)"
    )


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RunReadError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    return decode_utf8(path, data)


def _load_edct(root: Path) -> LoadedRun:
    results = read_json_object(root / RESULTS_FILE)
    samples = root / SAMPLES_FILE
    records = parse_records(samples, _read_text(samples))
    log = parse_run_log(results, root / RESULTS_FILE)  # the typed view; another version is refused
    images: dict[str, Path] = {}
    for record in records:
        for name, ref in image_files(record).items():
            images.setdefault(ref, root / name)
    return LoadedRun(root, "edct", records, results, log=log, _images=images)


def _lmms_sample_files(root: Path) -> Iterator[Path]:
    return (p for p in sorted(root.rglob("*_samples_*.jsonl")) if p.is_file())


def _load_lmms(root: Path) -> LoadedRun:
    from edct_task.engine.stage_cache import ImageStore

    tasks: dict[str, list[SampleRecord]] = {}
    images: dict[str, Path] = {}
    for path in _lmms_sample_files(root):
        task = path.stem.split("_samples_", 1)[1]
        found: list[SampleRecord] = []
        for number, line in enumerate(_read_text(path).split("\n"), 1):
            if not line.strip():
                continue
            logged = parse_json_line(path, number, line)
            response = _final_response(logged)
            if response is None:
                continue  # another task's sample (lmms-eval logs every task of a run)
            record = parse_record(path, number, response)
            found.append(record)
            edct = logged.get("edct")
            setup = edct.get("setup") if isinstance(edct, dict) else None
            store = setup.get("work_dir") if isinstance(setup, dict) else None
            if isinstance(store, str) and store:
                for ref in _refs(record):
                    images.setdefault(ref, ImageStore(store).path(ref))
        if found:
            tasks[task] = found
    if not tasks:
        raise RunReadError(f"{root}: no logged sample of an EDCT task (edct_bench*, edct_calibration)")
    results_files = sorted(root.rglob("*_results.json"))
    results = read_json_object(results_files[-1]) if results_files else {}
    records = [r for found in tasks.values() for r in found]
    return LoadedRun(root, "lmms", records, results, tasks=tasks, _images=images)


def _final_response(logged: dict[str, Any]) -> str | None:
    """The sample record JSON an EDCT task logged as its final response, if this is one."""
    for key in ("filtered_resps", "resps"):
        value = logged.get(key)
        while isinstance(value, list) and value:
            value = value[0]
        if isinstance(value, str) and value.lstrip().startswith("{"):
            # a SampleRecord (model_dump_json puts schema_version first, so look at the keys)
            try:
                data = json.loads(value)
            except json.JSONDecodeError:
                continue
            if isinstance(data, dict) and "sample" in data and "status" in data:
                return value
    return None


def _refs(record: SampleRecord) -> Iterator[str]:
    yield from image_files(record).values()
