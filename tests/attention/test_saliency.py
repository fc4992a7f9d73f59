"""The paper's saliency recipe and the localization score, pinned to hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from edct_task.attention.probe import resolve_layers
from edct_task.attention.saliency import Recipe, localization, saliency_grid, upscale
from edct_task.core.errors import ConfigError


def test_layer_mean_is_subtracted_and_a_flat_layer_adds_nothing():
    # layer 0 peaks on token 3; layer 1 is flat (an attention sink lifts it): only layer 0 shows,
    # averaged over the two layers: (0.5 - 0.2) / 2 = 0.15 → squared 0.0225
    a = np.array([[[0.1, 0.1, 0.1, 0.5]], [[0.3, 0.3, 0.3, 0.3]]])
    np.testing.assert_allclose(saliency_grid(a, (2, 2)), [[0, 0], [0, 0.0225]], atol=1e-12)


def test_a_constant_added_to_a_layer_changes_nothing():
    rng = np.random.default_rng(0)
    a = rng.random((3, 4, 12))
    shifted = a.copy()
    shifted[1] += 0.7  # a sink that lifts every image token of layer 1
    np.testing.assert_allclose(saliency_grid(a, (3, 4)), saliency_grid(shifted, (3, 4)), atol=1e-12)


def test_heads_are_weighted_by_their_variance():
    # head 0: var 0.0675, head 1: var 0.0075 → weights 0.9 / 0.1; layer mean 0.2
    # S = 0.9·[.5,-.1,-.1,-.1] + 0.1·[-.1,-.1,-.1,.1] = [.44, -.1, -.1, -.08] → relu² → [.1936, 0, 0, 0]
    a = np.array([[[0.7, 0.1, 0.1, 0.1], [0.1, 0.1, 0.1, 0.3]]])
    np.testing.assert_allclose(saliency_grid(a, (1, 4)), [[0.1936, 0, 0, 0]], atol=1e-12)


def test_values_below_the_25th_percentile_are_zeroed_and_the_rest_kept():
    a = np.array([[[0.0, 5.0, 5.1, 5.2, 5.3, 5.4, 5.5, 5.6]]])
    uncut = saliency_grid(a, (2, 4), Recipe(percentile=0.0)).ravel()
    cut = saliency_grid(a, (2, 4)).ravel()
    threshold = np.percentile(uncut, 25)
    assert (uncut > 0).sum() == 7 and threshold > uncut[1] > 0  # the weakest positive token is cut
    np.testing.assert_array_equal(cut, np.where(uncut < threshold, 0.0, uncut))
    assert cut[1] == 0 and cut[2] == uncut[2]


def test_uniform_attention_gives_an_empty_map():
    assert not saliency_grid(np.full((2, 3, 6), 1 / 6), (2, 3)).any()


@pytest.mark.parametrize(
    ("shape", "grid", "match"),
    [((4, 6), (2, 3), "layers, heads"), ((1, 2, 6), (2, 2), "needs 4 image tokens")],
)
def test_bad_shapes_name_the_rule(shape, grid, match):
    with pytest.raises(ValueError, match=match):
        saliency_grid(np.ones(shape), grid)


def test_upscale_is_bicubic_non_negative_and_peaks_where_the_token_is():
    grid = np.zeros((3, 4))
    grid[0, 3] = 1.0
    up = upscale(grid, (40, 30))
    assert up.shape == (30, 40) and up.dtype == np.float32
    assert up.min() >= 0 and up.max() == pytest.approx(1.0)
    y, x = np.unravel_index(np.argmax(up), up.shape)
    assert y < 10 and x >= 30  # inside the top-right token's cell
    assert not upscale(np.zeros((3, 4)), (40, 30)).any()


def test_localization_is_mass_inside_over_area_share():
    mask = np.zeros((10, 10), bool)
    mask[:2, :5] = True  # 10% of the image
    inside_only = np.where(mask, 1.0, 0.0)
    loc = localization(inside_only, mask)
    assert loc.mass_inside == pytest.approx(1.0) and loc.mask_share == pytest.approx(0.1)
    assert loc.score == pytest.approx(10.0)
    assert localization(np.ones((10, 10)), mask).score == pytest.approx(1.0)  # spread evenly
    half = np.where(mask, 1.0, 0.0) + np.where(mask, 0.0, 1 / 9)  # mass 10 inside, 10 outside
    assert localization(half, mask).score == pytest.approx(5.0)
    empty = localization(np.zeros((10, 10)), mask)
    assert empty.score is None and empty.mass_inside is None


def test_localization_refuses_an_empty_mask_and_negative_saliency():
    with pytest.raises(ValueError, match="empty"):
        localization(np.ones((4, 4)), np.zeros((4, 4), bool))
    with pytest.raises(ValueError, match="non-negative"):
        localization(-np.ones((4, 4)), np.ones((4, 4), bool))


@pytest.mark.parametrize(
    ("n", "spec", "layers"),
    [
        (36, None, tuple(range(7, 13))),  # the paper's layers 7–12 of Qwen3-VL-8B
        (28, None, (5, 6, 7, 8, 9)),
        (2, None, (0, 1)),
        (36, "7-12", tuple(range(7, 13))),
        (36, "3,5, 9-10", (3, 5, 9, 10)),
        (36, "0.5-1.0", tuple(range(18, 36))),
    ],
)
def test_layers_default_to_the_papers_relative_band(n, spec, layers):
    assert resolve_layers(n, spec) == layers


@pytest.mark.parametrize(
    ("spec", "match"), [("40", "0-35, not 40"), ("x", "give indices"), ("9-7", "backwards")]
)
def test_bad_layer_specs_are_config_errors(spec, match):
    with pytest.raises(ConfigError, match=match):
        resolve_layers(36, spec)


def test_memory_estimate_for_qwen3_vl_8b():
    from edct_task.attention.memory import QWEN3_VL_8B, estimate, image_tokens

    tokens = image_tokens(1600, 900, QWEN3_VL_8B)  # DriveLM front camera → 28 × 50 merged patches
    assert tokens == 1400
    e = estimate(QWEN3_VL_8B, tokens + 60)
    assert e["weights_bytes"] == 2 * 8_767_123_696
    assert e["one_layer_eager_bytes"] == 32 * 1460**2 * 8  # bf16 scores + fp32 softmax + bf16 copy
    assert e["output_attentions_kept_bytes"] == 36 * 32 * 1460**2 * 2
    assert e["output_attentions_kept_bytes"] / e["one_layer_eager_bytes"] == pytest.approx(9.0)
