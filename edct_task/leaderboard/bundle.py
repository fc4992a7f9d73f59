"""Leaderboard bundles: one run packed into one zip archive that anyone can verify.

Members::

    bundle.json            format, model, setup identity, claimed scores, scoring parameters,
                           package versions, the SHA-256 of every other member, and ``digest``
    results.json           the run folder's results.json (bundles made by edct-bench 0.2.0 of an
                           lmms-eval output folder, kind ``lmms``: lmms-eval's results file)
    samples.jsonl          every sample record (one ``SampleRecord`` per line)
    dataset_manifest.json  id, domain, image hash and question hash of every sample, and its digest
    images.json            image id of every image the records reference (original + attempts)
    setup_source.json      kind ``lmms`` bundles only (edct-bench 0.2.0): the setup lmms-eval's logged
                           samples recorded
    controls.jsonl         the known-answer controls' records (``edct run`` folders that have them:
                           the board re-derives the results' ``controls`` block and its verdict)
    images/<ref>.png       the images themselves (``--with-images`` only; ref = the image store's
                           ``image_id``: sha256 of the decoded pixels and ``edct_`` text)

``digest`` is the SHA-256 of the canonical JSON of ``bundle.json`` without ``digest``; because
``bundle.json`` holds every member's hash, it covers everything. Secrets never enter a bundle:
results and setups hold role specs (backend, model, ``api_key_env`` names), never keys.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import tempfile
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edct_task.core.canonical import canonical_json
from edct_task.core.errors import UserError
from edct_task.core.records import SampleRecord
from edct_task.leaderboard.archive import (
    DEFAULT_LIMITS,
    ArchiveError,
    Limits,
    Members,
    json_lines,
    load_json,
    read_archive,
)
from edct_task.reporting.setup import dataset_manifest, sha256_text
from edct_task.reporting.sources import (
    DEFAULT_RESAMPLES,
    EdctRun,
    ReportInputError,
    edct_run_from_results,
    edct_runs_from_lmms,
)
from edct_task.run.log import installed_versions
from edct_task.run.outputs import CONTROLS_FILE, RESULTS_FILE, LoadedRun, image_files
from edct_task.scoring.results import as_json

FORMAT = "edct-bundle"
FORMAT_VERSION = 1
BUNDLE_JSON = "bundle.json"
JSON_MEMBERS = (
    "results.json",
    "samples.jsonl",
    "dataset_manifest.json",
    "images.json",
    "setup_source.json",
    "controls.jsonl",
)
KNOWN_MEMBERS = frozenset((BUNDLE_JSON, *JSON_MEMBERS))
"""Every member name a bundle may hold, besides ``images/<64 hex>.png``."""
_ZIP_DATE = (2020, 1, 1, 0, 0, 0)
_VERSIONED = ("edct-bench", "lmms-eval", "numpy", "scipy", "pydantic", "transformers", "torch")


class BundleError(UserError, ValueError):
    """A bundle that cannot be made or read; the message names the file and what is wrong."""


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def bundle_digest(meta: dict[str, Any]) -> str:
    return sha256_text(canonical_json({k: v for k, v in meta.items() if k != "digest"}))


def _image_refs(records: list[SampleRecord]) -> list[str]:
    return sorted({ref for r in records for ref in image_files(r).values()})


@dataclass
class Bundle:
    """A bundle read back: its metadata and members (verification happens in ``verify``)."""

    path: Path
    meta: dict[str, Any]
    members: Mapping[str, bytes] = field(repr=False)
    """Member name → bytes (``bundle.json`` excluded); packed images are read when asked for."""
    limits: Limits = DEFAULT_LIMITS

    def close(self) -> None:
        """Close the archive (its streamed members can no longer be read)."""
        if isinstance(self.members, Members):
            self.members.close()

    def __enter__(self) -> Bundle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def json_member(self, name: str) -> Any:
        if name not in self.members:
            raise BundleError(f"{self.path}: member {name} is missing")
        try:
            return load_json(self.members[name], f"member {name}", self.limits)
        except ArchiveError as exc:
            raise BundleError(f"{self.path}: {exc}") from None

    def json_object(self, name: str) -> dict[str, Any]:
        """A JSON member that must hold an object (a mapping)."""
        value = self.json_member(name)
        if not isinstance(value, dict):
            raise BundleError(f"{self.path}: member {name} holds a {type(value).__name__}, not an object")
        return value

    def records(self) -> list[SampleRecord]:
        if "samples.jsonl" not in self.members:
            raise BundleError(f"{self.path}: member samples.jsonl is missing")
        out = []
        try:
            lines = (
                self.members.lines("samples.jsonl")
                if isinstance(self.members, Members)
                else json_lines(self.members["samples.jsonl"], "samples.jsonl", self.limits)
            )
            for i, line in lines:
                try:
                    out.append(SampleRecord.model_validate_json(line))
                except ValueError as exc:
                    first = str(exc).splitlines()[0]
                    raise BundleError(
                        f"{self.path}: samples.jsonl line {i} is not a sample record ({first})"
                    ) from None
        except ArchiveError as exc:
            raise BundleError(f"{self.path}: {exc}") from None
        return out

    def edct_run(self) -> EdctRun:
        """The bundle as an EDCT result for ``edct report`` (its claimed numbers, its setup)."""
        from edct_task.run.checks import RunReadError, check_summary

        where = f"{self.path}: {BUNDLE_JSON}"
        try:
            claimed = check_summary(where, self.meta.get("claimed"))
        except RunReadError as exc:
            raise BundleError(str(exc)) from None
        model = self.meta.get("model", {})
        return EdctRun(
            model_key=str(model.get("key", "unknown")),
            model_name=str(model.get("name", "unknown")),
            task=str(self.meta.get("task", "edct")),
            summary=claimed,
            # the bundle's setup also names the target (for the board); a report's setup is the
            # setup without it, exactly as for the run folder the bundle was made from
            setup={k: v for k, v in (self.meta.get("setup") or {}).items() if k != "target"},
            seed=(self.meta.get("scoring") or {}).get("seed"),
            kind="bundle",
            source=str(self.path),
            metric_source=f"{self.path}: bundle.json claimed (verify with `edct leaderboard`)",
            records=self.records(),
            controls=self._controls_block(),
        )

    def _controls_block(self) -> dict[str, Any] | None:
        """The run's claimed controls block (results.json's ``controls``; None: not run)."""
        if "results.json" not in self.members:
            return None
        block = self.json_object("results.json").get("controls")
        return block if isinstance(block, dict) else None


def _run_of(path: Path) -> tuple[EdctRun, LoadedRun]:
    """(EDCT result, run folder) of an ``edct run`` folder, or of the run folder that an lmms-eval
    output folder's logs name: flagged where lmms-eval's own per-task values in its results files
    disagree with that run folder's records."""
    from edct_task.run.lmms_results import find_results_files, read_results_file
    from edct_task.run.outputs import load_run

    loaded = load_run(path)
    run = edct_run_from_results(loaded.results, loaded.records, source=str(loaded.path), kind="edct-run")
    if path.is_dir() and not (path / RESULTS_FILE).exists():  # lmms-eval output
        for file in find_results_files(path):
            results = read_results_file(file)
            for named in edct_runs_from_lmms(results, results.model_key, results.model_name):
                if named.run_dir is not None and Path(named.run_dir) == loaded.path:
                    run.flags += [f for f in named.flags if f not in run.flags]
    return run, loaded


