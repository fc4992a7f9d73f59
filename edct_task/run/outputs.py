"""What a finished run left on disk, read back: records, results and image files.

Two kinds of run are read:

``edct``
    an ``edct run`` / ``edct demo`` output folder: ``results.json``, ``samples.jsonl`` (one
    ``SampleRecord`` per line) and ``images/<sample folder>/`` (``sample_folder`` names it).
``lmms``
    an lmms-eval output folder written with ``--log_samples``: ``[<model>/]<date>_results.json``
    and ``<date>_samples_<task>.jsonl``, whose final responses are the sample records and whose
    ``edct`` setup names the EDCT run folder holding the images (``run_dir``).


``load_run`` is the one decoder of runs: report, audit, export, annotate, agreement, submit,
leaderboard, ``estimate --latencies-from``, stability and the tiny-VLM comparison read runs
through it (``read_logged_samples`` is its decoder of one lmms-eval sample log, which ``edct
report`` also calls per results file); a test greps the product for any other. It reads hostile
folders safely: only regular files (no links, FIFOs or devices), each read bounded
(``checks.MAX_JSON_BYTES``; a JSONL file line by line, ``checks.read_lines``: one line of at
most ``checks.MAX_LINE_BYTES`` in memory, never the whole file), the folder walked to a bounded depth without
following links; every bad input is one ``RunReadError`` line naming the file and the line.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from edct_task.core.records import ControlRecord, SampleInput, SampleRecord
from edct_task.run.checks import (
    RunReadError,
    bad_image_refs,
    parse_controls,
    parse_json_line,
    parse_records,
    read_json_object,
    read_lines,
    read_regular_file,
)
from edct_task.run.log import RunLog, parse_run_log

RESULTS_FILE = "results.json"
SAMPLES_FILE = "samples.jsonl"
CONTROLS_FILE = "controls.jsonl"
"""The known-answer controls' records (``ControlRecord``), one per reply; absent in older runs."""
IMAGES_DIR = "images"
LMMS_RESULTS_SUFFIX = "_results.json"
"""lmms-eval's results file: ``<date>_results.json``."""
LMMS_SAMPLES_MARK = "_samples_"
"""lmms-eval's sample log: ``<date>_samples_<task>.jsonl``."""
SETUP_KEY = "edct"
"""The key of an EDCT task's logged sample that holds its audit digest and ``setup``."""
MAX_DEPTH = 6
"""How deep below a run folder the lmms-eval files are looked for (``<output>/<model>/`` is 1)."""
MAX_ENTRIES = 100_000
"""Folder entries looked at while walking a run folder, at most."""


