"""What a new user meets at the command line: every command described, one spelling for the output
folder (the others accepted), lmms-eval's flags accepted by ``edct run --model``, numbers printed rounded."""

from __future__ import annotations

import argparse
import csv
import re
import types

import pytest
from support.edct_runs import records, write_edct_run

from edct_task.cli.main import build_parser, main
from model_adapters.contracts import GenerationParams
from model_adapters.errors import OptionsError
from model_adapters.lmms_eval_target import LmmsTarget, parse_gen_kwargs


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser, _ = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


@pytest.mark.parametrize("command", sorted(_subparsers()))
def test_every_command_has_a_description_and_its_help_reads_right(command) -> None:
    p = _subparsers()[command]
    assert p.description and len(p.description) > 30
    text = p.format_help()
    assert "%%" not in text and "SPEC §" not in text


def test_agreement_help_says_95_percent(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["agreement", "--help"])
    out = capsys.readouterr().out
    assert "95% Wilson" in out and "95%%" not in out


WRITERS = {
    "run": ["--config", "c.yaml"],
    "demo": [],
    "build-bench": [],
    "export-counterfactuals": ["RUN"],
    "report": ["RUN"],
    "submit": ["RUN"],
    "leaderboard": ["B"],
    "audit": ["RUN"],
    "agreement": ["L.jsonl", "--run", "RUN"],
    "verify": ["A", "B", "--instruction", "x"],
}


@pytest.mark.parametrize("command", sorted(WRITERS))
@pytest.mark.parametrize("flag", ["--output", "--out"])
def test_the_output_folder_is_spelled_output_everywhere_and_out_still_works(command, flag) -> None:
    parser, _ = build_parser()
    args = parser.parse_args([command, *WRITERS[command], flag, "somewhere"])
    value = getattr(args, "output", None) or getattr(args, "out", None)
    assert str(value) == "somewhere"
    assert re.search(r"--output[ ,]", _subparsers()[command].format_help())


def _all_parsers(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()):
    yield words, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _all_parsers(child, (*words, name))


def test_every_output_option_is_one_definition_with_one_dest() -> None:
    """``--output`` (``--out`` accepted) into ``args.output`` in every command and sub-command, and
    no other spelling or dest of the output: the readers all read ``args.output``."""
    parser, _ = build_parser()
    seen = []
    for words, p in _all_parsers(parser):
        for action in p._actions:
            flags = set(action.option_strings)
            if flags & {"--output", "--out", "-o"} or action.dest in ("out", "output"):
                assert action.option_strings in ([], ["--output", "--out"]), (words, action.option_strings)
                assert action.dest == "output", (words, action.dest)
                seen.append(" ".join(words))
    # every writer of WRITERS, the sub-commands of tiny-vlm and hub-benchmark's positional OUT
    assert set(WRITERS) | {"tiny-vlm train", "hub-benchmark", "merge", "sweep", "attention"} <= set(seen)


def test_run_accepts_lmms_eval_flags_with_underscores_and_dashes() -> None:
    parser, _ = build_parser()
    lmms = ["--model", "qwen3_vl", "--tasks", "edct_calibration", "--limit", "3", "--log_samples"]
    for spelling in ("_", "-"):
        args = parser.parse_args(
            [
                "run",
                *lmms,
                f"--model{spelling}args",
                "pretrained=x",
                f"--gen{spelling}kwargs",
                "max_new_tokens=7,temperature=0",
                f"--output{spelling}path",
                "res",
                f"--batch{spelling}size",
                "4",
            ]
        )
        assert args.model_args == "pretrained=x" and args.gen_kwargs == "max_new_tokens=7,temperature=0"
        assert str(args.output_path) == "res" and args.batch_size == "4" and args.limit == 3
        assert args.log_samples


def test_gen_kwargs_reach_the_target_requests_and_its_identity() -> None:
    assert parse_gen_kwargs("max_new_tokens=7,temperature=0") == {"max_new_tokens": 7, "temperature": 0}
    with pytest.raises(OptionsError, match="gen_kwargs"):
        parse_gen_kwargs("max_new_tokens")
    lm = types.SimpleNamespace(is_simple=True)
    plain = LmmsTarget(lm, "qwen3_vl", "pretrained=x")
    tuned = LmmsTarget(lm, "qwen3_vl", "pretrained=x", {"max_new_tokens": 7})
    params = GenerationParams(max_new_tokens=4096)
    assert plain._gen_kwargs(params)["max_new_tokens"] == 4096
    assert tuned._gen_kwargs(params)["max_new_tokens"] == 7
    # the stage cache is keyed on the identity: other decoding, other cache entries
    assert tuned.identity() != plain.identity() and tuned.identity()["gen_kwargs"] == {"max_new_tokens": 7}


