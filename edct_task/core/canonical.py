"""The canonical JSON text every digest of the project is taken over.

Stage-cache keys (``engine.stage_cache.fingerprint``), the setup id and the dataset manifest's
digest (``reporting.setup``) and a leaderboard bundle's seal (``leaderboard.bundle``) are all the
SHA-256 of :func:`canonical_json`: sorted keys, no whitespace, UTF-8 characters kept, floats in
their shortest round-trip form. Whatever JSON would change silently (a non-``str`` key, a set,
bytes, a numpy scalar) or cannot represent (NaN, infinity) is refused with a message naming the
offending path, so two equal values always give one text and one digest.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

__all__ = ["canonical_json", "json_text", "plain_json"]


def plain_json(value: object, path: str) -> Any:
    """``value`` as plain JSON data (dicts, lists, str, int, float, bool, None), or raise.

    Mappings become dicts and tuples become lists; anything that JSON would change silently or
    cannot represent is refused with a message naming ``path``.
    """
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{path}: {value!r} is not allowed; JSON has no NaN or infinity")
        return value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(
                    f"{path}: key {k!r} is {type(k).__name__}; JSON object keys must be str "
                    "(a non-str key would be silently converted and could collide)"
                )
            out[k] = plain_json(v, f"{path}[{k!r}]")
        return out
    if isinstance(value, (list, tuple)):
        return [plain_json(v, f"{path}[{i}]") for i, v in enumerate(value)]
    hint = ""
    if isinstance(value, (bytes, bytearray, memoryview)):
        hint = "; hash bytes first (e.g. an ImageStore ref or hashlib.sha256(...).hexdigest())"
    elif hasattr(value, "model_dump"):
        hint = "; pass model.model_dump(mode='json')"
    elif type(value).__module__ == "numpy":
        hint = "; convert numpy values with .item() or .tolist()"
    raise TypeError(f"{path}: {type(value).__name__} is not JSON-serialisable{hint}")


def json_text(value: object, name: str, *, sort_keys: bool) -> str:
    """Compact JSON text of :func:`plain_json` of ``value`` (errors name ``name``), keys sorted
    or in their order."""
    plain = plain_json(value, name)
    return json.dumps(plain, sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_json(value: object, *, name: str = "value") -> str:
    """The canonical JSON text of ``value``: sorted keys, no whitespace, UTF-8 characters kept.

    ``value`` is any JSON value (an object, a list, a scalar). Floats are written by ``repr``
    (shortest round-trip form), so they are stable across runs and platforms; note that ``1``
    and ``1.0`` are different values here. Tuples are written as lists.

    Raises
    ------
    TypeError
        If anywhere inside ``value`` a key is not ``str`` or a value is not ``None``, ``bool``,
        ``int``, ``float``, ``str``, list/tuple or mapping. The message names the offending path,
        e.g. ``value['inputs'][0]`` (``name`` is the path's root).
    ValueError
        If a float is NaN or infinite.
    """
    return json_text(value, name, sort_keys=True)
