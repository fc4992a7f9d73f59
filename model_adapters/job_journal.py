"""A paid job's outcome, looked up before it is paid for again.

A paid editor (BFL) submits a job, is told its id, then polls it. When the process dies or a reply
is lost after the submit was accepted (a dropped poll, a crash, Ctrl-C, a killed shard), the job
was billed; a rerun that submits the same request again pays twice. So the submit's outcome is
written down the moment it is known, one JSON line per request in the journal file, keyed by the
SHA-256 of the request (model and body, the input image included):

``submitted``
    the job's id and polling URL: a rerun polls that job instead of submitting (a job BFL no
    longer knows, ``Task not found``, is submitted again as the adapter's ``job_attempts`` allow);
``uncertain``
    the submit may have been accepted but its reply never came (``SubmitUncertain``): the job id
    is unknown, so a rerun does not re-send it either, and says how to pay for it again (remove
    the line from the journal);
``lost``
    BFL said the job is gone: the next run submits it.

The latest line of a key wins. The journal is a file this package writes, read bounded; a line it
cannot parse is skipped.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

MAX_JOURNAL_BYTES = 64 << 20


def request_key(model: str, body: Mapping[str, Any]) -> str:
    """The SHA-256 of a paid request: its model and its body, canonically serialised."""
    text = json.dumps({"model": model, "body": body}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class JobJournal:
    """Append-only journal of paid jobs (the module docstring), safe across threads."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._entries: dict[str, dict[str, Any]] = {}
        if self.path.is_file() and not self.path.is_symlink():
            with self.path.open("rb") as f:
                data = f.read(MAX_JOURNAL_BYTES)
            for line in data.decode("utf-8", "replace").split("\n"):
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if isinstance(entry, dict) and isinstance(entry.get("key"), str):
                    self._entries[entry["key"]] = entry

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            return self._entries.get(key)

    def put(self, key: str, status: str, **fields: Any) -> None:
        """Record ``status`` for ``key``, on disk (flushed and synced) before this returns."""
        entry = {"key": key, "status": status, **fields}
        line = json.dumps(entry, sort_keys=True) + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(
                self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0), 0o600
            )
            try:
                os.write(fd, line.encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)
            self._entries[key] = entry
