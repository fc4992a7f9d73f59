"""Verify a bundle by recomputation: members, digest, dataset manifest, setup, every metric.

A bundle is accepted only when everything it claims follows from what it contains:

1. every listed member is present with its SHA-256, nothing unlisted is present;
2. the digest over ``bundle.json`` is right;
3. the sample records match the dataset manifest (same ids, domains, images, questions) and the
   manifest's digest is the setup's (and the board's reference manifest, when one is given);
4. ``images.json`` lists exactly the images the records reference; packed images decode to
   their refs (``image_id`` of the decoded pixels and ``edct_`` text);
5. the setup identity equals the one recomputed from the run's own files;
6. every record is re-derived from its own evidence (``rederive``): the protocol is replayed with
   each request answered from the record (raw replies, images, gate numbers re-decided under the
   setup's gate) and must give back the record, field for field;
7. every claimed estimate and sample count, overall and per domain, equals
   ``edct_task.scoring.metrics.summarise`` over the records, and the run's own results file says
   the same. Intervals, rank ranges and everything shown are computed with the **board's**
   scoring parameters (:class:`BoardScoring`), never the bundle's: a bundle cannot choose its
   resamples or seed. Claimed intervals are only checked to be intervals in [0, 1] around their
   estimate;
8. the known-answer controls (``edct run`` bundles): every record of ``controls.jsonl`` is a
   control of the shipped bank with its known answer, and each one counted right is right when
   its raw reply is graded again (``rederive.rederive_controls``); the results' ``controls``
   block equals ``scoring.controls.summarise_controls`` over those records under the setup's
   ``protocol.controls`` and ``protocol.control_bar`` (part of the setup identity). A block that
   claims more than its records support, a run whose protocol asked for controls but whose block
   is missing, or records without a block, are rejected (``controls_mismatch``). A run made
   before controls (no ``controls`` in its protocol, no block, no records) is verified as
   "controls: not run": it is not unreliable, and the board says so. A verified entry whose
   controls put a role below the bar is *unreliable*: the board lists it apart, never ranked.

The first failure is the rejection reason (each names the field or sample it is about). Nothing
a bundle holds can stop the board: an unexpected error while checking one bundle rejects that
bundle (code ``malformed``) and the board goes on.
"""

from __future__ import annotations

import io
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image, UnidentifiedImageError

from edct_task.engine.stage_cache import image_id
from edct_task.leaderboard.archive import DEFAULT_LIMITS, ArchiveError, Limits
from edct_task.leaderboard.bundle import BundleError, _image_refs, bundle_digest, member_sha256, read_bundle
from edct_task.leaderboard.identity import (
    display_name,
    evidence_digest,
    recorded_time,
    sample_fingerprints,
    sanitise,
    target_identity,
)
from edct_task.leaderboard.rederive import Mismatch, protocol_of, rederive_controls, rederive_records
from edct_task.reporting.setup import (
    dataset_manifest,
    host_of,
    setup_differences,
    setup_id,
    setup_identity,
    target_rendering,
)
from edct_task.run.log import partial_label
from edct_task.scoring.metrics import metric_names, summarise
from edct_task.scoring.results import Results, ScoreBlock

REQUIRED = ("results.json", "samples.jsonl", "dataset_manifest.json", "images.json")
CONTROLS_MEMBER = "controls.jsonl"
TOLERANCE = 1e-9
SUPPORTED_VERSIONS = (1,)
MAX_RESAMPLES = 1_000_000


@dataclass(frozen=True)
class BoardScoring:
    """The board's statistics: every entry's intervals use these, whatever its bundle says."""

    seed: int = 0
    n_resamples: int = 10_000
    method: str = "clopper-pearson-effective-n (CCS), Wilson (AC/EF)"

    def __post_init__(self) -> None:
        if not 100 <= self.n_resamples <= MAX_RESAMPLES:
            raise ValueError(f"resamples must be within 100..{MAX_RESAMPLES}, not {self.n_resamples}")

    def as_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "n_resamples": self.n_resamples, "method": self.method}


