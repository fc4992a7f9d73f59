"""Fig. 5: every marker labelled with its model, labels legible (inside the axes, not over one
another), also where models coincide (the calibration demo: four models at accuracy 1.0, two of
them at CCS_binary 0)."""

from __future__ import annotations

import itertools

import pytest

from edct_task.reporting.figures import Panel, Point, draw_figure5

DEMO = Panel(
    "calibration_accuracy",
    "Calibration answer accuracy",
    (
        Point("faithful", 1.0, 1.0, 1.0),
        Point("prior", 1.0, 0.0, 0.069),
        Point("stale", 1.0, 0.0, 0.25),
        Point("mixed:0.5", 1.0, 0.453, 0.49),
    ),
)
SPREAD = Panel(
    "mmmu_val",
    "MMMU",
    (
        Point("org/alpha-vl", 0.62, 0.81, 0.78),
        Point("org/beta-vl", 0.55, 0.52, 0.6),
        Point("org/gamma-vl", 0.58, 0.5, 0.55),
        Point("org/delta-vl", 0.1, 0.02, 0.05),
        Point("org/eps-vl", 0.12, 0.03, None),
    ),
)


@pytest.mark.parametrize("panels", [[DEMO], [DEMO, SPREAD]], ids=["demo", "two-panels"])
def test_every_marker_is_labelled_and_no_label_overlaps_another(panels) -> None:
    import matplotlib.pyplot as plt

    fig = draw_figure5(panels, {})
    try:
        renderer = fig.canvas.get_renderer()
        for ax, panel in zip(fig.axes, panels, strict=False):
            labels = [t for t in ax.texts if t.get_text()]
            expected = []
            for p in panel.points:  # one label per marker; one for both when they coincide
                values = {v for v in (p.ccs_binary, p.ccs_graded) if v is not None}
                expected += [p.model] * len(values)
            assert sorted(t.get_text() for t in labels) == sorted(expected)
            boxes = [t.get_window_extent(renderer) for t in labels]
            frame = ax.get_window_extent(renderer)
            for box in boxes:
                assert frame.x0 - 1 <= box.x0 and box.x1 <= frame.x1 + 1
                assert frame.y0 - 1 <= box.y0 and box.y1 <= frame.y1 + 1
            for (i, a), (j, b) in itertools.combinations(enumerate(boxes), 2):
                assert not a.overlaps(b), (labels[i].get_text(), labels[j].get_text())
    finally:
        plt.close(fig)
