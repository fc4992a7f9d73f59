"""mkdocs hook: the generated reference pages, built from the code at every `mkdocs build`.

A reference page holds one marker line, replaced by Markdown generated here:

- ``<!-- edct-reference: cli -->``: every ``edct`` command and flag, from the real argparse parsers
  (``edct_task.cli.main.build_parser``): usage, each argument's flags, choices, default and help;
- ``<!-- edct-reference: models NAME -->``: the pydantic models of one group of ``MODEL_GROUPS``
  (each field's name, type, default and description), every nested model of ours included;
- ``<!-- edct-reference: backends -->``: every registered backend (``edct_task.roles.registry``),
  by kind: its traits and its options model's fields.

So the reference cannot drift from the code. ``tests/docs/test_reference.py`` imports this file and
fails when a flag has no ``help`` or a field no ``description``.
"""

from __future__ import annotations

import argparse
import enum
import importlib
import inspect
import re
import sys
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

ROOT = Path(__file__).resolve().parents[2]


def _checkout_first() -> None:
    """Import this checkout's code, never another installed copy. Called at use, not at import:
    mkdocs restores ``sys.path`` after it loads a hook."""
    if str(ROOT) not in sys.path[:1]:
        sys.path.insert(0, str(ROOT))
    loaded = sys.modules.get("edct_task")
    if loaded is not None and not Path(loaded.__file__).resolve().is_relative_to(ROOT):
        raise RuntimeError(f"edct_task was imported from {loaded.__file__}, not from {ROOT}")


MARKER = re.compile(
    r"^<!-- edct-reference: (?P<what>cli|backends|models (?P<group>[a-z-]+)) -->$", re.MULTILINE
)

MODEL_GROUPS: dict[str, tuple[str, ...]] = {
    "config": ("edct_task.config:RunConfig",),
    "records": (
        "edct_task.core.records:SampleRecord",
        "verification.gate:GateResult",
        "edct_task.annotation.labels:Label",
    ),
    "run-log": ("edct_task.run.log:RunLog",),
}
"""Each group's root models (``module:Class``); the page lists the roots and every model they nest."""

MODEL_MODULES = (
    "edct_task.config",
    "edct_task.engine.protocol",
    "edct_task.engine.driver",
    "edct_task.core.records",
    "edct_task.run.log",
    "edct_task.run.sharding",
    "edct_task.scoring.results",
    "verification.records",
    "verification.gate",
    "edct_task.annotation.labels",
)
"""Modules whose public pydantic models are documented: every field of them needs a description."""


# -- the command line ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    """One ``edct`` (sub-)command: its words, parser and the arguments it takes."""

    words: tuple[str, ...]
    parser: argparse.ArgumentParser
    arguments: tuple[argparse.Action, ...]


def commands() -> list[Command]:
    """Every command of ``edct``, sub-commands of sub-commands included, in the parser's order."""
    _checkout_first()
    from edct_task.cli.main import build_parser

    parser, _ = build_parser()
    return list(_walk(parser, ("edct",)))


def _walk(parser: argparse.ArgumentParser, words: tuple[str, ...]) -> Iterator[Command]:
    own = tuple(
        a
        for a in parser._actions
        if not isinstance(a, argparse._HelpAction | argparse._SubParsersAction)
        and a.help != argparse.SUPPRESS
    )
    yield Command(words, parser, own)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if sub.prog.split()[-1] == name:  # aliases share their parser: listed once
                    yield from _walk(sub, (*words, name))


def cli_markdown() -> str:
    out: list[str] = []
    for command in commands():
        level = "#" * min(len(command.words) + 1, 4)
        out.append(f"{level} `{' '.join(command.words)}`\n")
        description = command.parser.description or ""
        if description:
            out.append(_escape_text(description) + "\n")
        usage = command.parser.format_usage().removeprefix("usage: ").strip()
        out.append(f"```text\n{usage}\n```\n")
        if command.arguments:
            out.append("| argument | values | default | what it does |")
            out.append("|---|---|---|---|")
            for action in command.arguments:
                cells = (_flags(action), _values(action), _default(action), _cell(action.help or ""))
                out.append("| " + " | ".join(cells) + " |")
            out.append("")
    return "\n".join(out)


def _flags(action: argparse.Action) -> str:
    names = action.option_strings or [action.metavar or action.dest]
    return ", ".join(f"`{n}`" for n in names)


def _values(action: argparse.Action) -> str:
    if action.choices is not None and not isinstance(action.choices, dict):
        return ", ".join(f"`{c}`" for c in action.choices)
    if action.nargs == 0:
        return "flag"
    metavar = action.metavar or (action.dest.upper() if action.option_strings else action.dest)
    many = {"*": " …", "+": " …", argparse.REMAINDER: " …"}.get(action.nargs, "")  # type: ignore[arg-type]
    repeat = " (repeatable)" if isinstance(action, argparse._AppendAction) else ""
    return f"`{metavar}`{many}{repeat}"


def _default(action: argparse.Action) -> str:
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS, [], ()):
        return ""
    return code(action.default)


def code(value: Any) -> str:
    """``value`` as one Markdown code span whatever its text holds: a fence longer than any run of
    backticks inside, padded where the text starts or ends with one (CommonMark's rule), so no
    default ever shows as raw backticks; an empty text shows as ``""``."""
    text = str(value) or '""'
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


# -- the pydantic models -------------------------------------------------------------------------


def _load(ref: str) -> type[BaseModel]:
    _checkout_first()
    module, name = ref.split(":")
    return getattr(importlib.import_module(module), name)