DEFAULT_SCORING = BoardScoring()


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
    """The verified target's model id (``@revision`` when pinned), sanitised."""
    setup: dict[str, Any]
    """Setup identity without the target: defines the track."""
    target: Any
    summary: Results
    """Recomputed ``summarise`` output, with the board's scoring parameters."""
    records: list[Any] = field(repr=False)
    digest: str = ""
    identity: dict[str, Any] = field(default_factory=dict)
    """backend, model_id, revision of the verified target."""
    label: str = ""
    """The submitter's free-text model name, sanitised (shown, never trusted)."""
    dataset: dict[str, Any] = field(default_factory=dict)
    """digest, n (samples) and domains of the scored documents."""
    claimed: dict[str, Any] = field(default_factory=dict, repr=False)
    """The bundle's claimed ``summarise`` output (its numbers, checked estimate by estimate)."""
    kind: str = "edct"
    evidence: str = ""
    """:func:`identity.evidence_digest` of the records (the same evidence under another name)."""
    fingerprints: dict[str, tuple[str, str]] = field(default_factory=dict, repr=False)
    """:func:`identity.sample_fingerprints` of the records (a copy with a few texts touched)."""
    created: float = float("inf")
    """When the bundle says it was made (``bundle.json`` ``created``, POSIX seconds): of two
    duplicates the earlier keeps the entry, never the one whose file name sorts first."""
    received: float = float("inf")
    """When the bundle's file reached the board's disk (its modification time): of two
    duplicates that claim the same ``created`` (a copy keeps the original's), the one received
    first keeps the entry."""
    controls: dict[str, Any] | None = None
    """The known-answer controls' summary, re-derived from ``controls.jsonl`` (None: controls not
    run, as in runs made before them and in lmms-eval bundles)."""

    @property
    def unreliable(self) -> list[str]:
        """Why the entry cannot be ranked: its roles below the controls' bar (empty: reliable)."""
        from edct_task.scoring.controls import unreliable_reasons

        return unreliable_reasons(self.controls)

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


