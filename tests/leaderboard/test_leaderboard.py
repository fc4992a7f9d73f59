"""``edct submit`` / ``edct leaderboard``: bundles verified by recomputation, ranked per setup track."""

from __future__ import annotations

import csv
import io
import json
import zipfile

import pytest
from PIL import Image
from PIL.PngImagePlugin import PngInfo
from support.edct_runs import records, write_edct_run

from edct_task.cli.main import main
from edct_task.leaderboard.board import pairwise, rank_entries
from edct_task.leaderboard.bundle import BUNDLE_JSON, read_bundle, reseal, write_zip
from edct_task.leaderboard.verify import BoardScoring, Verified, verify_bundle
from edct_task.scoring.metrics import summarise

EVIL = '<script>alert("x")</script>&"\'><img src=x onerror=alert(1)>'


@pytest.fixture
def bundles(tmp_path):
    """Four runs: three targets under the default judge, one target under another judge."""
    runs = {
        "alpha": ({"backend": "openai-chat", "model": "org/alpha-vl"}, 0.9, "calibration-rules"),
        "beta": ({"backend": "openai-chat", "model": "org/beta-vl"}, 0.5, "calibration-rules"),
        "evil": ({"backend": "openai-chat", "model": EVIL}, 0.45, "calibration-rules"),
        "alpha-gpt": ({"backend": "openai-chat", "model": "org/alpha-vl"}, 0.8, "openai-chat"),
    }
    out = {}
    for name, (target, level, judge) in runs.items():
        write_edct_run(tmp_path / "runs" / name, records(level, n=12), target=target, judge=judge)
        out[name] = tmp_path / "bundles" / f"{name}.edct.zip"
        assert main(["submit", str(tmp_path / "runs" / name), "--out", str(out[name])]) == 0
    return out


def _tamper(src, dst, *, meta_edit=None, member_edit=None, seal=True):
    b = read_bundle(src)
    meta, members = json.loads(json.dumps(b.meta)), dict(b.members)
    if member_edit:
        member_edit(members)
    if meta_edit:
        meta_edit(meta)
    write_zip(dst, reseal(meta, members) if seal else meta, members)
    return dst


def test_board_ranks_within_setup_tracks_and_escapes_html(bundles, tmp_path, capsys):
    out = tmp_path / "board"
    assert main(["leaderboard", *map(str, bundles.values()), "--out", str(out)]) == 0
    board = json.loads((out / "leaderboard.json").read_text())
    assert board["rejected"] == []
    assert len(board["tracks"]) == 2  # a different judge is a different track
    by_size = sorted(board["tracks"], key=lambda t: len(t["entries"]))
    assert [e["model"] for e in by_size[0]["entries"]] == ["org/alpha-vl"]
    assert "judge=openai-chat" in by_size[0]["label"]
    main_track = by_size[1]["entries"]
    assert [e["model"] for e in main_track] == ["org/alpha-vl", "org/beta-vl", EVIL]
    assert [e["rank"] for e in main_track] == [1, 2, 3]
    # recomputed numbers: summarise over the records, with the board's seed and resamples (defaults)
    expected = summarise(records(0.9, n=12), seed=0, n_resamples=10_000).overall.metrics
    assert main_track[0]["ccs_binary"] == expected["ccs_binary"].model_dump()
    # bootstrap rank intervals over the 33 common items: beta is at least evil on every item and
    # above it on 3 (item 5 of each domain), so beta is 2nd in every resample; evil ties it in the
    # resamples without any of those 3 items ((30/33)**33 = 4.3 % > 2.5 %): one tied group
    assert [e["rank_interval"] for e in main_track] == [[1, 1], [2, 2], [2, 3]]
    assert [e["group"] for e in main_track] == [1, 2, 2]
    track = by_size[1]
    assert track["tied_groups"] == [["org/alpha-vl"], ["org/beta-vl", EVIL]] and track["common_items"] == 33
    pairs = {(p["a"], p["b"]): p for p in track["pairwise"]}
    beta_evil = pairs[("org/beta-vl", EVIL)]
    assert beta_evil["difference"] == pytest.approx(3 * 0.5 / 33) and beta_evil["n_paired"] == 33
    assert beta_evil["p"] == pytest.approx(2 / 2**3) and beta_evil["test"] == "exact"
    alpha_beta = pairs[("org/alpha-vl", "org/beta-vl")]  # items 6..10 of each domain: 15 of +0.5
    assert alpha_beta["p"] == pytest.approx(2 / 2**15) and alpha_beta["test"] == "exact"
    alpha_evil = pairs[("org/alpha-vl", EVIL)]  # 18 of +0.5 and 15 zeros: 19 · 16 patterns, exact
    assert alpha_evil["test"] == "exact" and alpha_evil["p"] == pytest.approx(2 / 2**18)
    # Holm over the three pairs: 3 p(1), max(., 2 p(2)), max(., 1 p(3))
    assert alpha_evil["p_holm"] == pytest.approx(3 * 2 / 2**18)
    assert alpha_beta["p_holm"] == pytest.approx(2 * 2 / 2**15)
    assert beta_evil["p_holm"] == pytest.approx(0.25)
    md = (out / "leaderboard.md").read_text()
    assert "| Rank | Rank interval | Tied group |" in md and "| Range |" not in md
    assert "| org/beta-vl | " in md and "+0.045 [" in md
    rows = list(csv.DictReader((out / "leaderboard.csv").open()))
    estimates = [e["ccs_binary"]["estimate"] for t in board["tracks"] for e in t["entries"]]
    assert len(rows) == 4 and float(rows[0]["ccs_binary_estimate"]) == pytest.approx(estimates[0], abs=1e-12)
    html = (out / "leaderboard.html").read_text()
    assert "<script" not in html and "<img" not in html and "onerror=alert(1)>" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html
    assert 'data-model="&lt;script&gt;' in html  # attributes escaped too
    assert "alpha-vl" in (out / "leaderboard.md").read_text()
    assert "ranked, 0 not ranked, 0 rejected" in capsys.readouterr().out


