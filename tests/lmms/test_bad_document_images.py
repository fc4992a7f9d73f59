"""Issue 19, rows 4 and 5 on the lmms-eval path: a document whose image is a bomb (or unreadable)
costs that document, recorded with its reason; EXIF orientation is applied as in ``edct run``."""

from __future__ import annotations

import io

import pytest
from PIL import Image
from support.calibration_dataset import bomb_png

from edct_task.core.records import SampleRecord
from edct_task.lmms import documents
from edct_task.lmms import hooks as lmms_hooks
from edct_task.lmms import settings as lmms_settings


@pytest.fixture()
def hook_settings(tmp_path, monkeypatch):
    monkeypatch.delenv("EDCT_CONFIG", raising=False)
    monkeypatch.setenv(lmms_settings.ENV_WORK_DIR, str(tmp_path / "work"))
    yield lmms_settings.settings()
    lmms_settings.release()


def _doc(image: bytes) -> dict:
    return {
        "id": "bomb-1",
        "domain": "okvqa",
        "question": "What is shown?",
        "system_prompt": "",
        "source": "okvqa",
        "source_id": "1",
        "metadata": "{}",
        "image": {"bytes": image, "path": None},
    }


def test_a_bomb_document_is_its_error_record_not_a_crash(hook_settings) -> None:
    doc = _doc(bomb_png())
    assert documents.doc_to_visual(doc) == []
    _visuals, _text, terminal, outputs, _info = lmms_hooks.doc_to_text(
        doc, previous_output=["A dog."], round_idx=1, previous_round_info=None
    )
    assert terminal
    record = SampleRecord.model_validate_json(outputs[-1])
    assert record.status == "error" and record.reason.startswith("row bomb-1: image refused")
    metrics = lmms_hooks.process_results(doc, [outputs[-1]])
    assert metrics  # counted like any failed sample


def test_exif_orientation_is_applied_to_document_images() -> None:
    image = Image.new("RGB", (40, 20), "white")
    exif = Image.Exif()
    exif[0x0112] = 6
    buf = io.BytesIO()
    image.save(buf, format="JPEG", exif=exif.tobytes())
    doc = _doc(buf.getvalue())
    assert documents.doc_image(doc).size == (20, 40)
    image, notes = documents.doc_image_and_notes(doc)
    assert documents.sample_of(doc, "0" * 64, notes).metadata["exif_orientation"] == "6"


def _decoded_dataset(images: list[bytes]):
    """A datasets ``Dataset`` of EDCT-Bench rows whose ``image`` column decodes on access."""
    import datasets

    from edct_task.bench_data.format import features

    rows = [{**_doc(image), "id": f"row-{i}"} for i, image in enumerate(images)]
    return datasets.Dataset.from_list(rows, features=features())


def test_chosen_rows_decode_each_image_once_when_drawn_and_a_bomb_costs_its_row(monkeypatch) -> None:
    import datasets

    good = io.BytesIO()
    Image.new("RGB", (8, 6), "red").save(good, format="PNG")
    docs = _decoded_dataset([good.getvalue(), bomb_png(), good.getvalue()])
    decodes = []
    real = datasets.Image.decode_example

    def counted(self, value, token_per_repo_id=None):
        decodes.append(1)
        return real(self, value, token_per_repo_id=token_per_repo_id)

    monkeypatch.setattr(datasets.Image, "decode_example", counted)
    chosen = documents.ChosenRows(docs, 3)
    rows = list(chosen.rows_without_images())
    assert [documents.doc_source(r) for r in rows] == ["okvqa"] * 3 and "image" not in rows[0]
    assert decodes == []  # checking every row's source decodes nothing
    assert chosen.draw(0)["image"].size == (8, 6) and len(decodes) == 1
    assert chosen.doc(0) is chosen.doc(0) and len(decodes) == 1  # kept, not read again
    with pytest.raises(documents.IMAGE_ERRORS) as raised:  # datasets' decoder meets the bomb
        chosen.draw(1)
    record = documents.unreadable_record(chosen.doc(1), raised.value)
    assert record.status == "error" and record.reason.startswith("row row-1: image cannot be decoded")
    assert chosen.draw(2)["id"] == "row-2"
