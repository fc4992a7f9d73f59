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
