"""The output of ``eval graph-signal``: plain-words verdicts, a Markdown table, a plot, JSON."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from envsched_gnn.eval.graph_signal.measure import ESTIMATES, GRAPH_ESTIMATES, LABELS, METRICS
from envsched_gnn.json_files import write_json_atomically
from envsched_gnn.plots import pyplot, save_figure

if TYPE_CHECKING:
    from envsched_gnn.eval.graph_signal.measure import GraphSignal

NULL_BANDS = (("global", "tab:grey", -0.22), ("within_env", "tab:olive", 0.22))
"""Each null's colour and offset in the plot."""


def _cell(value: float) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.3f}"


def table(signal: GraphSignal) -> str:
    """Markdown: per estimate, each metric with its CI and both nulls (mean +- sd, p)."""
    lines = [
        "| estimate | targets | metric | value | 95% CI | global null (mean ± sd) | p "
        "| within-env null (mean ± sd) | p |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in ESTIMATES:
        row = signal.rows[name]
        for metric in METRICS:
            lo, hi = row[f"{metric}_ci"]
            cells = [LABELS[name], str(row["targets"]), metric, _cell(row[metric])]
            cells.append(f"{_cell(lo)} to {_cell(hi)}")
            for null in ("global", "within_env"):
                summary = row["nulls"].get(null, {}).get(metric)
                if summary is None or math.isnan(summary["mean"]):
                    cells += ["n/a", "n/a"]
                else:
                    cells += [f"{summary['mean']:.3f} ± {summary['sd']:.3f}", f"{summary['p']:.3f}"]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(signal: GraphSignal, path: str | Path) -> None:
    """Per metric: each estimate with its bootstrap CI, and the central 95 % of each null's
    draws (:func:`~envsched_gnn.eval.stats.percentile_ci`)."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    names = list(ESTIMATES)
    for ax, metric in zip(axes, METRICS, strict=True):
        for x, name in enumerate(names):
            row = signal.rows[name]
            value, (lo, hi) = row[metric], row[f"{metric}_ci"]
            for null, colour, dx in NULL_BANDS:
                summary = row["nulls"].get(null, {}).get(metric)
                if summary is not None and not math.isnan(summary["mean"]):
                    low, high = summary["band"]
                    ax.bar(
                        x + dx,
                        high - low,
                        bottom=low,
                        width=0.18,
                        color=colour,
                        alpha=0.35,
                        label=f"{null} null (95% band)" if x == 0 else None,
                    )
            colour = "tab:blue" if name in GRAPH_ESTIMATES else "tab:orange"
            if not math.isnan(value):
                ax.errorbar(
                    x,
                    value,
                    yerr=[[value - lo], [hi - value]] if not math.isnan(lo) else None,
                    fmt="o",
                    color=colour,
                    capsize=4,
                )
        ax.axhline(0.5 if metric == "auc" else 0.0, color="black", lw=0.6)
        ax.set_xticks(range(len(names)), [LABELS[n].split(" (")[0] for n in names], rotation=20)
        ax.set_title(f"{metric} of the estimate vs the realised variance (95% bootstrap CI)")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.suptitle(
        f"graph signal: {signal.targets} targets at {len(signal.steps)} step(s), "
        f"{signal.config['permutations']} permutations, {signal.config['bootstrap']} bootstraps"
    )
    save_figure(fig, path)


def write(signal: GraphSignal, out: str | Path) -> dict[str, Path]:
    """``graph_signal.json``, ``graph_signal.md`` and ``graph_signal.png`` under ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "json": out / "graph_signal.json",
        "md": out / "graph_signal.md",
        "png": out / "graph_signal.png",
    }
    write_json_atomically(paths["json"], signal.to_json(), non_finite_as_null=True)
    paths["md"].write_text(render(signal) + "\n", encoding="utf-8")
    plot(signal, paths["png"])
    return paths


def render(signal: GraphSignal) -> str:
    """The verdicts, then the table."""
    lines = ["# Graph signal", "", *(f"- {signal.verdicts[name]}" for name in ESTIMATES), ""]
    return "\n".join(lines) + table(signal)
