"""Checked reading of the files a run leaves: bytes, JSON, records, image refs and results shape.

Every function takes a path (and the bytes or text read from it) and returns validated data, or
raises :class:`RunReadError` with one line naming the file and, where there is one, the line:
``<file>, line <n>: <what is wrong>``. The readers of runs (``run_outputs.load_run``), bundles
and reports call these, so bad bytes and bad shapes become a user error (exit 2) everywhere.

Image refs are content ids (``stage_cache.image_id``: 64 lowercase hex characters) wherever a
record is read: a ref is joined to folder names by the tools (audit pages, bundles, exports), so
anything else (``../../x``) is refused here, before any tool sees it.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, StrictFloat, StrictInt, ValidationError

from edct_task.core.errors import UserError
from edct_task.core.records import SampleRecord

__all__ = [
    "REF_RE",
    "RunReadError",
    "bad_image_refs",
    "check_results",
    "check_summary",
    "decode_utf8",
    "parse_json_line",
    "parse_json_object",
    "parse_records",
    "read_json_object",
    "read_regular_file",
]

MAX_JSON_BYTES = 256 * 1024**2
"""Largest JSON file (a results file, a run log) a reader takes in."""
MAX_LOG_BYTES = 4 * 1024**3
"""Largest JSONL file (sample records, logged samples, a call log) a reader takes in."""

REF_RE = re.compile(r"[0-9a-f]{64}")
"""An image ref: the image store's content id."""


class RunReadError(UserError, ValueError):
    """A path is not a readable run; the message says what was expected there."""


