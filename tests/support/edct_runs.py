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
    ControlRecord,
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
EDIT_TARGET = EditTargetRecord(
    edit_type="MODIFY", target="cue", source="llm", raw='{"type": "MODIFY", "target": "cue"}'
)
"""Every edit's target, with the edit parser's reply it was read from."""


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
        return ChainStep(index=j, instruction=CHAIN[j - 1], edit_target=EDIT_TARGET, attempts=attempts)
    image = ref(f"{sid}-e{j}-0")
    return ChainStep(
        index=j,
        instruction=CHAIN[j - 1],
        edit_target=EDIT_TARGET,
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
    controls: list[ControlRecord] | None = None,
    bar: float = 0.8,
) -> dict:
    """An ``edct run`` output folder; returns its results.json. ``controls``: the known-answer
    controls' records, written to controls.jsonl and summarised in results.json (None: a run made
    before controls, with neither)."""
    from edct_task.scoring.controls import summarise_controls

    setup = run_config(target, judge=judge, seed=seed)
    if controls is None:  # a run made before controls: its protocol has no controls settings either
        setup["protocol"] = {
            k: v for k, v in setup["protocol"].items() if k not in ("controls", "control_bar")
        }
    else:
        setup["protocol"]["control_bar"] = bar

    folder.mkdir(parents=True, exist_ok=True)
    target = target or {"backend": "calibration-reference", "behavior": "faithful"}
    log = RunLog(
        created="2026-12-01T08:00:00+00:00",
        versions={"edct-bench": "0.1.0"},
        prompt_versions=prompts.prompt_versions(),
        config=RunSetup(**setup, bootstrap_resamples=resamples),
        results=summarise(recs, seed=seed, n_resamples=resamples),
        judge_agreement=None,
        judge_health=judge_health(recs),
        controls=None
        if controls is None
        else summarise_controls(controls, bar=bar, requested=setup["protocol"]["controls"]),
        usage={},
        calls={},
        wall_seconds=1.0,
    )
    results = log.model_dump(mode="json")
    if controls is None:  # written by the edct-bench of that time: run log version 1, no controls keys
        results["schema_version"] = 1
        results["config"]["protocol"] = setup["protocol"]
    (folder / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    (folder / "samples.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in recs))
    if controls is not None:
        (folder / "controls.jsonl").write_text("".join(c.model_dump_json() + "\n" for c in controls))
    return results


def control_records(correct: int, recs: list[SampleRecord] | None = None) -> list[ControlRecord]:
    """The records of every known-answer control a run of ``recs`` draws (``controls.draw`` over
    their domains, as ``edct run`` does), graded from real replies: every role answers right, but
    the binary judge only on its first ``correct`` controls (the rest get the opposite verdict)."""
    import json

    from edct_task.controls import control_domains, draw
    from edct_task.engine.controls import (
        ConceptsControl,
        EditParseControl,
        JudgeControl,
        control_requests,
        grade_control,
    )
    from model_adapters.contracts import Completion

    cfg = calibration_config().protocol
    domains = control_domains([r.sample.domain for r in recs or records(0.5, n=2)], False)
    out: list[ControlRecord] = []
    judged = 0
    for item in draw(domains, cfg.controls, seed=cfg.seed, k=cfg.k):
        body = item.body
        requests = control_requests(item, cfg)
        replies = []
        for request in requests:
            if isinstance(body, JudgeControl) and request.template.startswith("judge_binary"):
                ac, ef = (body.ac, body.ef) if judged < correct else (1 - body.ac, 1 - body.ef)
                judged += 1
                text = (
                    "AC_REASON: The new answer fits the edited scene.\nEF_REASON: The explanation "
                    f"rests on what the edits left.\nFINAL SCORES\nAC: {ac}\nEF: {ef}\nCCS: {ac * ef}"
                )
            elif isinstance(body, JudgeControl):
                text = f"REASON: The answer and the explanation follow the edits.\nSCORE: {body.level}"
            elif isinstance(body, ConceptsControl):
                text = json.dumps([" ".join(words) for words in body.concepts])
            else:
                assert isinstance(body, EditParseControl)
                text = json.dumps({"type": body.edit_type, "target": " ".join(body.target)})
            replies.append(Completion(text, finish_reason="stop"))
        out += grade_control(item, requests, replies, cfg)
    return out
