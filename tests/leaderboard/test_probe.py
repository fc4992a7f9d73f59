"""The issue-20 probe, case by case: forged, hostile and confusing bundles against `edct leaderboard`.

Every forgery here is resealed with the project's own helpers (``reseal`` + ``write_zip``), the way
anyone would; every hostile bundle must cost its own entry only, with the board still written.
"""

from __future__ import annotations

import json
import os
import stat
import zipfile

import pytest
from support import forged_bundles
from support.edct_runs import records, write_edct_run

from edct_task.cli.main import main
from edct_task.core.records import SampleRecord
from edct_task.leaderboard.archive import Limits
from edct_task.leaderboard.board import build_board, to_markdown
from edct_task.leaderboard.bundle import BUNDLE_JSON, read_bundle, reseal, write_zip
from edct_task.leaderboard.verify import BoardScoring, Verified, verify_bundle

ALPHA = {"backend": "openai-chat", "model": "org/alpha-vl", "revision": "abc123"}
BETA = {"backend": "openai-chat", "model": "org/beta-vl"}


def _bundle(tmp_path, name, level, *, target=ALPHA, n=12, resamples=2000):
    write_edct_run(tmp_path / "runs" / name, records(level, n=n), target=target, resamples=resamples)
    out = tmp_path / "bundles" / f"{name}.edct.zip"
    assert main(["submit", str(tmp_path / "runs" / name), "--out", str(out)]) == 0
    return out


@pytest.fixture
def honest(tmp_path):
    return _bundle(tmp_path, "alpha", 0.6)


def _forge(src, dst, edit_records=None, *, edit_meta=None, recompute_claims=True):
    """Rewrite records (and claims recomputed with ``summarise``, as the probe did), reseal."""
    b = read_bundle(src)
    meta, members = json.loads(json.dumps(b.meta)), dict(b.members)
    recs = [SampleRecord.model_validate_json(line) for line in members["samples.jsonl"].decode().splitlines()]
    if edit_records:
        recs = [edit_records(r) for r in recs]
        members["samples.jsonl"] = "".join(r.model_dump_json() + "\n" for r in recs).encode()
    if recompute_claims:
        forged_bundles.recompute_claims(meta, members, recs)
    if edit_meta:
        edit_meta(meta)
    write_zip(dst, reseal(meta, members), members)
    return dst


def _rejected(path, code, text):
    result = verify_bundle(path)
    assert not isinstance(result, Verified), f"{path.name} was accepted"
    assert result.code == code, result.reason
    assert text in result.reason, result.reason
    return result


def _scores(r: SampleRecord, **update) -> SampleRecord:
    if r.scores is None:
        return r
    return r.model_copy(update={"scores": r.scores.model_copy(update=update)})


def test_L1_scores_forged_over_zero_verdicts_are_rejected(honest, tmp_path):
    forged = _forge(honest, tmp_path / "l1.edct.zip", lambda r: _scores(r, ccs_binary=1.0, ccs_graded=1.0))
    _rejected(forged, "score_mismatch", "scores recorded as CCS_binary, CCS_graded = (1.0, 1.0)")


def test_L1_verdicts_forged_over_raw_replies_are_rejected(honest, tmp_path):
    def flip(r: SampleRecord) -> SampleRecord:
        if r.status != "scored":
            return r
        steps = tuple(
            s.model_copy(update={"binary": s.binary.model_copy(update={"ac": 1, "ef": 1})}) for s in r.steps
        )
        from edct_task.engine.protocol import score_sample

        return r.model_copy(update={"steps": steps, "scores": score_sample(steps)})

    forged = _forge(honest, tmp_path / "l1b.edct.zip", flip)
    result = _rejected(forged, "verdict_mismatch", "the judge's raw replies parse to AC=")
    assert "the record says AC=1 EF=1" in result.reason