def decode_utf8(where: str | Path, data: bytes) -> str:
    """``data`` as UTF-8 text; a bad byte is reported with its line and column."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise RunReadError(
            f"{where}, line {line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at column {column})"
        ) from None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_json_object(where: str | Path, text: str) -> dict[str, Any]:
    """A JSON object from ``text``; ``NaN`` / ``Infinity`` are refused like any other non-JSON."""
    return _json_object(text, str(where), lambda exc: f"{where}, line {exc.lineno}: not JSON ({exc.msg})")


def parse_json_line(path: str | Path, number: int, line: str) -> dict[str, Any]:
    """Line ``number`` of a JSONL file as a JSON object."""
    at = f"{path}, line {number}"
    return _json_object(line, at, lambda exc: f"{at}: not JSON ({exc.msg} at column {exc.colno})")


def _json_object(text: str, at: str, decode_error: Callable[[json.JSONDecodeError], str]) -> dict[str, Any]:
    """``text`` as a JSON object (no NaN / Infinity); errors name ``at``, a decode error as
    ``decode_error`` words it."""
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise RunReadError(decode_error(exc)) from None
    except ValueError as exc:
        raise RunReadError(f"{at}: not JSON ({exc})") from None
    except RecursionError:
        raise RunReadError(f"{at}: nested too deeply to be a file a run writes") from None
    if not isinstance(value, dict):
        raise RunReadError(f"{at}: expected a JSON object, found {type(value).__name__}")
    return value


def read_regular_file(path: Path, limit: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them.

    A link, a folder, a FIFO or a device is refused without being read (a FIFO would block, a
    device never end), as is a file larger than ``limit``: each with one line naming the file.
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise RunReadError(f"{path}: is a link, not a regular file") from None
        raise RunReadError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            what = "a folder" if stat.S_ISDIR(mode) else "a FIFO, socket or device"
            raise RunReadError(f"{path}: is {what}, not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(limit + 1)
    except OSError as exc:
        raise RunReadError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise RunReadError(f"{path}: larger than {limit:,} bytes; not a file a run writes")
    return data


def read_json_object(path: Path, limit: int = MAX_JSON_BYTES) -> dict[str, Any]:
    """The JSON object in the regular file ``path`` (UTF-8, no NaN, at most ``limit`` bytes)."""
    return parse_json_object(path, decode_utf8(path, read_regular_file(Path(path), limit)))


def bad_image_refs(record: SampleRecord) -> list[str]:
    """The image refs of ``record`` that are not content ids (an error row's empty original is fine)."""
    refs: list[str | None] = [record.sample.image or None]
    for step in record.steps:
        refs.append(step.image)
        for a in step.attempts:
            refs.append(a.image)
            refs.append(a.check.maps if a.check is not None else None)
    return [r for r in refs if r is not None and not REF_RE.fullmatch(r)]


def _lines(text: str) -> Iterator[tuple[int, str]]:
    # JSONL lines end at "\n" only: str.splitlines() would also split inside a record at U+2028,
    # U+2029, U+0085 or a form feed, which JSON writers (pydantic included) leave unescaped.
    for number, line in enumerate(text.split("\n"), 1):
        if line.strip():
            yield number, line


def parse_record(where: str | Path, number: int, line: str) -> SampleRecord:
    """One JSONL line as a sample record whose image refs are content ids."""
    try:
        record = SampleRecord.model_validate_json(line)
    except ValueError as exc:
        first = str(exc).splitlines()[0]
        raise RunReadError(f"{where}, line {number}: not a sample record ({first})") from None
    bad = bad_image_refs(record)
    if bad:
        raise RunReadError(
            f"{where}, line {number}: image ref {bad[0][:80]!r} is not an image id (64 hex characters)"
        )
    return record


def parse_records(where: str | Path, text: str) -> list[SampleRecord]:
    """Every sample record of a JSONL text (``samples.jsonl``), checked line by line."""
    return [parse_record(where, number, line) for number, line in _lines(text)]


# ----------------------------------------------------------------------------- results.json


class _Shape(BaseModel):
    model_config = ConfigDict(extra="allow")


Number = StrictFloat | StrictInt


class _Metric(_Shape):
    estimate: Number | None
    low: Number | None = None
    high: Number | None = None
    n: StrictInt | None = None


class _Block(_Shape):
    metrics: dict[str, _Metric]
    counts: dict[str, StrictInt] = {}


class _Summary(_Shape):
    overall: _Block
    per_domain: dict[str, _Block] = {}


class _Config(_Shape):
    roles: dict[str, Any]
    protocol: dict[str, Any] = {}
    verification: dict[str, Any] = {}
    data: dict[str, Any] = {}


class _Results(_Shape):
    config: _Config
    results: _Summary
    prompt_versions: dict[str, Any] = {}


def _non_finite(value: Any, path: str) -> str | None:
    if isinstance(value, float) and not math.isfinite(value):
        return path
    if isinstance(value, dict):
        return next((p for k, v in value.items() if (p := _non_finite(v, f"{path}.{k}"))), None)
    if isinstance(value, list):
        return next((p for i, v in enumerate(value) if (p := _non_finite(v, f"{path}[{i}]"))), None)
    return None


def _refuse(where: str | Path, exc: ValidationError, prefix: str = "") -> RunReadError:
    err = exc.errors()[0]
    key = ".".join(str(x) for x in (*([prefix] if prefix else []), *err["loc"]))
    return RunReadError(f"{where}: {key}: {err['msg'].lower()}")


def check_summary(where: str | Path, summary: Any) -> dict[str, Any]:
    """``summary`` when it has the shape ``scoring.metrics.summarise`` writes (finite numbers)."""
    try:
        _Summary.model_validate(summary)
    except ValidationError as exc:
        raise _refuse(where, exc, "claimed") from None
    bad = _non_finite(summary, "claimed")
    if bad:
        raise RunReadError(f"{where}: {bad} is not a finite number")
    return summary


def check_results(where: str | Path, results: dict[str, Any]) -> dict[str, Any]:
    """``results`` when it has the shape of an ``edct run`` results.json (``config.roles``,
    ``results.overall.metrics.<m>.estimate`` numbers or null, …); else one line naming the key."""
    try:
        _Results.model_validate(results)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(x) for x in err["loc"])
        raise RunReadError(f"{where}: {key}: {err['msg'].lower()} (not an `edct run` results.json)") from None
    bad = _non_finite(results, "results.json")
    if bad:
        raise RunReadError(f"{where}: {bad} is not a finite number")
    return results
