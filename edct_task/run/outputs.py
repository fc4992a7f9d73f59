"""What a finished run left on disk, read back: records, results and image files.

A run is an EDCT run folder: ``results.json``, ``samples.jsonl`` (one ``SampleRecord`` per line)
and ``images/<sample folder>/`` (``sample_folder`` names it), written by ``edct run`` / ``edct
demo`` and by lmms-eval's loop on our tasks alike. It is the one EDCT format.

An lmms-eval output folder (``[<model>/]<date>_results.json`` and, with ``--log_samples``,
``<date>_samples_<task>.jsonl``) is read through the run folder its logs name: every logged sample
of an EDCT task names it at ``edct.run_dir`` (``RUN_KEY``), an export's results file at
``edct.run_dir`` too; lmms-eval's logs carry the metric values, never a second copy of the
records (``logged_runs`` reads one sample log; ``final_record`` is the lmms-eval hooks' decoder of
the final response they hand lmms-eval).

``load_run`` is the one decoder of runs: report, audit, export, annotate, agreement, submit,
leaderboard, ``estimate --latencies-from``, stability and the tiny-VLM comparison read runs
through it; a test greps the product for any other. It reads hostile folders safely: only regular
files (no links, FIFOs or devices), each read bounded (``checks.MAX_JSON_BYTES``; a JSONL file line
by line, ``checks.read_lines``: one line of at most ``checks.MAX_LINE_BYTES`` in memory, never the
whole file), the folder walked to a bounded depth without following links, a run folder that
lmms-eval's logs name taken only when it is a folder and not a link; every bad input is one
``RunReadError`` line naming the file and the line.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from edct_task.core.records import ControlRecord, SampleRecord
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
RUN_KEY = "edct"
"""The key of an EDCT task's logged sample that names where its record is kept:
``{"run_dir": <the EDCT run folder>, "id": <sample id>}`` (``lmms.results.record_results``). lmms-eval
output written by edct-bench 0.2.0 held a digest there, with the run folder at ``setup.run_dir``.
An export's results file names the run folder at ``edct.run_dir`` (0.2.0 and later)."""
MAX_RUN_DIR_CHARS = 4096
"""Longest run folder path (and sample id) a logged sample may name."""
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
    "logged_runs",
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
    """One run folder as read from disk."""

    path: Path
    kind: Literal["edct"]
    """Always ``edct``: an lmms-eval output folder is read as the run folder its logs name."""
    records: list[SampleRecord]
    results: dict[str, Any]
    """``results.json``."""
    log: RunLog | None = None
    """``results.json`` as the typed run log."""
    controls: list[ControlRecord] = field(default_factory=list)
    """The known-answer controls' records (``controls.jsonl``; none in older runs)."""
    results_file: Path | None = None
    """The file ``results`` was read from."""
    _images: dict[str, Path] = field(default_factory=dict, repr=False)
    _image_root: Path | None = field(default=None, repr=False)
    """The folder every image file must lie in: the run folder."""

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
        """The run's backend call statistics (``RunLog.calls``)."""
        return self.results.get("calls")

    @property
    def usage(self) -> Any:
        """Tokens and calls per role as the backends reported them, where the run recorded them."""
        return self.results.get("usage")


