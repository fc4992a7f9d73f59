"""Human labels of interventions: the record, its validation, and the append-only JSONL file.

One line per label given, for one annotator per file::

    {"intervention": "<sample_id>#<step>", "annotator": "alice", "edit_valid": "valid",
     "ac": 1, "ef": 0, "time": "2026-12-01T09:30:00.123456+00:00"}

``edit_valid`` is ``valid``, ``invalid`` or ``not_assessable``; ``ac`` and ``ef`` are 0 or 1 and
may be given only when the edit is valid (``null`` otherwise, or while not yet given). The file is
only ever appended to; every line is flushed and fsynced before the write returns. When an
intervention has several lines the last one wins, so correcting a label is appending a new line.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)

from edct_task.core.errors import UserError
from edct_task.core.inputs import InputFileError, read_regular

__all__ = [
    "ANNOTATOR_RE",
    "EditValidity",
    "Label",
    "LabelChoice",
    "LabelFileError",
    "LabelLog",
    "check_annotator",
    "read_label_files",
]

EditValidity = Literal["valid", "invalid", "not_assessable"]
ANNOTATOR_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


class LabelFileError(UserError, ValueError):
    """A label file that cannot be read: the message names the file, the line and what to do."""


def check_annotator(name: str) -> str:
    """``name`` when it is a usable annotator name (letters, digits, ``_.-``; ≤ 64 characters)."""
    if not isinstance(name, str) or not ANNOTATOR_RE.fullmatch(name):
        raise ValueError(
            f"annotator name {name!r} is not allowed: use 1-64 letters, digits, '_', '.' or '-', "
            "starting with a letter or digit"
        )
    return name


class LabelChoice(BaseModel):
    """What an annotator chose for one intervention (the body the annotation page posts)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    intervention: str = Field(description="Intervention id '<sample_id>#<step>'.")
    edit_valid: EditValidity = Field(description="Is the edit a valid, local realisation of the instruction?")
    ac: StrictInt | None = Field(
        default=None, description="Answer consistency, 0 or 1; only when the edit is valid."
    )
    ef: StrictInt | None = Field(
        default=None, description="Explanation faithfulness, 0 or 1; only when the edit is valid."
    )

    @field_validator("ac", "ef")
    @classmethod
    def _binary(cls, value: int | None) -> int | None:
        if value is not None and value not in (0, 1):
            raise ValueError("must be 0, 1 or null")
        return value

    @model_validator(mode="after")
    def _only_when_valid(self) -> LabelChoice:
        if self.edit_valid != "valid" and (self.ac is not None or self.ef is not None):
            raise ValueError(
                f"ac and ef can only be given when edit_valid is 'valid' (got edit_valid={self.edit_valid!r})"
            )
        return self

    @property
    def complete(self) -> bool:
        """Nothing more to label: the edit is not valid, or it is and AC and EF are both given."""
        return self.edit_valid != "valid" or (self.ac is not None and self.ef is not None)

    @property
    def ccs(self) -> int | None:
        """The annotator's CCS = AC · EF; None unless the edit is valid and both are given."""
        if self.edit_valid != "valid" or self.ac is None or self.ef is None:
            return None
        return self.ac * self.ef


class Label(LabelChoice):
    """One line of a label file."""

    annotator: str = Field(description="Who gave the label.")
    time: datetime = Field(description="When the label was given (ISO-8601, UTC).")

    @field_validator("annotator")
    @classmethod
    def _annotator(cls, value: str) -> str:
        return check_annotator(value)

    def line(self) -> str:
        """The JSONL line (with its newline), keys in the documented order."""
        data = {
            "intervention": self.intervention,
            "annotator": self.annotator,
            "edit_valid": self.edit_valid,
            "ac": self.ac,
            "ef": self.ef,
            "time": self.time.isoformat(),
        }
        return json.dumps(data, ensure_ascii=False) + "\n"


def _error_text(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(x) for x in err["loc"]) or "line"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


MAX_LABEL_FILE_BYTES = 64 << 20
"""Largest label file read (a label line is about 200 bytes: 300,000 labels fit)."""