def test_L2_out_of_range_scores_and_claims_are_rejected(honest, tmp_path):
    # claims left as they were: a record's scores are in [0, 1] (core.records), so such a line is
    # no sample record at all
    forged = _forge(
        honest,
        tmp_path / "l2.edct.zip",
        lambda r: _scores(r, ccs_binary=7.5, ccs_graded=-3.0),
        recompute_claims=False,
    )
    _rejected(forged, "incomplete", "is not a sample record")

    def claim(meta):
        meta["claimed"]["overall"]["metrics"]["ccs_binary"].update(estimate=7.5, low=7.0, high=8.0)

    claimed = _forge(honest, tmp_path / "l2b.edct.zip", edit_meta=claim)
    _rejected(claimed, "out_of_range", "claimed ccs_binary estimate 7.5 is not a number in [0, 1]")


def test_L3_failing_samples_relabelled_excluded_are_rejected(honest, tmp_path):
    def exclude_failures(r: SampleRecord) -> SampleRecord:
        if r.status == "scored" and r.scores.ccs_binary < 1:
            return r.model_copy(
                update={"status": "excluded", "scores": None, "reason": "verification failed"}
            )
        return r

    forged = _forge(honest, tmp_path / "l3.edct.zip", exclude_failures)
    _rejected(forged, "status_mismatch", "recorded excluded, but its steps make it scored")


def test_gate_numbers_that_contradict_the_verdict_are_rejected(honest, tmp_path):
    def unpass(r: SampleRecord) -> SampleRecord:
        if r.status != "excluded":
            return r
        step = r.steps[0]
        attempts = (
            step.attempts[0],
            step.attempts[1].model_copy(
                update={
                    "check": step.attempts[1].check.model_copy(update={"passed": True, "verdict": "pass"})
                }
            ),
        )
        return r.model_copy(update={"steps": (step.model_copy(update={"attempts": attempts}),)})

    forged = _forge(honest, tmp_path / "gate.edct.zip", unpass)
    _rejected(
        forged, "gate_mismatch", "r_in=0.04 r_out=0.03 against τ_in=0.1 τ_out=0.3 fails, the record says pass"
    )


def test_the_bundle_cannot_choose_its_statistics(tmp_path):
    """n_resamples 10^12 is never run; n_resamples 1 does not shrink the interval or the rank range."""
    honest = _bundle(tmp_path, "alpha", 0.6)
    huge = _forge(
        honest, tmp_path / "huge.edct.zip", edit_meta=lambda m: m["scoring"].update(n_resamples=10**12)
    )
    tiny = _forge(
        honest, tmp_path / "tiny.edct.zip", edit_meta=lambda m: m["scoring"].update(n_resamples=1, seed=137)
    )
    scoring = BoardScoring(n_resamples=2000)
    results = [verify_bundle(p, scoring=scoring) for p in (honest, huge, tiny)]
    assert all(isinstance(r, Verified) for r in results), [getattr(r, "reason", "") for r in results]
    intervals = [r.summary.overall.metrics["ccs_binary"] for r in results]
    assert intervals[0] == intervals[1] == intervals[2]
    assert intervals[0].low < intervals[0].estimate < intervals[0].high
    # a board of the tiny-resample bundle and a close rival (3 items apart): the board's own 2000
    # resamples put the rival's rank interval at 1–2, one tied group, whatever the bundle claims
    rival = _bundle(tmp_path, "beta", 0.5, target=BETA)
    board = build_board([tiny, rival], scoring=scoring)
    (track,) = board["tracks"]
    assert [e["rank_interval"] for e in track["entries"]] == [[1, 1], [1, 2]]
    assert len(track["tied_groups"]) == 1
    assert board["scoring"]["n_resamples"] == 2000


