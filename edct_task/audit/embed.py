"""Putting untrusted data into HTML pages safely.

Everything a model or a judge wrote (and everything from a dataset) is *data*: pages carry it as
JSON inside ``<script type="application/json">`` and the page's own script puts it into the DOM
with ``textContent``. The JSON text is made safe for that position by escaping ``<``, ``>`` and
``&`` (so ``</script>`` or ``<!--`` cannot end or change the element) and U+2028 / U+2029 (line
separators that some JavaScript parsers treat as newlines). The few values written straight into
the markup (titles) go through :func:`html.escape` with quotes escaped.
"""

from __future__ import annotations

import html
import json
from typing import Any

__all__ = ["attribute", "json_for_script", "script_json_element", "text"]

_SCRIPT_ESCAPES = {
    ord("<"): "\\u003c",
    ord(">"): "\\u003e",
    ord("&"): "\\u0026",
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}


def json_for_script(data: Any) -> str:
    """JSON text of ``data`` that can stand inside a ``<script>`` element unchanged.

    ``JSON.parse`` of the element's text gives back ``data`` exactly; the text contains no
    ``<``, ``>``, ``&``, U+2028 or U+2029 characters. NaN and infinities are refused (JSON has
    none; write None).
    """
    return json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":")).translate(
        _SCRIPT_ESCAPES
    )


def script_json_element(element_id: str, data: Any) -> str:
    """``<script type="application/json" id="…">…</script>`` holding ``data``."""
    return f'<script type="application/json" id="{attribute(element_id)}">{json_for_script(data)}</script>'


def text(value: object) -> str:
    """``value`` escaped for HTML text content."""
    return html.escape(str(value), quote=False)


def attribute(value: object) -> str:
    """``value`` escaped for a double- or single-quoted HTML attribute."""
    return html.escape(str(value), quote=True)
