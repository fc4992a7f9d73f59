"""Every Eval Ever records (https://github.com/evaleval/every_eval_ever, PyPI ``every-eval-ever``):
one aggregate record per run, in the open schema Hugging Face model pages show.

``edct submit RUN --output B.edct.zip --every-eval-ever DIR`` writes the record of the bundled run
to the one path the schema's datastore allows,
``DIR/data/edct-bench/<developer>/<model>/<uuid4>.json`` (the package's validator checks that
path, and the model id's directory, too). What the record holds, all from the bundle:

- ``model_info``: the target (its Hub-style id; ``<backend>/<model>`` where the name has no
  org); ``eval_library``: edct-bench and its version, with the **setup identity** (setup id and
  label, the full setup as canonical JSON, the target's rendering, the dataset manifest);
- one ``evaluation_results`` entry per row of the metric table (``scoring.metrics``) and scope
  (overall, then each domain): the claimed estimate as ``score``, its 95% interval as
  ``uncertainty.confidence_interval`` (with the method results.json names) and ``num_samples``,
  the scope's counts (total, scored, excluded, unscored, error …) as ``score_details.details``;
  a metric without an estimate (nothing scored) is left out and named in the source details;
- ``metric_config.llm_scoring.judges[]``: every judge of the panel, each with its known-answer
  controls (correct/n, accuracy, 95% CI, below the bar) for the judge role the metric reads
  (``judge_binary`` for CCS_binary, AC and EF; ``judge_graded`` for CCS_graded), and the prompt
  template that judge was given;
- ``source_metadata.additional_details``: the run's honesty flags: ``partial`` (a merge with
  missing slices) or ``shard`` (one slice), ``controls`` (passed, below the bar, off, not run)
  with the lines of every role below the bar, and the overall sample counts; the bundle digest
  (the verifiable source) and ``--source-url``.

The file name is a UUID4 derived from the bundle's members and model (``record_uuid``), so
submitting one run again replaces its record instead of adding a second one.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from edct_task.core.canonical import canonical_json
from edct_task.prompts import get_template, prompt_versions
from edct_task.reporting.setup import setup_id, setup_label
from edct_task.scoring.controls import controls_status, unreliable_reasons
from edct_task.scoring.metrics import metric_names, metric_row
from edct_task.scoring.results import Results, ScoreBlock

SCHEMA_VERSION = "0.3.0"
"""The Every Eval Ever schema these records follow (``every_eval_ever/schemas/eval.schema.json``)."""
COLLECTION = "edct-bench"
"""The benchmark's datastore collection (``source_data.dataset_name``, the path's first folder)."""
BENCHMARK = "EDCT-Bench"
CONFIDENCE_LEVEL = 0.95
RELATIONSHIPS = ("first_party", "third_party", "collaborative", "other")
"""``source_metadata.evaluator_relationship``: who ran the evaluation, relative to the model."""
_RESERVED = {"data", "unknown", "con", "prn", "aux", "nul"} | {
    f"{p}{i}" for p in ("com", "lpt") for i in range(10)
}
"""Folder names the datastore refuses (its own ``data``, ``unknown``, Windows device names)."""
_LOCAL_HOSTS = ("127.0.0.1", "localhost", "0.0.0.0", "[::1]")
_IN_PROCESS = {"calibration-reference", "calibration-rules", "lmms-eval"}


def path_component(text: str) -> str:
    """``text`` as one portable datastore folder name: letters, digits, ``.``, ``_``, ``-``."""
    out = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip(".- ")
    if not out:
        return "model"
    return f"x-{out}" if out.split(".", 1)[0].lower() in _RESERVED else out


def model_id(name: str, backend: str) -> str:
    """A Hub-style ``org/model`` id for a model named ``name`` served by ``backend``: the name's own
    ``org/model`` when it has one, else ``<backend>/<name>`` (``openai-chat/gpt-4o``)."""
    parts = [path_component(p) for p in str(name).split("/") if p.strip()]
    if len(parts) >= 2:
        return "/".join(parts)
    return f"{path_component(backend)}/{parts[0] if parts else 'model'}"


def datastore_path(model: str) -> Path:
    """``data/<collection>/<developer>/<model>`` of a record whose ``model_info.id`` is ``model``."""
    developer, *rest = model.split("/")
    return Path("data", COLLECTION, developer, "_".join(rest))


def _deployment(spec: Mapping[str, Any]) -> str:
    """``self_deployed`` for a backend that runs in this process or on this machine's server,
    ``externally_managed`` for a remote API, ``unknown`` when the spec does not say."""
    backend = str(spec.get("backend") or "")
    if backend in _IN_PROCESS or spec.get("model_args") is not None:
        return "self_deployed"
    base_url = spec.get("base_url")
    if isinstance(base_url, str) and base_url:
        return "self_deployed" if any(h in base_url for h in _LOCAL_HOSTS) else "externally_managed"
    return "unknown"


def _spec_name(spec: Mapping[str, Any]) -> str:
    if spec.get("model"):
        return str(spec["model"])
    args = "-".join(str(v) for k, v in sorted(spec.items()) if k not in ("backend", "version"))
    return args or str(spec.get("backend") or "model")


def model_info(spec: Mapping[str, Any], *, name: str | None = None) -> dict[str, Any]:
    """The schema's ``model_info`` of a role spec (``name``: the display name, when known). The id is
    the name's ``org/model`` when it has one, else ``<backend>/<the spec's model or settings>``."""
    backend = str(spec.get("backend") or "lmms-eval")
    shown = name or _spec_name(spec)
    ident = model_id(shown if "/" in shown else _spec_name(spec), backend)
    return {
        "name": shown,
        "id": ident,
        "developer": ident.split("/")[0],
        "inference_platform": backend,
        "additional_details": {
            "deployment_type": _deployment(spec),
            "model_availability": "unknown",
            "edct_role_spec": canonical_json(dict(spec)),
        },
    }


def _strings(values: Mapping[str, Any]) -> dict[str, str]:
    """The schema's ``additional_details``: every value a string (None left out)."""
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items() if v is not None}


