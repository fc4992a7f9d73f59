"""Durable, content-addressed stage cache: a killed run resumes without repeating finished calls.

Three pieces, all keyed by content (DESIGN "Records, cache, resume"):

``fingerprint``
    sha256 of the canonical JSON of a request description (role, backend, model id/revision,
    prompt-template hash, input hashes including image refs, decoding parameters, seed, attempt
    number). Put into it exactly what changes the output, never timeouts or concurrency.
``StageCache``
    ``fingerprint -> JSON dict`` in SQLite (WAL journal), one row per finished stage call,
    committed as soon as it is written.
``ImageStore``
    PNG files named by the image's id (:func:`image_id`: sha256 of the decoded pixels and the
    ``edct_`` text metadata, never of the PNG encoding), written atomically.

Only successful results are cached. Errors, refusals, moderation blocks and unparseable
outputs must *not* be put: a resumed run has to retry them. That rule is the caller's (the
driver's) job; this module cannot tell a refusal from an answer.

Durability contract: an entry whose ``put`` returned survives a SIGKILL of the process at any
later moment. Power loss and OS crashes are out of scope by default (see ``StageCache``).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import re
import sqlite3
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from PIL import Image
from PIL.PngImagePlugin import PngInfo

from edct_task.core.canonical import canonical_json, json_text
from edct_task.core.errors import UserError
from edct_task.engine.files import atomic_write

log = logging.getLogger(__name__)

__all__ = [
    "CACHE_SCHEMA_VERSION",
    "IMAGE_META_PREFIX",
    "PNG_COMPRESS_LEVEL",
    "CacheEntry",
    "CacheSchemaError",
    "ImageStore",
    "StageCache",
    "fingerprint",
    "image_id",
]

IMAGE_META_PREFIX = "edct_"
"""Image ``info`` keys with this prefix (and str values) are kept in stored PNGs as text chunks."""

PNG_COMPRESS_LEVEL = 1
"""zlib level of the PNG files the image store writes: a size/speed trade-off only (image ids
are computed from the decoded pixels, so neither this level nor the zlib build changes them)."""

CACHE_SCHEMA_VERSION = 2
"""Version of a cache folder (``PRAGMA user_version`` of ``stages.sqlite``).

