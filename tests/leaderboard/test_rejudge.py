"""`edct leaderboard --rejudge`: the board's own judge on every entry, through the stage cache.

Runs on the calibration world: the honest bundle's verdicts agree 100% with the board's
calibration judge; a bundle whose verdicts *and* raw judge replies were rewritten consistently
passes verification but is caught here (agreement drops, its claim falls outside the board's CI).
"""

from __future__ import annotations

import json

import pytest
import yaml
from support.forged_bundles import recompute_claims

from edct_task.cli.main import main
from edct_task.config import calibration_config
from edct_task.core.records import SampleRecord
from edct_task.engine.protocol import binary_score, graded_score, score_sample
from edct_task.engine.stage_cache import StageCache
from edct_task.leaderboard.bundle import read_bundle, reseal, write_zip
from edct_task.leaderboard.verify import Verified, verify_bundle
from edct_task.run.outputs import image_files
from edct_task.run.runner import run
from model_adapters.contracts import Completion


def _run_and_submit(tmp_path, behavior, n, *, images=False):
    cfg = calibration_config(behavior, n=n, output_dir=tmp_path / behavior).model_copy(
        update={"progress": False, "bootstrap_resamples": 200}
    )
    run(cfg)
    bundle = tmp_path / f"{behavior}.edct.zip"
    args = ["submit", str(tmp_path / behavior), "--out", str(bundle)]
    assert main(args + (["--with-images"] if images else [])) == 0
    return bundle


def _forge_consistently(src, dst):
    """Every judged step rewritten to AC = EF = 1, grade 5, read from matching raw replies; scores,
    claims and the run's own results recomputed; resealed."""
    b = read_bundle(src)
    meta, members = json.loads(json.dumps(b.meta)), dict(b.members)
    out = []
    for line in members["samples.jsonl"].decode().splitlines():
        r = SampleRecord.model_validate_json(line)
        if r.status == "scored":
            steps = tuple(
                s.model_copy(
                    update={
                        "binary": binary_score(
                            Completion(
                                "AC_REASON: ok\nEF_REASON: ok\nAC: 1\nEF: 1\nCCS: 1", finish_reason="stop"
                            )
                        ),
                        "graded": graded_score(Completion("REASON: ok\nSCORE: 5", finish_reason="stop")),
                    }
                )
                if s.binary is not None
                else s
                for s in r.steps
            )
            r = r.model_copy(
                update={"steps": steps, "scores": score_sample([s for s in steps if s.verified])}
            )
        out.append(r)
    members["samples.jsonl"] = "".join(r.model_dump_json() + "\n" for r in out).encode()
    recompute_claims(meta, members, out)
    write_zip(dst, reseal(meta, members), members)
    return dst


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rejudge")
    honest = _run_and_submit(tmp, "mixed:0.5", 6, images=True)
    stale = _run_and_submit(tmp, "stale", 6)
    forged = _forge_consistently(stale, tmp / "forged.edct.zip")
    config = tmp / "board.yaml"  # a board names only what it re-runs: its judge
    config.write_text(yaml.safe_dump({"roles": {"judge": {"backend": "calibration-rules"}}}))
    return tmp, honest, forged, config