def test_malformed_bundles_cost_one_entry_and_the_board_is_written(honest, tmp_path, capsys):
    cases = {}

    def nan_claim(meta):
        meta["claimed"]["overall"]["metrics"]["ccs_binary"]["estimate"] = float("nan")

    b = read_bundle(honest)
    meta = json.loads(json.dumps(b.meta))
    nan_claim(meta)
    members = dict(b.members)
    files = {name: __import__("hashlib").sha256(data).hexdigest() for name, data in members.items()}
    meta["files"] = files
    meta["digest"] = "0" * 64  # canonical_json refuses NaN: a forger seals by hand
    cases["nan"] = tmp_path / "nan.edct.zip"
    write_zip(cases["nan"], meta, members)

    def typed(name, value):
        def edit(members):
            members[name] = json.dumps(value).encode()

        path = tmp_path / f"typed-{name}.edct.zip"
        b = read_bundle(honest)
        m = dict(b.members)
        edit(m)
        write_zip(path, reseal(b.meta, m), m)
        return path

    cases["results_list"] = typed("results.json", [1, 2, 3])
    cases["manifest_no_id"] = typed("dataset_manifest.json", {"samples": [{"x": 1}], "digest": "d"})
    cases["images_str"] = typed("images.json", "images")
    deep = b"[" * 200_000 + b"]" * 200_000
    b = read_bundle(honest)
    m = dict(b.members)
    m["results.json"] = deep
    cases["deep"] = tmp_path / "deep.edct.zip"
    write_zip(cases["deep"], reseal(b.meta, m), m)

    out = tmp_path / "board"
    assert main(["leaderboard", str(honest), *map(str, cases.values()), "--out", str(out)]) == 0
    board = json.loads((out / "leaderboard.json").read_text())
    assert [e["model"] for t in board["tracks"] for e in t["entries"]] == ["org/alpha-vl@abc123"]
    reasons = {os.path.basename(r["bundle"]): r["reason"] for r in board["rejected"]}
    assert len(reasons) == len(cases)
    assert "NaN is not a JSON number" in reasons["nan.edct.zip"]
    assert "member results.json holds a list, not an object" in reasons["typed-results.json.edct.zip"]
    assert "not a list of entries with an id" in reasons["typed-dataset_manifest.json.edct.zip"]
    assert "member images.json holds a str" in reasons["typed-images.json.edct.zip"]
    assert "nested deeper than 64 levels" in reasons["deep.edct.zip"]
    assert "Traceback" not in capsys.readouterr().err


def _raw_zip(path, items, *, symlink=None):
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, data in items:
            z.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0)), data)
        if symlink:
            info = zipfile.ZipInfo(symlink, date_time=(2020, 1, 1, 0, 0, 0))
            info.create_system = 3
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            z.writestr(info, "/etc/passwd")
    return path


def test_archive_caps_names_duplicates_and_symlinks(honest, tmp_path):
    b = read_bundle(honest)
    genuine = [(BUNDLE_JSON, json.dumps(b.meta).encode()), *sorted(b.members.items())]
    with zipfile.ZipFile(honest) as z:
        assert not any(i.filename.startswith("..") for i in z.infolist())

    # duplicate member: forged samples first, genuine last
    forged_samples = b"{}\n"
    with pytest.warns(UserWarning, match="Duplicate name"):  # zipfile warns, and writes it
        dup = _raw_zip(tmp_path / "dup.edct.zip", [("samples.jsonl", forged_samples), *genuine])
    _rejected(dup, "unreadable", "member 'samples.jsonl' appears more than once")

    up = _raw_zip(tmp_path / "up.edct.zip", [*genuine, ("../evil.json", b"{}")])
    _rejected(up, "unreadable", "member '../evil.json' is not a bundle member (unknown name)")
    link = _raw_zip(tmp_path / "link.edct.zip", genuine, symlink="images/" + "a" * 64 + ".png")
    _rejected(link, "unreadable", "is a symbolic link")
    unknown = _raw_zip(tmp_path / "pad.edct.zip", [*genuine, ("padding.bin", b"\0" * 1000)])
    _rejected(unknown, "unreadable", "member 'padding.bin' is not a bundle member")

    # a zip bomb in known names is refused by its declared size before anything is inflated
    bomb = _raw_zip(tmp_path / "bomb.edct.zip", [*genuine[:-1], ("samples.jsonl", b"\0" * (8 << 20))])
    small = Limits(max_samples_bytes=4 << 20)
    result = verify_bundle(bomb, limits=small)
    assert result.code == "unreadable" and "over the limit of 4194304" in result.reason
    many = Limits(max_members=3)
    assert "over the limit of 3" in verify_bundle(honest, limits=many).reason
    total = Limits(max_total_bytes=1000)
    assert "more than 1000 bytes uncompressed" in verify_bundle(honest, limits=total).reason
    long_line = Limits(max_line_bytes=100)
    assert "samples.jsonl line 1 is longer than 100 bytes" in verify_bundle(honest, limits=long_line).reason


