"""The calibration benchmark's samples: seeded scenes rendered to images, with their questions."""

from __future__ import annotations

import random

from edct_task.calibration import world
from edct_task.calibration.render import render_scene
from edct_task.calibration.scenes import CalibrationSample, Scene, build_objects, context_of


def generate_samples(n: int = 300, seed: int = 0) -> list[CalibrationSample]:
    """``n`` seeded samples, families interleaved (knowledge, driving, spatial, ...).

    Deterministic: the same ``(n, seed)`` gives the same scenes and byte-identical images, and
    sample i does not depend on ``n`` (it is ``calibration_sample(i, seed)``).
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    return [calibration_sample(i, seed) for i in range(n)]


def calibration_sample(index: int, seed: int = 0) -> CalibrationSample:
    """Sample ``index`` of the world ``seed``, rendered without rendering the ones before it.

    Its family is ``FAMILIES[index % 3]`` and its id counts the earlier samples of that family
    (``cal-driving-0004`` is sample 13), so any subset of a benchmark can be built on its own.
    """
    if index < 0:
        raise ValueError(f"index must be >= 0, got {index}")
    rng = random.Random(f"{seed}:{index}")
    family = family_of(index)
    config = rng.choice(world.configs(family))
    scene = Scene(
        family, context_of(family, config), rng.randrange(2**31), build_objects(family, config, rng)
    )
    return CalibrationSample(
        id=calibration_id(index),
        domain=family,
        question=rng.choice(world.QUESTIONS[family]),
        system_prompt=world.DRIVING_SYSTEM_PROMPT if family == "driving" else None,
        image=render_scene(scene),
        expected_answer=scene.answer(),
    )


def family_of(index: int) -> str:
    """The family of sample ``index``: the families take turns."""
    return world.FAMILIES[index % len(world.FAMILIES)]


def calibration_id(index: int) -> str:
    """The id of sample ``index`` (of any world seed), known without rendering it."""
    return f"cal-{family_of(index)}-{index // len(world.FAMILIES):04d}"
