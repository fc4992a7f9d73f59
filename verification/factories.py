"""Mask-provider factories by name, merged into ``edct_task.roles.REGISTRY`` (kind ``detector``).

Each factory takes the role's options mapping from the run config and imports its optional
dependencies inside itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Factory = Callable[[Mapping[str, Any]], Any]

FACTORIES: dict[str, dict[str, Factory]] = {"detector": {}}