1: image refs were the sha256 of the encoded PNG (so a Pillow/zlib upgrade changed them).
2: image refs are :func:`image_id` of the decoded pixels. Every stage key holds image refs, so
no version-1 entry can be found by version-2 code: such a folder is refused with
:class:`CacheSchemaError` instead of being silently recomputed."""

_IMAGE_ID_DOMAIN = b"edct-bench image id v2\n"
_IMAGE_REF_ATTR = "_edct_image_ref"
_REF_RE = re.compile(r"[0-9a-f]{64}")
_PNG_KEYWORD_MAX = 79  # PNG spec: tEXt keywords are 1-79 latin-1 characters


# --------------------------------------------------------------------------- keys (core.canonical)


def _json_text(value: Mapping[str, Any], name: str, *, sort_keys: bool) -> str:
    if not isinstance(value, Mapping):
        raise TypeError(f"{name} must be a mapping (a JSON object); got {type(value).__name__}")
    return json_text(value, name, sort_keys=sort_keys)


def fingerprint(payload: Mapping[str, Any]) -> str:
    """sha256 hex digest of :func:`canonical_json` of ``payload`` (UTF-8): a stage-cache key.

    Two payloads have the same fingerprint exactly when they are equal as JSON, whatever the
    order of their keys. Raises like :func:`canonical_json` (errors name ``payload[...]``), and
    ``TypeError`` if ``payload`` is not a mapping.
    """
    return hashlib.sha256(_json_text(payload, "payload", sort_keys=True).encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- stage cache


class CacheSchemaError(UserError, RuntimeError):
    """A cache folder was written with another :data:`CACHE_SCHEMA_VERSION`; the message says what to do.

    A user error (the CLI exits 2 with the message): nothing in the folder is read or changed.
    """

    prefix = "cache error: "

    def __init__(self, root: Path, version: int) -> None:
        self.root = root
        self.version = version
        if version == 1:
            why = (
                "it was written by an older edct-bench that named images by their PNG bytes; this "
                "version names them by their pixels, so none of its entries can be found again"
            )
        else:
            why = f"this edct-bench reads version {CACHE_SCHEMA_VERSION}"
        super().__init__(
            f"cache folder {root} has schema version {version} ({why}). Delete the folder to "
            "rebuild it, or set cache_dir to a new folder"
        )


@dataclass(frozen=True)
class CacheEntry:
    """One stored stage result, with its bookkeeping."""

    key: str
    """The fingerprint the result is stored under."""
    stage: str
    """The stage that produced it (e.g. ``"baseline"``, ``"judge"``); used by ``counts()``."""
    value: dict[str, Any]
    """The result as decoded JSON (tuples written by the caller come back as lists)."""
    meta: dict[str, Any] | None
    """Optional caller bookkeeping (e.g. the fingerprint payload, model id, token counts)."""
    created: float
    """Unix time of the (last) ``put``."""


class StageCache:
    """Durable ``key -> JSON dict`` store for finished stage calls, in ``root/stages.sqlite``.

    Each :meth:`put` is its own committed transaction: once it returns, the entry survives a
    crash or SIGKILL of the process. Safe to share between the threads of a driver's pool (one
    connection guarded by a lock; statements take microseconds next to the model calls they
    save), and between processes on one machine (SQLite file locks, 30 s busy timeout). Not for
    network file systems, where SQLite's WAL mode does not work.

    Parameters
    ----------
    root : Path
        Folder of the cache; created if missing.
    synchronous : {"NORMAL", "FULL"}, optional
        SQLite ``PRAGMA synchronous``. ``"NORMAL"`` (default) is enough for the contract above:
        in WAL mode a commit has been *written* to the WAL file before ``put`` returns, and data
        written to a file lives in the kernel's page cache, which a process kill does not touch;
        the next open replays the WAL. What NORMAL gives up is only the fsync per commit, i.e.
        the last commits may be lost on power loss or an OS crash (the database itself stays
        consistent). ``"FULL"`` fsyncs the WAL on every commit to survive power loss, at the
        cost of one fsync per ``put``.

    Notes
    -----
    Never ``put`` an error, refusal or unparseable output: a resumed run must retry those.
    A database SQLite cannot read (``PRAGMA quick_check`` at open) is moved aside to
    ``stages.sqlite.damaged-<time>-<pid>`` with one warning and the cache starts empty: it holds
    nothing that cannot be recomputed. An entry that is not JSON is a miss (one warning).
    ``put`` on an existing key replaces the entry (last write wins).
    """

    def __init__(self, root: Path | str, *, synchronous: Literal["NORMAL", "FULL"] = "NORMAL") -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise ValueError(f"synchronous must be 'NORMAL' or 'FULL'; got {synchronous!r}")
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.path = self.root / "stages.sqlite"
        self._lock = threading.Lock()
        self._warned = False
        try:
            conn = self._open(synchronous)
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError):  # locked, unreadable folder: not damage
                raise
            moved = _move_aside(self.path)
            log.warning(
                "stage cache %s is damaged (%s); moved it aside to %s and starting from an empty cache "
                "(finished calls are recomputed)",
                self.path,
                exc,
                moved.name,
            )
            conn = self._open(synchronous)
        self._conn: sqlite3.Connection | None = conn

    def _open(self, synchronous: str) -> sqlite3.Connection:
        """Connect, check the schema version and that the file is a sound SQLite database
        (``PRAGMA quick_check``), create the table. ``sqlite3.DatabaseError`` for a damaged file."""
        conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
        try:
            # The version is checked before anything is written: a refused folder stays as it was.
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, CACHE_SCHEMA_VERSION):
                raise CacheSchemaError(self.root, version)
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise RuntimeError(f"{self.path}: could not switch SQLite to WAL mode (got {mode!r})")
            problems = [row[0] for row in conn.execute("PRAGMA quick_check").fetchall()]
            if problems != ["ok"]:
                raise sqlite3.DatabaseError(f"quick_check: {'; '.join(map(str, problems[:3]))}")
            conn.execute(f"PRAGMA synchronous={synchronous}")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS entries ("
                " key TEXT PRIMARY KEY,"
                " stage TEXT NOT NULL,"
                " value TEXT NOT NULL,"
                " meta TEXT,"
                " created REAL NOT NULL)"
            )
            conn.execute("CREATE INDEX IF NOT EXISTS entries_stage ON entries(stage)")
            if version == 0:
                conn.execute(f"PRAGMA user_version={CACHE_SCHEMA_VERSION}")
        except BaseException:
            conn.close()
            raise
        return conn

    # -- internals

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError(f"StageCache({self.root}) is closed")
        return self._conn

    @staticmethod
    def _check_key(key: object) -> str:
        if not isinstance(key, str) or not key:
            raise TypeError(f"key must be a non-empty str (a fingerprint); got {key!r}")
        return key

    # -- public API

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored value for ``key``, or ``None`` on a miss."""
        entry = self.entry(key)
        return None if entry is None else entry.value

    def entry(self, key: str) -> CacheEntry | None:
        """The stored entry for ``key`` with its stage, meta and time, or ``None`` on a miss."""
        key = self._check_key(key)
        try:
            with self._lock:
                row = (
                    self._connection()
                    .execute("SELECT stage, value, meta, created FROM entries WHERE key = ?", (key,))
                    .fetchone()
                )
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError):
                raise
            self._warn_once(
                f"stage cache {self.path} has a damaged page ({exc}); its entries there are recomputed"
            )
            return None
        if row is None:
            return None
        stage, value, meta, created = row
        try:
            decoded = json.loads(value)
            meta_value = None if meta is None else json.loads(meta)
            if not isinstance(decoded, dict):
                raise ValueError(f"a {type(decoded).__name__}, not an object")
        except (TypeError, ValueError) as exc:
            self._warn_once(f"stage cache {self.path}: entry {key[:12]}… is not JSON ({exc}); recomputed")
            return None
        return CacheEntry(key, stage, decoded, meta_value, created)

    def _warn_once(self, message: str) -> None:
        if not self._warned:
            self._warned = True
            log.warning(message)

    def put(
        self,
        key: str,
        value: Mapping[str, Any],
        *,
        stage: str,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        """Store ``value`` under ``key`` and commit before returning.

        ``value`` and ``meta`` must be plain JSON mappings (same rules as
        :func:`canonical_json`; their key order is kept). They are validated before anything is
        written, so a bad value leaves the cache untouched. Never store errors or refusals.

        Raises
        ------
        TypeError
            If ``key`` or ``stage`` is not a non-empty str, or ``value``/``meta`` is not JSON.
        ValueError
            If ``value``/``meta`` holds NaN or infinity.
        """
        key = self._check_key(key)
        if not isinstance(stage, str) or not stage:
            raise TypeError(f"stage must be a non-empty str; got {stage!r}")
        value_text = _json_text(value, "value", sort_keys=False)
        meta_text = None if meta is None else _json_text(meta, "meta", sort_keys=False)
        try:
            with self._lock:
                # Autocommit mode: this single statement is one committed transaction.
                self._connection().execute(
                    "INSERT OR REPLACE INTO entries (key, stage, value, meta, created) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (key, stage, value_text, meta_text, time.time()),
                )
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError):  # a full disk, a lock: the caller decides
                raise
            # the file was damaged while this run had it open: the result is used, not kept
            self._warn_once(f"stage cache {self.path} is damaged ({exc}); new results are not cached")

    def counts(self) -> dict[str, int]:
        """Number of stored entries per stage, sorted by stage name."""
        with self._lock:
            rows = (
                self._connection()
                .execute("SELECT stage, COUNT(*) FROM entries GROUP BY stage ORDER BY stage")
                .fetchall()
            )
        return {stage: int(n) for stage, n in rows}

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str) or not key:
            return False
        with self._lock:
            row = self._connection().execute("SELECT 1 FROM entries WHERE key = ?", (key,)).fetchone()
        return row is not None

    def __len__(self) -> int:
        with self._lock:
            return int(self._connection().execute("SELECT COUNT(*) FROM entries").fetchone()[0])

    def close(self) -> None:
        """Close the database (idempotent). Later calls raise ``RuntimeError``."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> StageCache:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._conn is None else "open"
        return f"StageCache({str(self.root)!r}, {state})"


def _move_aside(path: Path) -> Path:
    """Rename a damaged database (and its ``-wal`` / ``-shm`` files) to ``<name>.damaged-<time>``."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    target = path.with_name(f"{path.name}.damaged-{stamp}-{os.getpid()}")
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.replace(f"{path}{suffix}", f"{target}{suffix}")
    return target