__all__ = [
    "CONTROLS_FILE",
    "IMAGES_DIR",
    "RESULTS_FILE",
    "SAMPLES_FILE",
    "LoadedRun",
    "RunReadError",
    "call_seconds",
    "find_files",
    "image_files",
    "load_records",
    "load_run",
    "read_logged_samples",
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
    """``results.json`` of an ``edct`` run; lmms-eval's aggregated results file of an ``lmms`` run
    (empty when the folder has logged samples but no results file)."""
    tasks: dict[str, list[SampleRecord]] = field(default_factory=dict)
    """lmms runs: records per lmms-eval task; edct runs: empty."""
    log: RunLog | None = None
    """edct runs: ``results.json`` as the typed run log."""
    controls: list[ControlRecord] = field(default_factory=list)
    """edct runs: the known-answer controls' records (``controls.jsonl``; none in older runs)."""
    setup: dict[str, Any] | None = None
    """lmms runs: the EDCT setup as logged (``edct`` block of the results file, else of a sample)."""
    results_file: Path | None = None
    """The file ``results`` was read from."""
    _images: dict[str, Path] = field(default_factory=dict, repr=False)
    _image_root: Path | None = field(default=None, repr=False)
    """The folder every image file must lie in: the run folder (an lmms run: its EDCT run folder)."""

    def image_path(self, ref: str | None) -> Path | None:
        """The file holding image ``ref``, or None when the run did not keep it. Only a regular
        file (not a link, a FIFO or a device) whose real path lies inside the run's folder counts:
        an image replaced by a link to ``/proc/self/environ`` or a folder linked elsewhere is no
        image of this run, so no tool packs or copies it."""
        if not ref:
            return None
        path = self._images.get(ref)
        if path is None or self._image_root is None:
            return None
        try:
            regular = stat.S_ISREG(os.lstat(path).st_mode)
            inside = path.resolve().is_relative_to(self._image_root.resolve())
        except (OSError, RuntimeError):  # unreadable, or a link loop
            return None
        return path if regular and inside else None

    def read_image(self, ref: str | None, limit: int) -> bytes | None:
        """The bytes of image ``ref`` (``image_path``), read as a regular file of at most ``limit``
        bytes (``RunReadError`` beyond); None when the run did not keep it."""
        path = self.image_path(ref)
        return None if path is None else read_regular_file(path, limit)

    @property
    def calls(self) -> Any:
        """The run's backend call statistics (``RunLog.calls``; on an lmms run, its ``edct`` block's)."""
        if self.kind == "edct":
            return self.results.get("calls")
        block = self.results.get(SETUP_KEY)
        return block.get("calls") if isinstance(block, dict) else None

    @property
    def usage(self) -> Any:
        """Tokens and calls per role as the backends reported them, where the run recorded them."""
        if self.kind == "edct":
            return self.results.get("usage")
        block = self.results.get(SETUP_KEY)
        return block.get("usage") if isinstance(block, dict) else None


def load_run(path: Path | str) -> LoadedRun:
    """Read an ``edct run`` folder or an lmms-eval output folder (see the module docstring).

    ``path`` may also name the folder's ``results.json``.

    Raises
    ------
    RunReadError
        When ``path`` is neither, or a file in it cannot be parsed; the message names the file.
    """
    root = Path(path)
    if root.name == RESULTS_FILE and not root.is_dir():
        root = root.parent
    if not root.exists() and not root.is_symlink():
        raise RunReadError(
            f"{root} does not exist (pass a run output folder: {RESULTS_FILE} + {SAMPLES_FILE}, "
            "or lmms-eval output with logged samples)"
        )
    if not root.is_dir():
        raise RunReadError(f"{root} is not a folder (pass a run output folder)")
    if _present(root / RESULTS_FILE) or _present(root / SAMPLES_FILE):
        if _present(root / RESULTS_FILE) and _present(root / SAMPLES_FILE):
            return _load_edct(root)
        missing = SAMPLES_FILE if _present(root / RESULTS_FILE) else RESULTS_FILE
        if not find_files(root, LMMS_SAMPLES_MARK, ".jsonl"):
            raise RunReadError(
                f"{root / missing}: missing; an `edct run` folder holds both {RESULTS_FILE} and "
                f"{SAMPLES_FILE} (it writes {RESULTS_FILE} last: a folder without it is unfinished)"
            )
    if find_files(root, LMMS_SAMPLES_MARK, ".jsonl"):
        return _load_lmms(root)
    raise RunReadError(
        f"{root} is not a run folder: expected {RESULTS_FILE} + {SAMPLES_FILE} (an `edct run` output) "
        "or lmms-eval output with logged samples (*_samples_<task>.jsonl; run lmms-eval with --log_samples)"
    )


def _present(path: Path) -> bool:
    return path.exists() or path.is_symlink()  # a link is refused when read, not overlooked


def _load_edct(root: Path) -> LoadedRun:
    results = read_json_object(root / RESULTS_FILE)
    samples = root / SAMPLES_FILE
    records = parse_records(samples, read_lines(samples))
    log = parse_run_log(results, root / RESULTS_FILE)  # the typed view; another version is refused
    controls_file = root / CONTROLS_FILE
    controls = parse_controls(controls_file, read_lines(controls_file)) if _present(controls_file) else []
    images: dict[str, Path] = {}
    for record in records:
        for name, ref in image_files(record).items():
            images.setdefault(ref, root / name)
    file = root / RESULTS_FILE
    return LoadedRun(
        root,
        "edct",
        records,
        results,
        log=log,
        controls=controls,
        results_file=file,
        _images=images,
        _image_root=root,
    )


def find_files(root: Path, mark: str, suffix: str) -> list[Path]:
    """Regular files at or below ``root`` whose name holds ``mark`` and ends with ``suffix``, sorted.

    The walk does not follow links, stops ``MAX_DEPTH`` folders down and after ``MAX_ENTRIES``
    entries, and skips folders it cannot list: a hostile folder costs bounded time.
    """
    out: list[Path] = []
    seen = 0
    stack: list[tuple[Path, int]] = [(root, 0)]
    while stack and seen < MAX_ENTRIES:
        folder, depth = stack.pop()
        try:
            entries = os.scandir(folder)
        except OSError:
            continue
        with entries:
            for entry in entries:
                seen += 1
                if seen > MAX_ENTRIES:
                    break
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if depth < MAX_DEPTH:
                            stack.append((Path(entry.path), depth + 1))
                        continue
                    wanted = mark in entry.name and entry.name.endswith(suffix)
                    if wanted and entry.is_file(follow_symlinks=False):
                        out.append(Path(entry.path))
                except OSError:
                    continue
    return sorted(out)


def read_logged_samples(path: Path) -> tuple[list[SampleRecord], dict[str, Any] | None]:
    """The sample records of one lmms-eval sample log (``<date>_samples_<task>.jsonl``), and the
    EDCT setup its samples logged (``edct.setup``), if any.

    A logged sample of an EDCT task whose final response is no sample record (lmms-eval ended the
    loop early, a response cut short) is that document's error record, with the reason; another
    task's sample (no record and no ``edct`` digest) is skipped. The final response is the first
    element of ``filtered_resps`` (else ``resps``) at any list depth, as lmms-eval flattens it.
    """
    records: list[SampleRecord] = []
    setup: dict[str, Any] | None = None
    for number, line in read_lines(path):
        logged = parse_json_line(path, number, line)
        record = _logged_record(path, number, logged)
        if record is None:
            continue
        records.append(record)
        digest = logged.get(SETUP_KEY)
        if setup is None and isinstance(digest, dict) and isinstance(digest.get("setup"), dict):
            setup = digest["setup"]
    return records, setup


def _final_response(logged: dict[str, Any]) -> Any:
    value = logged.get("filtered_resps")
    return logged.get("resps") if value is None else value


def final_record(response: object) -> SampleRecord | str:
    """The sample record an EDCT task's final response carries (``filtered_resps``/``resps``, at
    any list depth), or why there is none: lmms-eval's early-stop reply, or what came instead.

    Raises ``RunReadError`` for a record whose image refs are not content ids (tools join refs to
    folder names, so such a record is refused, never read).
    """
    depth = 0
    while isinstance(response, list) and response and depth < 8:
        response, depth = response[0], depth + 1
    if not (isinstance(response, str) and response.lstrip().startswith("{")):
        return f"final response is not a record: {str(response)[:200]!r}"
    try:
        data = json.loads(response)
    except (ValueError, RecursionError):
        return f"final response is not a record: {response[:200]!r}"
    if isinstance(data, dict) and data.get("error") and "sample" not in data:
        return f"lmms-eval ended the agentic loop early: {str(data['error'])[:200]}"
    try:
        record = SampleRecord.model_validate_json(response)
    except ValueError as exc:
        return f"final response is not a record: {str(exc).splitlines()[0][:200]}"
    bad = bad_image_refs(record)
    if bad:
        raise RunReadError(f"image ref {bad[0][:80]!r} is not an image id (64 hex characters)")
    return record


def _logged_record(path: Path, number: int, logged: dict[str, Any]) -> SampleRecord | None:
    response = _final_response(logged)
    try:
        got = final_record(response)
    except RunReadError as exc:
        raise RunReadError(f"{path}, line {number}: {exc}") from None
    if isinstance(got, SampleRecord):
        return got
    digest = logged.get(SETUP_KEY)
    if not isinstance(digest, dict):
        return None  # another task's sample (lmms-eval logs every task of a run)
    doc = logged.get("doc")
    if not isinstance(doc, dict):
        doc = {}
    sample_id = str(doc.get("id") or digest.get("id") or logged.get("doc_id"))[:200]
    domain = str(digest.get("domain") or "unknown")[:80]
    return SampleRecord(
        sample=SampleInput(id=sample_id, domain=domain, question="", image=""),
        status="error",
        reason=f"doc {str(logged.get('doc_id'))[:40]}: {got}",
    )


def _task_of(path: Path) -> str:
    return path.name[: -len(".jsonl")].split(LMMS_SAMPLES_MARK, 1)[1]


def _load_lmms(root: Path) -> LoadedRun:
    tasks: dict[str, list[SampleRecord]] = {}
    setup: dict[str, Any] | None = None
    for path in find_files(root, LMMS_SAMPLES_MARK, ".jsonl"):
        found, logged_setup = read_logged_samples(path)
        if found:
            tasks.setdefault(_task_of(path), []).extend(found)
            setup = setup or logged_setup
    if not tasks:
        raise RunReadError(f"{root}: no logged sample of an EDCT task (edct_bench*, edct_calibration)")
    results_files = find_files(root, "", LMMS_RESULTS_SUFFIX)
    results_file = results_files[-1] if results_files else None
    results = read_json_object(results_file) if results_file else {}
    block = results.get(SETUP_KEY)  # an export's setup block, else the one its samples logged
    setup = block if isinstance(block, dict) else setup
    records = [r for found in tasks.values() for r in found]
    images: dict[str, Path] = {}
    folder = _run_images(root)
    run_dir = setup.get("run_dir") if isinstance(setup, dict) else None
    base = root if folder is not None else (Path(run_dir) if isinstance(run_dir, str) and run_dir else None)
    for record in records:
        for name, ref in image_files(record).items():
            if base is not None:
                images.setdefault(ref, base / name)
    return LoadedRun(
        root,
        "lmms",
        records,
        results,
        tasks=tasks,
        setup=setup,
        results_file=results_file,
        _images=images,
        _image_root=base,
    )


def load_records(samples: Path) -> list[SampleRecord]:
    """The records of one ``samples.jsonl`` (none when it does not exist yet), read as
    ``load_run`` reads them: the lmms-eval hooks' run folder gathers its records with it."""
    if not samples.exists():
        return []
    return parse_records(samples, read_lines(samples))


def _run_images(root: Path) -> Path | None:
    """The run's own ``images/`` folder, when the run placed its images inside it."""
    folder = root / IMAGES_DIR
    return folder if folder.is_dir() and not folder.is_symlink() else None


def call_seconds(root: Path) -> dict[str, list[float]]:
    """Seconds of every backend call by stage, from a call log (``call_log:``, ``*calls*.jsonl``)
    in the run folder; lines that are not a call are skipped."""
    logs = find_files(Path(root), "calls", ".jsonl")
    out: dict[str, list[float]] = {}
    if not logs:
        return out
    for number, line in read_lines(logs[-1]):
        try:
            row = parse_json_line(logs[-1], number, line)
            seconds = row["seconds"]
            if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 <= seconds < 1e9:
                continue
            out.setdefault(str(row["stage"])[:40], []).append(float(seconds))
        except (RunReadError, KeyError):
            continue
    return out
