"""Who an entry is: the verified target identity, and text from submitters made safe to show.

The board names an entry by its target as the run resolved it (backend, model id, revision),
taken from the run's own configuration that verification checked, never by the free-text name in
``bundle.json``. That name is shown only as a *label*, sanitised: control, format (bidi,
zero-width) and separator characters are removed or turned into spaces, pipes into ``¦``, and it
is cut to :data:`MAX_LABEL` characters, so it can neither break a table row nor pose as another
model by reordering text.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

MAX_LABEL = 80
_MODEL_ARG_KEYS = ("pretrained", "model", "model_name", "model_id", "model_version")


def sanitise(text: object, limit: int = MAX_LABEL) -> str:
    """One line of plain text: control and format characters (bidi overrides included) shown as
    ``[U+XXXX]`` rather than obeyed, no pipes, collapsed spaces."""
    out = []
    for ch in str(text):
        cat = unicodedata.category(ch)
        if ch in "\t\n\r\v\f" or cat in ("Zl", "Zp", "Zs"):
            out.append(" ")
        elif cat in ("Cc", "Cf", "Cs", "Co", "Cn"):
            out.append(f"[U+{ord(ch):04X}]")
        elif ch == "|":
            out.append("¦")
        else:
            out.append(ch)
    clean = " ".join("".join(out).split())
    return clean if len(clean) <= limit else clean[: limit - 1] + "…"


def _model_args(text: str) -> dict[str, str]:
    """lmms-eval's ``key=value,key=value`` model arguments."""
    out = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def target_identity(kind: str, target: Any) -> dict[str, str | None]:
    """(backend, model id, revision) of a verified target spec.

    ``edct`` runs record the target role (``{"backend", "model", "revision", …}``; calibration
    targets have a ``behavior`` instead of a model); lmms-eval runs (the ``lmms-eval`` backend of
    a run folder, or a kind ``lmms`` bundle of edct-bench 0.2.0) record the model class and its
    ``model_args`` (``pretrained=org/name,revision=…``).
    """
    spec = target if isinstance(target, Mapping) else {}
    if kind == "lmms" or spec.get("backend") == "lmms-eval":
        args = _model_args(str(spec.get("model_args") or ""))
        model = next((args[k] for k in _MODEL_ARG_KEYS if args.get(k)), None)
        return {
            "backend": sanitise(spec.get("model") or "?"),
            "model_id": sanitise(model or spec.get("model") or "?", 200),
            "revision": sanitise(args["revision"], 100) if args.get("revision") else None,
        }
    model = spec.get("model") or spec.get("pretrained") or spec.get("model_id")
    if not model and spec.get("behavior"):
        model = f"behavior={spec['behavior']}"
    revision = spec.get("revision")
    return {
        "backend": sanitise(spec.get("backend") or "?"),
        "model_id": sanitise(model or "?", 200),
        "revision": sanitise(revision, 100) if revision else None,
    }


def display_name(identity: Mapping[str, str | None]) -> str:
    """``model_id`` with ``@revision`` when one is pinned."""
    rev = identity.get("revision")
    return f"{identity['model_id']}@{rev}" if rev else str(identity["model_id"])


def differing_fields(setups: Sequence[Mapping[str, Any]]) -> list[str]:
    """Dotted paths of every field whose value is not the same in all ``setups``."""
    paths: set[str] = set()

    def walk(values: list[Any], prefix: str) -> None:
        if all(isinstance(v, Mapping) for v in values):
            for key in sorted({k for v in values for k in v}):
                walk([v.get(key) for v in values], f"{prefix}{key}.")
        elif any(v != values[0] for v in values[1:]):
            paths.add(prefix[:-1])

    if len(setups) > 1:
        walk(list(setups), "")
    return sorted(paths)


def field_value(setup: Mapping[str, Any], path: str) -> Any:
    node: Any = setup
    for part in path.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return node


def evidence_digest(records: Sequence[Any]) -> str:
    """SHA-256 over the per-sample evidence (each record's canonical JSON, hashed, sorted by
    sample id): the same records under another model name, another label or a resealed
    ``bundle.json`` give the same digest, so the board can list such an entry as a duplicate."""
    per_sample = sorted(
        (str(r.sample.id), hashlib.sha256(r.model_dump_json().encode("utf-8")).hexdigest()) for r in records
    )
    return hashlib.sha256("\n".join(f"{i}\t{h}" for i, h in per_sample).encode("utf-8")).hexdigest()


def _normal_text(text: str) -> str:
    """Text as a copier cannot tell it apart: NFKC, format characters (zero-width, bidi) dropped,
    every run of whitespace one space, case folded, trimmed."""
    text = "".join(ch for ch in unicodedata.normalize("NFKC", text) if unicodedata.category(ch) != "Cf")
    return re.sub(r"\s+", " ", text).casefold().strip()


def _normal(node: Any) -> Any:
    if isinstance(node, str):
        return _normal_text(node)
    if isinstance(node, Mapping):
        return {_normal_text(str(k)): _normal(v) for k, v in node.items()}
    if isinstance(node, (list, tuple)):
        return [_normal(v) for v in node]
    return node


_IMAGE_REF = re.compile(r"[0-9a-f]{64}")


def _skeleton(node: Any) -> Any:
    """What a record says apart from its free text: numbers, verdicts, statuses kept, image refs
    (content ids) kept, every other text blanked."""
    if isinstance(node, str):
        return node if _IMAGE_REF.fullmatch(node) else ""
    if isinstance(node, Mapping):
        return {str(k): _skeleton(v) for k, v in node.items()}
    if isinstance(node, (list, tuple)):
        return [_skeleton(v) for v in node]
    return node


def _sha(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def sample_fingerprints(records: Sequence[Any]) -> dict[str, tuple[str, str]]:
    """Sample id → (skeleton, text) fingerprints of its record: the SHA-256 of its numbers,
    verdicts, statuses and image refs with every free text blanked (``_skeleton``), and of the
    whole record with every text normalised (``_normal_text``: spacing, case, zero-width and
    compatibility characters do not count)."""
    out = {}
    for r in records:
        dumped = r.model_dump(mode="json")
        out[_normal_text(str(r.sample.id))] = (_sha(_skeleton(dumped)), _sha(_normal(dumped)))
    return out


NEAR_DUPLICATE_TEXT_SHARE = 0.5
"""Of two bundles, the smaller copies the other when every one of its samples has the other's
skeleton (the same numbers, verdicts and images: the evidence) and at least this share of its
samples have the other's normalised text too: a copy with texts touched (a space, a case, a
zero-width character) or samples dropped. Independent runs of different targets differ in
their verdicts or their images, so they are never each other's copy."""


def copied_share(a: Mapping[str, tuple[str, str]], b: Mapping[str, tuple[str, str]]) -> float | None:
    """The share of the smaller bundle's samples whose normalised text the other has, when every
    one of its samples has the other's skeleton (``sample_fingerprints``); None when one differs."""
    small, large = (a, b) if len(a) <= len(b) else (b, a)
    if not small or any(i not in large or large[i][0] != fp[0] for i, fp in small.items()):
        return None
    return sum(1 for i, fp in small.items() if large[i][1] == fp[1]) / len(small)


def recorded_time(value: object) -> float:
    """A bundle's recorded ``created`` time as a POSIX timestamp; +inf when it is missing or not
    an ISO time with a zone (a bundle that does not say when it was made cannot claim to be first)."""
    try:
        when = dt.datetime.fromisoformat(str(value))
    except ValueError:
        return float("inf")
    return when.timestamp() if when.tzinfo is not None else float("inf")