def judge_role(metric: str) -> str:
    """The controls role (and prompt template) of the judgements a metric is computed from."""
    return "judge_graded" if metric_row(metric).judge == "graded" else "judge_binary"


def _judge_specs(setup: Mapping[str, Any]) -> list[dict[str, Any]]:
    spec = (setup.get("roles") or {}).get("judge")
    specs = spec if isinstance(spec, list) else [spec]
    return [dict(s) if isinstance(s, Mapping) else {"backend": str(s or "unknown")} for s in specs]


def _control_details(controls: Mapping[str, Any] | None, role: str, judge: str) -> dict[str, str]:
    if not controls or not controls.get("requested"):
        return {"controls": controls_status(controls)}
    tally = ((controls.get("roles") or {}).get(role) or {}).get(judge)
    if not isinstance(tally, Mapping):
        return {"controls": "none for this judge"}
    ci = tally.get("ci") or [None, None]
    return _strings(
        {
            "controls_role": role,
            "controls_n": tally.get("n"),
            "controls_correct": tally.get("correct"),
            "controls_accuracy": tally.get("accuracy"),
            "controls_ci_low": ci[0],
            "controls_ci_high": ci[1],
            "controls_unanswered": tally.get("unanswered"),
            "controls_bar": controls.get("bar"),
            "controls_below_bar": bool(tally.get("below_bar")),
        }
    )


def _prompt(role: str, recorded: Mapping[str, str]) -> str:
    """The judge's prompt template: its text when the run used this version of it, else its name
    and recorded version (the text of another version is not in this package)."""
    version = recorded.get(role)
    if version is None or version == prompt_versions().get(role):
        return get_template(role).text
    return f"edct-bench prompt template {role} {version} (text not shipped with this version)"


