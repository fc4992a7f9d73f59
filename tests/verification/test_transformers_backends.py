"""OWLv2, Grounding DINO and SAM2 at tiny size with random weights, through the real backend code.

Each model is built from a config, saved with its processor (tokenizers built in memory: a
character-level CLIP BPE vocabulary for OWLv2, a small WordPiece vocabulary for Grounding DINO)
and re-loaded by the factories with ``from_pretrained`` under offline mode. Random weights say
nothing about accuracy: the tests assert the code path, shapes, thresholds and result types.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import skimage.data
from PIL import Image

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from support.backends import build  # noqa: E402

from model_adapters.errors import OptionsError  # noqa: E402
from verification.check import check_edit  # noqa: E402
from verification.detection import Detections  # noqa: E402
from verification.factories import build_detector, build_segmenter  # noqa: E402
from verification.sam2_segmenter import Sam2Segmenter  # noqa: E402
from verification.zero_shot_detector import ZeroShotDetector  # noqa: E402


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    import huggingface_hub.constants as hub_constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)


@pytest.fixture(scope="module")
def image() -> Image.Image:
    """A non-square photo (OWLv2 pads to a square: boxes must come back in this image's pixels)."""
    return Image.fromarray(np.ascontiguousarray(skimage.data.astronaut()[:, :400]))


@pytest.fixture(scope="module")
def owlv2_dir(tmp_path_factory) -> str:
    from transformers import (
        CLIPTokenizer,
        Owlv2Config,
        Owlv2ForObjectDetection,
        Owlv2ImageProcessor,
        Owlv2Processor,
    )

    vocab: dict[str, int] = {"!": 0}  # id 0 must not start a query (OWLv2 masks such queries)
    for ch in "abcdefghijklmnopqrstuvwxyz'":
        vocab[ch] = len(vocab)
        vocab[ch + "</w>"] = len(vocab)
    vocab["<|startoftext|>"] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    tokenizer = CLIPTokenizer(vocab=vocab, merges=[])
    text = {
        "vocab_size": len(vocab),
        "hidden_size": 32,
        "intermediate_size": 37,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "max_position_embeddings": 32,
        "bos_token_id": len(vocab) - 2,
        "eos_token_id": len(vocab) - 1,
        "pad_token_id": len(vocab) - 1,
    }
    vision = {
        "image_size": 64,
        "patch_size": 16,
        "hidden_size": 32,
        "intermediate_size": 37,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
    }
    torch.manual_seed(0)
    model = Owlv2ForObjectDetection(Owlv2Config(text_config=text, vision_config=vision, projection_dim=32))
    # Random heads saturate (degenerate boxes, scores of exactly 0 or 1). Zeroing the last box layer
    # leaves OWLv2's per-patch prior boxes (real rectangles, some only in the square padding), and
    # zeroing the logit shift/scale layers leaves logits = cosine similarity, scores in (0.26, 0.74).
    with torch.no_grad():
        for layer in (model.box_head.dense2, model.class_head.logit_shift, model.class_head.logit_scale):
            layer.weight.zero_()
            layer.bias.zero_()
    processor = Owlv2Processor(
        image_processor=Owlv2ImageProcessor(size={"height": 64, "width": 64}), tokenizer=tokenizer
    )
    path = tmp_path_factory.mktemp("owlv2")
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def grounding_dino_dir(tmp_path_factory) -> str:
    from transformers import (
        BertTokenizer,
        GroundingDinoConfig,
        GroundingDinoForObjectDetection,
        GroundingDinoImageProcessor,
        GroundingDinoProcessor,
        SwinConfig,
    )

    vocab = {
        w: i
        for i, w in enumerate(
            [
                "[PAD]",
                "[UNK]",
                "[CLS]",
                "[SEP]",
                "[MASK]",
                ".",
                "'",
                "s",
                "a",
                "face",
                "astronaut",
                "cat",
                "person",
                "photo",
                "of",
            ]
        )
    }
    tokenizer = BertTokenizer(vocab=vocab)
    swin = SwinConfig(
        window_size=7,
        embed_dim=8,
        depths=[1, 1, 1, 1],
        num_heads=[1, 1, 1, 1],
        image_size=98,
        out_features=["stage2", "stage3", "stage4"],
        out_indices=[2, 3, 4],
    )
    config = GroundingDinoConfig(
        d_model=32,
        encoder_layers=1,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=8,
        decoder_ffn_dim=8,
        num_queries=6,
        num_feature_levels=4,
        encoder_n_points=2,
        decoder_n_points=2,
        backbone_config=swin,
        max_text_len=16,
        text_config={
            "model_type": "bert",
            "vocab_size": len(vocab),
            "hidden_size": 8,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "intermediate_size": 8,
            "max_position_embeddings": 32,
        },
    )
    torch.manual_seed(0)
    model = GroundingDinoForObjectDetection(config)
    processor = GroundingDinoProcessor(
        image_processor=GroundingDinoImageProcessor(size={"shortest_edge": 98, "longest_edge": 128}),
        tokenizer=tokenizer,
    )
    path = tmp_path_factory.mktemp("grounding_dino")
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def sam2_dir(tmp_path_factory) -> str:
    from transformers import (
        Sam2Config,
        Sam2HieraDetConfig,
        Sam2MaskDecoderConfig,
        Sam2Model,
        Sam2Processor,
        Sam2PromptEncoderConfig,
        Sam2VisionConfig,
    )
    from transformers.models.sam2.image_processing_sam2 import Sam2ImageProcessor

    backbone = Sam2HieraDetConfig(
        hidden_size=12,
        num_channels=3,
        image_size=128,
        patch_stride=4,
        patch_kernel_size=7,
        patch_padding=3,
        blocks_per_stage=[1, 1, 1, 1],
        embed_dim_per_stage=[12, 24, 48, 96],
        num_attention_heads_per_stage=[1, 2, 4, 8],
    )
    vision = Sam2VisionConfig(
        backbone_config=backbone,
        backbone_channel_list=[96, 48, 24, 12],
        backbone_feature_sizes=[[32, 32], [16, 16], [8, 8]],
        fpn_hidden_size=32,
    )
    prompt = Sam2PromptEncoderConfig(
        image_size=128, patch_size=16, mask_input_channels=8, hidden_size=32, num_point_embeddings=4
    )
    decoder = Sam2MaskDecoderConfig(
        hidden_size=32,
        mlp_dim=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        attention_downsample_rate=2,
        num_multimask_outputs=3,
        iou_head_depth=3,
        iou_head_hidden_dim=32,
    )
    torch.manual_seed(0)
    model = Sam2Model(
        Sam2Config(vision_config=vision, prompt_encoder_config=prompt, mask_decoder_config=decoder)
    )
    processor = Sam2Processor(image_processor=Sam2ImageProcessor(size={"height": 128, "width": 128}))
    path = tmp_path_factory.mktemp("sam2")
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def owlv2(owlv2_dir) -> ZeroShotDetector:
    return build_detector("owlv2", {"model": owlv2_dir, "threshold": 0.0, "max_boxes": 5})


@pytest.fixture(scope="module")
def sam2(sam2_dir) -> Sam2Segmenter:
    # benchmarks/gpu_check.sh runs the SAM2 tests with EDCT_TEST_DEVICE=cuda
    return build_segmenter(
        {"backend": "sam2", "model": sam2_dir, "device": os.environ.get("EDCT_TEST_DEVICE", "cpu")}
    )


def _assert_detections(d: Detections, image: Image.Image, threshold: float, max_boxes: int) -> None:
    w, h = image.size
    assert isinstance(d, Detections) and len(d.boxes) == len(d.scores) <= max_boxes
    assert all(isinstance(s, float) and threshold <= s <= 1.0 for s in d.scores)
    assert list(d.scores) == sorted(d.scores, reverse=True)
    for x0, y0, x1, y1 in d.boxes:
        assert 0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h


# ------------------------------------------------------------------------------------- OWLv2


def test_owlv2_loads_offline_and_detects(owlv2, owlv2_dir, image):
    assert os.environ["HF_HUB_OFFLINE"] == "1" and owlv2.model.config.model_type == "owlv2"
    assert owlv2.query("the Astronaut's face") == "a photo of astronaut's face"
    d = owlv2.detect(image, "the astronaut's face")
    _assert_detections(d, image, 0.0, 5)
    query = owlv2.query("the astronaut's face")
    assert len(d) == 5 and d.detail.startswith(
        f"owlv2 {owlv2.model_id} query {query!r}: 5 box(es) kept of 16"
    )


def test_owlv2_boxes_are_in_the_unpadded_images_pixels(owlv2, image):
    """OWLv2 pads to a square: scaling against the padded side, then clipping, is the right inverse."""
    with torch.inference_mode():
        inputs = owlv2.processor(text=[[owlv2.query("face")]], images=image, return_tensors="pt")
        raw = owlv2.processor.post_process_grounded_object_detection(
            owlv2.model(**inputs), threshold=0.0, target_sizes=[(512, 512)]
        )[0]
    boxes = np.clip(raw["boxes"].numpy(), 0, [400, 512, 400, 512])
    scores = raw["scores"].numpy()
    valid = (boxes[:, 2] - boxes[:, 0] >= 1) & (boxes[:, 3] - boxes[:, 1] >= 1)
    assert (raw["boxes"][:, 0] >= 400).any() and not valid.all()  # some priors lie in the padding only
    order = np.argsort(-scores[valid], kind="stable")[:5]
    d = owlv2.detect(image, "face")
    np.testing.assert_allclose(np.array(d.boxes), boxes[valid][order], rtol=1e-5, atol=1e-3)
    np.testing.assert_allclose(d.scores, scores[valid][order], rtol=1e-5)


def test_owlv2_threshold_above_every_score_is_not_found(owlv2_dir, image):
    det = build_detector("owlv2", {"model": owlv2_dir, "threshold": 1.0})
    d = det.detect(image, "face")
    assert not d.found and "reached threshold 1" in d.detail


def test_wrong_family_is_refused(owlv2_dir):
    with pytest.raises(OptionsError, match="is a 'owlv2' model, not grounding-dino"):
        build_detector("grounding-dino", {"model": owlv2_dir})


# ----------------------------------------------------------------------------- Grounding DINO


def test_grounding_dino_loads_offline_and_detects(grounding_dino_dir, image):
    det = build_detector(
        "grounding-dino",
        {"model": grounding_dino_dir, "threshold": 0.0, "text_threshold": 0.0, "max_boxes": 4},
    )
    assert det.model.config.model_type == "grounding-dino" and det.query("The Face") == "face."
    d = det.detect(image, "the face")
    _assert_detections(d, image, 0.0, 4)
    assert len(d) == 4 and "query 'face.'" in d.detail


def test_grounding_dino_threshold_filters(grounding_dino_dir, image):
    low = build_detector("grounding-dino", {"model": grounding_dino_dir, "threshold": 0.0, "max_boxes": 6})
    all_scores = low.detect(image, "face").scores
    cut = sorted(all_scores)[len(all_scores) // 2]
    high = build_detector("grounding-dino", {"model": grounding_dino_dir, "threshold": cut, "max_boxes": 6})
    kept = high.detect(image, "face").scores
    assert kept == tuple(s for s in all_scores if s >= cut) and 0 < len(kept) < len(all_scores)


# --------------------------------------------------------------------------------------- SAM2


def test_sam2_gives_one_image_sized_mask_per_box(sam2, image):
    boxes = [(150.0, 50.0, 280.0, 180.0), (10.0, 300.0, 120.0, 500.0)]
    masks = sam2.segment(image, boxes)
    assert len(masks) == 2
    for m in masks:
        assert m.dtype == bool and m.shape == (512, 400)
    assert sam2.segment(image, []) == []


def test_sam2_keeps_the_best_mask_by_predicted_iou(sam2, image):
    box = (150.0, 50.0, 280.0, 180.0)
    with torch.inference_mode():
        inputs = sam2.processor(images=image, input_boxes=[[list(box)]], return_tensors="pt")
        out = sam2.model(
            pixel_values=inputs["pixel_values"], input_boxes=inputs["input_boxes"], multimask_output=True
        )
        all_masks = sam2.processor.post_process_masks(out.pred_masks, inputs["original_sizes"])[0][0]
    best = int(out.iou_scores[0, 0].argmax())
    (mask,) = sam2.segment(image, [box])
    np.testing.assert_array_equal(mask, all_masks[best].numpy())


# ------------------------------------------------------------------------ composed providers


def test_owlv2_with_sam2_runs_the_gate(owlv2_dir, sam2_dir, image):
    provider = build(
        "detector",
        "owlv2",
        {
            "model": owlv2_dir,
            "threshold": 0.0,
            "max_boxes": 2,
            "segmenter": {"backend": "sam2", "model": sam2_dir},
        },
    )
    assert provider.name == "owlv2+sam2"
    identity = provider.identity()
    assert identity["detector"]["model"] == owlv2_dir and identity["segmenter"]["model"] == sam2_dir
    loc = provider.locate(image, "face")
    assert (
        loc.found and loc.mask.shape == (512, 400) and len(loc.boxes) == 2 and "sam2: 2 mask(s)" in loc.detail
    )
    chk = check_edit(image, image, edit_type="MODIFY", target="face", locator=provider)
    assert chk.verdict == "no_change_in_target" and chk.n_boxes == 2 and chk.locator == "owlv2+sam2"


def test_grounding_dino_default_segmenter_is_the_box(grounding_dino_dir, image):
    provider = build(
        "detector", "grounding-dino", {"model": grounding_dino_dir, "threshold": 0.0, "max_boxes": 1}
    )
    loc = provider.locate(image, "face")
    x0, y0, x1, y1 = loc.boxes[0]
    assert provider.name == "grounding-dino+box"
    assert loc.mask.sum() == (np.ceil(x1) - np.floor(x0)) * (np.ceil(y1) - np.floor(y0))