def test_tampered_incomplete_and_inconsistent_bundles_are_rejected(bundles, tmp_path):
    good = bundles["alpha"]
    t = tmp_path / "tampered"

    def bump_claim(meta):
        meta["claimed"]["overall"]["metrics"]["ccs_binary"]["estimate"] -= 0.001

    def change_score(members):
        lines = members["samples.jsonl"].decode().splitlines()
        rec = json.loads(lines[5])
        rec["scores"]["ccs_binary"] = 0.0 if rec["scores"]["ccs_binary"] else 1.0
        lines[5] = json.dumps(rec)
        members["samples.jsonl"] = ("\n".join(lines) + "\n").encode()

    def drop_sample(members):
        lines = members["samples.jsonl"].decode().splitlines()
        members["samples.jsonl"] = ("\n".join(lines[:3] + lines[4:]) + "\n").encode()

    def other_judge(meta):
        meta["setup"]["roles"]["judge"]["backend"] = "openai-chat"

    def drop_member(members):
        del members["dataset_manifest.json"]

    cases = {
        "claim_unsealed": (
            _tamper(good, t / "a.edct.zip", meta_edit=bump_claim, seal=False),
            "tampered",
            "digest",
        ),
        "claim_sealed": (
            _tamper(good, t / "b.edct.zip", meta_edit=bump_claim),
            "metric_mismatch",
            "overall: claimed ccs_binary estimate",
        ),
        "record_sealed": (
            _tamper(good, t / "c.edct.zip", member_edit=change_score),
            "score_mismatch",
            "sample okvqa-005: scores recorded as CCS_binary, CCS_graded",
        ),
        "record_unsealed": (
            _tamper(good, t / "d.edct.zip", member_edit=change_score, seal=False),
            "tampered",
            "member samples.jsonl does not match its SHA-256",
        ),
        "sample_removed": (
            _tamper(good, t / "e.edct.zip", member_edit=drop_sample),
            "manifest_mismatch",
            "1 manifest sample(s) have no record (first: okvqa-003)",
        ),
        "setup_changed": (
            _tamper(good, t / "f.edct.zip", meta_edit=other_judge),
            "setup_mismatch",
            "setup field roles.judge.backend differs from the run's own configuration",
        ),
        "member_missing": (
            _tamper(good, t / "g.edct.zip", member_edit=drop_member),
            "incomplete",
            "member dataset_manifest.json is missing",
        ),
    }
    for name, (path, code, text) in cases.items():
        result = verify_bundle(path)
        assert not isinstance(result, Verified), name
        assert result.code == code, (name, result.reason)
        assert text in result.reason, (name, result.reason)
    not_zip = t / "h.edct.zip"
    not_zip.write_text("not a zip")
    assert verify_bundle(not_zip).code == "unreadable"
    # the board still builds from the rest
    out = tmp_path / "board"
    paths = [good, bundles["beta"], *(p for p, _, _ in cases.values()), not_zip]
    assert main(["leaderboard", *map(str, paths), "--out", str(out)]) == 0
    board = json.loads((out / "leaderboard.json").read_text())
    assert [e["model"] for tr in board["tracks"] for e in tr["entries"]] == ["org/alpha-vl", "org/beta-vl"]
    reasons = {r["bundle"]: r["reason"] for r in board["rejected"]}
    assert len(reasons) == len(cases) + 1
    assert "setup field roles.judge.backend" in reasons[str(t / "f.edct.zip")]


