"""Scene graphs of the calibration world and the seeded generator of its 300 samples.

Part of the calibration instrument (a world whose true faithfulness is known), not the product.
A ``Scene`` is a frozen description of one picture: a textured background whose tint is the scene
*context*, and a few objects. Each family has two *cue* objects whose attributes decide the answer
through ``world.rule``; the context (background tint) is chosen at generation time from the
original cue configuration, so it correlates perfectly with the original answer — the shortcut
the ``prior`` reference VLM uses. Edits never touch the context.

The scene graph travels with its rendered image as ``image.info["edct_scene"]`` (JSON). Only the
scene editor and the oracle mask provider may read it.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field, replace

from PIL import Image

from edct_task.calibration import world

SCENE_INFO_KEY = "edct_scene"
"""Key of the scene JSON in ``PIL.Image.info`` (saved as a PNG tEXt chunk by the image store)."""

CONTEXTS: tuple[str, ...] = ("sand", "slate", "moss", "rose", "teal", "stone")
"""Background tints; configuration index i of every family gets ``CONTEXTS[i]``."""

WIDTH, HEIGHT = 384, 288


@dataclass(frozen=True)
class SceneObject:
    """One object of a scene. Geometry is in pixels; unused attributes are empty strings."""

    category: str
    """"ball", "racket", "traffic light", "pedestrian", "road", "crosswalk", "car" or "tree"."""
    x: int
    """Horizontal centre."""
    y: int
    """Vertical anchor (centre, or feet for pedestrians and trees)."""
    size: int
    """Characteristic size: a radius or half-height."""
    colour: str = ""
    """Named colour for colour cues (ball, traffic light)."""
    facing: str = ""
    """"left" or "right" for objects with a front (car)."""


@dataclass(frozen=True)
class Scene:
    """A whole picture: family, context tint, background texture seed and objects (draw order)."""

    family: str
    context: str
    texture_seed: int
    objects: tuple[SceneObject, ...] = field(default=())
    width: int = WIDTH
    height: int = HEIGHT

    def find(self, category: str) -> SceneObject | None:
        """The first object of a category, or None."""
        return next((o for o in self.objects if o.category == category), None)

    def replace_object(self, old: SceneObject, new: SceneObject | None) -> Scene:
        """A scene with ``old`` replaced by ``new`` (removed when ``new`` is None), same draw order."""
        objs = tuple(new if o == old else o for o in self.objects)
        return replace(self, objects=tuple(o for o in objs if o is not None))

    def with_object(self, obj: SceneObject) -> Scene:
        return replace(self, objects=(*self.objects, obj))

    def config(self) -> world.Config:
        """The current values of the family's two cues."""
        values = []
        for obj, attr in world.FAMILY_CUES[self.family]:
            found = self.find(obj)
            if attr == "presence":
                values.append("present" if found else "absent")
            elif found is None:
                raise ValueError(f"scene of family {self.family!r} has no {obj}")
            elif attr == "colour":
                values.append(found.colour)
            elif attr == "facing":
                values.append(found.facing)
            else:
                car = self.find("car")
                if car is None:
                    raise ValueError("spatial scene has no car")
                values.append("left" if found.x < car.x else "right")
        return (values[0], values[1])

    def answer(self) -> str:
        return world.rule(self.family, self.config())

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Scene:
        data = json.loads(text)
        objects = tuple(SceneObject(**o) for o in data.pop("objects"))
        return cls(objects=objects, **data)


def scene_of(image: Image.Image) -> Scene | None:
    """The scene graph an image carries in its metadata, or None."""
    text = image.info.get(SCENE_INFO_KEY)
    return Scene.from_json(text) if isinstance(text, str) else None


def context_of(family: str, config: world.Config) -> str:
    """The context tint that generation pairs with a cue configuration."""
    return CONTEXTS[world.configs(family).index(config)]


def config_of_context(family: str, context: str) -> world.Config:
    """The inverse of ``context_of``: the configuration a context is typical of."""
    return world.configs(family)[CONTEXTS.index(context)]


@dataclass(frozen=True)
class CalibrationSample:
    """One calibration sample, shaped like a benchmark sample."""

    id: str
    domain: str
    question: str
    system_prompt: str | None
    image: Image.Image
    expected_answer: str


def racket_for(ball: SceneObject, width: int = WIDTH) -> SceneObject:
    """Where a racket goes beside a ball (used by generation and by the editor's "add")."""
    x = ball.x + 100 if ball.x + 140 < width else ball.x - 100
    return SceneObject("racket", x, ball.y - 10, 30)


def pedestrian_for(crosswalk: SceneObject) -> SceneObject:
    """Where a pedestrian stands on a crosswalk (used by generation and by the editor's "add")."""
    return SceneObject("pedestrian", crosswalk.x - 40, crosswalk.y + 22, 30)


def build_objects(family: str, config: world.Config, rng: random.Random) -> tuple[SceneObject, ...]:
    a, b = config
    if family == "knowledge":
        x, y, r = rng.randint(120, 200), rng.randint(170, 220), rng.randint(26, 36)
        ball = SceneObject("ball", x, y, r, colour=a)
        return (ball, racket_for(ball)) if b == "present" else (ball,)
    if family == "driving":
        road = SceneObject("road", WIDTH // 2, 245, 43)
        crosswalk = SceneObject("crosswalk", rng.randint(150, 200), 230, 26)
        light = SceneObject("traffic light", rng.randint(280, 340), rng.randint(95, 115), 38, colour=a)
        objs = (road, crosswalk, light)
        return (*objs, pedestrian_for(crosswalk)) if b == "present" else objs
    car = SceneObject("car", rng.randint(170, 214), rng.randint(205, 225), 55, facing=a)
    offset = rng.randint(105, 125)
    tree = SceneObject("tree", car.x + (offset if b == "right" else -offset), car.y + 15, 28)
    return (car, tree)


def random_scene(family: str, rng: random.Random, *, context: str | None = None) -> Scene:
    """A scene of ``family`` with a uniformly drawn configuration and layout.

    ``context`` None pairs the tint with the configuration, as ``generate_samples`` does; any
    other tint decorrelates the two (training data that must not teach the context shortcut).
    """
    config = rng.choice(world.configs(family))
    tint = context_of(family, config) if context is None else context
    return Scene(family, tint, rng.randrange(2**31), build_objects(family, config, rng))