# --------------------------------------------------------------------------- image store


def _edct_text(image: Image.Image) -> dict[str, str]:
    """The image's ``edct_`` text metadata (str values only), validated as PNG text keywords."""
    text: dict[str, str] = {}
    for k, v in image.info.items():
        if isinstance(k, str) and k.startswith(IMAGE_META_PREFIX) and isinstance(v, str):
            if len(k) > _PNG_KEYWORD_MAX:
                raise ValueError(f"image info key {k!r} is longer than the PNG limit of 79 characters")
            try:
                k.encode("latin-1")
            except UnicodeEncodeError:
                raise ValueError(f"image info key {k!r} must be latin-1 text (a PNG keyword)") from None
            text[k] = v
    return text


@dataclass(frozen=True)
class _Content:
    """What an image id covers: RGB pixels (as raw bytes), size, and the ``edct_`` text."""

    size: tuple[int, int]
    pixels: bytes
    text: dict[str, str]

    @classmethod
    def of(cls, image: Image.Image) -> _Content:
        if not isinstance(image, Image.Image):
            raise TypeError(f"image must be a PIL.Image.Image; got {type(image).__name__}")
        text = _edct_text(image)
        rgb = image if image.mode == "RGB" else image.convert("RGB")  # alpha dropped, not composited
        return cls(rgb.size, rgb.tobytes(), text)

    @cached_property
    def ref(self) -> str:
        header = canonical_json({"mode": "RGB", "size": list(self.size), "text": self.text}).encode("utf-8")
        h = hashlib.sha256(_IMAGE_ID_DOMAIN)
        h.update(len(header).to_bytes(8, "big"))
        h.update(header)
        h.update(self.pixels)
        return h.hexdigest()

    def png(self) -> bytes:
        # A fresh image carries no info, so nothing else (ICC profile, EXIF, dpi, transparency)
        # reaches the file.
        bare = Image.frombytes("RGB", self.size, self.pixels)
        pnginfo = PngInfo()
        for k in sorted(self.text):
            pnginfo.add_text(k, self.text[k])  # non-latin-1 values become iTXt (UTF-8) automatically
        buf = io.BytesIO()
        bare.save(buf, format="PNG", compress_level=PNG_COMPRESS_LEVEL, optimize=False, pnginfo=pnginfo)
        return buf.getvalue()


