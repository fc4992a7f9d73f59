"""Verify a bundle by recomputation: members, digest, dataset manifest, setup, every metric.

A bundle is accepted only when everything it claims follows from what it contains:

1. every listed member is present with its SHA-256, nothing unlisted is present;
2. the digest over ``bundle.json`` is right;
3. the sample records match the dataset manifest (same ids, domains, images, questions) and the
   manifest's digest is the setup's (and the board's reference manifest, when one is given);
4. ``images.json`` lists exactly the images the records reference; packed images decode to
   their refs (``image_id`` of the decoded pixels and ``edct_`` text);
5. the setup identity equals the one recomputed from the run's own files;
6. every metric and interval, overall and per domain, and every count equals
   ``edct_task.scoring.metrics.summarise`` over the records (same seed and resamples), and the
   run's own results file says the same.

The first failure is the rejection reason (each names the field or sample it is about).
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image, UnidentifiedImageError

from edct_task.engine.stage_cache import image_id
from edct_task.leaderboard.bundle import BundleError, _image_refs, bundle_digest, read_bundle, sha256_bytes
from edct_task.reporting.setup import dataset_manifest, setup_differences, setup_id, setup_identity
from edct_task.scoring.metrics import METRIC_NAMES, summarise

REQUIRED = ("results.json", "samples.jsonl", "dataset_manifest.json", "images.json")
TOLERANCE = 1e-9
SUPPORTED_VERSIONS = (1,)


def _decoded_id(data: bytes) -> str | None:
    """The image id of packed PNG bytes, None when they are not an image."""
    try:
        with Image.open(io.BytesIO(data)) as im:
            im.load()
            return image_id(im)
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError):
        return None


class Rejection(Exception):
    """Why a bundle is rejected: a short code and one sentence."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


@dataclass
class Verified:
    """A verified bundle: its entry on the board."""

    bundle: Path
    model: str
    setup: dict[str, Any]
    """Setup identity without the target: defines the track."""
    target: Any
    summary: dict[str, Any]
    """Recomputed ``summarise`` output."""
    records: list[Any] = field(repr=False)
    digest: str = ""

    @property
    def track(self) -> str:
        return setup_id(self.setup)


@dataclass(frozen=True)
class Rejected:
    bundle: Path
    code: str
    reason: str


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=0, abs_tol=TOLERANCE)
    return a == b


def _compare_block(claimed: dict[str, Any], mine: dict[str, Any], where: str) -> None:
    for m in METRIC_NAMES:
        c = (claimed.get("metrics") or {}).get(m)
        r = mine["metrics"][m]
        if c is None:
            raise Rejection("incomplete", f"{where}: metric {m} is not claimed")
        for part in ("estimate", "low", "high", "n"):
            if not _same(c.get(part), r[part]):
                raise Rejection(
                    "metric_mismatch",
                    f"{where}: claimed {m} {part} {c.get(part)} but the sample records give {r[part]}",
                )
    for name, value in mine["counts"].items():
        if not _same((claimed.get("counts") or {}).get(name), value):
            raise Rejection(
                "metric_mismatch",
                f"{where}: claimed {name} count {(claimed.get('counts') or {}).get(name)} but the sample "
                f"records give {value}",
            )


def _check_manifest(bundle: Any, records: list[Any], reference_digest: str | None) -> dict[str, Any]:
    packed = bundle.json_member("dataset_manifest.json")
    mine = dataset_manifest(records)
    by_id = {e["id"]: e for e in packed.get("samples", [])}
    have = {e["id"]: e for e in mine["samples"]}
    missing = sorted(set(by_id) - set(have))
    extra = sorted(set(have) - set(by_id))
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"{len(missing)} manifest sample(s) have no record (first: {missing[0]})")
        if extra:
            parts.append(f"{len(extra)} record(s) are not in the manifest (first: {extra[0]})")
        raise Rejection(
            "manifest_mismatch", "sample records do not match the dataset manifest: " + "; ".join(parts)
        )
    changed = sorted(i for i in have if have[i] != by_id[i])
    if changed:
        raise Rejection(
            "manifest_mismatch",
            f"sample {changed[0]} differs from its dataset manifest entry (image or question changed)",
        )
    if packed.get("digest") != mine["digest"]:
        raise Rejection("manifest_mismatch", "dataset manifest digest does not match its entries")
    if reference_digest is not None and mine["digest"] != reference_digest:
        raise Rejection(
            "wrong_dataset",
            f"dataset manifest {mine['digest'][:12]} is not the board's reference manifest "
            f"{reference_digest[:12]}",
        )
    return mine


def _own_setup(bundle: Any, kind: str, results: dict[str, Any], digest: str) -> tuple[dict[str, Any], Any]:
    """(setup identity, target identity) recomputed from the run's own files."""
    if kind == "edct":
        config = results.get("config") or {}
        source = {
            "roles": config.get("roles", {}),
            "protocol": config.get("protocol", {}),
            "verification": config.get("verification", {}),
            "prompt_versions": results.get("prompt_versions", {}),
        }
        target = (config.get("roles") or {}).get("target")
    else:
        source = bundle.json_member("setup_source.json")
        config = results.get("config") or {}
        target = {"model": config.get("model"), "model_args": config.get("model_args")}
    setup = setup_identity(
        roles=source.get("roles", {}),
        protocol=source.get("protocol", {}),
        verification=source.get("verification", {}),
        prompt_versions=source.get("prompt_versions", {}),
        dataset_digest=digest,
    )
    return setup, target