def test_consistent_forgery_passes_verification_but_not_the_board_judge(world, capsys):
    tmp, honest, forged, config = world
    verified = verify_bundle(forged)
    assert isinstance(verified, Verified), verified.reason  # re-derivation cannot see it
    assert verified.summary.overall.estimate("ccs_binary") == 1.0

    out = tmp / "board"
    args = ["leaderboard", str(honest), str(forged), "--out", str(out), "--rejudge", str(config)]
    assert main([*args, "--resamples", "1000"]) == 0
    board = json.loads((out / "leaderboard.json").read_text())
    (track,) = board["tracks"]
    by_label = {e["bundle"].rsplit("/", 1)[-1]: e for e in (*track["entries"], *track["unranked"])}
    good, bad = by_label[honest.name]["board"], by_label["forged.edct.zip"]["board"]
    # the flag changes the ranking: the forgery is shown apart, the honest entry ranks alone
    assert [e["bundle"] for e in track["entries"]] == [str(honest)]
    assert by_label["forged.edct.zip"]["rank"] is None
    assert by_label["forged.edct.zip"]["unranked"] == ["claim outside the board's interval"]

    assert good["agreement"]["rate"] == 1.0 and good["agreement"]["kappa"] == 1.0
    assert good["agreement"]["steps"] > 0 and not good["flagged"]
    assert good["ccs_binary"] == by_label[honest.name]["ccs_binary"]  # same verdicts, same numbers

    assert bad["submitted_ccs_binary"] == 1.0
    assert bad["ccs_binary"]["estimate"] == 0.0  # the stale model's real score
    assert bad["agreement"]["rate"] == 0.0 and bad["flagged"]
    assert "Shown apart, not ranked" in (out / "leaderboard.md").read_text()
    assert "not ranked  behavior=stale: claim outside the board's interval" in capsys.readouterr().out


def test_rejudging_is_resumable_and_pays_only_for_new_entries(world):
    tmp, honest, forged, config = world
    cache = tmp / "cache"
    args = ["--rejudge", str(config), "--cache", str(cache), "--resamples", "200"]
    assert main(["leaderboard", str(honest), "--out", str(tmp / "b1"), *args]) == 0
    with StageCache(cache) as c:
        first = len(c)
    assert first > 0
    assert main(["leaderboard", str(honest), "--out", str(tmp / "b2"), *args]) == 0
    with StageCache(cache) as c:
        assert len(c) == first  # nothing judged twice
    assert main(["leaderboard", str(honest), str(forged), "--out", str(tmp / "b3"), *args]) == 0
    with StageCache(cache) as c:
        grown = len(c) - first
    steps = sum(
        1
        for line in read_bundle(forged).members["samples.jsonl"].decode().splitlines()
        for s in SampleRecord.model_validate_json(line).steps
        if s.verified and s.requery is not None
    )
    # one binary and one graded call per judged step of the new entry, less the prompts the honest
    # entry already paid for (the mixed model answers like the stale one on some samples)
    assert 0 < grown <= 2 * steps
    assert main(["leaderboard", str(honest), str(forged), "--out", str(tmp / "b4"), *args]) == 0
    with StageCache(cache) as c:
        assert len(c) == first + grown
    b1 = json.loads((tmp / "b1" / "leaderboard.json").read_text())
    b3 = json.loads((tmp / "b3" / "leaderboard.json").read_text())
    e1 = b1["tracks"][0]["entries"][0]["board"]
    e3 = next(e for e in b3["tracks"][0]["entries"] if e["bundle"] == str(honest))["board"]
    assert [e["bundle"] for e in b3["tracks"][0]["unranked"]] == [str(forged)]
    assert e1 == e3


def test_regate_reruns_the_gate_on_bundled_images(world, capsys):
    tmp, honest, _, judge_only = world
    args = ["leaderboard", str(honest), "--out", str(tmp / "x"), "--rejudge", str(judge_only), "--regate"]
    assert main(args) == 2
    assert "--regate: the config names no detector role" in capsys.readouterr().err
    config = tmp / "full.yaml"
    config.write_text(yaml.safe_dump(calibration_config(n=4).model_dump(mode="json")))
    out = tmp / "regate"
    assert main(["leaderboard", str(honest), "--out", str(out), "--rejudge", str(config), "--regate"]) == 0
    board = json.loads((out / "leaderboard.json").read_text())
    gate = board["tracks"][0]["entries"][0]["board"]["gate_agreement"]
    assert gate["edits"] > 0 and gate["rate"] == 1.0