def _png_problem(path: Path) -> str | None:
    """Why the file at ``path`` is not a complete, uncorrupted PNG (chunk CRCs), or None."""
    try:
        with Image.open(path) as f:
            if f.format != "PNG":
                return f"a {f.format} file, not a PNG"
            f.verify()
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        return f"{type(exc).__name__}: {str(exc)[:80]}"
    return None


def _remember_ref(image: Image.Image, ref: str) -> None:
    """Attach ``ref`` to ``image`` so that it is not hashed again while it is unchanged.

    The image is made read-only, which in Pillow means copy-on-write: every Pillow operation
    that changes pixels in place (``paste``, ``putpixel``, ``ImageDraw``…) first copies the
    pixel buffer and clears the flag, and writing through ``image.load()`` raises. The
    remembered ref is trusted only while the image is still read-only, holds the same pixel
    buffer and has the same ``edct_`` text (``info`` is a plain dict anyone may change). Only
    the buffer's ``id`` is kept, not the buffer, so a changed image frees its old pixels.
    """
    image.readonly = 1
    setattr(image, _IMAGE_REF_ATTR, (ref, id(image.im), _edct_text(image)))


def _remembered_ref(image: Image.Image) -> str | None:
    tag = getattr(image, _IMAGE_REF_ATTR, None)
    if tag is None:
        return None
    ref, core, text = tag
    try:
        unchanged = bool(image.readonly) and id(image.im) == core and _edct_text(image) == text
    except ValueError:  # a closed image, or edct_ text that is no longer a valid PNG keyword
        return None
    return ref if unchanged else None


