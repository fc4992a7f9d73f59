"""Reading a bundle's zip archive as hostile input: caps checked before anything is decompressed.

A bundle comes from anyone. Before a byte is inflated, the central directory is checked against
:class:`Limits`: the member count, each member's uncompressed size and their total, the member
names (only ``bundle.json``, the known JSON members and ``images/<64 hex>.png``; no directories,
no ``..``, no absolute paths), duplicate names, symlinks and encrypted members. Members are then
read streaming, in chunks, never beyond their declared size (``zipfile`` stops at the recorded
size and checks the CRC), so a zip bomb costs what its central directory says and is refused
there. JSON members are parsed with NaN/Infinity refused, a line-length cap for JSON Lines and a
nesting-depth cap (deeper documents are refused instead of exhausting the interpreter's stack).

``zipfile`` reads the archive; what it cannot do for us is refuse an archive by its directory
before inflating it, so that part is here.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import stat
import zipfile
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from edct_task.core.inputs import InputFileError, open_regular

MiB = 1 << 20
CHUNK = 1 * MiB
IMAGE_MEMBER_RE = re.compile(r"images/[0-9a-f]{64}\.png")


class ArchiveError(ValueError):
    """The archive breaks a cap or a naming rule; the message says which."""


@dataclass(frozen=True)
class Limits:
    """Caps on what one bundle may cost the board (defaults fit a 10,000-sample run with images)."""

    max_members: int = 100_000
    max_samples_bytes: int = 256 * MiB
    """Uncompressed size of ``samples.jsonl`` (the records: by far the largest JSON member)."""
    max_member_bytes: int = 16 * MiB
    """Uncompressed size of any other JSON member (``bundle.json``, results, manifest …)."""
    max_image_bytes: int = 32 * MiB
    """Uncompressed size of one packed image."""
    max_total_bytes: int = 2048 * MiB
    """Uncompressed size of all members together."""
    max_line_bytes: int = 16 * MiB
    """Longest line of a JSON Lines member (one sample record)."""
    max_json_depth: int = 64
    """Deepest nesting of objects and arrays in a JSON member (the records need about 10)."""


DEFAULT_LIMITS = Limits()


def _is_symlink(info: zipfile.ZipInfo) -> bool:
    return info.create_system == 3 and stat.S_ISLNK(info.external_attr >> 16)


SAMPLES_MEMBER = "samples.jsonl"


def check_directory(
    infos: list[zipfile.ZipInfo], known: frozenset[str], limits: Limits = DEFAULT_LIMITS
) -> None:
    """Refuse an archive by its central directory alone (nothing is decompressed)."""
    if len(infos) > limits.max_members:
        raise ArchiveError(f"{len(infos)} members, over the limit of {limits.max_members}")
    seen: set[str] = set()
    total = 0
    for info in infos:
        name = info.filename
        shown = ascii(name)
        if name in seen:
            raise ArchiveError(f"member {shown} appears more than once")
        seen.add(name)
        if _is_symlink(info):
            raise ArchiveError(f"member {shown} is a symbolic link")
        if info.is_dir():
            raise ArchiveError(f"member {shown} is a directory")
        if info.flag_bits & 0x1:
            raise ArchiveError(f"member {shown} is encrypted")
        is_image = IMAGE_MEMBER_RE.fullmatch(name) is not None
        if name not in known and not is_image:
            raise ArchiveError(f"member {shown} is not a bundle member (unknown name)")
        if is_image:
            cap = limits.max_image_bytes
        else:
            cap = limits.max_samples_bytes if name == SAMPLES_MEMBER else limits.max_member_bytes
        if info.file_size > cap:
            raise ArchiveError(
                f"member {shown} is {info.file_size} bytes uncompressed, over the limit of {cap}"
            )
        total += info.file_size
        if total > limits.max_total_bytes:
            raise ArchiveError(
                f"members add up to more than {limits.max_total_bytes} bytes uncompressed (the limit)"
            )


def read_member(z: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    """A member's bytes, read in chunks and never beyond its declared size."""
    buf = io.BytesIO()
    with z.open(info) as f:
        while True:
            chunk = f.read(CHUNK)
            if not chunk:
                break
            buf.write(chunk)
            if buf.tell() > info.file_size:  # zipfile stops at file_size; a guard, not a path
                raise ArchiveError(f"member {info.filename!a} inflates beyond its declared size")
    return buf.getvalue()


