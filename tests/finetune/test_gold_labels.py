"""Gold answers of counterfactual pairs, correctness, and the split by sample."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edct_task.attention.pairs import Pair
from edct_task.bench_data.format import BenchDataError
from edct_task.calibration import world
from edct_task.calibration.samples import generate_samples
from edct_task.finetune.data import items_of, split_pairs, trl_row
from edct_task.finetune.labels import Gold, gold_labels, is_correct, normalise, read_label_file


def _pair(sample: str, step: int, original: Path, edited: Path, question: str = "How many axles?") -> Pair:
    return Pair(f"{sample}-step{step}", sample, step, question, "", original, edited, None, None, None)


@pytest.mark.parametrize(
    ("answer", "gold", "question", "right"),
    [
        ("Stop.", "stop", "Which action should the ego vehicle take now: stop, slow down or go?", True),
        ("It should slow down.", "stop", "Which action should the ego vehicle take now?", False),
        ("Table tennis.", "tennis", "Name the sport that this scene shows equipment for.", False),
        ("Two", "2", "How many wheel axles does the red vehicle have?", True),
        ("2 axles.", "2", "How many wheel axles does the red vehicle have?", True),
        ("3", "2", "How many wheel axles does the red vehicle have?", False),
        ("The bus", "bus", "What vehicle is that?", True),
        ("", "bus", "What vehicle is that?", False),
    ],
)
def test_is_correct(answer, gold, question, right):
    assert is_correct(answer, gold, question) is right


def test_normalise():
    assert normalise("  The TWO big-wheels!  ") == "2 big wheels"


def test_calibration_pairs_are_labelled_by_the_world_and_a_label_file_wins(tmp_path):
    samples = generate_samples(3, seed=0)
    paths = []
    for s in samples:
        path = tmp_path / f"{s.id}.png"
        s.image.save(path, pnginfo=_info(s.image))
        paths.append(path)
    plain = tmp_path / "plain.png"
    samples[0].image.copy().save(plain)  # no scene metadata: a "real" image
    pairs = [
        _pair(samples[0].id, 1, paths[0], paths[1], samples[0].question),
        _pair("real-1", 1, plain, plain),
    ]
    gold, missing = gold_labels(pairs)
    assert missing == ["real-1-step1"]
    assert gold[pairs[0].id] == Gold(
        world.ANSWER_TEXT[samples[0].expected_answer],
        world.ANSWER_TEXT[samples[1].expected_answer],
        "calibration-world",
    )
    labels = tmp_path / "labels.jsonl"
    labels.write_text(json.dumps({"id": "real-1-step1", "original": "2", "counterfactual": "3"}) + "\n")
    gold, missing = gold_labels(pairs, labels)
    assert missing == [] and gold["real-1-step1"] == Gold("2", "3", "label-file")


def _info(image):
    from PIL.PngImagePlugin import PngInfo

    info = PngInfo()
    for k, v in image.info.items():
        info.add_text(k, v)
    return info


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ('{"id": "a", "original": "2"}\n', "line 1: expected"),
        ('{"id": "a", "original": "", "counterfactual": "3"}', "empty"),
    ],
)
def test_bad_label_files_are_data_errors(tmp_path, content, match):
    path = tmp_path / "labels.jsonl"
    path.write_text(content)
    with pytest.raises(BenchDataError, match=match):
        read_label_file(path)
    with pytest.raises(BenchDataError, match="not found"):
        read_label_file(tmp_path / "nope.jsonl")


def test_split_keeps_samples_whole_and_is_seeded(tmp_path):
    img = tmp_path / "x.png"
    pairs = [_pair(f"s{i}", j, img, img) for i in range(8) for j in (1, 2)]
    train, test = split_pairs(pairs, 0.25, seed=3)
    assert len(test) == 4 and len(train) == 12
    assert not {p.sample_id for p in train} & {p.sample_id for p in test}
    assert split_pairs(pairs, 0.25, seed=3) == (train, test)
    assert split_pairs(pairs, 0.25, seed=4) != (train, test)
    two = [_pair("a", 1, img, img), _pair("b", 1, img, img)]
    assert [len(x) for x in split_pairs(two, 0.1, 0)] == [1, 1]  # one sample on each side at least


def test_items_take_each_original_once_and_rows_are_trl_prompt_completion(tmp_path):
    samples = generate_samples(1, seed=0)
    path = tmp_path / "o.png"
    samples[0].image.save(path)
    pairs = [_pair("s", 1, path, path, "Q?"), _pair("s", 2, path, path, "Q?")]
    gold = {p.id: Gold("stop", f"go{p.step}", "label-file") for p in pairs}
    originals, cfs = items_of(pairs, gold, "original"), items_of(pairs, gold, "counterfactual")
    assert [i.key for i in originals] == ["s/original"]
    assert [i.gold for i in cfs] == ["go1", "go2"]
    row = trl_row(cfs[0])
    assert row["prompt"] == [{"role": "user", "content": "Q?"}]
    assert row["completion"] == [{"role": "assistant", "content": "go1"}]
    assert row["images"][0].size == samples[0].image.size


def test_answer_only_labels_stop_at_the_end_of_turn_token():
    import torch

    from edct_task.finetune.data import AnswerOnlyLabels

    def collator(_examples):
        labels = torch.tensor([[-100, -100, 5, 6, 9, 7, 9], [-100, 5, 9, 7, -100, -100, -100]])
        return {"labels": labels, "input_ids": labels.clamp(min=0)}

    out = AnswerOnlyLabels(collator, end_token_id=9)([{}])
    assert out["labels"].tolist() == [[-100, -100, 5, 6, 9, -100, -100], [-100, 5, 9, -100, -100, -100, -100]]