def create_bundle(run_path: Path, out: Path, *, with_images: bool = False) -> dict[str, Any]:
    """Pack the run at ``run_path`` (an ``edct run`` folder, or lmms-eval output naming one) into
    ``out``; return ``bundle.json``."""
    from edct_task.run.lmms_results import ResultsFileError
    from edct_task.run.outputs import RunReadError

    try:
        run, loaded = _run_of(run_path)
    except (ReportInputError, ResultsFileError, RunReadError) as exc:
        raise BundleError(str(exc)) from None
    if run.flags:
        raise BundleError(f"{run_path}: cannot bundle an inconsistent run: {'; '.join(run.flags)}")
    records, results = run.records, loaded.results
    manifest = dataset_manifest(records)
    refs = _image_refs(records)
    members: dict[str, bytes] = {
        "results.json": json.dumps(results, indent=2, ensure_ascii=False).encode("utf-8"),
        "samples.jsonl": "".join(r.model_dump_json() + "\n" for r in records).encode("utf-8"),
        "dataset_manifest.json": json.dumps(manifest, indent=2).encode("utf-8"),
        "images.json": json.dumps({"images": refs}, indent=2).encode("utf-8"),
    }
    if (loaded.path / CONTROLS_FILE).is_file():
        controls = "".join(c.model_dump_json() + "\n" for c in loaded.controls)
        members[CONTROLS_FILE] = controls.encode("utf-8")
    if with_images:
        missing = []
        for ref in refs:
            try:
                data = loaded.read_image(ref, DEFAULT_LIMITS.max_image_bytes)
            except RunReadError as exc:
                raise BundleError(str(exc)) from None
            if data is None:
                missing.append(ref)
                continue
            members[f"images/{ref}.png"] = data
        if missing:
            raise BundleError(
                f"{run_path}: --with-images, but {len(missing)} image(s) are not in the run folder or its "
                f"image store (first: {missing[0]}); bundle without --with-images or restore the images"
            )
    model = {"key": run.model_key, "name": run.model_name, "identity": results["config"]["roles"]["target"]}
    meta: dict[str, Any] = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "kind": "edct",
        "task": run.task,
        "model": model,
        "setup": {**run.setup, "target": model["identity"]},
        "backend_identities": {
            role: ident
            for role, ident in ((results.get("config") or {}).get("backends") or {}).items()
            if role != "target"
        },
        "claimed": as_json(run.summary),
        "lmms_claims": None,
        "scoring": {"seed": int(run.seed or 0), "n_resamples": _resamples(results)},
        "versions": installed_versions(_VERSIONED),
        "images_included": with_images,
        "files": {name: sha256_bytes(data) for name, data in sorted(members.items())},
    }
    meta["digest"] = bundle_digest(meta)
    write_zip(out, meta, members)
    return meta


