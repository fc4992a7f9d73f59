"""Forged exclusions under ``edct leaderboard --rejudge --regate`` (issue 46, point 5): the scored
samples a bundle would rather hide turned into editor failures, gate failures whose "edited" image
is the image it edits, gate failures with altered ratios, or gate calls recorded as failed. Each
forgery is consistent (it passes verification); the board re-checks each exclusion from its images,
or does not trust it, and shows the entry apart. The honest bundle still ranks."""

from __future__ import annotations

import json

import pytest
import yaml
from support.forged_bundles import recompute_claims
from test_rejudge import _run_and_submit

from edct_task.cli.main import main
from edct_task.config import calibration_config
from edct_task.core.records import EditAttempt, SampleRecord
from edct_task.engine.protocol import EDIT_FAILED, VERIFY_FAILED
from edct_task.leaderboard.bundle import read_bundle, reseal, write_zip
from edct_task.leaderboard.verify import Verified, verify_bundle
from edct_task.run.outputs import image_files
from edct_task.scoring.results import as_json


def _attempts(kind: str, first: EditAttempt, original: str) -> tuple[EditAttempt, ...]:
    """Two failed attempts of the given forgery, built from the honest first attempt."""
    seeds = (first.seed, first.seed + 1)
    if kind == "editor":
        return tuple(
            EditAttempt(attempt=a, seed=s, failure=EDIT_FAILED + "editor timed out")
            for a, s in enumerate(seeds)
        )
    if kind == "gate_error":
        return tuple(
            EditAttempt(attempt=a, seed=s, image=first.image, failure=VERIFY_FAILED + "detector timed out")
            for a, s in enumerate(seeds)
        )
    image = original if kind == "original" else first.image
    update = {"r_in": 0.0, "r_out": 0.0} if kind == "original" else {"r_in": 0.01}
    check = first.check.model_copy(update={**update, "passed": False, "verdict": "no_change_in_target"})
    return tuple(
        first.model_copy(
            update={
                "attempt": a,
                "seed": s,
                "image": image,
                "check": check,
                "failure": "verification: no_change_in_target",
            }
        )
        for a, s in enumerate(seeds)
    )


def forge_exclusions(src, dst, kind: str):
    """Every scored sample with a CCS-0 step excluded at its first edit by a forged failure of
    ``kind``; claims, results, images.json and the packed images redone; resealed."""
    b = read_bundle(src)
    meta, members = json.loads(json.dumps(b.meta)), dict(b.members)
    recs = [SampleRecord.model_validate_json(line) for line in members["samples.jsonl"].decode().splitlines()]
    forged = 0
    for i, r in enumerate(recs):
        if r.status != "scored" or r.scores.ccs_binary == 1:
            continue
        step = r.steps[0]
        attempts = _attempts(kind, step.attempts[0], r.sample.image or "")
        step = step.model_copy(
            update={
                "attempts": attempts,
                "verified": False,
                "image": None,
                "requery": None,
                "binary": None,
                "graded": None,
                "votes": (),
            }
        )
        recs[i] = r.model_copy(
            update={
                "steps": (step,),
                "status": "excluded",
                "scores": None,
                "reason": f"edit 1 failed verification after 2 attempt(s): {attempts[-1].failure}",
            }
        )
        forged += 1
    assert forged > 0
    members["samples.jsonl"] = "".join(r.model_dump_json() + "\n" for r in recs).encode()
    refs = sorted({ref for r in recs for ref in image_files(r).values()})
    members["images.json"] = json.dumps({"images": refs}).encode()
    for name in [n for n in members if n.startswith("images/") and n[7:-4] not in refs]:
        del members[name]
    recompute_claims(meta, members, recs)
    write_zip(dst, reseal(meta, members), members)
    return dst


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("exclusions")
    honest = _run_and_submit(tmp, "mixed:0.5", 8, images=True)
    config = tmp / "full.yaml"
    config.write_text(yaml.safe_dump(calibration_config(n=4).model_dump(mode="json")))
    return tmp, honest, config


REASONS = {
    "editor": "editor failure(s) the board cannot re-check (no image): not trusted",
    "original": "edit(s) whose edited image is the image it edits",
    "ratios": "gate check(s) whose r_in/r_out differ from the board's on the same images",
    "gate_error": "the board's gate disagrees on",
}


@pytest.mark.parametrize("kind", sorted(REASONS))
def test_a_forged_exclusion_is_rechecked_or_not_trusted(world, kind):
    tmp, honest, config = world
    forged = forge_exclusions(honest, tmp / f"{kind}.edct.zip", kind)
    verified = verify_bundle(forged)
    assert isinstance(verified, Verified), verified.reason  # consistent: re-derivation cannot see it
    claimed = as_json(verified.summary)["overall"]["metrics"]["ccs_binary"]["estimate"]
    assert claimed == 1.0  # what the forgery would rank at
    out = tmp / f"board-{kind}"
    args = ["leaderboard", str(honest), str(forged), "--out", str(out), "--rejudge", str(config), "--regate"]
    assert main([*args, "--resamples", "200"]) == 0
    (track,) = json.loads((out / "leaderboard.json").read_text())["tracks"]
    assert [e["bundle"] for e in track["entries"]] == [str(honest)]  # the honest run ranks, alone
    assert track["entries"][0]["rank"] == 1 and track["entries"][0]["ccs_binary"]["estimate"] < 1.0
    (apart,) = track["unranked"]
    assert apart["bundle"] == str(forged) and apart["rank"] is None
    assert any(REASONS[kind] in reason for reason in apart["unranked"]), apart["unranked"]
    assert REASONS[kind] in (out / "leaderboard.md").read_text()


def test_the_honest_bundle_alone_has_nothing_untrusted(world):
    tmp, honest, config = world
    out = tmp / "board-honest"
    args = ["leaderboard", str(honest), "--out", str(out), "--rejudge", str(config), "--regate"]
    assert main([*args, "--resamples", "200"]) == 0
    (track,) = json.loads((out / "leaderboard.json").read_text())["tracks"]
    (entry,) = track["entries"]
    gate = entry["board"]["gate_agreement"]
    assert gate["edits"] > 0 and gate["rate"] == 1.0
    assert gate["ratio_mismatches"] == gate["unchanged"] == gate["untrusted_edits"] == 0
    assert entry["board"]["unranked"] == []