def _read_labels(path: Path) -> bytes:
    """A label file's bytes: a regular file (not a link, FIFO or device) of at most 64 MiB."""
    try:
        return read_regular(path, MAX_LABEL_FILE_BYTES)
    except InputFileError as exc:
        raise LabelFileError(str(exc)) from None


def _utf8(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise LabelFileError(f"{path}:{line}: not UTF-8 text; fix or delete that line") from None


def parse_label_lines(path: Path, lines: Iterable[str]) -> list[Label]:
    """Every label of a file's lines (split at "\\n" only, never ``str.splitlines``), in order.

    Raises
    ------
    LabelFileError
        On a line that is not JSON or not a label, naming ``path`` and the line number.
    """
    labels = []
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            data = json.loads(text)
            json.dumps(data, ensure_ascii=False).encode("utf-8")  # lone surrogates (\ud800) refused
        except json.JSONDecodeError as exc:
            raise LabelFileError(
                f"{path}:{number}: not a JSON line ({exc.msg}); fix or delete that line"
            ) from None
        except (ValueError, RecursionError) as exc:  # a 5,000-digit number, deep nesting, bad text
            reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc).split(":")[0][:120]
            raise LabelFileError(
                f"{path}:{number}: not a label line ({reason}); fix or delete that line"
            ) from None
        try:
            labels.append(Label.model_validate(data))
        except ValidationError as exc:
            raise LabelFileError(
                f"{path}:{number}: not a label ({_error_text(exc)}); "
                "a line is {intervention, annotator, edit_valid, ac, ef, time}"
            ) from None
    return labels


def read_label_files(paths: Iterable[Path]) -> dict[str, dict[str, Label]]:
    """The labels of several files: annotator → intervention → its last label.

    Raises
    ------
    LabelFileError
        On a missing or unreadable file, a malformed line, or one annotator's labels in two files
        (the message names them).
    """
    out: dict[str, dict[str, Label]] = {}
    owner: dict[str, Path] = {}
    for path in paths:
        path = Path(path)
        if not path.exists() and not path.is_symlink():
            raise LabelFileError(f"{path}: no such label file")
        text = _utf8(path, _read_labels(path))
        for label in parse_label_lines(path, text.split("\n")):
            first = owner.setdefault(label.annotator, path)
            if first != path:
                raise LabelFileError(
                    f"{path}: annotator {label.annotator!r} also labelled in {first}; one file per "
                    "annotator (concatenate the two files if they are one person's labels)"
                )
            out.setdefault(label.annotator, {})[label.intervention] = label
    return out


class LabelLog:
    """One annotator's append-only label file.

    Parameters
    ----------
    path : Path
        The JSONL file (created with its folder on the first label).
    annotator : str
        Whose labels these are; a file holding another annotator's lines is refused.
    """

    def __init__(self, path: Path, annotator: str) -> None:
        self.path = Path(path)
        self.annotator = check_annotator(annotator)
        self._lock = threading.Lock()
        self._latest: dict[str, Label] = {}
        if self.path.exists():
            data = _read_labels(self.path)
            for label in parse_label_lines(self.path, _utf8(self.path, data).split("\n")):
                if label.annotator != self.annotator:
                    raise LabelFileError(
                        f"{self.path} holds labels of annotator {label.annotator!r}, not {self.annotator!r}; "
                        "give each annotator a file of their own (--labels)"
                    )
                self._latest[label.intervention] = label

    @property
    def latest(self) -> dict[str, Label]:
        """Intervention → its last label."""
        with self._lock:
            return dict(self._latest)

    def append(self, choice: LabelChoice, *, now: datetime | None = None) -> Label:
        """Write one label line, flushed and fsynced before returning; it becomes the latest."""
        label = Label(**choice.model_dump(), annotator=self.annotator, time=now or datetime.now(timezone.utc))
        line = label.line().encode("utf-8")
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
            try:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    line = b"\n" + line  # a file edited by hand without a final newline
                view = memoryview(line)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
                os.fsync(fd)
            finally:
                os.close(fd)
            self._latest[label.intervention] = label
        return label
