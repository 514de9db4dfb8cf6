"""``eval headroom``'s files: ``headroom.json`` (every number and the per-task rewards),
``headroom.md`` (the tables) and ``headroom.png`` (headroom and mean reward by operation
count, one line per temperature, 95 % bands over tasks)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from envsched_gnn.eval.headroom.measure import headroom_stat
from envsched_gnn.eval.stats import format_ci
from envsched_gnn.json_files import write_json_atomically
from envsched_gnn.plots import pyplot, save_figure

COLUMNS = (
    ("tasks", "tasks", 0),
    ("mean", "mean_reward", 3),
    ("best of K", "mean_best", 3),
    ("headroom (95 % CI)", None, 3),
    ("zero-var.", "zero_variance_share", 2),
    ("all ones", "all_ones_share", 2),
    ("all zeros", "all_zeros_share", 2),
)


def _cells(row: Mapping[str, Any]) -> list[str]:
    cells = []
    for _, key, digits in COLUMNS:
        if key is None:
            cells.append(format_ci(headroom_stat(row)))
        else:
            cells.append(f"{row[key]:.{digits}f}" if digits else str(row[key]))
    return cells


def render_markdown(runs: Sequence[Mapping[str, Any]], header: Sequence[str]) -> str:
    """The tables of every run (one per temperature): overall, then each grouping."""
    titles = [title for title, _, _ in COLUMNS]
    lines = ["# Headroom: what GRPO could gain from these samples", ""]
    lines += [f"- {line}" for line in header]
    lines += [
        "- headroom = best of K - mean of K, per task, averaged over tasks: what a perfect "
        "update could lift the visited tasks by; zero-var. = groups whose K rewards are "
        "equal (no GRPO signal).",
        "",
        "## Overall",
        "",
        "| temperature | " + " | ".join(titles) + " |",
        "|---|" + "---|" * len(titles),
    ]
    for run in runs:
        lines.append(f"| {run['temperature']} | " + " | ".join(_cells(run["overall"])) + " |")
    lines += render_variance(runs)
    groupings = [k for k in runs[0] if k.startswith("by_")] if runs else []
    for grouping in groupings:
        lines += ["", f"## By {grouping[3:]}", ""]
        lines.append(f"| temperature | {grouping[3:]} | " + " | ".join(titles) + " |")
        lines.append("|---|---|" + "---|" * len(titles))
        for run in runs:
            for value, row in run[grouping].items():
                cells = " | ".join(_cells(row))
                lines.append(f"| {run['temperature']} | {value} | {cells} |")
    return "\n".join(lines) + "\n"


STATISTICS = {
    "mean_reward": "task mean reward m",
    "zero_variance": "zero-variance 1[s = 0]",
    "all_zeros": "all zeros 1[best = 0]",
    "all_ones": "all ones 1[worst = 1]",
}
"""The per-task statistics whose variance :func:`render_variance` splits, in words."""


def render_variance(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The lines of the table of where the variance of the task statistics lies."""
    lines = [
        "",
        "## Where the variance lies",
        "",
        "- eta^2 = between-group sum of squares / total; adjusted = eta^2 less what noise in "
        "that many groups gives (epsilon^2); chance = (groups - 1) / (tasks - 1), eta^2's "
        "expectation with no group effect; p from 999 seeded shuffles of the groups.",
        "",
        "| temperature | statistic | between | groups | eta^2 | adjusted | chance | p |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        for statistic, partitions in run["variance"].items():
            for partition, share in partitions.items():
                lines.append(
                    f"| {run['temperature']} | {STATISTICS[statistic]} | {partition} | "
                    f"{share['groups']} | **{share['eta2']:.3f}** | {share['epsilon2']:.3f} | "
                    f"{share['chance']:.3f} | {share['p_value']:.3f} |"
                )
    return lines


def plot_headroom(runs: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Headroom and mean reward against the reference's call count, per temperature."""
    plt = pyplot()
    figure, axes = plt.subplots(1, 2, figsize=(10, 4))
    for run in runs:
        rows = run["by_calls"]
        xs = [int(x) for x in rows]
        for axis, key in zip(axes, ("headroom", "mean_reward"), strict=True):
            ys = [rows[str(x)][key] for x in xs]
            line = axis.plot(xs, ys, marker="o", label=f"T = {run['temperature']}")[0]
            if key == "headroom":
                half = [rows[str(x)]["headroom_ci95"] or 0.0 for x in xs]
                low = [y - h for y, h in zip(ys, half, strict=True)]
                high = [y + h for y, h in zip(ys, half, strict=True)]
                axis.fill_between(xs, low, high, color=line.get_color(), alpha=0.18, linewidth=0)
    axes[0].set_title("headroom: best of K - mean (95 % bands over tasks)")
    axes[1].set_title("mean reward")
    for axis in axes:
        axis.set_xlabel("calls in the reference solution")
        axis.grid(alpha=0.3)
        axis.legend()
    return save_figure(figure, path, dpi=100)


def write_headroom(
    runs: Sequence[Mapping[str, Any]], header: Sequence[str], out_dir: str | Path
) -> list[Path]:
    """Write the three files into ``out_dir``; return their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = out / "headroom.json"
    write_json_atomically(data, {"header": list(header), "runs": list(runs)})
    markdown = out / "headroom.md"
    markdown.write_text(render_markdown(runs, header))
    return [data, markdown, plot_headroom(runs, out / "headroom.png")]
