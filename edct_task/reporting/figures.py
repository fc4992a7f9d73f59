"""Fig. 5: CCS against each other benchmark across models, with Spearman ρ and Kendall τ.

One panel per benchmark; x is the benchmark's score normalised to [0, 1], y is CCS (binary as
filled circles, graded as open squares); every marker is labelled with its model, labels moved
apart by ``adjustText`` (a maintained library for exactly this; hand-placed offsets overlapped
near 0 and left the graded markers unlabelled). Rank correlations come
from ``scipy.stats.spearmanr`` / ``kendalltau`` and need at least three models with both scores.
Written as PNG and SVG (text kept as text in the SVG so labels can be read back).
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edct_task.engine.files import atomic_write
from edct_task.scoring.metrics import GRADED, PRIMARY

MIN_MODELS_FOR_CORRELATION = 3
PANEL_WIDTH = 4.2
PANEL_HEIGHT = 4.4
MIN_WIDTH = 6.4
DPI = 110


@dataclass(frozen=True)
class Point:
    model: str
    x: float
    """Benchmark score in [0, 1]."""
    ccs_binary: float | None
    ccs_graded: float | None


@dataclass(frozen=True)
class Panel:
    task: str
    display: str
    points: tuple[Point, ...]


def rank_correlation(xs: Sequence[float], ys: Sequence[float]) -> dict[str, Any]:
    """Spearman ρ and Kendall τ (with p-values) from scipy; None with a note when undefined."""
    from scipy import stats

    n = len(xs)
    out: dict[str, Any] = {
        "spearman": None,
        "spearman_p": None,
        "kendall": None,
        "kendall_p": None,
        "n_models": n,
        "note": "",
    }
    if n < MIN_MODELS_FOR_CORRELATION:
        out["note"] = f"{n} model(s) with both scores; rank correlation needs {MIN_MODELS_FOR_CORRELATION}"
        return out
    if len(set(xs)) < 2 or len(set(ys)) < 2:
        out["note"] = "one of the two scores is the same for every model: rank correlation undefined"
        return out
    rho = stats.spearmanr(xs, ys)
    tau = stats.kendalltau(xs, ys)
    out.update(
        spearman=float(rho.statistic),
        spearman_p=float(rho.pvalue),
        kendall=float(tau.statistic),
        kendall_p=float(tau.pvalue),
    )
    return out


def _corr_text(c: dict[str, Any]) -> str:
    if c.get("spearman") is None:
        return "ρ, τ: n/a"
    return f"ρ={c['spearman']:.2f}, τ={c['kendall']:.2f}"


BINARY_COLOUR, GRADED_COLOUR = "#1f77b4", "#d62728"


def _label_points(ax: Any, points: Sequence[Point]) -> None:
    """Every marker gets its model's name, in the marker's colour (grey when the model's two
    markers coincide: one label for both); ``adjustText`` moves the labels apart and off the
    markers, with a thin line back to the point, keeping them inside the axes."""
    from adjustText import adjust_text

    texts, xs, ys = [], [], []
    for p in points:
        marks = [
            (v, c) for v, c in ((p.ccs_binary, BINARY_COLOUR), (p.ccs_graded, GRADED_COLOUR)) if v is not None
        ]
        if len(marks) == 2 and abs(marks[0][0] - marks[1][0]) < 1e-9:
            marks = [(marks[0][0], "0.25")]
        for value, colour in marks:
            right = p.x > 0.6  # start on the side with room; adjustText takes it from there
            texts.append(
                ax.text(
                    p.x + (-0.04 if right else 0.04),
                    value,
                    p.model,
                    fontsize=8,
                    color=colour,
                    ha="right" if right else "left",
                    va="center",
                    zorder=4,
                )
            )
            xs.append(p.x)
            ys.append(value)
    if texts:
        adjust_text(
            texts,
            x=xs,
            y=ys,
            ax=ax,
            expand=(1.2, 2.0),
            ensure_inside_axes=True,
            min_arrow_len=14,  # a label beside its marker needs no line (short lines cross the text)
            arrowprops={"arrowstyle": "-", "color": "0.6", "lw": 0.5, "shrinkA": 2, "shrinkB": 4},
        )


def figure5(
    panels: Sequence[Panel], correlations: dict[tuple[str, str], dict[str, Any]], stem: Path
) -> list[Path]:
    """Draw the panels; write ``<stem>.png`` and ``<stem>.svg``; return their paths."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    with matplotlib.rc_context(RC):
        fig = draw_figure5(panels, correlations)
        paths = [stem.with_suffix(".png"), stem.with_suffix(".svg")]
        for path, fmt, meta in ((paths[0], "png", None), (paths[1], "svg", {"Date": None})):
            buf = io.BytesIO()
            fig.savefig(buf, format=fmt, metadata=meta)
            atomic_write(path, buf.getvalue())  # a killed report never leaves half a figure
        plt.close(fig)
    return paths


RC = {"svg.fonttype": "none", "font.size": 9}


def draw_figure5(panels: Sequence[Panel], correlations: dict[tuple[str, str], dict[str, Any]]) -> Any:
    """The figure (a matplotlib ``Figure``, laid out, labels placed), not yet saved."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    n = len(panels)
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    with matplotlib.rc_context(RC):
        fig, axes = plt.subplots(
            rows,
            cols,
            figsize=(max(PANEL_WIDTH * cols, MIN_WIDTH), PANEL_HEIGHT * rows),
            squeeze=False,
            dpi=DPI,
        )
        for ax in axes.flat[n:]:
            ax.set_visible(False)
        for ax, panel in zip(axes.flat, panels, strict=False):
            xb = [p.x for p in panel.points if p.ccs_binary is not None]
            yb = [p.ccs_binary for p in panel.points if p.ccs_binary is not None]
            xg = [p.x for p in panel.points if p.ccs_graded is not None]
            yg = [p.ccs_graded for p in panel.points if p.ccs_graded is not None]
            cb = correlations.get((panel.task, PRIMARY.name), {})
            cg = correlations.get((panel.task, GRADED.name), {})
            ax.scatter(xb, yb, s=36, color=BINARY_COLOUR, zorder=3, label=f"CCS_binary ({_corr_text(cb)})")
            ax.scatter(
                xg,
                yg,
                s=36,
                facecolors="none",
                edgecolors=GRADED_COLOUR,
                marker="s",
                zorder=3,
                label=f"CCS_graded ({_corr_text(cg)})",
            )
            ax.set_xlim(-0.03, 1.08)
            ax.set_ylim(-0.05, 1.12)
            ax.set_xlabel(f"{panel.display} score (normalised to [0, 1])")
            ax.set_ylabel("CCS")
            ax.set_title(panel.display)
            ax.grid(True, alpha=0.3)
            ax.legend(loc="best", fontsize=7, framealpha=0.85)
        fig.suptitle("CCS vs other benchmarks across models (Spearman ρ, Kendall τ)", fontsize=10)
        fig.tight_layout()  # the layout first: the labels are placed in the final axes
        for ax, panel in zip(axes.flat, panels, strict=False):
            _label_points(ax, panel.points)
    return fig
