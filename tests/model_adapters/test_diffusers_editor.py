"""The diffusers editor on a tiny random-weight FLUX.1 Kontext pipeline, saved and re-loaded offline.

The architecture is the real one at test size (cf. diffusers' own pipeline tests); the tokenizers
are built in memory with the ``tokenizers`` library, since nothing may come from the hub.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from PIL import Image

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")
pytest.importorskip("tokenizers")

from support.backends import build  # noqa: E402

from model_adapters.errors import OptionsError  # noqa: E402
from model_adapters.images import RESIZE_INFO_KEY  # noqa: E402
from verification.localization import folder_stamp  # noqa: E402

WORDS = (
    "keep",
    "change",
    "how",
    "constraints",
    "the",
    "a",
    "of",
    "to",
    "from",
    "ball",
    "car",
    "tree",
    "red",
    "white",
    "orange",
    "yellow",
    "blue",
    "green",
    "recolour",
    "remove",
    "add",
    "turn",
    "move",
    "left",
    "right",
    "everything",
    "else",
    "lighting",
    "match",
    "no",
    "new",
    "objects",
)


def _tokenizer(specials: dict[str, int], max_length: int):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = dict(specials)
    for word in WORDS:
        vocab.setdefault(word, len(vocab))
    unk = next(t for t in specials if "unk" in t)
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=unk))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    names = {"bos_token": "bos", "eos_token": "eos", "pad_token": "pad", "unk_token": "unk"}
    kwargs = {
        k: next(t for t in specials if v in t) for k, v in names.items() if any(v in t for t in specials)
    }
    return PreTrainedTokenizerFast(tokenizer_object=tok, model_max_length=max_length, **kwargs)


def _tiny_kontext():
    from diffusers import (
        AutoencoderKL,
        FlowMatchEulerDiscreteScheduler,
        FluxKontextPipeline,
        FluxTransformer2DModel,
    )
    from transformers import CLIPTextConfig, CLIPTextModel, T5Config, T5EncoderModel

    torch.manual_seed(0)
    transformer = FluxTransformer2DModel(
        patch_size=1,
        in_channels=4,
        num_layers=1,
        num_single_layers=1,
        attention_head_dim=16,
        num_attention_heads=2,
        joint_attention_dim=32,
        pooled_projection_dim=32,
        axes_dims_rope=[4, 4, 8],
    )
    text_encoder = CLIPTextModel(
        CLIPTextConfig(
            bos_token_id=0,
            eos_token_id=2,
            pad_token_id=1,
            hidden_size=32,
            intermediate_size=37,
            layer_norm_eps=1e-5,
            num_attention_heads=4,
            num_hidden_layers=2,
            vocab_size=100,
            hidden_act="gelu",
            projection_dim=32,
            max_position_embeddings=77,
        )
    )
    text_encoder_2 = T5EncoderModel(
        T5Config(
            vocab_size=100,
            d_model=32,
            d_kv=8,
            d_ff=37,
            num_layers=2,
            num_heads=4,
            pad_token_id=0,
            eos_token_id=1,
            decoder_start_token_id=0,
        )
    )
    vae = AutoencoderKL(
        sample_size=32,
        in_channels=3,
        out_channels=3,
        block_out_channels=(4,),
        layers_per_block=1,
        latent_channels=1,
        norm_num_groups=1,
        use_quant_conv=False,
        use_post_quant_conv=False,
        shift_factor=0.0609,
        scaling_factor=1.5035,
    )
    return FluxKontextPipeline(
        scheduler=FlowMatchEulerDiscreteScheduler(),
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=_tokenizer({"<|startoftext|>": 0, "<|pad|>": 1, "<|endoftext|>": 2, "<unk>": 3}, 77),
        text_encoder_2=text_encoder_2,
        tokenizer_2=_tokenizer({"<pad>": 0, "</s>": 1, "<unk>": 2}, 512),
        transformer=transformer,
        image_encoder=None,
        feature_extractor=None,
    )


@pytest.fixture(scope="module")
def saved_pipeline(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-flux-kontext")
    _tiny_kontext().save_pretrained(folder)
    return folder


@pytest.fixture()
def offline(monkeypatch):
    import huggingface_hub.constants as hub

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", True)


OPTIONS = {
    "pipeline": "flux-kontext",
    "dtype": "float32",
    "device": os.environ.get("EDCT_TEST_DEVICE", "cpu"),  # benchmarks/gpu_check.sh runs these on cuda
    "local_files_only": True,
    "num_inference_steps": 2,
    "call_kwargs": {"_auto_resize": False, "max_sequence_length": 16, "max_area": 32 * 24},
}
INSTRUCTION = "Keep: everything else\nChange: recolour the ball from white to orange\nHow: match the lighting"


def _image(w: int, h: int) -> Image.Image:
    rng = np.random.default_rng(0)
    return Image.fromarray(rng.integers(0, 255, size=(h, w, 3), dtype=np.uint8), mode="RGB")


def test_tiny_kontext_edits_through_the_backend(saved_pipeline, offline) -> None:
    editor = build("editor", "diffusers", {**OPTIONS, "model": str(saved_pipeline)})
    image = _image(32, 24)
    first = editor.edit(image, INSTRUCTION, seed=1)
    again = editor.edit(image, INSTRUCTION, seed=1)
    other = editor.edit(image, INSTRUCTION, seed=2)
    assert first.size == image.size and first.mode == "RGB" and RESIZE_INFO_KEY not in first.info
    assert np.array_equal(np.asarray(first), np.asarray(again))  # the seed makes an attempt reproducible
    assert not np.array_equal(np.asarray(first), np.asarray(other))  # and the retry differs
    ident = editor.identity()
    assert ident["class"] == "FluxKontextPipeline" and ident["dtype"] == "float32"
    assert ident["checkpoint"] == folder_stamp(str(saved_pipeline))  # weights saved again: another key
    assert ident["call_kwargs"]["num_inference_steps"] == 2 and ident["call_kwargs"]["guidance_scale"] == 2.5
    assert editor.usage()["edits"] == 3


def test_an_output_snapped_to_the_pipeline_grid_is_resized_back(saved_pipeline, offline) -> None:
    editor = build("editor", "diffusers", {**OPTIONS, "model": str(saved_pipeline)})
    image = _image(33, 25)
    out = editor.edit(image, INSTRUCTION, seed=0)
    assert out.size == (33, 25) and out.info[RESIZE_INFO_KEY] == "32x24"
    assert editor.usage()["resized"] == 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"pipeline": "dalle"}, "pipeline must be one of"),
        ({"dtype": "int8"}, "dtype must be one of"),
        ({"call_kwargs": {"prompt": "x"}}, "without"),
        ({"call_kwargs": {"strength": 0.5}}, "does not take strength"),
        ({"cpu_offload": "disk"}, "cpu_offload must be"),
    ],
)
def test_bad_diffusers_options(saved_pipeline, offline, options, message) -> None:
    with pytest.raises(OptionsError, match=message):
        build("editor", "diffusers", {**OPTIONS, "model": str(saved_pipeline), **options})


def test_a_pipeline_that_cannot_be_loaded_is_an_options_error() -> None:
    """Not cached while offline (or gated, or no such repo): one message saying what to do."""
    from model_adapters import diffusers_editor

    with pytest.raises(OptionsError, match=r"cannot load edct-test/kontext-not-in-any-cache .*HF_TOKEN"):
        diffusers_editor.from_options(
            {"pipeline": "flux-kontext", "model": "edct-test/kontext-not-in-any-cache", "device": "cpu"}
        )
