"""The report of ``edct finetune``: ``finetune.json``, ``report/figure.png`` and ``report/summary.md``.

The figure has three panels: (a) the training loss per step; (b) the held-out attention
localization per epoch, original and counterfactual, with 95% CIs (the paper's Fig. 9 as a
number; epoch 0 is before training); (c) held-out accuracy per epoch, original and
counterfactual (Wilson 95% CIs).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

__all__ = ["summary_markdown", "write_report"]

COLOURS = {"original": "#2f5fb3", "counterfactual": "#c0392b"}


def _series(
    per_epoch: list[dict[str, Any]], get: Any
) -> tuple[list[int], list[float], list[float], list[float]]:
    xs, est, lo, hi = [], [], [], []
    for e in per_epoch:
        ci = get(e)
        if ci and ci.get("estimate") is not None:
            xs.append(e["epoch"])
            est.append(ci["estimate"])
            lo.append(max(0.0, ci["estimate"] - ci["low"]))  # rounding can put a bound a hair inside
            hi.append(max(0.0, ci["high"] - ci["estimate"]))
    return xs, est, lo, hi


def figure(document: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    curve = document["loss_curve"]
    ax = axes[0]
    ax.plot([c["step"] for c in curve], [c["loss"] for c in curve], color="#999999", lw=0.8, label="per step")
    epochs = sorted({max(1, math.ceil(c["epoch"] - 1e-9)) for c in curve})
    means = [[c for c in curve if max(1, math.ceil(c["epoch"] - 1e-9)) == e] for e in epochs]
    ax.plot(
        [m[-1]["step"] for m in means],
        [sum(c["loss"] for c in m) / len(m) for m in means],
        "o-",
        color="#333333",
        label="epoch mean",
    )
    before = document["before"]["train"]
    for side in ("original", "counterfactual"):
        ax.axhline(
            before[side]["loss"]["estimate"], color=COLOURS[side], ls="--", lw=1, label=f"initial, {side}"
        )
    ax.set(xlabel="step", ylabel="training loss", title="(a) loss curve")
    ax.legend(fontsize=8)
    for ax, title, key in (
        (axes[1], "(b) held-out localization", lambda e, s: e["localization"]["localization"][s]),
        (axes[2], "(c) held-out accuracy", lambda e, s: e["held_out"][s]["accuracy"]),
    ):
        for side, shift in (("original", -0.06), ("counterfactual", 0.06)):
            xs, est, lo, hi = _series(document["per_epoch"], lambda e, s=side, k=key: k(e, s))
            ax.errorbar(
                [x + shift for x in xs],
                est,
                yerr=[lo, hi],
                marker="o",
                capsize=3,
                color=COLOURS[side],
                label=side,
            )
        ax.set(xlabel="epoch", title=title)
        ax.set_xticks([e["epoch"] for e in document["per_epoch"]])
        ax.legend(fontsize=8)
    axes[1].axhline(1.0, color="#999999", lw=0.8, ls=":")
    axes[1].set_ylabel("mass inside M / M's area share")
    axes[2].set_ylabel("accuracy")
    axes[2].set_ylim(-0.05, 1.05)
    fig.suptitle(f"edct finetune — {Path(document['model']).name} ({document['mode']})", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _pct(ci: dict[str, Any] | None) -> str:
    if not ci or ci.get("estimate") is None:
        return "–"
    return f"{100 * ci['estimate']:.1f}% [{100 * ci['low']:.1f}, {100 * ci['high']:.1f}]"


def _num(ci: dict[str, Any] | None) -> str:
    if not ci or ci.get("estimate") is None:
        return "–"
    return f"{ci['estimate']:.4f} [{ci['low']:.4f}, {ci['high']:.4f}]"


def summary_markdown(document: dict[str, Any]) -> str:
    b, a = document["before"], document["after"]
    first, last = document["per_epoch"][0], document["per_epoch"][-1]
    ratio = b["all"]["loss_ratio_counterfactual_to_original"]
    lines = [
        f"# edct finetune — {document['model']} ({document['mode']})",
        "",
        f"{document['split']['train_items']} train / {document['split']['held_out_items']} held-out items "
        f"({document['split']['train_samples']} / {document['split']['held_out_samples']} samples), "
        f"{document['settings']['epochs']} epochs, LoRA r={document['lora']['r']}.",
        "",
        "| | original | counterfactual |",
        "|---|---|---|",
        f"| accuracy before (all) | {_pct(b['all']['original']['accuracy'])} | "
        f"{_pct(b['all']['counterfactual']['accuracy'])} |",
        f"| initial loss (all) | {_num(b['all']['original']['loss'])} | "
        f"{_num(b['all']['counterfactual']['loss'])} |",
        f"| accuracy held-out, before | {_pct(b['held_out']['original']['accuracy'])} | "
        f"{_pct(b['held_out']['counterfactual']['accuracy'])} |",
        f"| accuracy held-out, after | {_pct(a['held_out']['original']['accuracy'])} | "
        f"{_pct(a['held_out']['counterfactual']['accuracy'])} |",
        f"| loss held-out, after | {_num(a['held_out']['original']['loss'])} | "
        f"{_num(a['held_out']['counterfactual']['loss'])} |",
        f"| localization held-out, epoch {first['epoch']} | "
        f"{_num(first['localization']['localization']['original'])} | "
        f"{_num(first['localization']['localization']['counterfactual'])} |",
        f"| localization held-out, epoch {last['epoch']} | "
        f"{_num(last['localization']['localization']['original'])} | "
        f"{_num(last['localization']['localization']['counterfactual'])} |",
        "",
        "Initial loss ratio counterfactual / original: " + ("–" if ratio is None else f"{ratio:.2f}×"),
        "",
        "![figure](figure.png)",
    ]
    return "\n".join(lines) + "\n"


def write_report(folder: Path, document: dict[str, Any]) -> None:
    """``finetune.json`` in ``folder``, the figure and summary in ``folder/report``."""
    report = folder / "report"
    report.mkdir(exist_ok=True)
    figure(document, report / "figure.png")
    (report / "summary.md").write_text(summary_markdown(document), encoding="utf-8")
    (folder / "finetune.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
