"""Scenes, rendering, perception and the oracle of the calibration world."""

from __future__ import annotations

import io
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest
from PIL import Image

from edct_task.calibration import (
    SCENE_INFO_KEY,
    OracleMaskProvider,
    Scene,
    generate_samples,
    object_mask,
    perceive,
    render_scene,
    scene_of,
    world,
)
from edct_task.calibration.render import png_info
from edct_task.calibration.scenes import config_of_context
from verification.localization import MaskProvider


@pytest.fixture(scope="module")
def samples():
    return generate_samples(300, seed=0)


def test_samples_are_split_evenly_with_stable_ids(samples) -> None:
    assert Counter(s.domain for s in samples) == {"knowledge": 100, "driving": 100, "spatial": 100}
    assert samples[0].id == "cal-knowledge-0000" and samples[7].id == "cal-driving-0002"
    assert len({s.id for s in samples}) == 300
    assert all((s.system_prompt is not None) == (s.domain == "driving") for s in samples)
    assert all(s.image.size == (384, 288) and s.image.mode == "RGB" for s in samples)
    # every answer of every family occurs, and the expected answer follows the rule table
    for family, answers in world.ANSWERS.items():
        assert {s.expected_answer for s in samples if s.domain == family} == set(answers)
    for s in samples:
        scene = scene_of(s.image)
        assert scene is not None and s.expected_answer == world.rule(scene.family, scene.config())
        # the context (background tint) was chosen from the original configuration
        assert config_of_context(scene.family, scene.context) == scene.config()


def test_generation_is_deterministic_and_prefix_stable(samples) -> None:
    again = generate_samples(30, seed=0)
    for a, b in zip(samples[:30], again, strict=True):
        assert (a.id, a.question, a.expected_answer) == (b.id, b.question, b.expected_answer)
        assert a.image.tobytes() == b.image.tobytes()
        assert a.image.info[SCENE_INFO_KEY] == b.image.info[SCENE_INFO_KEY]
    other = generate_samples(30, seed=1)
    assert sum(a.image.tobytes() != b.image.tobytes() for a, b in zip(again, other, strict=True)) >= 28


def test_scene_json_round_trip_and_png_metadata(samples) -> None:
    scene = scene_of(samples[4].image)
    assert scene is not None
    assert Scene.from_json(scene.to_json()) == scene
    assert render_scene(scene).tobytes() == samples[4].image.tobytes()
    buf = io.BytesIO()
    samples[4].image.save(buf, format="PNG", pnginfo=png_info(samples[4].image))
    reloaded = Image.open(io.BytesIO(buf.getvalue()))
    assert scene_of(reloaded) == scene
    assert np.array_equal(np.asarray(reloaded.convert("RGB")), np.asarray(samples[4].image))


def test_perception_reads_every_scene_correctly(samples) -> None:
    for s in samples:
        scene = scene_of(s.image)
        percept = perceive(np.asarray(s.image), s.domain)
        assert percept.config == scene.config(), s.id
        assert percept.context == scene.context, s.id
    keys = {(p.context, p.signature) for p in (perceive(np.asarray(s.image), s.domain) for s in samples)}
    assert len(keys) > 250  # tint + texture identify the scene, far beyond the 6 tints


def test_perception_follows_pixels_not_metadata(samples) -> None:
    sample = next(s for s in samples if s.domain == "driving" and scene_of(s.image).config()[0] == "red")
    scene = scene_of(sample.image)
    pixels = np.asarray(sample.image).copy()
    light = scene.find("traffic light")
    # hand-paint the lit (top) lamp green and the bottom lamp red: only pixels change
    yy, xx = np.mgrid[: scene.height, : scene.width]
    top = (xx - light.x) ** 2 + (yy - (light.y - 24)) ** 2 <= 81
    pixels[top] = (20, 200, 60)
    painted = Image.fromarray(pixels)
    painted.info[SCENE_INFO_KEY] = sample.image.info[SCENE_INFO_KEY]  # metadata still says red
    assert perceive(np.asarray(sample.image), "driving").config[0] == "red"
    assert perceive(np.asarray(painted), "driving").config[0] == "green"


def test_perception_validates_its_input() -> None:
    with pytest.raises(ValueError, match="uint8"):
        perceive(np.zeros((288, 384, 3), dtype=np.float32), "driving")
    with pytest.raises(ValueError, match="H×W×3"):
        perceive(np.zeros((288, 384), dtype=np.uint8), "driving")
    with pytest.raises(ValueError, match="unknown family"):
        perceive(np.zeros((288, 384, 3), dtype=np.uint8), "cooking")


def test_oracle_returns_drawn_masks(samples) -> None:
    oracle = OracleMaskProvider()
    assert isinstance(oracle, MaskProvider)
    sample = next(s for s in samples if s.domain == "driving" and scene_of(s.image).find("pedestrian"))
    scene = scene_of(sample.image)
    loc = oracle.locate(sample.image, "the person")
    assert loc.found and loc.mask.dtype == bool and loc.mask.shape == (288, 384)
    assert np.array_equal(loc.mask, object_mask(scene, scene.find("pedestrian")))
    x0, y0, x1, y1 = loc.boxes[0]
    assert 0 < (x1 - x0) < 60 and 40 < (y1 - y0) < 80
    assert oracle.locate(sample.image, "traffic signal").mask.sum() > 500
    # the earliest mention names the target
    assert oracle.locate(sample.image, "pedestrian on the crosswalk").mask.sum() == loc.mask.sum()


def test_oracle_reports_missing_targets(samples) -> None:
    oracle = OracleMaskProvider()
    spatial = next(s for s in samples if s.domain == "spatial")
    assert not oracle.locate(spatial.image, "ball").found
    assert "no category" in oracle.locate(spatial.image, "giraffe").detail
    bare = Image.fromarray(np.asarray(spatial.image))
    assert not oracle.locate(bare, "car").found


def test_objects_do_not_overlap_cue_objects(samples) -> None:
    for s in samples[:60]:
        scene = scene_of(s.image)
        cues = [scene.find(obj) for obj, _ in world.FAMILY_CUES[scene.family]]
        masks = [object_mask(scene, o) for o in cues if o is not None]
        if len(masks) == 2:
            assert not (masks[0] & masks[1]).any(), s.id
        # nothing reaches the top band where the context is read
        for o in scene.objects:
            assert not object_mask(scene, o)[:40].any(), (s.id, o.category)
    moved = replace(scene, context="rose")
    assert perceive(np.asarray(render_scene(moved)), scene.family).context == "rose"
