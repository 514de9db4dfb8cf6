"""The ablation report's reward against rollouts: tables and plots with their 95 % bands.

The numbers are :mod:`~envsched_gnn.eval.ablation.summary`'s; the x axis is rollouts spent. The
policy learner's tables have a column per evaluation; the simulator's keep step 0 and the score
columns (its plots every step).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from envsched_gnn.eval.ablation.config import LEARNER_LABELS, AblationConfig
from envsched_gnn.eval.stats import NOISE_MARK, format_ci
from envsched_gnn.plots import pyplot, save_figure

MAX_COLUMNS = 12
"""Evaluations beyond which a table keeps only step 0 and the score columns."""
REWARDS = {
    "score": ("curve", "Held-out reward", "held-out"),
    "pool_score": ("pool_curve", "Pool reward", "pool"),
    "check_fraction": ("check_fraction_curve", "Held-out mean fraction of checks", "fraction"),
}
"""Reward key -> (its curve in the results, its title, its short name)."""


def _columns(grid: list[float], config: AblationConfig) -> list[int]:
    """Indices of the curve's budget steps that a table shows."""
    if len(grid) <= MAX_COLUMNS:
        return list(range(len(grid)))
    return [i for i, b in enumerate(grid) if b == 0 or b in config.score_steps]


def _point(curve: dict, i: int) -> str:
    return format_ci({"mean": curve["score_mean"][i], "ci95": curve["score_ci95"][i]}, 4)


def markdown_table(head: list[str], rows: list[tuple[str, list[str]]]) -> list[str]:
    """A Markdown table: the header ``head`` (its first cell names the row labels), then one
    line per (label, cells)."""
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    return lines + [f"| {name} | " + " | ".join(cells) + " |" for name, cells in rows]


def render_reward_curves(results: dict, config: AblationConfig) -> str:
    """Per reward (held-out, pool, fraction of checks): every scheduler's mean ± CI at each
    evaluation, then each scheduler minus each reference, paired by seed."""
    lines: list[str] = []
    per_step = config.rollouts_per_step
    for key, (curve_key, title, _) in REWARDS.items():
        entries = [(name, e) for name, e in results.items() if curve_key in e]
        if not entries:
            continue
        grid = entries[0][1][curve_key]["budget_step"]
        shown = _columns(grid, config)
        head = ["scheduler"] + [f"{grid[i] * per_step:.0f}" for i in shown]
        rows = [(name, [_point(e[curve_key], i) for i in shown]) for name, e in entries]
        lines += [
            f"{title} against rollouts spent (columns: rollouts = budget step x B x K; the "
            "curve through each run's evaluations there); mean ± 95 % CI over seeds.",
            "",
            *markdown_table(head, rows),
            "",
        ]
        for reference in _references(results, key):
            later = [i for i in shown if grid[i] > 0]
            rows = []
            for name, e in entries:
                margin = e.get("curve_margins", {}).get(reference, {}).get(key)
                if margin is not None:
                    cells = [{"mean": margin["mean"][i], "ci95": margin["ci95"][i]} for i in later]
                    rows.append((name, [format_ci(c, 4, sign=True, noise=True) for c in cells]))
            lines += [
                f"{title} minus {reference}, paired by seed: mean ± 95 % t-interval over seeds "
                f"of the per-seed difference;{NOISE_MARK}: the interval contains 0.",
                "",
                *markdown_table(["scheduler"] + [f"{grid[i] * per_step:.0f}" for i in later], rows),
                "",
            ]
    return "\n".join(lines)


def _references(results: dict, key: str) -> list[str]:
    """The references some scheduler's ``key`` is paired against, in the results' order."""
    found = {r for e in results.values() for r, m in e.get("curve_margins", {}).items() if key in m}
    return [name for name in results if name in found]


def plot_reward_curves(results: dict, out: Path, config: AblationConfig) -> list[Path]:
    """``score.png``, ``pool_score.png`` and ``check_fraction.png`` (reward against rollouts,
    mean and 95 % band, those recorded) and
    ``paired_margins.png`` (each scheduler minus each reference, paired by seed, with its
    band); the pool files only where the pool reward was recorded."""
    plt = pyplot()
    label = LEARNER_LABELS[config.learner]
    style = {
        "per_step": config.rollouts_per_step,
        "marker": "o" if config.learner == "policy" else None,
        "colors": {name: f"C{i % 10}" for i, name in enumerate(results)},
    }
    paths = []
    for key, (curve_key, title, _) in REWARDS.items():
        if not any(curve_key in e for e in results.values()):
            continue
        fig, ax = plt.subplots(figsize=(9, 5.5))
        for name, entry in results.items():
            if curve_key in entry:
                c = entry[curve_key]
                points = c["budget_step"], c["score_mean"], c["score_ci95"]
                _band(ax, points, name, style)
        ax.set_xlabel("rollouts spent (budget step x B x K)")
        ax.set_ylabel(
            "held-out expected reward (SIMULATED)"
            if config.learner == "sim"
            else f"{title} of the policy"
        )
        ax.set_title(f"{title} against rollouts, 95 % bands (learner: {label})")
        ax.legend(fontsize=7, ncol=2)
        paths.append(save_figure(fig, out / f"{key}.png"))
    if any(e.get("curve_margins") for e in results.values()):
        paths.append(_plot_margins(results, out, config, style))
    return paths


def _band(ax, points: tuple, name: str, style: dict) -> None:
    """A curve (budget steps, means, 95 % half-widths) against rollouts with its band (none
    where the interval is undefined); ``style``: rollouts per budget step, marker, and each
    scheduler's colour (the same in every panel)."""
    budget_steps, mean, ci95 = points
    color = style["colors"][name]
    per_step = style["per_step"]
    x = np.asarray(budget_steps, dtype=np.float64) * per_step
    y = np.asarray(mean, dtype=np.float64)
    ci = np.asarray([np.nan if c is None else c for c in ci95], dtype=np.float64)
    main = name in ("envsched", "random")
    line = "-" if main else "--"
    width = 2.0 if main else 1.0
    ax.plot(x, y, line, color=color, marker=style["marker"], label=name, linewidth=width)
    ax.fill_between(x, y - ci, y + ci, color=color, alpha=0.12)


def _plot_margins(results: dict, out: Path, config: AblationConfig, style: dict) -> Path:
    """A panel per (reward, reference): each scheduler minus the reference, with its band."""
    plt = pyplot()
    keys = [key for key in REWARDS if _references(results, key)]
    references = [r for r in results if any(r in _references(results, key) for key in keys)]
    fig, axes = plt.subplots(
        len(keys), len(references), figsize=(7 * len(references), 4.5 * len(keys)), squeeze=False
    )
    for row, key in zip(axes, keys, strict=True):
        for ax, reference in zip(row, references, strict=True):
            for name, entry in results.items():
                margin = entry.get("curve_margins", {}).get(reference, {}).get(key)
                if margin is not None:
                    points = margin["budget_step"], margin["mean"], margin["ci95"]
                    _band(ax, points, name, style)
            ax.axhline(0.0, color="grey", linewidth=0.8)
            ax.set_xlabel("rollouts spent (budget step x B x K)")
            ax.set_ylabel(f"{REWARDS[key][2]} reward minus {reference}")
            ax.set_title(f"{REWARDS[key][1]} minus {reference}, paired by seed, 95 % bands")
            ax.legend(fontsize=7, ncol=2)
    fig.suptitle(f"Paired differences (learner: {LEARNER_LABELS[config.learner]})")
    return save_figure(fig, out / "paired_margins.png")