def _in_unit(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0.0 <= value <= 1.0


def _check_claim_range(c: Any, m: str, where: str) -> None:
    """A claimed interval: estimate, low, high in [0, 1] (or all None), low ≤ estimate ≤ high."""
    if not isinstance(c, dict):
        raise Rejection("out_of_range", f"{where}: claimed {m} is not an interval")
    parts = [c.get(p) for p in ("estimate", "low", "high")]
    if all(p is None for p in parts):
        return
    for name, value in zip(("estimate", "low", "high"), parts, strict=True):
        if not _in_unit(value):
            raise Rejection(
                "out_of_range", f"{where}: claimed {m} {name} {value!r} is not a number in [0, 1]"
            )
    est, low, high = parts
    if not low - TOLERANCE <= est <= high + TOLERANCE:
        raise Rejection("out_of_range", f"{where}: claimed {m} interval [{low}, {high}] does not hold {est}")


def _compare_block(claimed: Any, mine: ScoreBlock, where: str) -> None:
    """The claimed block (untrusted JSON) against the records' own ``mine``."""
    if not isinstance(claimed, dict) or not isinstance(claimed.get("metrics"), dict):
        raise Rejection("incomplete", f"{where}: no claimed metrics")
    for m in metric_names():
        c = claimed["metrics"].get(m)
        r = mine.metrics[m]
        if c is None:
            raise Rejection("incomplete", f"{where}: metric {m} is not claimed")
        _check_claim_range(c, m, where)
        for part, own in (("estimate", r.estimate), ("n", r.n)):
            if not _same(c.get(part), own):
                raise Rejection(
                    "metric_mismatch",
                    f"{where}: claimed {m} {part} {c.get(part)} but the sample records give {own}",
                )
    counts = claimed.get("counts") if isinstance(claimed.get("counts"), dict) else {}
    for name, value in mine.counts.model_dump().items():
        if not _same(counts.get(name), value):
            raise Rejection(
                "metric_mismatch",
                f"{where}: claimed {name} count {counts.get(name)} but the sample records give {value}",
            )


def _check_manifest(bundle: Any, records: list[Any], reference_digest: str | None) -> dict[str, Any]:
    packed = bundle.json_object("dataset_manifest.json")
    mine = dataset_manifest(records)
    entries = packed.get("samples")
    if not isinstance(entries, list) or not all(isinstance(e, dict) and "id" in e for e in entries):
        raise Rejection("malformed", "dataset_manifest.json 'samples' is not a list of entries with an id")
    if len({str(e["id"]) for e in entries}) != len(entries) or len(mine["samples"]) != len(
        {e["id"] for e in mine["samples"]}
    ):
        raise Rejection("manifest_mismatch", "sample ids are not unique")
    by_id = {e["id"]: e for e in entries}
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


def _obj(value: Any, what: str) -> dict[str, Any]:
    """A mapping from a bundle's JSON, or a rejection naming the field (None reads as empty)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Rejection("malformed", f"{what} is a {type(value).__name__}, not an object")
    return value


def _own_setup(
    bundle: Any, kind: str, results: dict[str, Any], digest: str, records: list[Any]
) -> tuple[dict[str, Any], Any]:
    """(setup identity, target identity) recomputed from the run's own files."""
    if kind == "edct":
        config = _obj(results.get("config"), "results.json config")
        source = {
            "roles": config.get("roles", {}),
            "protocol": config.get("protocol", {}),
            "verification": config.get("verification", {}),
            "prompt_versions": results.get("prompt_versions", {}),
        }
        target = (config.get("roles") or {}).get("target")
    else:
        source = bundle.json_object("setup_source.json")
        config = _obj(results.get("config"), "results.json config")
        target = {"model": config.get("model"), "model_args": config.get("model_args")}
    setup = setup_identity(
        roles=_obj(source.get("roles"), "roles"),
        protocol=_obj(source.get("protocol"), "protocol"),
        verification=_obj(source.get("verification"), "verification"),
        prompt_versions=_obj(source.get("prompt_versions"), "prompt_versions"),
        dataset_digest=digest,
        rendering=target_rendering(records),
        host=host_of(target),
    )
    return setup, target


def _received(path: Path) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return float("inf")


def check_bundle(
    path: Path,
    *,
    reference_manifest: str | None = None,
    scoring: BoardScoring = DEFAULT_SCORING,
    limits: Limits = DEFAULT_LIMITS,
) -> Verified:
    """Verify one bundle; raise :class:`Rejection` with the first reason it fails."""
    try:
        bundle = read_bundle(path, limits)
    except BundleError as exc:
        raise Rejection("unreadable", str(exc)) from None
    with bundle:
        return _check_open_bundle(bundle, path, reference_manifest, scoring)


def _check_open_bundle(
    bundle: Any, path: Path, reference_manifest: str | None, scoring: BoardScoring
) -> Verified:
    meta = bundle.meta
    if meta.get("format_version") not in SUPPORTED_VERSIONS:
        raise Rejection(
            "unsupported", f"bundle format_version {meta.get('format_version')!r} is not supported"
        )
    for name in REQUIRED:
        if name not in bundle.members:
            raise Rejection("incomplete", f"member {name} is missing")
    files = meta.get("files")
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        raise Rejection("incomplete", "bundle.json has no 'files' list of member hashes")
    for name, digest in files.items():
        if name not in bundle.members:
            raise Rejection("incomplete", f"member {name!a} is listed in bundle.json but missing")
        if member_sha256(bundle.members, name) != digest:
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
    if bundle.json_object("images.json").get("images") != refs:
        raise Rejection(
            "manifest_mismatch", "images.json does not list exactly the images the records reference"
        )
    packed = {name[len("images/") : -len(".png")] for name in bundle.members if name.startswith("images/")}
    if packed - set(refs) if meta.get("images_included") else packed:
        extra = sorted(packed - set(refs)) or sorted(packed)
        raise Rejection(
            "tampered",
            f"{len(extra)} packed image(s) are not referenced by the records (first: {extra[0][:12]})",
        )
    if meta.get("images_included"):
        for ref in refs:
            name = f"images/{ref}.png"
            if name not in bundle.members:
                raise Rejection("incomplete", f"image {ref[:12]} is referenced but not packed")
            if _decoded_id(bundle.members[name]) != ref:
                raise Rejection("tampered", f"image {ref[:12]} does not decode to its reference")

    kind = meta.get("kind")
    if kind not in ("edct", "lmms"):
        raise Rejection("incomplete", f"bundle kind {kind!r} is neither 'edct' nor 'lmms'")
    results = bundle.json_object("results.json")
    partial = partial_label(results) if kind == "edct" else None
    if partial is not None:  # `edct merge --allow-missing`: some slices' items were never run
        raise Rejection("partial", f"a partial run ({partial}) is not ranked: merge every slice")
    if kind == "lmms" and "setup_source.json" not in bundle.members:
        raise Rejection("incomplete", "member setup_source.json is missing (lmms-eval bundles need it)")
    own, target = _own_setup(bundle, kind, results, manifest["digest"], records)
    claimed_setup = {k: v for k, v in _obj(meta.get("setup"), "bundle.json setup").items() if k != "target"}
    diff = setup_differences(claimed_setup, own)
    if diff:
        raise Rejection(
            "setup_mismatch",
            f"setup field {diff[0]} differs from the run's own configuration"
            + (f" (and {len(diff) - 1} more)" if len(diff) > 1 else ""),
        )
    model_meta = _obj(meta.get("model"), "bundle.json model")
    if (
        _obj(meta.get("setup"), "bundle.json setup").get("target") != target
        or model_meta.get("identity") != target
    ):
        raise Rejection("setup_mismatch", "target model identity differs from the run's own configuration")

    if kind == "edct":
        own_identities = {
            r: i
            for r, i in _obj(_obj(results.get("config"), "config").get("backends"), "config.backends").items()
            if r != "target"
        }
        if meta.get("backend_identities") != own_identities:
            raise Rejection("setup_mismatch", "backend identities differ from the run's own results.json")

    try:
        cfg = protocol_of(own["protocol"])
        rederive_records(records, cfg, own["verification"])
    except Mismatch as exc:
        raise Rejection(exc.code, exc.reason) from None

    controls = _check_controls(bundle, kind, results, own, cfg, records)

    summary = summarise(records, seed=scoring.seed, n_resamples=scoring.n_resamples)
    claimed = _obj(meta.get("claimed"), "bundle.json claimed")
    _compare_block(claimed.get("overall"), summary.overall, "overall")
    claimed_domains = _obj(claimed.get("per_domain"), "claimed per_domain")
    if set(claimed_domains) != set(summary.per_domain):
        raise Rejection("metric_mismatch", "claimed domains differ from the domains of the sample records")
    for domain, block in summary.per_domain.items():
        _compare_block(claimed_domains.get(domain), block, f"domain {domain}")
    if kind == "edct":
        own_results = _obj(results.get("results"), "results.json results")
        _compare_block(own_results.get("overall"), summary.overall, "results.json overall")
    else:
        _check_lmms_claims(meta, results, summary)
    identity = target_identity(kind, target)
    domains: dict[str, int] = {}
    for r in records:
        domains[r.sample.domain] = domains.get(r.sample.domain, 0) + 1
    return Verified(
        bundle=path,
        model=display_name(identity),
        setup=own,
        target=target,
        summary=summary,
        records=records,
        digest=str(meta["digest"]),
        identity=identity,
        label=sanitise(model_meta.get("name", "")),
        dataset={"digest": manifest["digest"], "n": manifest["n"], "domains": dict(sorted(domains.items()))},
        claimed=claimed,
        kind=kind,
        evidence=evidence_digest(records),
        fingerprints=sample_fingerprints(records),
        created=recorded_time(meta.get("created")),
        received=_received(path),
        controls=controls,
    )


def _check_controls(
    bundle: Any, kind: str, results: dict[str, Any], own: dict[str, Any], cfg: Any, samples: list[Any]
) -> dict[str, Any] | None:
    """The controls' summary re-derived from ``controls.jsonl`` and equal to the results' block
    (step 8 of the module docstring); None when the run made none (controls: not run)."""
    from edct_task.leaderboard.archive import ArchiveError, json_lines
    from edct_task.run.checks import RunReadError, parse_controls
    from edct_task.scoring.controls import summarise_controls

    claimed = results.get("controls") if kind == "edct" else None
    has_member = CONTROLS_MEMBER in bundle.members
    asked = own["protocol"].get("controls")
    if kind != "edct":
        if has_member:
            raise Rejection("controls_mismatch", "controls.jsonl in a bundle of an lmms-eval run")
        return None
    if claimed is None:
        if has_member:
            raise Rejection(
                "controls_mismatch", "controls.jsonl is packed but results.json has no controls block"
            )
        if asked:
            raise Rejection(
                "controls_mismatch",
                f"the protocol asks for {asked} known-answer controls but results.json has no controls block",
            )
        return None
    if not isinstance(claimed, dict):
        raise Rejection("malformed", f"results.json controls is a {type(claimed).__name__}, not an object")
    if claimed.get("calls") and not has_member:
        raise Rejection("incomplete", f"member {CONTROLS_MEMBER} is missing (results.json counts controls)")
    member = bundle.members[CONTROLS_MEMBER] if has_member else b""
    try:
        records = parse_controls(CONTROLS_MEMBER, json_lines(member, CONTROLS_MEMBER, bundle.limits))
    except (RunReadError, ArchiveError) as exc:
        raise Rejection("malformed", str(exc)) from None
    try:
        rederive_controls(records, cfg, samples)
    except Mismatch as exc:
        raise Rejection(exc.code, exc.reason) from None
    mine = summarise_controls(records, bar=cfg.control_bar, requested=cfg.controls)
    hides = bool(mine["unreliable"]) and not claimed.get("unreliable")
    if json.loads(json.dumps(mine)) != claimed:
        fields = [k for k in mine if mine[k] != claimed.get(k)] or sorted(set(claimed) - set(mine))
        raise Rejection(
            "controls_mismatch",
            f"results.json controls {', '.join(fields) or 'block'} is not what controls.jsonl gives"
            + (" (it hides a role below the bar)" if hides else ""),
        )
    return mine


def _check_lmms_claims(meta: dict[str, Any], results: dict[str, Any], summary: Results) -> None:
    """lmms-eval's per-task values: as in its results file, and equal to the records' per domain."""
    claims = meta.get("lmms_claims") or {}
    for task, values in claims.items():
        entry = (results.get("results") or {}).get(task) or {}
        for m, v in values.items():
            if not _same(entry.get(f"{m},none"), v):
                raise Rejection("metric_mismatch", f"{task}: claimed {m} {v} is not what results.json says")
        block = None
        if task.startswith("edct_bench_"):
            block = summary.per_domain.get(task[len("edct_bench_") :])
        elif task == meta.get("task") and not (results.get("group_subtasks") or {}).get(task):
            block = summary.overall
        if block is None:
            continue
        for m, v in values.items():
            if not _same(v, block.estimate(m)):
                raise Rejection(
                    "metric_mismatch",
                    f"{task}: lmms-eval's {m} {v} differs from the sample records' {block.estimate(m)}",
                )


def verify_bundle(
    path: Path,
    *,
    reference_manifest: str | None = None,
    scoring: BoardScoring = DEFAULT_SCORING,
    limits: Limits = DEFAULT_LIMITS,
) -> Verified | Rejected:
    """Verify one bundle; whatever goes wrong inside it becomes its rejection, never the board's."""
    try:
        return check_bundle(path, reference_manifest=reference_manifest, scoring=scoring, limits=limits)
    except Rejection as exc:
        return Rejected(path, exc.code, exc.reason)
    except (ArchiveError, BundleError) as exc:  # a member found corrupt while it is streamed
        return Rejected(path, "unreadable", str(exc))
    except (RecursionError, MemoryError) as exc:
        return Rejected(path, "malformed", f"the bundle could not be checked ({type(exc).__name__})")
    except Exception as exc:  # a hostile bundle must cost its own entry, never the board
        first = str(exc).splitlines()[0][:200] if str(exc) else ""
        return Rejected(
            path, "malformed", f"the bundle's content is malformed ({type(exc).__name__}: {first})"
        )