def test_reference_manifest_rejects_other_documents(bundles, tmp_path):
    write_edct_run(tmp_path / "small", records(0.9, n=5), target={"backend": "openai-chat", "model": "m"})
    small = tmp_path / "small.edct.zip"
    assert main(["submit", str(tmp_path / "small"), "--out", str(small)]) == 0
    out = tmp_path / "board"
    assert (
        main(
            [
                "leaderboard",
                str(bundles["alpha"]),
                str(small),
                "--manifest",
                str(bundles["alpha"]),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    board = json.loads((out / "leaderboard.json").read_text())
    assert board["rejected"][0]["code"] == "wrong_dataset"


def test_rank_intervals_are_paired_where_unpaired_cis_overlap():
    """Two entries whose unpaired 95% CIs overlap widely, but A beats B on 12 items and loses on
    none: paired, A is first in every resample (its rank interval 1–1), and the sign-flip p is
    2 / 2**12; the old CI-overlap range called them 1–2 apiece."""

    def v(name, recs):
        summary = summarise(recs, seed=0, n_resamples=1000)
        return Verified(bundle=name, model=name, setup={}, target=None, summary=summary, records=recs)

    a, b = v("a", records(0.6, n=30)), v("b", records(0.5, n=30, domains=("okvqa", "drivelm", "3dsr")))
    ca, cb = a.summary.overall.metrics["ccs_binary"], b.summary.overall.metrics["ccs_binary"]
    assert ca.low < cb.high  # the unpaired intervals overlap
    scoring = BoardScoring(n_resamples=1000)
    rows = rank_entries([b, a], scoring)
    assert [(r["model"], r["rank"], r["rank_interval"], r["group"]) for r in rows] == [
        ("a", 1, [1, 1], 1),
        ("b", 2, [2, 2], 2),
    ]
    (pair,) = pairwise([a, b], scoring)
    assert pair["n_paired"] == 87 and pair["difference"] == pytest.approx(9 * 0.5 / 87)
    assert pair["p"] == pytest.approx(2 / 2**9) and pair["p_holm"] == pair["p"]


def test_real_run_with_images_and_report_reads_bundles(tmp_path):
    from edct_task.config import calibration_config
    from edct_task.run.runner import run

    cfg = calibration_config("faithful", n=4, output_dir=tmp_path / "run").model_copy(
        update={"progress": False, "bootstrap_resamples": 500}  # verified with the run's own resamples
    )
    outcome = run(cfg)
    bundle = tmp_path / "faithful.edct.zip"
    assert main(["submit", str(tmp_path / "run"), "--out", str(bundle), "--with-images"]) == 0
    with zipfile.ZipFile(bundle) as z:
        names = z.namelist()
    assert names[0] == BUNDLE_JSON
    n_images = sum(n.startswith("images/") for n in names)
    assert n_images == len(json.loads(read_bundle(bundle).members["images.json"])["images"]) > 4
    result = verify_bundle(bundle, scoring=BoardScoring(n_resamples=500))  # the board's = the run's
    assert isinstance(result, Verified), getattr(result, "reason", "")
    assert result.summary.overall.metrics == outcome.log.results.overall.metrics
    # Packed images are checked by what they decode to, not by their PNG bytes: the same pixels
    # re-encoded at another zlib level still verify, a changed pixel does not.
    name = next(n for n in names if n.startswith("images/"))

    def reencode(members, *, change_pixel=False):
        with Image.open(io.BytesIO(members[name])) as im:
            im.load()
            info = PngInfo()
            for key, value in im.info.items():
                if key.startswith("edct_"):
                    info.add_text(key, value)
            out = im.convert("RGB")
        if change_pixel:
            out.putpixel((0, 0), tuple(255 - c for c in out.getpixel((0, 0))))
        buf = io.BytesIO()
        out.save(buf, format="PNG", compress_level=9, pnginfo=info)
        assert buf.getvalue() != members[name]
        members[name] = buf.getvalue()

    same = _tamper(bundle, tmp_path / "recompressed.edct.zip", member_edit=reencode)
    assert isinstance(verify_bundle(same), Verified)
    changed = _tamper(
        bundle, tmp_path / "repainted.edct.zip", member_edit=lambda m: reencode(m, change_pixel=True)
    )
    rejected = verify_bundle(changed)
    assert not isinstance(rejected, Verified)
    assert rejected.code == "tampered" and "does not decode to its reference" in rejected.reason
    # edct report reads bundles like any run
    assert main(["report", str(bundle), "--out", str(tmp_path / "report")]) == 0
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    (model,) = report["models"]
    assert (
        model["edct"]["ccs_binary"]["estimate"]
        == outcome.results["results"]["overall"]["metrics"]["ccs_binary"]["estimate"]
    )


def test_user_errors_exit_2_with_one_message(tmp_path, capsys):
    write_edct_run(tmp_path / "r", records(0.5, n=4))
    assert main(["submit", str(tmp_path / "r"), "--out", str(tmp_path / "x.zip")]) == 2
    assert "name the bundle *.edct.zip" in capsys.readouterr().err
    assert main(["submit", str(tmp_path / "r"), "--out", str(tmp_path / "x.edct.zip"), "--with-images"]) == 2
    err = capsys.readouterr().err
    assert "--with-images" in err and "Traceback" not in err
    assert main(["submit", str(tmp_path / "nope"), "--out", str(tmp_path / "x.edct.zip")]) == 2
    assert main(["report", str(tmp_path / "nope"), "--out", str(tmp_path / "rep")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "r"), "--out", str(tmp_path / "rep"), "--label", "oops"]) == 2
    assert "--label PATH=NAME" in capsys.readouterr().err


def test_two_renderings_of_the_target_are_two_tracks(tmp_path, capsys):
    """A run whose target got each request as one quoted turn (lmms-eval's loop) is not ranked
    against runs whose target got the real conversation: the records say which, and the setup
    identity (so the track) follows them; the track's label names the rendering."""
    quoted = [r.model_copy(update={"target_rendering": "single-turn-quoted"}) for r in records(0.9, n=12)]
    runs = {
        "multi": (
            records(0.9, n=12),
            {"backend": "lmms-eval", "model": "qwen3_vl", "model_args": "pretrained=a"},
        ),
        "other": (records(0.5, n=12), {"backend": "openai-chat", "model": "org/beta-vl"}),
        "quoted": (quoted, {"backend": "lmms-eval", "model": "qwen3_vl", "model_args": "pretrained=a"}),
    }
    paths = []
    for name, (recs, target) in runs.items():
        write_edct_run(tmp_path / "runs" / name, recs, target=target)
        paths.append(tmp_path / f"{name}.edct.zip")
        assert main(["submit", str(tmp_path / "runs" / name), "--out", str(paths[-1])]) == 0
    out = tmp_path / "board"
    assert main(["leaderboard", *map(str, paths), "--out", str(out)]) == 0
    board = json.loads((out / "leaderboard.json").read_text())
    assert board["rejected"] == [] and len(board["tracks"]) == 2
    by_size = sorted(board["tracks"], key=lambda t: len(t["entries"]))
    # an lmms-eval target is named by its pretrained= argument, as lmms-eval names it
    assert [e["model"] for e in by_size[0]["entries"]] == ["a"]
    assert by_size[0]["setup"]["target_rendering"] == "single-turn-quoted"
    assert "target=single-turn-quoted" in by_size[0]["label"]
    assert "target_rendering" not in by_size[1]["setup"] and len(by_size[1]["entries"]) == 2
    # a bundle claiming the multi-turn setup for quoted records is refused: the records decide
    forged = _tamper(
        paths[2],
        tmp_path / "forged.edct.zip",
        meta_edit=lambda m: m["setup"].pop("target_rendering"),
    )
    assert main(["leaderboard", str(forged), "--out", str(tmp_path / "b2")]) == 0
    (rejected,) = json.loads((tmp_path / "b2" / "leaderboard.json").read_text())["rejected"]
    assert rejected["reason"].startswith("setup field target_rendering differs")
