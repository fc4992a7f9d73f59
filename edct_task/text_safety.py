"""Showing untrusted text (model output, ids, names from submitted files) as what it is.

A U+202E (right-to-left override) in a model name makes ``evil\\u202egnp.exe`` *display* as
``evilexe.png``; a newline in a name splits a Markdown table row; other control characters are
invisible. So every such character is made visible as ``[U+XXXX]`` (:func:`reveal`) before text
reaches HTML, Markdown, CSV or LaTeX, and HTML additionally isolates each value's direction
(``<bdi>`` / ``unicode-bidi: isolate``) so right-to-left text in one value cannot reorder its
neighbours. Ordinary right-to-left text (Arabic, Hebrew) is kept as is.
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = ["csv_text", "md_cell", "reveal", "reveal_all", "reveal_line"]

_CONTROLS = re.compile(
    "[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f"  # C0 (tab and newline kept) and C1 controls, DEL
    "\\u061c\\u200e\\u200f\\u202a-\\u202e\\u2066-\\u2069"  # bidi marks, embeddings, overrides, isolates
    "\\ufeff]"  # zero-width no-break space
)


def _show(match: re.Match[str]) -> str:
    return f"[U+{ord(match.group()):04X}]"


def reveal(text: Any) -> str:
    """``text`` with bidi controls and control characters (tab and newline kept) as ``[U+XXXX]``."""
    return _CONTROLS.sub(_show, str(text))


def reveal_line(text: Any) -> str:
    """:func:`reveal`, and newlines and tabs as spaces: one line of Markdown or a table cell."""
    return reveal(text).replace("\r", " ").replace("\n", " ").replace("\t", " ")


def md_cell(text: Any) -> str:
    """A Markdown table cell: one line, controls shown, ``|`` escaped."""
    return reveal_line(text).replace("\\", "\\\\").replace("|", "\\|")


def reveal_all(value: Any) -> Any:
    """:func:`reveal` applied to every string (keys included) of JSON-like data."""
    if isinstance(value, str):
        return reveal(value)
    if isinstance(value, dict):
        return {reveal(k) if isinstance(k, str) else k: reveal_all(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [reveal_all(v) for v in value]
    return value


CSV_DECIMALS = 12


def csv_number(value: Any) -> Any:
    """A CSV cell: floats rounded to ``CSV_DECIMALS`` places, which drops binary floating-point noise
    (``0.9999999999999998`` → ``1.0``) and keeps every digit a statistic has; ``None`` as an empty
    cell, everything else as it is."""
    if value is None:
        return ""
    if isinstance(value, float) and not math.isnan(value):
        return round(value, CSV_DECIMALS) + 0.0  # + 0.0: no "-0.0"
    return value


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_text(text: Any) -> str:
    """A CSV text cell a spreadsheet shows as text: :func:`reveal`, and a cell starting with ``=``,
    ``+``, ``-``, ``@``, a tab or a carriage return (what Excel, LibreOffice and Sheets evaluate
    as a formula: ``=HYPERLINK(…)``, ``@SUM(…)``) prefixed with ``'`` (OWASP's rule for CSV
    injection). Numbers are written as numbers (:func:`csv_number`), never through this."""
    shown = str(text)
    if shown.startswith(_FORMULA_START):
        shown = "'" + shown
    return reveal(shown)