def check_bundle(path: Path, *, reference_manifest: str | None = None) -> Verified:
    """Verify one bundle; raise :class:`Rejection` with the first reason it fails."""
    try:
        bundle = read_bundle(path)
    except BundleError as exc:
        raise Rejection("unreadable", str(exc)) from None
    meta = bundle.meta
    if meta.get("format_version") not in SUPPORTED_VERSIONS:
        raise Rejection("unsupported", f"bundle format_version {meta.get('format_version')} is not supported")
    for name in REQUIRED:
        if name not in bundle.members:
            raise Rejection("incomplete", f"member {name} is missing")
    files = meta.get("files")
    if not isinstance(files, dict):
        raise Rejection("incomplete", "bundle.json has no 'files' list of member hashes")
    for name, digest in files.items():
        if name not in bundle.members:
            raise Rejection("incomplete", f"member {name} is listed in bundle.json but missing")
        if sha256_bytes(bundle.members[name]) != digest:
            raise Rejection("tampered", f"member {name} does not match its SHA-256 in bundle.json")
    unlisted = sorted(set(bundle.members) - set(files))
    if unlisted:
        raise Rejection("tampered", f"member {unlisted[0]} is not listed in bundle.json")
    if meta.get("digest") != bundle_digest(meta):
        raise Rejection(
            "tampered", "bundle digest does not match bundle.json (its content changed after sealing)"
        )

    try:
        records = bundle.records()
    except BundleError as exc:
        raise Rejection("incomplete", str(exc)) from None
    manifest = _check_manifest(bundle, records, reference_manifest)

    refs = _image_refs(records)
    if bundle.json_member("images.json").get("images") != refs:
        raise Rejection(
            "manifest_mismatch", "images.json does not list exactly the images the records reference"
        )
    if meta.get("images_included"):
        for ref in refs:
            data = bundle.members.get(f"images/{ref}.png")
            if data is None:
                raise Rejection("incomplete", f"image {ref[:12]} is referenced but not packed")
            if _decoded_id(data) != ref:
                raise Rejection("tampered", f"image {ref[:12]} does not decode to its reference")

    kind = meta.get("kind")
    if kind not in ("edct", "lmms"):
        raise Rejection("incomplete", f"bundle kind {kind!r} is neither 'edct' nor 'lmms'")
    results = bundle.json_member("results.json")
    if kind == "lmms" and "setup_source.json" not in bundle.members:
        raise Rejection("incomplete", "member setup_source.json is missing (lmms-eval bundles need it)")
    own, target = _own_setup(bundle, kind, results, manifest["digest"])
    claimed_setup = {k: v for k, v in (meta.get("setup") or {}).items() if k != "target"}
    diff = setup_differences(claimed_setup, own)
    if diff:
        raise Rejection(
            "setup_mismatch",
            f"setup field {diff[0]} differs from the run's own configuration"
            + (f" (and {len(diff) - 1} more)" if len(diff) > 1 else ""),
        )
    if (meta.get("setup") or {}).get("target") != target or (meta.get("model") or {}).get(
        "identity"
    ) != target:
        raise Rejection("setup_mismatch", "target model identity differs from the run's own configuration")

    if kind == "edct":
        own_identities = {
            r: i for r, i in ((results.get("config") or {}).get("backends") or {}).items() if r != "target"
        }
        if meta.get("backend_identities") != own_identities:
            raise Rejection("setup_mismatch", "backend identities differ from the run's own results.json")
    scoring = meta.get("scoring") or {}
    try:
        summary = summarise(
            records, seed=int(scoring.get("seed", 0)), n_resamples=int(scoring.get("n_resamples"))
        )
    except (TypeError, ValueError) as exc:
        raise Rejection("incomplete", f"scoring parameters are unusable ({exc})") from None
    claimed = meta.get("claimed") or {}
    _compare_block(claimed.get("overall") or {}, summary["overall"], "overall")
    for domain, block in summary["per_domain"].items():
        _compare_block((claimed.get("per_domain") or {}).get(domain) or {}, block, f"domain {domain}")
    if set(claimed.get("per_domain") or {}) != set(summary["per_domain"]):
        raise Rejection("metric_mismatch", "claimed domains differ from the domains of the sample records")
    if kind == "edct":
        own_results = results.get("results") or {}
        _compare_block(own_results.get("overall") or {}, summary["overall"], "results.json overall")
    else:
        _check_lmms_claims(meta, results, summary)
    return Verified(
        bundle=path,
        model=str((meta.get("model") or {}).get("name", "unknown")),
        setup=own,
        target=target,
        summary=summary,
        records=records,
        digest=str(meta["digest"]),
    )


def _check_lmms_claims(meta: dict[str, Any], results: dict[str, Any], summary: dict[str, Any]) -> None:
    """lmms-eval's per-task values: as in its results file, and equal to the records' per domain."""
    claims = meta.get("lmms_claims") or {}
    for task, values in claims.items():
        entry = (results.get("results") or {}).get(task) or {}
        for m, v in values.items():
            if not _same(entry.get(f"{m},none"), v):
                raise Rejection("metric_mismatch", f"{task}: claimed {m} {v} is not what results.json says")
        block = None
        if task.startswith("edct_bench_"):
            block = summary["per_domain"].get(task[len("edct_bench_") :])
        elif task == meta.get("task") and not (results.get("group_subtasks") or {}).get(task):
            block = summary["overall"]
        if block is None:
            continue
        for m, v in values.items():
            if not _same(v, block["metrics"][m]["estimate"]):
                raise Rejection(
                    "metric_mismatch",
                    f"{task}: lmms-eval's {m} {v} differs from the sample records' "
                    f"{block['metrics'][m]['estimate']}",
                )


def verify_bundle(path: Path, *, reference_manifest: str | None = None) -> Verified | Rejected:
    try:
        return check_bundle(path, reference_manifest=reference_manifest)
    except Rejection as exc:
        return Rejected(path, exc.code, exc.reason)