def _resamples(results: dict[str, Any]) -> int:
    value = results.get("bootstrap_resamples") or (results.get("config") or {}).get("bootstrap_resamples")
    return int(value) if value else DEFAULT_RESAMPLES


def write_zip(out: Path, meta: dict[str, Any], members: dict[str, bytes]) -> None:
    """Deterministic zip: fixed timestamps, sorted members, bundle.json first; written to a
    temporary file beside ``out`` and moved into place, the temporary file removed on any failure
    (a full disk leaves no ``.tmp`` and one :class:`BundleError` line)."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name[:40]}.", suffix=".tmp")
    except OSError as exc:
        raise BundleError(f"{out}: cannot be written ({exc.strerror or exc})") from None
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as f, zipfile.ZipFile(f, "w", compression=zipfile.ZIP_DEFLATED) as z:
            items = [(BUNDLE_JSON, json.dumps(meta, indent=2, ensure_ascii=False).encode("utf-8"))]
            items += sorted(members.items())
            for member, data in items:
                info = zipfile.ZipInfo(member, date_time=_ZIP_DATE)
                info.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(info, data)
        os.chmod(tmp, 0o644)
        tmp.replace(out)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError):
            raise BundleError(f"{out}: cannot be written ({exc.strerror or exc}); nothing was left") from None
        raise


def read_bundle(path: Path, limits: Limits = DEFAULT_LIMITS) -> Bundle:
    """Read a bundle's members (nothing is extracted to disk), refusing any archive that breaks a
    cap or a naming rule of ``edct_task.leaderboard.archive`` before inflating it."""
    try:
        members = read_archive(path, KNOWN_MEMBERS, limits)
    except ArchiveError as exc:
        raise BundleError(f"{path}: {exc}") from None
    except (OSError, zipfile.BadZipFile, EOFError, NotImplementedError) as exc:
        raise BundleError(f"{path}: not a readable zip archive ({exc})") from None
    try:
        meta_bytes = members.take(BUNDLE_JSON)
        if meta_bytes is None:
            raise BundleError(f"{path}: no {BUNDLE_JSON}; not an EDCT bundle (make one with `edct submit`)")
        try:
            meta = load_json(meta_bytes, BUNDLE_JSON, limits)
        except ArchiveError as exc:
            raise BundleError(f"{path}: {exc}") from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise BundleError(f"{path}: {BUNDLE_JSON} is not an {FORMAT} (format field)")
    except BaseException:
        members.close()
        raise
    return Bundle(path, meta, members, limits)


def member_sha256(members: Mapping[str, bytes], name: str) -> str:
    """A member's SHA-256, streamed from the archive where the member is not held."""
    return members.sha256(name) if isinstance(members, Members) else sha256_bytes(members[name])


def reseal(meta: dict[str, Any], members: dict[str, bytes]) -> dict[str, Any]:
    """``meta`` with the member hashes and digest recomputed (what a careful forger would do)."""
    meta = dict(meta)
    meta["files"] = {name: sha256_bytes(data) for name, data in sorted(members.items())}
    meta["digest"] = bundle_digest(meta)
    return meta
