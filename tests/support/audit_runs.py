"""Small calibration runs for the audit and annotation tests, and a run with hostile model text."""

from __future__ import annotations

import json
from pathlib import Path

from edct_task.config import calibration_config
from edct_task.run.outputs import sample_folder
from edct_task.run.runner import run

HOSTILE_TEXTS = {
    "script": "<script>window.__pwned = 'script';</script>",
    "img": "<img src=x onerror=\"window.__pwned = 'img'\">",
    "quotes": '"\'><b id="injected">bold</b> & &amp; </script><!-- \u2028\u2029',
}
"""Text a hostile model or judge could return: markup, an event handler, quotes, a script end."""

HOSTILE = " ".join(HOSTILE_TEXTS.values())
HOSTILE_ID = 'cal-"><img src=x onerror="window.__pwned=\'id\'">#1'
"""A sample id with markup, quotes and a '#' (intervention ids are '<sample_id>#<step>')."""


def calibration_run(out: Path, *, n: int = 12) -> Path:
    """A k = 2 calibration run with mixed outcomes.

    ``mixed:0.5`` gives AC/EF failures; the editor's background spill (30% of the width) makes
    some edits fail verification twice (excluded samples) and others pass, some after a retry.
    """
    config = calibration_config("mixed:0.5", n=n, output_dir=out, degradation={"spill": 0.3})
    run(config.model_copy(update={"progress": False, "bootstrap_resamples": 200}))
    return out


def make_hostile(run_dir: Path) -> None:
    """Rewrite a run's samples.jsonl: every model and judge text of the first sample is hostile."""
    path = run_dir / "samples.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[0])
    old_folder = run_dir / "images" / sample_folder(record["sample"]["id"])
    record["sample"]["id"] = HOSTILE_ID
    old_folder.rename(run_dir / "images" / sample_folder(HOSTILE_ID))
    record["sample"]["question"] = "Question " + HOSTILE
    record["sample"]["metadata"]["note"] = HOSTILE
    record["baseline"] = {"answer": "Answer " + HOSTILE, "explanation": "Why " + HOSTILE}
    record["concepts"]["concepts"] = ["concept " + HOSTILE, *record["concepts"]["concepts"][1:]]
    record["concepts"]["raw"] = HOSTILE
    record["reason"] = "reason " + HOSTILE
    for step in record["steps"]:
        step["instruction"]["concept"] = "concept " + HOSTILE
        step["instruction"]["change"] = "change " + HOSTILE
        if step.get("requery"):
            step["requery"] = {"answer": "New " + HOSTILE, "explanation": "New why " + HOSTILE}
        if step.get("binary"):
            step["binary"]["ac_reason"] = "ac " + HOSTILE
            step["binary"]["ef_reason"] = "ef " + HOSTILE
            step["binary"]["raw"] = HOSTILE
        if step.get("graded"):
            step["graded"]["reason"] = "graded " + HOSTILE
        for attempt in step["attempts"]:
            if attempt.get("check"):
                attempt["check"]["detail"] = HOSTILE
    lines[0] = json.dumps(record, ensure_ascii=False)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
