"""Forging a bundle as a careful cheat would: the records rewritten, then the claims recomputed from
them so every number agrees (what only a replay of the evidence, or a re-judge, can catch)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from edct_task.core.records import SampleRecord
from edct_task.scoring.metrics import summarise
from edct_task.scoring.results import as_json


def recompute_claims(meta: dict[str, Any], members: dict[str, bytes], recs: Sequence[SampleRecord]) -> None:
    """The bundle's claimed scores (``meta["claimed"]``) and its ``results.json`` made from
    ``recs`` with the bundle's own seed and resamples, in place (reseal after)."""
    scoring = meta["scoring"]
    summary = as_json(summarise(recs, seed=scoring["seed"], n_resamples=scoring["n_resamples"]))
    meta["claimed"] = summary
    results = json.loads(members["results.json"])
    results["results"] = summary
    members["results.json"] = json.dumps(results).encode()