def test_names_cannot_break_the_table_and_the_model_is_the_verified_target(tmp_path):
    fake = "openai/gpt-5.2 (official submission)\n| 1 | 1 | fake-row | 0.999 |\u202e"
    prior = _bundle(tmp_path, "prior", 0.3, target=BETA)
    renamed = _forge(prior, tmp_path / "renamed.edct.zip", edit_meta=lambda m: m["model"].update(name=fake))
    board = build_board([renamed, _bundle(tmp_path, "alpha", 0.6)], scoring=BoardScoring(n_resamples=500))
    entries = {e["model"]: e for t in board["tracks"] for e in t["entries"]}
    assert set(entries) == {"org/beta-vl", "org/alpha-vl@abc123"}
    label = entries["org/beta-vl"]["label"]
    assert label == "openai/gpt-5.2 (official submission) ¦ 1 ¦ 1 ¦ fake-row ¦ 0.999 ¦[U+202E]"
    assert entries["org/alpha-vl@abc123"]["backend"] == "openai-chat"
    md = to_markdown(board)
    lines = md.splitlines()
    table = lines[next(i for i, line in enumerate(lines) if line.startswith("| Rank")) :]
    table = table[: table.index("")]  # the entries table (the pairwise table follows it)
    rows = [line for line in table if "---" not in line]
    assert len(rows) == 3  # header + two entries, no injected row
    assert all(row.count(" | ") == rows[0].count(" | ") for row in rows)
    assert "\u202e" not in md and "fake-row" in md


def test_the_same_bundle_thrice_is_listed_once(honest, tmp_path):
    copies = []
    for i in range(2):
        copies.append(tmp_path / f"copy{i}.edct.zip")
        copies[-1].write_bytes(honest.read_bytes())
    board = build_board([honest, *copies], scoring=BoardScoring(n_resamples=500))
    assert sum(len(t["entries"]) for t in board["tracks"]) == 1
    assert [d["same_as"] for d in board["duplicates"]] == [str(honest)] * 2
    assert "Duplicate bundles (listed once)" in to_markdown(board)


def test_tracks_with_identical_labels_show_how_they_differ(tmp_path):
    small = _bundle(tmp_path, "small", 0.6, n=7)  # 21 documents
    large = _bundle(tmp_path, "large", 0.6, n=100, target=BETA)  # 300 documents
    board = build_board([small, large], scoring=BoardScoring(n_resamples=200))
    assert len(board["tracks"]) == 2
    assert board["tracks"][0]["label"] == board["tracks"][1]["label"]
    by_n = {t["dataset"]["n"]: t for t in board["tracks"]}
    assert set(by_n) == {21, 300}
    assert set(by_n[21]["differs"]) == {"dataset.digest", "dataset.n"}
    assert by_n[300]["differs"]["dataset.n"] == 300
    md = to_markdown(board)
    digest = by_n[21]["dataset"]["digest"]
    assert f"Differs from the other tracks in: dataset.digest = {digest[:12]}; dataset.n = 21" in md
    assert "(300 samples)" in md