def documented_models() -> list[type[BaseModel]]:
    """The public pydantic models of ``MODEL_MODULES`` (the test's scope)."""
    _checkout_first()
    found: list[type[BaseModel]] = []
    for name in MODEL_MODULES:
        module = importlib.import_module(name)
        for attr, obj in vars(module).items():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseModel)
                and obj.__module__ == name
                and not attr.startswith("_")
            ):
                found.append(obj)
    return found


def group_models(group: str) -> list[type[BaseModel]]:
    """The roots of ``group`` and every model of ours their fields nest, roots first, each once."""
    seen: list[type[BaseModel]] = []
    queue = [_load(ref) for ref in MODEL_GROUPS[group]]
    while queue:
        model = queue.pop(0)
        if model in seen:
            continue
        seen.append(model)
        for field in model.model_fields.values():
            queue.extend(m for m in _nested(field.annotation) if m not in seen)
    return seen


def _nested(annotation: Any) -> Iterator[type[BaseModel]]:
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in typing.get_args(annotation):
        yield from _nested(arg)


def type_name(annotation: Any) -> str:
    """A reader's spelling of a field's type: ``int | None``, ``list[EditAttempt]``, ``'a' | 'b'``."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is type(None):
        return "None"
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin is typing.Annotated:
        return type_name(args[0])
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join('…' if a is Ellipsis else type_name(a) for a in args)}]"
    if inspect.isclass(annotation):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _field_default(field: Any) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        try:
            value = field.default_factory()
        except TypeError:
            return "computed"
    else:
        value = field.default
    if value is PydanticUndefined:
        return "required"
    if isinstance(value, BaseModel):
        return f"see [{type(value).__name__}](#{type(value).__name__.lower()})"
    if isinstance(value, enum.Enum):
        value = value.value
    return code(repr(value) if not isinstance(value, str) else f'"{value}"')


def models_markdown(group: str) -> str:
    out: list[str] = []
    for model in group_models(group):
        out.append(f"### {model.__name__}\n")
        out.extend(_model_table(model))
    return "\n".join(out)


def backends_markdown() -> str:
    """Every registered backend by kind: its traits, and its options with types and defaults."""
    _checkout_first()
    from edct_task.roles import registry

    out: list[str] = []
    for kind, records in registry().items():
        out.append(f"### {kind}\n")
        for name, record in sorted(records.items()):
            traits = [
                t for t in ("paid", "local_weights", "serial", "calibration_only") if getattr(record, t)
            ]
            t = record.latency
            out.append(f"#### `{name}`\n")
            out.append(
                f"Traits: {', '.join(f'`{x}`' for x in traits) or 'none'}; assumed latency "
                f"{t.seconds:g} s per call ({_escape_text(t.note or 'no note')}).\n"
            )
            out.extend(_model_table(record.options_model()))
    return "\n".join(out)


def _model_table(model: type[BaseModel]) -> list[str]:
    out: list[str] = []
    out.append(f"`{model.__module__}.{model.__name__}`\n")
    doc = inspect.getdoc(model)
    if doc and doc != inspect.getdoc(BaseModel):
        out.append(_escape_text(doc) + "\n")
    extra = model.model_config.get("extra")
    if extra == "forbid":
        out.append("Unknown keys are refused.\n")
    elif extra == "allow":
        out.append("Further keys are allowed and passed on (a backend's options).\n")
    out.append("| field | type | default | description |")
    out.append("|---|---|---|---|")
    for name, field in model.model_fields.items():
        shown = field.alias or name
        cells = (
            f"`{shown}`",
            _cell(type_name(field.annotation), code=True),
            _cell(_field_default(field)),
            _cell(field.description or ""),
        )
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    return out


# -- completeness (tests/docs/test_reference.py) ---------------------------------------------------


def unhelped_arguments(found: list[Command]) -> list[str]:
    """``edct CMD --flag`` for every argument of ``found`` without a ``help`` text."""
    return [
        f"{' '.join(c.words)} {'/'.join(a.option_strings) or a.dest}"
        for c in found
        for a in c.arguments
        if not (a.help or "").strip()
    ]


def undescribed_fields(models: list[type[BaseModel]]) -> list[str]:
    """``module.Model.field`` for every field of ``models`` without a ``description``."""
    return [
        f"{m.__module__}.{m.__name__}.{name}"
        for m in models
        for name, info in m.model_fields.items()
        if not (info.description or "").strip()
    ]


# -- Markdown helpers ----------------------------------------------------------------------------


def _escape_text(text: str) -> str:
    """Help and docstring text as Markdown: markup characters outside ``code`` shown literally."""
    parts = re.split(r"(``?[^`]+``?)", text)
    for i in range(0, len(parts), 2):  # the even parts are outside code spans
        parts[i] = (
            parts[i].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("*", r"\*")
        ).replace("_", r"\_")
    return "".join(parts)


def _cell(text: str, code: bool = False) -> str:
    text = " ".join(text.split())
    if code:
        return "<code>" + text.replace("&", "&amp;").replace("<", "&lt;").replace("|", "&#124;") + "</code>"
    return _escape_text(text).replace("|", r"\|")


# -- the mkdocs hook -----------------------------------------------------------------------------


def on_page_markdown(markdown: str, **_: Any) -> str:
    def replace(match: re.Match[str]) -> str:
        if match.group("what") == "cli":
            return cli_markdown()
        if match.group("what") == "backends":
            return backends_markdown()
        group = match.group("group")
        if group not in MODEL_GROUPS:
            raise ValueError(f"unknown model group {group!r}; known: {', '.join(MODEL_GROUPS)}")
        return models_markdown(group)

    return MARKER.sub(replace, markdown)