def llm_scoring(metric: str, setup: Mapping[str, Any], controls: Mapping[str, Any] | None) -> dict[str, Any]:
    """``metric_config.llm_scoring``: the judge panel with each judge's controls accuracy."""
    role = judge_role(metric)
    protocol = setup.get("protocol") or {}
    specs = _judge_specs(setup)
    judges = []
    for i, spec in enumerate(specs):
        member = "judge" if len(specs) == 1 else f"judge{i}"  # as the controls name panel members
        entry: dict[str, Any] = {
            "model_info": model_info(spec),
            "additional_details": _control_details(controls, role, member),
        }
        if isinstance(protocol.get("judge_temperature"), (int, float)):
            entry["temperature"] = float(protocol["judge_temperature"])
        judges.append(entry)
    out: dict[str, Any] = {
        "judges": judges,
        "input_prompt": _prompt(role, setup.get("prompt_versions") or {}),
        "additional_details": _strings(
            {"judge_samples": protocol.get("judge_samples"), "panel_tie": protocol.get("panel_tie")}
        ),
    }
    if len(judges) > 1:
        out["aggregation_method"] = "average" if metric_row(metric).judge == "graded" else "majority_vote"
    return out


def _result(
    metric: str,
    scope: str,
    block: ScoreBlock,
    *,
    task: str,
    source_data: dict[str, Any],
    scoring: dict[str, Any],
    evaluated: str | None,
) -> dict[str, Any] | None:
    m = block.metric(metric)
    if m is None or m.estimate is None:
        return None
    estimate = m.estimate
    row = metric_row(metric)
    uncertainty: dict[str, Any] = {}
    if m.low is not None and m.high is not None:
        ci = {"lower": float(m.low), "upper": float(m.high), "confidence_level": CONFIDENCE_LEVEL}
        uncertainty["confidence_interval"] = {**ci, **({"method": m.method} if m.method else {})}
    if m.n is not None:
        uncertainty["num_samples"] = m.n
    result: dict[str, Any] = {
        "evaluation_result_id": f"{scope}.{metric}",
        "evaluation_name": task if scope == "overall" else f"{task}/{scope}",
        "source_data": source_data,
        "metric_config": {
            "evaluation_description": row.description,
            "metric_id": f"{COLLECTION}.{metric}",
            "metric_name": metric,
            "metric_unit": "proportion",
            "lower_is_better": not row.higher_is_better,
            "score_type": "continuous",
            "min_score": 0.0,
            "max_score": 1.0,
            "llm_scoring": scoring,
            "additional_details": {"scope": scope, "judge_role": judge_role(metric)},
        },
        "score_details": {
            "score": float(estimate),
            "details": _strings(block.counts.known()),
            **({"uncertainty": uncertainty} if uncertainty else {}),
        },
    }
    if evaluated:
        result["evaluation_timestamp"] = evaluated
    return result


def run_flags(results: Mapping[str, Any], claimed: Results) -> dict[str, str]:
    """What a reader must know before trusting the numbers: partial or sliced runs, the controls'
    verdict, and how many samples were not scored (counted, never scored 0)."""
    data = (results.get("config") or {}).get("data") or {}
    controls = results.get("controls") if isinstance(results.get("controls"), Mapping) else None
    counts = claimed.overall.counts.known()
    partial = data.get("partial") if isinstance(data.get("partial"), Mapping) else None
    shard = data.get("shard") if isinstance(data.get("shard"), Mapping) else None
    out: dict[str, Any] = {
        "partial": bool(partial or shard),
        "partial_missing_slices": ",".join(map(str, partial.get("missing_slices") or []))
        if partial
        else None,
        "partial_items": f"{partial.get('items')}/{partial.get('of_items')}" if partial else None,
        "shard": f"{shard.get('index')}/{shard.get('count')}" if shard else None,
        "controls": controls_status(controls),
        "controls_unreliable": "; ".join(unreliable_reasons(controls)) or None,
    }
    for key in ("total", "scored", "excluded", "unscored", "error", "steps_unscored"):
        out[f"samples_{key}"] = counts.get(key)
    return _strings(out)


