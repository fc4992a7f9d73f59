"""``edct verify`` on two photographs: pass and fail exit codes, printed numbers, artefacts, usage errors."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest
import skimage.data
from PIL import Image

from edct_task.cli.main import main

FACE = (172, 66, 273, 167)  # the astronaut's face (cascade box)


def _recolour(img: np.ndarray, where: np.ndarray) -> np.ndarray:
    hsv = cv2.cvtColor(img, cv2.COLOR_RGB2HSV)
    hsv[..., 0] = (hsv[..., 0].astype(np.int16) + 60) % 180
    hsv[..., 1] = np.maximum(hsv[..., 1], 140)
    out = img.copy()
    out[where] = cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)[where]
    return out


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """original.png, a face edit (local.png), a whole-photo edit (global.png), and the face mask."""
    d = tmp_path_factory.mktemp("verify")
    img = skimage.data.astronaut()
    yy, xx = np.mgrid[0:512, 0:512]
    cx, cy, ax, ay = (FACE[0] + FACE[2]) / 2, (FACE[1] + FACE[3]) / 2, 40, 45
    face = ((xx - cx) / ax) ** 2 + ((yy - cy) / ay) ** 2 <= 1
    Image.fromarray(img).save(d / "original.png")
    Image.fromarray(_recolour(img, face)).save(d / "local.png")
    Image.fromarray(_recolour(img, np.ones_like(face))).save(d / "global.png")
    Image.fromarray(face.astype(np.uint8) * 255).save(d / "mask.png")
    return d


def test_verify_passes_a_local_edit_with_the_default_detector(pair, tmp_path, capsys):
    out = tmp_path / "art"
    code = main(
        [
            "verify",
            str(pair / "original.png"),
            str(pair / "local.png"),
            "--instruction",
            "Recolour the astronaut's face to green",
            "--out",
            str(out),
        ]
    )
    text = capsys.readouterr().out
    assert code == 0
    assert "verdict: PASS" in text and 'MODIFY "astronaut\'s face"' in text
    assert "opencv-cascade+grabcut, 1 box(es)" in text and "r_in:" in text and "r_out:" in text
    assert "alignment: homography" in text
    for name in ("change_heatmap.png", "mask.png", "overlay.png", "panel.png", "check.json"):
        assert (out / name).is_file()
    record = json.loads((out / "check.json").read_text())
    assert record["passed"] and record["r_in"] > 0.1 and record["r_out"] < 0.3
    assert f"{record['r_in']:.3f}" in text and f"{record['r_out']:.3f}" in text


def test_verify_fails_a_global_edit(pair, tmp_path, capsys):
    code = main(
        [
            "verify",
            str(pair / "original.png"),
            str(pair / "global.png"),
            "--instruction",
            "Make the face green",
            "--out",
            str(tmp_path),
        ]
    )
    text = capsys.readouterr().out
    assert code == 1 and "verdict: CHANGE_OUTSIDE_TARGET (not passed)" in text
    assert json.loads((tmp_path / "check.json").read_text())["verdict"] == "change_outside_target"


def test_verify_with_a_user_box_and_json(pair, capsys):
    code = main(
        [
            "verify",
            str(pair / "original.png"),
            str(pair / "local.png"),
            "--edit-type",
            "modify",
            "--target",
            "face",
            "--box",
            ",".join(map(str, FACE)),
            "--no-align",
            "--json",
        ]
    )
    record = json.loads(capsys.readouterr().out)
    assert code == 0 and record["locator"] == "box" and record["alignment"] is None
    assert record["edit_type"] == "MODIFY" and not record["params"]["align"]


def test_verify_with_a_box_and_grabcut(pair, capsys):
    code = main(
        [
            "verify",
            str(pair / "original.png"),
            str(pair / "local.png"),
            "--instruction",
            "Make the face green",
            "--box",
            ",".join(map(str, FACE)),
            "--segmenter",
            "grabcut",
            "--segmenter-opt",
            "iterations=3",
        ]
    )
    assert code == 0 and "box+grabcut" in capsys.readouterr().out


def test_verify_with_a_user_mask(pair, capsys):
    code = main(
        [
            "verify",
            str(pair / "original.png"),
            str(pair / "local.png"),
            "--instruction",
            "Make the face green",
            "--mask",
            str(pair / "mask.png"),
            "--tau-in",
            "0.5",
        ]
    )
    text = capsys.readouterr().out
    assert code == 0 and "with mask, 1 box(es)" in text and "(pass needs > 0.5)" in text


def test_verify_target_not_found_fails(pair, capsys):
    code = main(
        ["verify", str(pair / "original.png"), str(pair / "local.png"), "--instruction", "Remove the flag"]
    )
    text = capsys.readouterr().out
    assert code == 1 and "TARGET_NOT_FOUND" in text and "no cascade for 'flag'" in text


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "give --instruction, or both --edit-type and --target"),
        (["--instruction", "..."], "could not parse an edit target"),
        (["--target", "face", "--edit-type", "ADD", "--box", "1,2,3"], "--box needs four numbers"),
        (["--target", "face", "--edit-type", "ADD", "--box", "5,5,1,1"], "X0 < X1"),
        (["--target", "face", "--edit-type", "ADD", "--detector", "yolo"], "unknown detector 'yolo'"),
        (["--target", "face", "--edit-type", "ADD", "--detector", "owlv2"], "detector 'owlv2' needs model"),
        (
            ["--target", "face", "--edit-type", "ADD", "--box", "1,1,9,9", "--detector-opt", "x=1"],
            "--detector-opt needs --detector",
        ),
        (
            [
                "--target",
                "face",
                "--edit-type",
                "ADD",
                "--detector",
                "opencv-cascade",
                "--detector-opt",
                "bad",
            ],
            "--detector-opt needs KEY=VALUE",
        ),
        (
            [
                "--target",
                "face",
                "--edit-type",
                "ADD",
                "--detector",
                "opencv-cascade",
                "--detector-opt",
                "zoom=2",
            ],
            "does not take option",
        ),
        (["--target", "face", "--edit-type", "ADD", "--tau-in", "2"], "invalid threshold"),
        (
            ["--target", "face", "--edit-type", "ADD", "--segmenter-opt", "a=1"],
            "--segmenter-opt needs --segmenter",
        ),
    ],
)
def test_verify_usage_errors_exit_2(pair, capsys, extra, message):
    code = main(["verify", str(pair / "original.png"), str(pair / "local.png"), *extra])
    assert code == 2 and message in capsys.readouterr().err


def test_verify_missing_or_bad_files_exit_2(pair, tmp_path, capsys):
    assert (
        main(
            [
                "verify",
                str(tmp_path / "nope.png"),
                str(pair / "local.png"),
                "--target",
                "face",
                "--edit-type",
                "MODIFY",
            ]
        )
        == 2
    )
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "bad.png").write_bytes(b"not an image")
    assert (
        main(
            [
                "verify",
                str(pair / "original.png"),
                str(tmp_path / "bad.png"),
                "--target",
                "face",
                "--edit-type",
                "MODIFY",
            ]
        )
        == 2
    )
    assert "not a readable image" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:  # argparse: mutually exclusive --box / --mask
        main(["verify", "a.png", "b.png", "--box", "1,1,2,2", "--mask", "m.png"])
    assert exc.value.code == 2
