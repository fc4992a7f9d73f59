"""The calibration world's edit grammar: the "Change:" sentences it writes, parses and applies.

Part of the calibration instrument, not the product. The rule-based instruction writer produces
exactly these sentences, the scene editor and the rule-based judge parse them back:

- ``recolour the traffic light from red to green`` / ``recolour the ball from orange to white``
- ``remove the pedestrian from the crosswalk`` / ``remove the racket from beside the ball``
- ``add a pedestrian on the crosswalk`` / ``add a racket beside the ball``
- ``turn the car to face left`` (also ``turn the car from facing right to facing left``)
- ``move the tree to the right of the car``

Anything after the first ``;`` is free commentary (size, position, material) and is ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from edct_task.calibration.world import CUE_VALUES, Cue

EDIT_TYPES = ("ADD", "MODIFY", "REMOVE")


@dataclass(frozen=True)
class SceneEdit:
    """One parsed edit: set ``attr`` of ``obj`` to ``new`` (``old`` when the sentence names it)."""

    obj: str
    attr: str
    new: str
    old: str | None = None

    @property
    def edit_type(self) -> str:
        """ADD, MODIFY or REMOVE: the three kinds of localized edit the verification knows."""
        if self.attr == "presence":
            return "ADD" if self.new == "present" else "REMOVE"
        return "MODIFY"


_SUFFIX = {
    "colour": "; keep its size, position, shape and material exactly as they are",
    "present": "; standing upright at the same scale as the rest of the scene",
    "absent": "; fill its area with the surroundings that it hid",
    "facing": "; keep its position, size and colour",
    "side": "; keep its size and its distance from the car",
}


def write_change(old: Cue, new_value: str) -> str:
    """The Change sentence that turns cue ``old`` into ``new_value``."""
    if new_value not in CUE_VALUES[old.key] or new_value == old.value:
        raise ValueError(f"cannot change {old.obj} {old.attr} from {old.value!r} to {new_value!r}")
    if old.attr == "colour":
        text = f"recolour the {old.obj} from {old.value} to {new_value}"
    elif old.attr == "presence" and new_value == "absent":
        where = "from the crosswalk" if old.obj == "pedestrian" else "from beside the ball"
        text = f"remove the {old.obj} {where}"
    elif old.attr == "presence":
        where = "on the crosswalk" if old.obj == "pedestrian" else "beside the ball"
        text = f"add a {old.obj} {where}"
    elif old.attr == "facing":
        text = f"turn the car to face {new_value}"
    else:
        text = f"move the tree to the {new_value} of the car"
    key = new_value if old.attr == "presence" else old.attr
    return text + _SUFFIX[key]


_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^recolou?r the (traffic light|ball) from (\w+) to (\w+)$"), "colour"),
    (re.compile(r"^remove the (pedestrian|racket)(?: (?:from|on|beside) .*)?$"), "remove"),
    (re.compile(r"^add an? (pedestrian|racket)(?: (?:on|to|beside|next to) .*)?$"), "add"),
    (
        re.compile(r"^turn the car (?:from facing (left|right) )?to fac(?:e|ing) (?:to the )?(left|right)$"),
        "facing",
    ),
    (re.compile(r"^move the tree to the (left|right) of the car$"), "side"),
)


def change_line(instruction: str) -> str:
    """The Change part of a four-line instruction; the whole text when it has no ``Change:`` line."""
    match = re.search(r"^\s*Change:\s*(.*)$", instruction, flags=re.M | re.I)
    return (match.group(1) if match else instruction).strip()


def parse_change(text: str) -> SceneEdit | None:
    """Parse a Change sentence (or a full four-line instruction) of the grammar; None otherwise."""
    head = change_line(text).split(";")[0].strip().rstrip(".").strip().lower()
    head = re.sub(r"\s+", " ", head)
    for pattern, kind in _PATTERNS:
        m = pattern.match(head)
        if m is None:
            continue
        if kind == "colour":
            obj, old, new = m.groups()
            if old not in CUE_VALUES[(obj, "colour")] or new not in CUE_VALUES[(obj, "colour")]:
                return None
            return SceneEdit(obj, "colour", new, old)
        if kind in ("remove", "add"):
            old = "present" if kind == "remove" else "absent"
            return SceneEdit(m.group(1), "presence", "absent" if kind == "remove" else "present", old)
        if kind == "facing":
            old, new = m.groups()
            return SceneEdit("car", "facing", new, old)
        return SceneEdit("tree", "side", m.group(1))
    return None
