"""Synthetic EDCT records and ``edct run`` output folders, in the runner's own file format.

``write_edct_run`` writes what ``edct_task.run.runner.run`` writes (``results.json`` with
``config`` / ``prompt_versions`` / ``results`` from ``summarise``, and ``samples.jsonl``), with
chosen scores so reports and leaderboards can be checked against known numbers.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from edct_task import prompts
from edct_task.config import calibration_config
from edct_task.core.records import (
    BinaryScore,
    ChainStep,
    ConceptsRecord,
    EditAttempt,
    EditInstruction,
    EditTargetRecord,
    Exchange,
    GradedScore,
    InstructionsRecord,
    SampleInput,
    SampleRecord,
)
from edct_task.engine.protocol import score_sample
from edct_task.run.log import RunLog, RunSetup
from edct_task.scoring.health import judge_health
from edct_task.scoring.metrics import summarise
from verification.check import EditCheck, GateParams

DOMAINS = ("okvqa", "drivelm", "3dsr")


def ref(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


CHAIN = tuple(
    EditInstruction(
        concept=f"cue {j}",
        keep="everything else",
        change=f"replace cue {j} with its opposite",
        how="match the lighting",
        constraints="no new objects",
    )
    for j in (1, 2)
)
GATE = GateParams()


def _check(passed: bool) -> EditCheck:
    """A gate record whose numbers give ``passed`` against the default thresholds."""
    return EditCheck(
        passed=passed,
        verdict="pass" if passed else "no_change_in_target",
        r_in=0.62 if passed else 0.04,
        r_out=0.03,
        tau_in=GATE.tau_in,
        tau_out=GATE.tau_out,
        edit_type="MODIFY",
        target="cue",
        searched="original",
        params=GATE,
    )


def _step(sid: str, j: int, *, verified: bool, ac: int = 1, ef: int = 1, grade: int = 5) -> ChainStep:
    """Edit j of a sample: one passing attempt (or two failing ones), re-query and judge replies."""
    if not verified:
        attempts = tuple(
            EditAttempt(
                attempt=a,
                seed=1000 * j + a,
                image=ref(f"{sid}-e{j}-{a}"),
                check=_check(False),
                failure="verification: no_change_in_target",
            )
            for a in (0, 1)
        )
        return ChainStep(index=j, instruction=CHAIN[j - 1], attempts=attempts)
    image = ref(f"{sid}-e{j}-0")
    return ChainStep(
        index=j,
        instruction=CHAIN[j - 1],
        edit_target=EditTargetRecord(edit_type="MODIFY", target="cue", source="llm"),
        attempts=(EditAttempt(attempt=0, seed=1000 * j, image=image, check=_check(True)),),
        verified=True,
        image=image,
        requery=Exchange(answer=f"answer after edit {j}", explanation=f"because of cue {j}"),
        binary=BinaryScore(
            raw=f"AC_REASON: checked\nEF_REASON: checked\nAC: {ac}\nEF: {ef}\nCCS: {ac * ef}",
            ac=ac,
            ef=ef,
            ac_reason="checked",
            ef_reason="checked",
        ),
        graded=GradedScore(raw=f"REASON: checked\nSCORE: {grade}", score=grade, reason="checked"),
    )


def _extraction() -> dict:
    concepts = tuple(c.concept for c in CHAIN)
    return {
        "baseline": Exchange(answer="yes", explanation="cue 1 and cue 2"),
        "concepts": ConceptsRecord(raw=json.dumps(list(concepts)), concepts=concepts),
        "instructions": InstructionsRecord(
            raw=json.dumps([c.model_dump() for c in CHAIN]), instructions=CHAIN
        ),
    }


def scored_record(sample: SampleInput, ac, ef, grades) -> SampleRecord:
    """A scored sample whose two steps carry the given verdicts, with consistent raw replies."""
    steps = tuple(
        _step(sample.id, j, verified=True, ac=a, ef=e, grade=g)
        for j, (a, e, g) in enumerate(zip(ac, ef, grades, strict=True), 1)
    )
    return SampleRecord(
        sample=sample, status="scored", steps=steps, scores=score_sample(steps), **_extraction()
    )


def excluded_record(sample: SampleInput) -> SampleRecord:
    """A sample whose first edit failed verification twice (retried once, then excluded)."""
    return SampleRecord(
        sample=sample,
        status="excluded",
        reason="edit 1 failed verification after 2 attempt(s): verification: no_change_in_target",
        steps=(_step(sample.id, 1, verified=False),),
        **_extraction(),
    )


def records(
    level: float, n: int = 30, *, domains: tuple[str, ...] = DOMAINS, excluded: int = 1, offset: int = 0
) -> list[SampleRecord]:
    """``n`` samples per domain: the first ``round(level * n)`` pass both edits, the rest fail one.

    ``excluded`` samples per domain are excluded instead (counted, not scored); ``offset`` shifts
    which samples pass (for runs that differ like repeated seeds do). Every record is complete as
    the protocol writes it (raw judge replies, gate numbers, attempts), so a leaderboard re-derives
    it: a passing sample has AC = EF = 1 and grade 5 at both steps (CCS 1.0); a failing one AC 1
    then 0 (CCS 0.5) and grades giving CCS_graded 0.25 or 0.5.
    """
    out = []
    for d in domains:
        passing = round(level * n)
        for i in range(n):
            sid = f"{d}-{i:03d}"
            sample = SampleInput(id=sid, domain=d, question=f"What about {sid}?", image=ref(sid))
            if i < excluded:
                out.append(excluded_record(sample))
                continue
            ok = ((i + offset) % n) < passing
            if ok:
                out.append(scored_record(sample, (1, 1), (1, 1), (5, 5)))
            else:
                out.append(scored_record(sample, (1, 0), (1, 1 if i % 3 else 0), (3, 1) if i % 2 else (4, 2)))
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
