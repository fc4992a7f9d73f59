"""Reading a file somebody else made: only a regular file, never more than a cap, decoded strictly.

Every input folder the leaderboard, the Hub builders, the annotation tools and the research tools
read may hold anything: a symbolic link to ``/dev/zero`` (an endless read), a FIFO (a read that
never returns), a device, a 10 GB file, bytes that are not UTF-8, YAML whose aliases expand a
kilobyte into gigabytes. So an input is opened here and nowhere else:

- :func:`open_regular` opens a path without following a final symbolic link (``O_NOFOLLOW``) and
  without blocking on a FIFO (``O_NONBLOCK``), then refuses anything that is not a regular file by
  the descriptor's own ``fstat`` (no race between the check and the read);
- :func:`read_regular` reads at most ``max_bytes`` from it and refuses a longer file before
  decoding anything;
- :func:`load_yaml` parses YAML with PyYAML's safe loader, refusing a document whose aliases
  expand it beyond :data:`MAX_YAML_NODES` values (the "billion laughs": 1.1 KB of nested aliases
  cost 208 CPU-s in ``edct estimate``), counted on the composed graph before anything is built,
  and maps every parser error (a 5,000-digit integer, an impossible date, deep nesting) to one
  :class:`InputFileError` line naming the file and, where the parser knows it, the line.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import IO, Any

import yaml

from edct_task.core.errors import UserError

MiB = 1 << 20


class InputFileError(UserError, ValueError):
    """An input file that is not a regular file, is over its cap, or does not decode."""


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def regular_file(path: Path) -> bool:
    """Whether ``path`` itself (not what a link points at) is a regular file."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def open_regular(path: Path) -> IO[bytes]:
    """``path`` opened for binary reading, only when it is a regular file (not a link to one)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            raise InputFileError(f"{path}: cannot be read ({exc.strerror or exc})") from None
        if not stat.S_ISREG(mode):
            raise InputFileError(f"{path}: is {_kind(mode)}, not a regular file; not read") from None
        raise InputFileError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise InputFileError(f"{path}: is {_kind(mode)}, not a regular file; not read")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_regular(path: Path, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` (refused beyond, before decoding)."""
    with open_regular(path) as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise InputFileError(f"{path}: larger than {max_bytes} bytes (the cap for this input); not read")
    return data


def read_text(path: Path, max_bytes: int) -> str:
    """:func:`read_regular` decoded as UTF-8 (a BOM allowed), bad bytes refused with their offset."""
    data = read_regular(path, max_bytes)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputFileError(f"{path}: byte {exc.start} is not UTF-8; not read") from None


MAX_YAML_NODES = 100_000
"""Most nodes a YAML document may have once its aliases are expanded (a run config has a few
hundred; the 1.1 KB "billion laughs" file expands to 10^9)."""


def expanded_nodes(root: yaml.Node, limit: int) -> int:
    """How many nodes ``root`` has with every alias expanded, counted over the composed graph
    (each node once, memoised: linear in the file, whatever it expands to); ``limit + 1`` as soon
    as the count passes ``limit`` or the graph is cyclic (a recursive alias expands forever)."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            children = _children(node)
            sizes[key] = min(limit + 1, 1 + sum(sizes[id(c)] for c in children))
            continue
        if key in sizes:
            continue
        if key in on_path:
            return limit + 1
        on_path.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if id(c) not in sizes)
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader that refuses a document over :data:`MAX_YAML_NODES` once expanded."""

    max_nodes = MAX_YAML_NODES

    def get_single_data(self) -> Any:
        node = self.get_single_node()
        if node is None:
            return None
        if expanded_nodes(node, self.max_nodes) > self.max_nodes:
            raise yaml.composer.ComposerError(
                None,
                None,
                f"more than {self.max_nodes} values once its aliases are expanded (or a recursive alias)",
                node.start_mark,
            )
        return self.construct_document(node)


# YAML 1.2's booleans: only true/false (any case) are booleans; PyYAML's YAML 1.1 rule also reads
# on/off/yes/no/y/n as booleans, so `structured: off` (a documented word) arrived as False. With
# this rule such a word stays the word the user wrote, and a boolean field still takes it
# (pydantic reads "off", "no", "yes", "on" as booleans).
_BOOL_TAG = "tag:yaml.org,2002:bool"
_BoundedLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != _BOOL_TAG]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_BoundedLoader.add_implicit_resolver(
    _BOOL_TAG, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def load_yaml(text: str, what: str) -> Any:
    """Parse YAML text safely (aliases allowed, their expansion bounded; booleans as YAML 1.2 reads
    them: ``off`` is the word "off"); every failure is one :class:`InputFileError` line."""
    try:
        return yaml.load(text, Loader=_BoundedLoader)  # a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise InputFileError(f"{what}{where}: not valid YAML ({exc.problem or exc.context})") from None
    except yaml.YAMLError as exc:
        raise InputFileError(f"{what}: not valid YAML ({str(exc).splitlines()[0][:200]})") from None
    except RecursionError:
        raise InputFileError(f"{what}: nested too deeply to read") from None
    except (ValueError, OverflowError, TypeError) as exc:  # 5,000-digit int, 2026-02-30, …
        first = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
        raise InputFileError(f"{what}: a value cannot be read ({first})") from None


def read_yaml(path: Path, max_bytes: int = MiB) -> Any:
    """:func:`read_text` then :func:`load_yaml` of a YAML input file."""
    return load_yaml(read_text(path, max_bytes), str(path))
