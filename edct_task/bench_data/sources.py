"""What every source reader returns: the candidates that passed its rules, and the rule counts."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edct_task.bench_data.format import BenchDataError, Candidate
from edct_task.core.inputs import InputFileError, read_regular


@dataclass
class RuleTally:
    """A selection rule of one source and how many items it removed."""

    name: str
    description: str
    removed: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "removed": self.removed}


@dataclass
class SourceScan:
    """A source read in its published layout: candidates, rules in the order applied, files read."""

    domain: str
    source: str
    files: dict[str, Path]
    """Role → source file (hashed into the manifest), e.g. ``questions``, ``annotations``."""
    folders: dict[str, Path]
    """Role → image folder (recorded, not hashed)."""
    rules: list[RuleTally]
    items_read: int = 0
    candidates: list[Candidate] = field(default_factory=list)
    removed_by: dict[str, str] = field(default_factory=dict)
    """Benchmark id → name of the rule that removed it (explains an unusable ``--ids`` entry)."""
    provenance: dict[str, Any] | None = None
    """Read through ``--<source>-hub``: the Hub id (or folder), revision, commit, config and split."""

    def rule(self, name: str) -> RuleTally:
        for r in self.rules:
            if r.name == name:
                return r
        raise KeyError(name)

    def remove(self, item_id: str, rule: str) -> None:
        self.rule(rule).removed += 1
        self.removed_by[item_id] = rule


MAX_SOURCE_JSON_BYTES = 1 << 30
"""Largest source JSON read (DriveLM's and OK-VQA's published files are a few hundred MB)."""


def load_json(path: Path, layout: str) -> Any:
    """A JSON file (a regular file of at most :data:`MAX_SOURCE_JSON_BYTES`); a parse error, bad
    bytes, a number of thousands of digits or nesting too deep to parse names the file and the
    layout it should have."""
    try:
        data = read_regular(path, MAX_SOURCE_JSON_BYTES)
        return json.loads(data.decode("utf-8-sig"))
    except InputFileError as exc:
        raise BenchDataError(str(exc)) from None
    except RecursionError:
        raise BenchDataError(f"{path}: nested too deeply to be {layout}") from None
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError, a 5,000-digit integer
        first = str(exc).splitlines()[0][:200]
        raise BenchDataError(f"{path}: not valid JSON, expected {layout} ({first})") from None
