"""One registration record per EDCT-Bench domain, next to its reader (cf. ``verification.backends``).

A ``Domain`` says what a domain is called (``name``: the id prefix and the dataset's ``domain``
column; ``label``: its source dataset), how many items the paper's benchmark takes
(``default_count``), which local files it is built from (``inputs``: each one ``edct build-bench``
flag), where its Hub copy is (``hub``: the default id, extra options and the reader of that
layout), the reader of the local layout (``scan``) and the system prompt its questions are asked
under. Everything else derives from the record: the build's flags and help, ``--counts``, ``--ids``
prefixes, the manifest's system prompts, the lmms-eval task (``task``) and its ``process_docs``
hook (``hook``), and what ``edct run --tasks`` accepts.

The registry (``edct_task.bench_data.domains``) lists the repository's records and those of the
``edct_bench.domains`` entry-point group, for domains shipped outside the repository.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from edct_task.bench_data.format import BenchDataError

if TYPE_CHECKING:
    from edct_task.bench_data.sources import SourceScan

__all__ = ["TASK_PREFIX", "Domain", "Hub", "HubOption", "HubSource", "Input"]

NAME = re.compile(r"[a-z0-9][a-z0-9_]{0,31}")
"""A domain name: lower-case letters, digits and ``_`` (it is an id prefix, a flag and a task name)."""
TASK_PREFIX = "edct_bench_"
"""A domain's lmms-eval task is ``edct_bench_<name>``."""
HOOK_PREFIX = "docs_"
"""A domain's ``process_docs`` hook is ``edct_task.lmms.documents.docs_<name>``."""


@dataclass(frozen=True)
class HubSource:
    """A ``--<domain>-hub`` value: a Hub id or a local folder, the revision to read, and the
    domain's ``HubOption`` values (``{"config": "3dsr"}``)."""

    location: str
    revision: str | None = None
    options: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_folder(self) -> bool:
        return Path(self.location).is_dir()


@dataclass(frozen=True)
class Input:
    """One local file or folder a domain is built from: one ``edct build-bench`` flag."""

    name: str
    """The key its reader finds the path under (``questions``)."""
    flag: str
    """The ``edct build-bench`` flag that gives it (``--okvqa-questions``)."""
    help: str
    """What it is, for ``--help`` and for the message when it is missing."""
    kind: Literal["file", "folder"] = "file"
    required: bool = True
    """False when the reader decides (3DSRBench's image folder: only without inline images)."""

    def check(self, path: Path | None) -> Path | None:
        """The path, checked: given when required, and an existing file or folder."""
        if path is None:
            if self.required:
                raise BenchDataError(f"{self.flag} is required: {self.help}")
            return None
        path = Path(path)
        if self.kind == "file" and not path.is_file():
            raise BenchDataError(f"{path}: file not found ({self.flag}: {self.help})")
        if self.kind == "folder" and not path.is_dir():
            raise BenchDataError(f"{path}: folder not found ({self.flag}: {self.help})")
        return path


@dataclass(frozen=True)
class HubOption:
    """An option of a domain's Hub copy besides its id and revision (``--3dsr-config``)."""

    name: str
    default: str
    help: str


@dataclass(frozen=True)
class Hub:
    """Where a domain's data is on the Hugging Face Hub, and the reader of that layout."""

    repo: str
    """The Hub id most users read (``lmms-lab-encoder/OK-VQA``): in ``--help`` and messages."""
    help: str
    """What ``--<name>-hub`` takes (ids and folder layouts it reads)."""
    scan: str | Callable[[HubSource], SourceScan]
    """``"module:function"`` (imported when the domain is built) or the function: reads a
    ``HubSource`` (a Hub id or a folder laid out like the repository; its ``options`` hold every
    ``HubOption``, defaults filled in)."""
    options: tuple[HubOption, ...] = ()


@dataclass(frozen=True)
class Domain:
    """One domain's registration (the module docstring)."""

    name: str
    label: str
    """The source dataset (``OK-VQA``): the ``source`` of its rows, the ``--help`` group's title."""
    default_count: int
    """Items the paper's EDCT-Bench takes (``--counts`` default)."""
    inputs: tuple[Input, ...]
    scan: str | Callable[[Mapping[str, Path | None]], SourceScan]
    """The reader of the local layout: ``"module:function"`` or the function; it takes the paths
    by ``Input.name`` (checked by ``Input.check``) and returns the candidates and rule counts."""
    hub: Hub | None = None
    system_prompt: str = ""
    """Sent before each of its questions (the dataset's ``system_prompt`` column); ``""``: none."""
    description: str = field(default="", compare=False)
    """One sentence for ``--help`` (what the domain tests)."""

    def __post_init__(self) -> None:
        if not NAME.fullmatch(self.name):
            raise ValueError(
                f"domain {self.name!r}: a name is lower-case letters, digits and _ (at most 32), "
                "starting with a letter or digit"
            )
        if self.default_count < 0:
            raise ValueError(f"domain {self.name!r}: default_count must be >= 0")
        names = [i.name for i in self.inputs]
        if len(set(names)) != len(names):
            raise ValueError(f"domain {self.name!r}: two inputs share a name ({', '.join(names)})")

    @property
    def task(self) -> str:
        """Its lmms-eval task (and ``edct run --tasks`` name)."""
        return TASK_PREFIX + self.name

    @property
    def hook(self) -> str:
        """Its ``process_docs`` hook's name in ``edct_task.lmms.documents``."""
        return HOOK_PREFIX + self.name

    @property
    def hub_flag(self) -> str:
        return f"--{self.name}-hub"

    @property
    def revision_flag(self) -> str:
        return f"--{self.name}-revision"

    def option_flag(self, option: HubOption) -> str:
        return f"--{self.name}-{option.name.replace('_', '-')}"

    def load_scan(self) -> Callable[[Mapping[str, Path | None]], SourceScan]:
        return _load(self.scan) if isinstance(self.scan, str) else self.scan

    def load_hub_scan(self) -> Callable[[HubSource], SourceScan]:
        if self.hub is None:
            raise BenchDataError(f"{self.name} has no Hub copy: give its local files")
        return _load(self.hub.scan) if isinstance(self.hub.scan, str) else self.hub.scan

    def scan_local(self, paths: Mapping[str, Path | None]) -> SourceScan:
        """Its local files read by its reader; every input checked first, an unknown one refused."""
        unknown = sorted(set(paths) - {i.name for i in self.inputs})
        if unknown:
            known = ", ".join(i.name for i in self.inputs)
            raise BenchDataError(f"{self.name} takes no input(s) {', '.join(unknown)} (inputs: {known})")
        return self.load_scan()({i.name: i.check(paths.get(i.name)) for i in self.inputs})

    def scan_hub(self, source: HubSource) -> SourceScan:
        """Its Hub copy read by its reader, with every ``HubOption``'s default filled in."""
        options = {o.name: o.default for o in (self.hub.options if self.hub else ())}
        unknown = sorted(set(source.options) - set(options))
        if unknown:
            raise BenchDataError(
                f"{self.hub_flag} takes no option(s) {', '.join(unknown)} "
                f"(options: {', '.join(options) or 'none'})"
            )
        return self.load_hub_scan()(replace(source, options={**options, **source.options}))


def _load(ref: str) -> Any:
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)
