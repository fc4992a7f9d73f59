"""Synthetic EDCT records and ``edct run`` output folders, in the runner's own file format.

``write_edct_run`` writes what ``edct_task.run.runner.run`` writes (``results.json`` with
``config`` / ``prompt_versions`` / ``results`` from ``summarise``, and ``samples.jsonl``), with
chosen scores so reports and leaderboards can be checked against known numbers.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from edct_task import prompts
from edct_task.config import calibration_config
from edct_task.core.records import SampleInput, SampleRecord, SampleScores
from edct_task.run.log import RunLog, RunSetup
from edct_task.scoring.health import judge_health
from edct_task.scoring.metrics import summarise

DOMAINS = ("okvqa", "drivelm", "3dsr")


def ref(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def records(
    level: float, n: int = 30, *, domains: tuple[str, ...] = DOMAINS, excluded: int = 1, offset: int = 0
) -> list[SampleRecord]:
    """``n`` samples per domain: the first ``round(level * n)`` pass both edits, the rest fail one.

    ``excluded`` samples per domain are excluded instead (counted, not scored); ``offset`` shifts
    which samples pass (for runs that differ like repeated seeds do).
    """
    out = []
    for d in domains:
        passing = round(level * n)
        for i in range(n):
            sid = f"{d}-{i:03d}"
            sample = SampleInput(id=sid, domain=d, question=f"What about {sid}?", image=ref(sid))
            if i < excluded:
                out.append(
                    SampleRecord(sample=sample, status="excluded", reason="verification failed after retry")
                )
                continue
            ok = ((i + offset) % n) < passing
            scores = SampleScores(
                ccs_binary=1.0 if ok else 0.5,
                ccs_graded=1.0 if ok else (0.25 if i % 2 else 0.5),
                ac=(1, 1) if ok else (1, 0),
                ef=(1, 1) if ok else (1, 1 if i % 3 else 0),
            )
            out.append(SampleRecord(sample=sample, status="scored", scores=scores))
    return out


def run_config(
    target: dict[str, Any], *, judge: str = "calibration-rules", seed: int = 0, k: int = 2
) -> dict:
    base = calibration_config(n=4).model_dump(mode="json")
    return {
        "data": base["data"],
        "protocol": {**calibration_config().protocol.model_dump(mode="json"), "seed": seed, "k": k},
        "verification": calibration_config().verification.model_dump(mode="json"),
        "limits": {},
        "roles": {
            "target": target,
            "extractor": {"backend": "calibration-rules"},
            "judge": {"backend": judge},
            "edit_parser": {"backend": "calibration-rules"},
            "editor": {"backend": "calibration-editor"},
            "detector": {"backend": "calibration-oracle"},
        },
        "backends": {},
    }


def write_edct_run(
    folder: Path,
    recs: list[SampleRecord],
    *,
    target: dict[str, Any] | None = None,
    judge: str = "calibration-rules",
    seed: int = 0,
    resamples: int = 2000,
) -> dict:
    """An ``edct run`` output folder; returns its results.json."""
    folder.mkdir(parents=True, exist_ok=True)
    target = target or {"backend": "calibration-reference", "behavior": "faithful"}
    log = RunLog(
        created="2026-12-01T08:00:00+00:00",
        versions={"edct-bench": "0.1.0"},
        prompt_versions=prompts.prompt_versions(),
        config=RunSetup(**run_config(target, judge=judge, seed=seed), bootstrap_resamples=resamples),
        results=summarise(recs, seed=seed, n_resamples=resamples),
        judge_agreement=None,
        judge_health=judge_health(recs),
        usage={},
        calls={},
        wall_seconds=1.0,
    )
    results = log.model_dump(mode="json")
    (folder / "results.json").write_text(log.to_json())
    (folder / "samples.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in recs))
    return results