def eee_record(
    meta: Mapping[str, Any],
    results: Mapping[str, Any],
    *,
    organization: str = "unknown",
    relationship: str = "third_party",
    source_url: str | None = None,
    retrieved: float | None = None,
) -> dict[str, Any]:
    """The Every Eval Ever aggregate record of a bundle (``meta``: its ``bundle.json``; ``results``:
    its ``results.json`` member, for the controls and the run's partial/shard marks)."""
    if relationship not in RELATIONSHIPS:
        raise ValueError(f"evaluator relationship {relationship!r}: one of {', '.join(RELATIONSHIPS)}")
    model = meta.get("model") or {}
    identity = model.get("identity") or {}
    target = dict(identity) if isinstance(identity, Mapping) else {"backend": str(identity)}
    if meta.get("kind") == "lmms":
        target = {"backend": "lmms-eval", **{k: v for k, v in target.items() if v is not None}}
    info = model_info(target, name=str(model.get("name") or _spec_name(target)))
    setup = {k: v for k, v in (meta.get("setup") or {}).items() if k != "target"}
    claimed = Results.model_validate(meta.get("claimed"))
    controls = results.get("controls") if isinstance(results.get("controls"), Mapping) else None
    versions = {**(meta.get("versions") or {}), **(results.get("versions") or {})}
    task = str(meta.get("task") or "edct")
    evaluated = results.get("created") if isinstance(results.get("created"), str) else meta.get("created")
    overall = claimed.overall
    source_data = {
        "dataset_name": COLLECTION,
        "source_type": "other",
        "additional_details": _strings(
            {
                "benchmark": BENCHMARK,
                "benchmark_version": versions.get("edct-bench"),
                "task": task,
                "dataset_manifest_digest": setup.get("dataset_digest"),
                "samples": overall.counts.total,
            }
        ),
    }
    scopes = claimed.blocks()
    entries, missing = [], []
    for metric in metric_names():
        scoring = llm_scoring(metric, setup, controls)
        for scope, block in scopes:
            entry = _result(
                metric, scope, block, task=task, source_data=source_data, scoring=scoring, evaluated=evaluated
            )
            if entry is not None:
                entries.append(entry)
            elif scope == "overall":
                missing.append(metric)
    stamp = time.time() if retrieved is None else retrieved
    digest = str(meta.get("digest") or "")
    source = run_flags(results, claimed)
    source.update(
        _strings(
            {
                "bundle_digest": digest,
                "bundle_url": source_url,
                "metrics_without_estimate": ",".join(missing) or None,
            }
        )
    )
    record: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "evaluation_id": f"{COLLECTION}/{info['id']}/{stamp}",
        "retrieved_timestamp": str(stamp),
        "source_metadata": {
            "source_name": f"{BENCHMARK} (edct-bench)",
            "source_type": "evaluation_run",
            "source_organization_name": organization,
            "evaluator_relationship": relationship,
            "additional_details": source,
        },
        "model_info": info,
        "eval_library": {
            "name": "edct-bench",
            "version": str(versions.get("edct-bench") or "unknown"),
            "additional_details": _strings(
                {
                    "host": "lmms-eval" if target.get("backend") == "lmms-eval" else "edct run",
                    "lmms_eval_version": versions.get("lmms-eval"),
                    "setup_id": setup_id(setup),
                    "setup_label": setup_label(setup),
                    "setup": canonical_json(setup),
                    "target_rendering": setup.get("target_rendering") or "multi-turn",
                    "seed": (meta.get("scoring") or {}).get("seed"),
                }
            ),
        },
        "evaluation_results": entries,
    }
    if evaluated:
        record["evaluation_timestamp"] = str(evaluated)
    return record


def record_uuid(meta: Mapping[str, Any]) -> str:
    """A UUID4 made from what the bundle holds (its members' hashes and the model), not from when
    it was made: submitting one run again names the same file, so its record is replaced."""
    basis = canonical_json({"files": meta.get("files") or {}, "model": meta.get("model") or {}})
    raw = hashlib.sha256(basis.encode("utf-8")).digest()[:16]
    return str(uuid.UUID(bytes=raw, version=4))


def write_eee_record(
    meta: Mapping[str, Any],
    results: Mapping[str, Any],
    folder: Path,
    *,
    organization: str = "unknown",
    relationship: str = "third_party",
    source_url: str | None = None,
) -> Path:
    """Write the record to ``folder/data/edct-bench/<developer>/<model>/<uuid4>.json``; its path."""
    from edct_task.engine.files import atomic_write

    record = eee_record(
        meta, results, organization=organization, relationship=relationship, source_url=source_url
    )
    target = folder / datastore_path(record["model_info"]["id"])
    target.mkdir(parents=True, exist_ok=True)
    path = target / f"{record_uuid(meta)}.json"
    atomic_write(path, json.dumps(record, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
    return path