def _fake_gate_failure(src, dst):
    """Exclude the worst scored sample by faking its first edit's gate failure, consistently: r_in
    lowered below τ_in, a "retry" with the same image, no re-query or judgement, status excluded
    with the protocol's reason, claims, results, images.json and packed images redone, resealed."""
    b = read_bundle(src)
    meta, members = json.loads(json.dumps(b.meta)), dict(b.members)
    recs = [SampleRecord.model_validate_json(line) for line in members["samples.jsonl"].decode().splitlines()]
    i = min((i for i, r in enumerate(recs) if r.status == "scored"), key=lambda i: recs[i].scores.ccs_binary)
    step = recs[i].steps[0]
    first = step.attempts[0]
    failed = first.model_copy(
        update={
            "check": first.check.model_copy(
                update={"r_in": 0.01, "passed": False, "verdict": "no_change_in_target"}
            ),
            "failure": "verification: no_change_in_target",
        }
    )
    retry = failed.model_copy(update={"attempt": 1, "seed": first.seed + 1})
    step = step.model_copy(
        update={
            "attempts": (failed, retry),
            "verified": False,
            "image": None,
            "requery": None,
            "binary": None,
            "graded": None,
        }
    )
    recs[i] = recs[i].model_copy(
        update={
            "steps": (step,),
            "status": "excluded",
            "scores": None,
            "reason": "edit 1 failed verification after 2 attempt(s): verification: no_change_in_target",
        }
    )
    members["samples.jsonl"] = "".join(r.model_dump_json() + "\n" for r in recs).encode()
    refs = sorted({ref for r in recs for ref in image_files(r).values()})
    members["images.json"] = json.dumps({"images": refs}).encode()
    for name in [n for n in members if n.startswith("images/") and n[7:-4] not in refs]:
        del members[name]
    recompute_claims(meta, members, recs)
    write_zip(dst, reseal(meta, members), members)
    return dst


def test_regate_catches_a_faked_gate_failure(world):
    tmp, honest, _, _ = world
    forged = _fake_gate_failure(honest, tmp / "excluded.edct.zip")
    assert isinstance(verify_bundle(forged), Verified)  # consistent: re-derivation cannot see it
    config = tmp / "full.yaml"
    config.write_text(yaml.safe_dump(calibration_config(n=4).model_dump(mode="json")))
    out = tmp / "regate-forged"
    assert main(["leaderboard", str(forged), "--out", str(out), "--rejudge", str(config), "--regate"]) == 0
    board = json.loads((out / "leaderboard.json").read_text())
    (track,) = board["tracks"]
    assert track["entries"] == []  # flagged: shown apart, not ranked
    entry = track["unranked"][0]["board"]
    assert entry["gate_agreement"]["disagreements"] == 2 and entry["gate_flagged"]  # both fake attempts
    assert track["unranked"][0]["unranked"] == [
        "the board's gate disagrees on 2 edit(s)",
        "2 gate check(s) whose r_in/r_out differ from the board's on the same images",  # r_in faked
    ]
    assert "the board's gate disagrees on 2 edit(s)" in (out / "leaderboard.md").read_text()


def test_regate_needs_rejudge(world, capsys):
    tmp, honest, _, _ = world
    assert main(["leaderboard", str(honest), "--out", str(tmp / "x"), "--regate"]) == 2
    assert "--regate goes with --rejudge" in capsys.readouterr().err


def test_regate_flags_gate_failures_it_cannot_recheck(world):
    """A faked gate failure in a bundle made without --with-images: the board's gate has nothing
    to re-run, so the entry is flagged and shown apart, not ranked as if it had been checked."""
    tmp, _, _, _ = world
    plain = _run_and_submit(tmp / "plain", "mixed:0.5", 6)
    forged = _fake_gate_failure(plain, tmp / "plain-excluded.edct.zip")
    assert isinstance(verify_bundle(forged), Verified)
    config = tmp / "full.yaml"
    config.write_text(yaml.safe_dump(calibration_config(n=4).model_dump(mode="json")))
    out = tmp / "regate-plain"
    assert main(["leaderboard", str(forged), "--out", str(out), "--rejudge", str(config), "--regate"]) == 0
    (track,) = json.loads((out / "leaderboard.json").read_text())["tracks"]
    assert track["entries"] == []
    (entry,) = track["unranked"]
    unchecked = entry["board"]["gate_agreement"]["unchecked"]
    assert unchecked > 0 and entry["board"]["gate_agreement"]["edits"] == 0
    assert entry["unranked"] == [
        f"{unchecked} gate check(s) could not be re-run (bundle made without --with-images)"
    ]


