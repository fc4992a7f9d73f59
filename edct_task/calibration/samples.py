"""The calibration benchmark's samples: seeded scenes rendered to images, with their questions."""

from __future__ import annotations

import random

from edct_task.calibration import world
from edct_task.calibration.render import render_scene
from edct_task.calibration.scenes import CalibrationSample, Scene, build_objects, context_of


def generate_samples(n: int = 300, seed: int = 0) -> list[CalibrationSample]:
    """``n`` seeded samples, families interleaved (knowledge, driving, spatial, ...).

    Deterministic: the same ``(n, seed)`` gives the same scenes and byte-identical images, and
    sample i does not depend on ``n``.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    samples = []
    counters = dict.fromkeys(world.FAMILIES, 0)
    for i in range(n):
        rng = random.Random(f"{seed}:{i}")
        family = world.FAMILIES[i % len(world.FAMILIES)]
        config = rng.choice(world.configs(family))
        scene = Scene(
            family, context_of(family, config), rng.randrange(2**31), build_objects(family, config, rng)
        )
        samples.append(
            CalibrationSample(
                id=f"cal-{family}-{counters[family]:04d}",
                domain=family,
                question=rng.choice(world.QUESTIONS[family]),
                system_prompt=world.DRIVING_SYSTEM_PROMPT if family == "driving" else None,
                image=render_scene(scene),
                expected_answer=scene.answer(),
            )
        )
        counters[family] += 1
    return samples
