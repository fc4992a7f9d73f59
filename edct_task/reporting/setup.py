"""The setup identity of an EDCT run: everything but the target that can move its scores.

Two runs are comparable only under the same setup: the same extractor, judge(s), edit parser,
editor and detector/segmenter, the same protocol (k, exclusion policy, retries, graded, panel),
the same verification thresholds (τ_in, τ_out and the change-map parameters), the same prompt
templates (version and hash) and the same documents (the dataset manifest's digest). The paper
shows the judge alone moves CCS by ~0.07. Seeds are left out: repeated runs of one setup differ
only in their seed (Table 5).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from edct_task.core.canonical import canonical_json
from edct_task.core.records import MULTI_TURN, SampleRecord

EXCLUDED_PROTOCOL_FIELDS = ("seed",)
"""Protocol fields that do not define a setup (repeated runs differ in them)."""


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def dataset_manifest(records: Sequence[SampleRecord]) -> dict[str, Any]:
    """The documents a run scored: id, domain, image hash and question hash per sample, and a digest.

    Image references are already SHA-256 hashes of the canonical PNG (the image store's keys).
    """
    entries = sorted(
        (
            {
                "id": r.sample.id,
                "domain": r.sample.domain,
                "image": r.sample.image,
                "question_sha256": sha256_text(r.sample.question),
            }
            for r in records
        ),
        key=lambda e: e["id"],
    )
    return {"samples": entries, "n": len(entries), "digest": sha256_text(canonical_json(entries))}


def target_rendering(records: Sequence[Any]) -> str:
    """How the target received its conversations in these records (``SampleRecord.target_rendering``):
    their one value, ``mixed`` when they disagree, ``multi-turn`` when there are none."""
    found = {getattr(r, "target_rendering", MULTI_TURN) for r in records}
    return found.pop() if len(found) == 1 else ("mixed" if found else MULTI_TURN)


def setup_identity(
    *,
    roles: Mapping[str, Any],
    protocol: Mapping[str, Any],
    verification: Mapping[str, Any],
    prompt_versions: Mapping[str, str],
    dataset_digest: str | None,
    rendering: str = MULTI_TURN,
    host: str | None = None,
) -> dict[str, Any]:
    """The normalised setup: roles without the target, protocol without seeds, thresholds, prompts,
    how the target received its conversations (``target_rendering``): a run whose target got
    each request as one quoted turn is not comparable with one that got the real conversation;
    and the evaluation host that drove the protocol when it is not edct-bench itself (``host``:
    ``inspect_ai``, from the target identity's ``host``). Each key is left out at its default, so
    the setup ids of runs recorded before it existed stand."""
    out = {
        "roles": {r: spec for r, spec in sorted(roles.items()) if r != "target"},
        "protocol": {k: v for k, v in sorted(protocol.items()) if k not in EXCLUDED_PROTOCOL_FIELDS},
        "verification": dict(verification),
        "prompt_versions": dict(sorted(prompt_versions.items())),
        "dataset_digest": dataset_digest,
    }
    if rendering != MULTI_TURN:
        out["target_rendering"] = rendering
    if host is not None:
        out["host"] = host
    return out


def host_of(target: Any) -> str | None:
    """The evaluation host a run's target identity names (``roles.target.host``), or None."""
    host = target.get("host") if isinstance(target, Mapping) else None
    return host if isinstance(host, str) else None


def setup_id(setup: Mapping[str, Any]) -> str:
    """A short stable id of a setup (12 hex digits of its canonical JSON's SHA-256)."""
    return sha256_text(canonical_json(setup))[:12]


def _role_label(spec: Any) -> str:
    if isinstance(spec, list):
        return "panel[" + ", ".join(_role_label(s) for s in spec) + "]"
    if isinstance(spec, Mapping):
        model = spec.get("model")
        return f"{spec.get('backend', '?')}:{model}" if model else str(spec.get("backend", "?"))
    return str(spec)


def setup_label(setup: Mapping[str, Any]) -> str:
    """One line for tables: judge, editor, extractor, k, τ_in/τ_out."""
    roles = setup.get("roles", {})
    protocol = setup.get("protocol", {})
    verification = setup.get("verification", {})
    rendering = setup.get("target_rendering")
    return (
        f"judge={_role_label(roles.get('judge'))} editor={_role_label(roles.get('editor'))} "
        f"extractor={_role_label(roles.get('extractor'))} k={protocol.get('k')} "
        f"τ_in={verification.get('tau_in')} τ_out={verification.get('tau_out')}"
        + (f" target={rendering}" if rendering else "")
    )


def setup_differences(a: Mapping[str, Any], b: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Dotted paths of the fields where two setups differ (for rejection reasons and Table 2)."""
    out = []
    for key in sorted(set(a) | set(b)):
        path = f"{prefix}{key}"
        va, vb = a.get(key), b.get(key)
        if isinstance(va, Mapping) and isinstance(vb, Mapping):
            out.extend(setup_differences(va, vb, path + "."))
        elif va != vb:
            out.append(path)
    return out