def _pad_explanations(src, dst, chars):
    b = read_bundle(src)
    meta, members = json.loads(json.dumps(b.meta)), dict(b.members)
    out = []
    for line in members["samples.jsonl"].decode().splitlines():
        r = SampleRecord.model_validate_json(line)
        if r.baseline is not None:
            padded = r.baseline.explanation + " and" * (chars // 4)
            r = r.model_copy(update={"baseline": r.baseline.model_copy(update={"explanation": padded})})
        out.append(r)
    members["samples.jsonl"] = "".join(r.model_dump_json() + "\n" for r in out).encode()
    write_zip(dst, reseal(meta, members), members)
    return dst


def test_padded_explanations_are_not_sent_and_leave_the_entry_unranked(world, monkeypatch):
    """Explanations padded past the judge cap: no prompt over the cap leaves the board (an uncapped
    board sent 168 MB to its paid judge for a 240 KB bundle); the entry is flagged, not ranked."""
    from edct_task.engine import handlers
    from edct_task.leaderboard.rejudge import MAX_JUDGE_PROMPT_CHARS

    tmp, honest, _, config = world
    padded = _pad_explanations(honest, tmp / "padded.edct.zip", 2 * MAX_JUDGE_PROMPT_CHARS)
    assert isinstance(verify_bundle(padded), Verified)  # the texts are the submitter's to choose
    sent: list[int] = []
    real_call = handlers.LLMHandler.call

    def spy(self, batch):
        sent.extend(len(r.prompt) for r in batch)
        return real_call(self, batch)

    monkeypatch.setattr(handlers.LLMHandler, "call", spy)
    out = tmp / "padded-board"
    args = ["leaderboard", str(padded), "--out", str(out), "--rejudge", str(config)]
    args += ["--cache", str(tmp / "pc")]
    assert main(args) == 0
    assert all(n <= MAX_JUDGE_PROMPT_CHARS for n in sent)
    (track,) = json.loads((out / "leaderboard.json").read_text())["tracks"]
    assert track["entries"] == []
    (entry,) = track["unranked"]
    steps = entry["board"]["overlong_steps"]
    assert steps > 0
    assert entry["unranked"][0] == f"{steps} step(s) over the {MAX_JUDGE_PROMPT_CHARS}-character judge cap"


def test_the_board_is_composed_like_a_run_call_log_and_image_store(world):
    """The board's dispatcher comes from the run's composition root: the config's call log gets a
    line per call, and the bundle's images land in the cache's image store (``images/<xx>/``)."""
    tmp, honest, _, _ = world
    log = tmp / "board-calls.jsonl"
    config = tmp / "logged.yaml"
    config.write_text(
        yaml.safe_dump({**calibration_config(n=4).model_dump(mode="json"), "call_log": str(log)})
    )
    cache = tmp / "composed-cache"
    args = ["leaderboard", str(honest), "--out", str(tmp / "composed"), "--rejudge", str(config)]
    assert main([*args, "--regate", "--cache", str(cache), "--resamples", "200"]) == 0
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert {c["stage"] for c in calls} == {"judge", "verify"}
    assert not (cache / "images" / "images").exists()
    packed = {n for n in read_bundle(honest).members if n.startswith("images/")}
    stored = {p.name for p in (cache / "images").glob("*/*.png")}
    assert {n.rsplit("/", 1)[-1] for n in packed} <= stored
