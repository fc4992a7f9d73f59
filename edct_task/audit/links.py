"""Where a run's audit report, annotations and agreement tables live, for reports to link to.

By default the three tools write inside the run folder: ``edct audit RUN`` to ``RUN/audit/``,
``edct annotate RUN --annotator NAME`` to ``RUN/annotations/NAME.jsonl`` and ``edct agreement …
--run RUN`` to ``RUN/agreement/``. ``validation_outputs`` finds what exists there, and
``markdown_lines`` gives the lines a report (``edct report``) can print under a run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from edct_task.annotation.labels import LabelFileError, read_label_files

__all__ = [
    "AGREEMENT_DIR",
    "ANNOTATIONS_DIR",
    "AUDIT_DIR",
    "ValidationOutputs",
    "markdown_lines",
    "validation_outputs",
]

AUDIT_DIR = "audit"
ANNOTATIONS_DIR = "annotations"
AGREEMENT_DIR = "agreement"


@dataclass(frozen=True)
class ValidationOutputs:
    """What exists of a run's audit and human-validation outputs."""

    run: Path
    audit_index: Path | None
    """``RUN/audit/index.html`` when ``edct audit`` wrote it."""
    labels: dict[str, int] = field(default_factory=dict)
    """Label file (path) → interventions it labels (its annotator's latest labels)."""
    agreement: Path | None = None
    """``RUN/agreement/agreement.md`` when ``edct agreement`` wrote it."""

    @property
    def any(self) -> bool:
        return self.audit_index is not None or bool(self.labels) or self.agreement is not None


def validation_outputs(run_dir: Path) -> ValidationOutputs:
    """Find a run's audit report, label files and agreement tables (unreadable label files skipped)."""
    run_dir = Path(run_dir)
    index = run_dir / AUDIT_DIR / "index.html"
    labels: dict[str, int] = {}
    for path in sorted((run_dir / ANNOTATIONS_DIR).glob("*.jsonl")):
        try:
            per = read_label_files([path])
        except LabelFileError:
            continue
        labels[str(path)] = sum(len(v) for v in per.values())
    agreement = run_dir / AGREEMENT_DIR / "agreement.md"
    return ValidationOutputs(
        run=run_dir,
        audit_index=index if index.is_file() else None,
        labels=labels,
        agreement=agreement if agreement.is_file() else None,
    )


def _rel(path: Path, base: Path | None) -> str:
    if base is None:
        return path.resolve().as_uri()
    return Path(os.path.relpath(path.resolve(), base.resolve())).as_posix()


def markdown_lines(outputs: ValidationOutputs, *, relative_to: Path | None = None) -> list[str]:
    """Markdown bullet lines linking what exists (none when nothing does).

    Links are relative to ``relative_to`` (the folder of the Markdown file) when given, else
    ``file://`` URIs.
    """
    lines = []
    if outputs.audit_index is not None:
        lines.append(f"- audit report: [{AUDIT_DIR}/index.html]({_rel(outputs.audit_index, relative_to)})")
    for path, n in outputs.labels.items():
        name = Path(path).stem
        lines.append(
            f"- annotations by {name}: {n} intervention(s) labelled "
            f"([{Path(path).name}]({_rel(Path(path), relative_to)}); continue with "
            f"`edct annotate {outputs.run} --annotator {name}`)"
        )
    if outputs.agreement is not None:
        lines.append(f"- human validation (Table 4): [agreement.md]({_rel(outputs.agreement, relative_to)})")
    return lines
