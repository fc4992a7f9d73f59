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
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, StrictFloat, StrictInt, ValidationError

from edct_task.core.errors import UserError
from edct_task.core.records import ControlRecord, SampleRecord
from edct_task.scoring.results import Results

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
    "read_lines",
    "read_regular_file",
]

MAX_JSON_BYTES = 256 * 1024**2
"""Largest JSON file (a results file, a run log) a reader takes in."""
MAX_LOG_BYTES = 4 * 1024**3
"""Largest JSONL file (sample records, logged samples, a call log) a reader takes in."""
MAX_LINE_BYTES = 64 * 1024**2
"""Longest line of a JSONL file (one record); a file is read line by line, never whole, so a
sparse multi-GB file without a newline costs this much memory at most before it is refused."""
CHUNK_BYTES = 1024**2
"""Bytes read at a time by ``read_lines``."""

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


def _open_regular(path: Path) -> int:
    """A descriptor of the regular file ``path``: a link, a folder, a FIFO or a device is refused
    without being read (a FIFO would block, a device never end), with one line naming the file."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise RunReadError(f"{path}: is a link, not a regular file") from None
        raise RunReadError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        what = "a folder" if stat.S_ISDIR(mode) else "a FIFO, socket or device"
        raise RunReadError(f"{path}: is {what}, not a regular file")
    return fd


def _too_large(path: Path, limit: int) -> RunReadError:
    return RunReadError(f"{path}: larger than {limit:,} bytes; not a file a run writes")


def read_regular_file(path: Path, limit: int) -> bytes:
    """The bytes of the regular file ``path`` (``_open_regular``), at most ``limit`` of them: a
    larger file is refused with one line naming it."""
    fd = _open_regular(path)
    try:
        with os.fdopen(fd, "rb", closefd=False) as f:
            # read(n) allocates n bytes first: ask for what the file holds, not for the cap
            parts = [f.read(min(limit, os.fstat(fd).st_size) + 1)]
            got = len(parts[0])
            while got <= limit and (more := f.read(min(CHUNK_BYTES, limit + 1 - got))):
                parts.append(more)  # a file that grew since fstat, up to the cap
                got += len(more)
            data = b"".join(parts)
    except OSError as exc:
        raise RunReadError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise _too_large(path, limit)
    return data


def read_lines(
    path: Path, limit: int = MAX_LOG_BYTES, max_line: int = MAX_LINE_BYTES
) -> Iterator[tuple[int, str]]:
    """(line number, text) of every non-blank line of the regular file ``path``, read
    ``CHUNK_BYTES`` at a time: never more than one line (at most ``max_line`` bytes) and one chunk
    held, the file refused past ``limit`` bytes. Lines end at ``\\n`` only (``str.splitlines``
    would also split inside a record at U+2028, U+2029, U+0085 or a form feed, which JSON writers,
    pydantic included, leave unescaped); each is decoded as strict UTF-8."""
    fd = _open_regular(path)
    try:
        with os.fdopen(fd, "rb", closefd=False) as f:
            yield from _stream_lines(path, f, limit, max_line)
    except OSError as exc:
        raise RunReadError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def _stream_lines(path: Path, f: Any, limit: int, max_line: int) -> Iterator[tuple[int, str]]:
    number = 1  # the line the start of ``pending`` is on
    pending: list[bytes] = []  # the unfinished last line, in pieces
    pending_bytes = total = 0
    while True:
        chunk = f.read(CHUNK_BYTES)
        total += len(chunk)
        if total > limit:
            raise _too_large(path, limit)
        end = chunk.rfind(b"\n") if chunk else -1
        if end < 0 and chunk:
            pending.append(chunk)
            pending_bytes += len(chunk)
            if pending_bytes > max_line:
                raise RunReadError(f"{path}, line {number}: longer than {max_line:,} bytes; not a record")
            continue
        block = b"".join([*pending, chunk[: end + 1] if chunk else b""])
        pending, pending_bytes = ([chunk[end + 1 :]], len(chunk) - end - 1) if chunk else ([], 0)
        if not block.strip():  # an all-blank block (a flood of newlines): one C scan, no line
            number += block.count(b"\n")
        else:
            lines = block.split(b"\n")
            for offset, line in enumerate(lines[:-1] if chunk else lines):
                if len(line) > max_line:
                    raise RunReadError(
                        f"{path}, line {number + offset}: longer than {max_line:,} bytes; not a record"
                    )
                if line.strip() and (text := _decode_line(path, number + offset, line)).strip():
                    yield number + offset, text
            number += len(lines) - 1
        if not chunk:
            return


def _decode_line(path: Path, number: int, line: bytes) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RunReadError(
            f"{path}, line {number}: not UTF-8 text (byte 0x{line[exc.start]:02x} at column {exc.start + 1})"
        ) from None


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


def parse_controls(where: str | Path, lines: Iterable[tuple[int, str]]) -> list[ControlRecord]:
    """Every known-answer control record of JSONL lines (``controls.jsonl``: ``read_lines``),
    checked line by line."""
    out = []
    for number, line in lines:
        try:
            out.append(ControlRecord.model_validate_json(line))
        except ValueError as exc:
            first = str(exc).splitlines()[0]
            raise RunReadError(f"{where}, line {number}: not a control record ({first})") from None
    return out


def parse_records(where: str | Path, lines: Iterable[tuple[int, str]]) -> list[SampleRecord]:
    """Every sample record of JSONL lines (``samples.jsonl``: ``read_lines``), checked line by line."""
    return [parse_record(where, number, line) for number, line in lines]


# ----------------------------------------------------------------------------- results.json


class _Shape(BaseModel):
    model_config = ConfigDict(extra="allow")


Number = StrictFloat | StrictInt


class _Config(_Shape):
    roles: dict[str, Any]
    protocol: dict[str, Any] = {}
    verification: dict[str, Any] = {}
    data: dict[str, Any] = {}


class _Tally(_Shape):
    n: StrictInt
    correct: StrictInt
    accuracy: Number | None = None
    ci: list[Number] | None = None
    below_bar: bool = False


class _Controls(_Shape):
    """``scoring.controls.summarise_controls``: what the surfaces read (reasons, bar, tallies)."""

    requested: StrictInt = 0
    bar: Number = 0.0
    calls: StrictInt = 0
    roles: dict[str, dict[str, _Tally]] = {}
    unreliable: list[str] = []


class _Results(_Shape):
    config: _Config
    results: Results
    prompt_versions: dict[str, Any] = {}
    controls: _Controls | None = None


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


def check_summary(where: str | Path, summary: Any) -> Results:
    """``summary`` as the typed ``Results`` (``scoring.metrics.summarise``'s shape, finite numbers),
    or one line naming the first key that does not fit (prefixed ``claimed``)."""
    try:
        typed = Results.model_validate(summary)
    except ValidationError as exc:
        raise _refuse(where, exc, "claimed") from None
    bad = _non_finite(summary, "claimed")
    if bad:
        raise RunReadError(f"{where}: {bad} is not a finite number")
    return typed


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