def image_id(image: Image.Image) -> str:
    """The content id (ref) of ``image``: what the image store names it by.

    sha256 of a versioned header (mode ``"RGB"``, width and height, and the image's ``info``
    entries whose key starts with ``"edct_"`` and whose value is ``str``, as canonical JSON)
    followed by the raw RGB pixel bytes. Non-RGB images are converted to RGB first (alpha is
    dropped, not composited); all other ``info`` is ignored. So the id depends on what a
    consumer decodes, never on how it was encoded: the same pixels saved at any PNG compression
    level, by any zlib, get one id. The ``edct_`` text is covered because the calibration world
    carries its scene graph there: two scenes with identical pixels are different inputs.

    An image returned by :meth:`ImageStore.get` carries its id and is not hashed again while it
    is unchanged (see :meth:`ImageStore.get`).

    Raises
    ------
    TypeError
        If ``image`` is not a PIL image.
    ValueError
        If an ``edct_`` key cannot be a PNG text keyword (longer than 79 or not latin-1).
    """
    return _remembered_ref(image) or _Content.of(image).ref


class ImageStore:
    """Content-addressed images at ``root/images/<aa>/<ref>.png``, ``ref`` = :func:`image_id`.

    The file is a PNG (lossless; compressed at :data:`PNG_COMPRESS_LEVEL`, no timestamps) of
    the RGB pixels with the image's ``edct_`` text entries as PNG text chunks sorted by key, so
    decoding it gives back exactly the content the ref names. Because the ref is computed from
    the pixels and not from the encoded bytes, it is stable across processes, runs, Pillow and
    zlib versions, and compression levels.

    Files are written to a temporary file in the target folder and moved into place with
    ``os.replace``, so a reader never sees a partial PNG; an already-present ref is not
    rewritten (``put`` is idempotent). Safe for concurrent threads and processes.
    """

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.images_dir = self.root / "images"
        self.images_dir.mkdir(parents=True, exist_ok=True)
        self._intact: set[str] = set()
        """Refs whose file this process wrote or verified (a set: safe to share between threads)."""

    def path(self, ref: str) -> Path:
        """Where the PNG of ``ref`` lives (whether or not it exists).

        Raises
        ------
        ValueError
            If ``ref`` is not 64 lowercase hex characters.
        """
        if not isinstance(ref, str) or not _REF_RE.fullmatch(ref):
            raise ValueError(f"image ref must be 64 lowercase hex characters (a sha256); got {ref!r}")
        return self.images_dir / ref[:2] / f"{ref}.png"

    def has(self, ref: str) -> bool:
        """Whether ``ref`` is stored; ``False`` for a malformed ref."""
        try:
            return self.path(ref).is_file()
        except ValueError:
            return False

    def put(self, image: Image.Image) -> str:
        """Store ``image`` and return its ref (:func:`image_id`).

        Costs one pass over the pixels (copy + sha256); the PNG is encoded only when the ref is
        not stored yet. An image obtained from :meth:`get` of this store and not changed since
        is neither hashed nor encoded again. ``image`` itself is not modified.

        Raises
        ------
        TypeError
            If ``image`` is not a PIL image.
        ValueError
            If an ``edct_`` key cannot be a PNG text keyword.
        """
        ref = _remembered_ref(image) if isinstance(image, Image.Image) else None
        if ref is not None and ref in self._intact and self.has(ref):
            return ref
        content = _Content.of(image)
        self._write(content)
        return content.ref

    def put_and_get(self, image: Image.Image) -> tuple[str, Image.Image]:
        """:meth:`put`, and the image as :meth:`get` of its ref returns it, without reading the file.

        For a producer that hands its image on (an editor's output goes to verification next):
        the second image is RGB, carries only the ``edct_`` text, is read-only and knows its
        ref, exactly like one read back from the store. Raises like :meth:`put`.
        """
        content = _Content.of(image)
        self._write(content)
        ref = content.ref
        out = Image.frombytes("RGB", content.size, content.pixels)
        out.info = {k: v for k, v in content.text.items()}  # PIL's info: dict[str | tuple[int, int], Any]
        _remember_ref(out, ref)
        return ref, out

    def _write(self, content: _Content) -> None:
        """The PNG of ``content`` at its ref's path, atomically, unless it is there already (and
        intact: a damaged file is replaced)."""
        ref = content.ref
        target = self.path(ref)
        if ref in self._intact and target.is_file():
            return
        if target.is_file():
            # A file already there is checked cheaply (every PNG chunk's CRC, no pixel decoding):
            # a truncated or overwritten file is written again. The full check against the id
            # happens when it is read (``get``).
            problem = _png_problem(target)
            if problem is None:
                return
            log.warning("image store: %s is damaged (%s); writing it again", target, problem)
            self._intact.discard(ref)
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target, content.png())
        self._intact.add(ref)

    def intact(self, ref: str) -> bool:
        """Whether the file of ``ref`` exists and decodes to the content ``ref`` names.

        A file that does not (truncated, overwritten, another image) is removed, so that whoever
        needs it recomputes it. Each ref is decoded once per process (a file this store wrote or
        already checked is only looked up); ``False`` for a malformed ref.
        """
        if ref in self._intact and self.has(ref):
            return True
        try:
            self.get(ref)
        except KeyError:
            return False
        return True

    def _damaged(self, ref: str, path: Path, why: str) -> KeyError:
        self._intact.discard(ref)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return KeyError(f"image {ref} in {self.images_dir} was damaged ({why}) and has been removed")

    def get(self, ref: str) -> Image.Image:
        """Load the image of ``ref`` as RGB, with its ``edct_`` text entries in ``.info``.

        The image is returned read-only and carrying its ref, so passing it on to :meth:`put`
        or :func:`image_id` costs nothing. Read-only is Pillow's copy-on-write: ``paste``,
        ``putpixel``, ``ImageDraw`` and the like copy the pixels before changing them (and the
        image then gets a new id); writing through ``image.load()`` raises, so call
        ``image.copy()`` first. This also keeps an image shared between requests (the
        driver's decoded-image cache) from being changed under another request.

        The file is checked against ``ref`` (the id of what it decodes to) the first time this
        store reads it; a damaged file is removed (one warning) and ``KeyError`` raised, so the
        caller recomputes it.

        Raises
        ------
        KeyError
            If ``ref`` is malformed, not stored, or its file was damaged.
        """
        try:
            p = self.path(ref)
        except ValueError as e:
            raise KeyError(f"no image with ref {ref!r}: {e}") from None
        try:
            with Image.open(p) as f:
                f.load()
                meta: dict[str | tuple[int, int], Any] = {
                    k: str(v)
                    for k, v in f.info.items()
                    if isinstance(k, str) and k.startswith(IMAGE_META_PREFIX) and isinstance(v, str)
                }
                out: Image.Image = f.convert("RGB")
        except FileNotFoundError:
            self._intact.discard(ref)
            raise KeyError(f"no image with ref {ref!r} in {self.images_dir}") from None
        except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
            raise self._damaged(ref, p, f"not a decodable PNG: {type(exc).__name__}") from None
        out.info = meta
        if ref not in self._intact:
            try:
                found = _Content.of(out).ref
            except ValueError as exc:
                raise self._damaged(ref, p, str(exc)) from None
            if found != ref:
                raise self._damaged(ref, p, f"it holds image {found[:12]}…") from None
            self._intact.add(ref)
        _remember_ref(out, ref)
        return out

    def __contains__(self, ref: object) -> bool:
        return isinstance(ref, str) and self.has(ref)

    def __repr__(self) -> str:
        return f"ImageStore({str(self.root)!r})"