def test_submit_prints_ccs_rounded(tmp_path, capsys) -> None:
    write_edct_run(tmp_path / "run", records(0.45, n=10))
    assert main(["submit", str(tmp_path / "run"), "--output", str(tmp_path / "x.edct.zip")]) == 0
    line = capsys.readouterr().out
    assert re.search(r"CCS_binary \d\.\d{3},", line), line


def test_csv_numbers_carry_no_floating_point_noise(tmp_path) -> None:
    from edct_task.reporting.tables import Table, to_csv
    from edct_task.text_safety import csv_number

    assert csv_number(0.9999999999999998) == 1.0 and csv_number(None) == "" and csv_number(3) == 3
    t = Table("t", "t", ["a"], csv_columns=["x", "y"])
    t.add(["a"], [0.1 + 0.2, 1 - 1e-16])
    assert list(csv.reader(to_csv(t).splitlines()))[1] == ["0.3", "1.0"]


def test_without_model_output_path_names_the_run_folder(tmp_path, capsys) -> None:
    import yaml

    from edct_task.config import calibration_config

    raw = calibration_config("faithful", n=2, output_dir=tmp_path / "unused").model_dump(mode="json")
    raw.update(progress=False, bootstrap_resamples=200)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(raw))
    assert main(["run", "--config", str(tmp_path / "c.yaml"), "--output_path", str(tmp_path / "o")]) == 0
    assert (tmp_path / "o" / "results.json").is_file() and not (tmp_path / "unused").exists()
    argv = ["run", "--config", str(tmp_path / "c.yaml"), "--output", "a", "--output_path", "b"]
    assert main(argv) == 2
    assert "name two folders" in capsys.readouterr().err


def test_the_top_level_help_cites_no_spec_that_does_not_ship() -> None:
    parser, _ = build_parser()
    assert "SPEC" not in parser.format_help()


def test_a_checkpoint_folder_trained_again_in_place_is_another_target(tmp_path) -> None:
    """The stage cache is keyed on the target's identity: weights rewritten under the same path
    must not be answered with the old weights' cached replies."""
    import os

    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"old weights")
    (folder / "config.json").write_text("{}")
    lm = types.SimpleNamespace(is_simple=True)

    def identity(args: str) -> dict:
        return LmmsTarget(lm, "qwen3_vl", args).identity()

    before = identity(f"pretrained={folder},device=cpu")
    assert before == identity(f"pretrained={folder},device=cpu") and before["checkpoint"]
    (folder / "model.safetensors").write_bytes(b"new weights")  # same size, a new time
    stat = (folder / "model.safetensors").stat()
    os.utime(folder / "model.safetensors", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    after = identity(f"pretrained={folder},device=cpu")
    assert after["checkpoint"] != before["checkpoint"] and after["model_args"] == before["model_args"]
    assert "checkpoint" not in identity("pretrained=Qwen/Qwen3-VL-8B-Instruct")  # a hub id: no folder
    assert identity(f"model={folder}")["checkpoint"] == after["checkpoint"]  # lmms-eval's vllm


def test_weights_loaded_from_a_local_folder_are_identified_by_its_files(tmp_path) -> None:
    """Detectors, segmenters and editors that load weights: the same folder rewritten is another model."""
    from verification.localization import folder_stamp, weights_identity

    (tmp_path / "model.safetensors").write_bytes(b"w" * 10)
    first = weights_identity("sam2", str(tmp_path), None, mask_threshold=0.0)
    assert first["checkpoint"] == folder_stamp(str(tmp_path)) and first["mask_threshold"] == 0.0
    (tmp_path / "model.safetensors").write_bytes(b"w" * 11)
    assert weights_identity("sam2", str(tmp_path), None, mask_threshold=0.0) != first
    assert "checkpoint" not in weights_identity("sam2", "facebook/sam2.1-hiera-large", None)