class Members(Mapping[str, bytes]):
    """Member name → bytes. Small JSON members are held; ``samples.jsonl`` and the images stay in
    the archive and are streamed when hashed or read (``sha256``, ``lines``), so what a bundle
    costs in memory does not grow with its records or images. The archive is opened once, from the
    descriptor :func:`read_archive` checked: reopening it per member re-read the whole central
    directory each time (quadratic in the member count: 426 CPU-s for 8,000 tiny members)."""

    def __init__(
        self,
        zf: zipfile.ZipFile,
        held: dict[str, bytes],
        images: dict[str, zipfile.ZipInfo],
        limits: Limits,
        file: IO[bytes],
    ) -> None:
        self._zip, self._held, self._images, self._limits, self._file = zf, held, images, limits, file

    def close(self) -> None:
        """Close the archive (members not held can no longer be read)."""
        self._zip.close()
        self._file.close()

    def __enter__(self) -> Members:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _chunks(self, name: str) -> Iterator[bytes]:
        with _corrupt_as_archive_error(name), self._zip.open(self._images[name]) as f:
            while chunk := f.read(CHUNK):
                yield chunk

    def sha256(self, name: str) -> str:
        """SHA-256 of a member, streamed for the members not held."""
        if name in self._held:
            return hashlib.sha256(self._held[name]).hexdigest()
        digest = hashlib.sha256()
        for chunk in self._chunks(name):
            digest.update(chunk)
        return digest.hexdigest()

    def lines(self, name: str) -> Iterator[tuple[int, str]]:
        """(line number, text) of the non-blank lines of a JSON Lines member, streamed, each
        refused beyond the line-length cap."""
        if name in self._held:
            yield from json_lines(self._held[name], name, self._limits)
            return
        with _corrupt_as_archive_error(name), self._zip.open(self._images[name]) as f:
            yield from _lines(f, name, self._limits)

    def take(self, name: str) -> bytes | None:
        """Remove a held member and return its bytes (None when absent)."""
        return self._held.pop(name, None)

    def __getitem__(self, name: str) -> bytes:
        if name in self._held:
            return self._held[name]
        info = self._images[name]  # KeyError for an unknown name, as a Mapping should
        with _corrupt_as_archive_error(name):
            return read_member(self._zip, info)

    def __iter__(self) -> Iterator[str]:
        yield from self._held
        yield from self._images

    def __len__(self) -> int:
        return len(self._held) + len(self._images)

    def __contains__(self, name: object) -> bool:
        return name in self._held or name in self._images


@contextlib.contextmanager
def _corrupt_as_archive_error(name: str) -> Iterator[None]:
    """A member whose compressed bytes are damaged (bad CRC, broken deflate stream) as one line."""
    try:
        yield
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
        raise ArchiveError(f"member {name!a} is corrupt ({str(exc)[:200]})") from None


def read_archive(path: Path, known: frozenset[str], limits: Limits = DEFAULT_LIMITS) -> Members:
    """Open the archive (a regular file only: a link to ``/dev/zero`` or a FIFO is refused before
    a byte is read), check its directory, then read its small JSON members (streaming)."""
    try:
        f = open_regular(path)
    except InputFileError as exc:
        raise ArchiveError(str(exc).removeprefix(f"{path}: ")) from None
    try:
        z = zipfile.ZipFile(f)
        infos = z.infolist()
        check_directory(infos, known, limits)
        lazy = {i.filename: i for i in infos if i.filename not in known or i.filename == SAMPLES_MEMBER}
        held = {}
        for info in infos:
            if info.filename not in lazy:
                with _corrupt_as_archive_error(info.filename):
                    held[info.filename] = read_member(z, info)
    except BaseException:
        f.close()
        raise
    return Members(z, held, lazy, limits, f)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def json_depth(value: Any) -> int:
    """Nesting depth of parsed JSON (a scalar is 0, ``[]`` is 1), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            deepest = max(deepest, depth + 1)
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            deepest = max(deepest, depth + 1)
            stack.extend((v, depth + 1) for v in item)
    return deepest


def load_json(data: bytes, what: str, limits: Limits = DEFAULT_LIMITS) -> Any:
    """Strict JSON: UTF-8, no NaN/Infinity, at most ``limits.max_json_depth`` levels deep."""
    try:
        value = json.loads(data.decode("utf-8"), parse_constant=_refuse_constant)
    except RecursionError:
        raise ArchiveError(f"{what} is nested deeper than {limits.max_json_depth} levels") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise ArchiveError(f"{what} is not JSON ({str(exc)[:200]})") from None
    if json_depth(value) > limits.max_json_depth:
        raise ArchiveError(f"{what} is nested deeper than {limits.max_json_depth} levels")
    return value


def json_lines(data: bytes, what: str, limits: Limits = DEFAULT_LIMITS) -> Iterator[tuple[int, str]]:
    """(line number, text) of each non-blank line, refusing lines over the length cap."""
    return _lines(io.BytesIO(data), what, limits)


def _lines(stream: IO[bytes], what: str, limits: Limits) -> Iterator[tuple[int, str]]:
    number = 0
    while True:
        line = stream.readline(limits.max_line_bytes + 1)
        if not line:
            return
        number += 1
        if len(line) > limits.max_line_bytes:
            raise ArchiveError(f"{what} line {number} is longer than {limits.max_line_bytes} bytes")
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            raise ArchiveError(f"{what} line {number} is not UTF-8") from None
        if text.strip():
            yield number, text