def load_run(path: Path | str) -> LoadedRun:
    """Read an EDCT run folder, or the run folder an lmms-eval output folder names (see the module
    docstring).

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
            "or lmms-eval output of an EDCT task)"
        )
    if not root.is_dir():
        raise RunReadError(f"{root} is not a folder (pass a run output folder)")
    if _present(root / RESULTS_FILE) or _present(root / SAMPLES_FILE):
        if _present(root / RESULTS_FILE) and _present(root / SAMPLES_FILE):
            return _load_edct(root)
        missing = SAMPLES_FILE if _present(root / RESULTS_FILE) else RESULTS_FILE
        raise RunReadError(
            f"{root / missing}: missing; an `edct run` folder holds both {RESULTS_FILE} and "
            f"{SAMPLES_FILE} (it writes {RESULTS_FILE} last: a folder without it is unfinished)"
        )
    samples = find_files(root, LMMS_SAMPLES_MARK, ".jsonl")
    results = find_files(root, "", LMMS_RESULTS_SUFFIX)
    if not samples and not results:
        raise RunReadError(
            f"{root} is not a run folder: expected {RESULTS_FILE} + {SAMPLES_FILE} (an `edct run` output) "
            "or lmms-eval output of an EDCT task (*_results.json, *_samples_<task>.jsonl)"
        )
    named: dict[str, Path] = {}  # run folder → the log that names it first
    for file in samples:
        for run_dir in logged_runs(file):
            named.setdefault(run_dir, file)
    for file in results:
        exported = exported_run(file)
        if exported is not None:
            named.setdefault(exported, file)
    if not named:
        raise RunReadError(
            f"{root}: lmms-eval's logs name no EDCT run folder (no logged sample of an EDCT task "
            "carries edct.run_dir: run lmms-eval with --log_samples, or pass the EDCT run folder)"
        )
    if len(named) > 1:
        raise RunReadError(
            f"{root}: lmms-eval's logs name {len(named)} EDCT run folders "
            f"({', '.join(d[:200] for d in sorted(named)[:3])}{', …' if len(named) > 3 else ''}); "
            "pass one run folder"
        )
    ((run_dir, file),) = named.items()
    return load_named_run(run_dir, file)


def load_named_run(run_dir: str, named_by: Path | str) -> LoadedRun:
    """The EDCT run folder ``run_dir`` that lmms-eval's log ``named_by`` names: only a folder
    named by its real path, through no link (the logs are untrusted: a link would lead the reader
    elsewhere; the writers name the run folder resolved)."""
    folder = Path(run_dir)
    why = _not_a_run_folder(folder)
    if why is not None:
        raise RunReadError(
            f"{named_by}: the EDCT run folder it names, {str(folder)[:300]}, {why} (moved or deleted?); "
            "pass the run folder itself"
        )
    return _load_edct(folder)


def _not_a_run_folder(folder: Path) -> str | None:
    try:
        mode = os.lstat(folder).st_mode
    except (OSError, ValueError):
        return "does not exist"
    if stat.S_ISLNK(mode):
        return "is a link"
    if not stat.S_ISDIR(mode):
        return "is not a folder"
    if os.path.realpath(folder) != os.path.normpath(folder):  # the writers name it resolved
        return "is reached through a link"
    if not (_present(folder / RESULTS_FILE) and _present(folder / SAMPLES_FILE)):
        return f"holds no {RESULTS_FILE} + {SAMPLES_FILE}"
    return None


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


def logged_runs(path: Path) -> dict[str, list[str]]:
    """Run folder → sample ids, as the logged samples of one lmms-eval sample log
    (``<date>_samples_<task>.jsonl``) name them (``RUN_KEY``: ``{"run_dir", "id"}``; edct-bench 0.2.0
    logged a digest there, with the run folder at ``setup.run_dir``). Another task's sample (no
    ``edct`` key) is skipped; an ``edct`` value of another shape is one ``RunReadError`` line."""
    out: dict[str, list[str]] = {}
    for number, line in read_lines(path):
        logged = parse_json_line(path, number, line)
        if RUN_KEY not in logged:
            continue
        run_dir, sample_id = _logged_run(f"{path}, line {number}", logged[RUN_KEY])
        out.setdefault(run_dir, []).append(sample_id)
    return out


def _logged_run(at: str, block: object) -> tuple[str, str]:
    block = _block(at, block)
    setup = block.get("setup")
    run_dir = block.get("run_dir")
    if run_dir is None and isinstance(setup, dict):
        run_dir = setup.get("run_dir")  # edct-bench 0.2.0: a digest with the setup
    return _run_dir(at, run_dir), _text(at, "id", block.get("id"))


def exported_run(path: Path) -> str | None:
    """The run folder an export's lmms-eval results file names (``edct.run_dir``), if any."""
    block = read_json_object(path).get(RUN_KEY)
    if block is None:
        return None
    block = _block(str(path), block)
    return None if block.get("run_dir") is None else _run_dir(str(path), block["run_dir"])


def _run_dir(at: str, value: object) -> str:
    text = _text(at, "run_dir", value)
    if not os.path.isabs(text) or "\0" in text:
        raise RunReadError(f"{at}: {RUN_KEY}.run_dir {text[:200]!r} is not an absolute path")
    return os.path.normpath(text)


def _block(at: str, block: object) -> dict[str, Any]:
    if not isinstance(block, dict):
        raise RunReadError(f"{at}: {RUN_KEY} is a {type(block).__name__}, not an object naming a run folder")
    return block


def _text(at: str, key: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        plain = value is None or isinstance(value, (bool, int, float))
        what = repr(value)[:80] if plain else "empty" if value == "" else f"a {type(value).__name__}"
        raise RunReadError(f"{at}: {RUN_KEY}.{key} is {what}, not a non-empty string")
    if len(value) > MAX_RUN_DIR_CHARS:
        raise RunReadError(f"{at}: {RUN_KEY}.{key} is {len(value)} characters (at most {MAX_RUN_DIR_CHARS})")
    return value


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


def load_records(samples: Path) -> list[SampleRecord]:
    """The records of one ``samples.jsonl`` (none when it does not exist yet), read as
    ``load_run`` reads them: the lmms-eval hooks' run folder gathers its records with it."""
    if not samples.exists():
        return []
    return parse_records(samples, read_lines(samples))


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
