"""The report of a scheduler comparison: ``results.json``, ``report.md`` and PNG plots.

``results`` is one dict holding every number of the run::

    {"run": str, "config": {...}, "notes": [str, ...], "timings": {name: seconds},
     "schedulers": {name: {"eval": [{"step", "mean_reward", ...}, ...],
                           "steps": [{"step", "batch/mean_reward", ...}, ...],
                           "rollouts": int, "wall_s": float}}}

``eval`` starts with the policy before any GRPO step (step 0); ``steps`` holds the
per-step metrics under the stable names of spec section 6.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from envsched_gnn.scheduler.metrics import BATCH_METRICS

PLOTS = (
    ("heldout_reward.png", "held-out mean reward", None),
    ("reward_variance.png", "batch mean reward variance", "batch/mean_reward_variance"),
    ("envs_covered.png", "environments covered per batch", "batch/envs_covered"),
)


def summarize(result: Mapping) -> dict[str, float]:
    """One row of the comparison table: held-out reward at start, end and best, and the
    per-step batch metrics averaged over the steps (the paper's per-step metrics)."""
    evals = result.get("eval", [])
    row: dict[str, float] = {
        "heldout_start": evals[0]["mean_reward"] if evals else math.nan,
        "heldout_end": evals[-1]["mean_reward"] if evals else math.nan,
        "heldout_best": max((e["mean_reward"] for e in evals), default=math.nan),
        "steps": float(len(result.get("steps", []))),
        "rollouts": float(result.get("rollouts", 0)),
    }
    for name in BATCH_METRICS:
        values = [s[name] for s in result.get("steps", []) if name in s]
        row[name] = float(np.mean(values)) if values else math.nan
    return row


def write_results(results: Mapping, out_dir: str | Path) -> Path:
    """Write ``results.json`` (atomically: a temporary file renamed into place)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "results.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(results, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def write_report(results: Mapping, out_dir: str | Path) -> list[Path]:
    """Write ``results.json``, ``report.md`` and the PNG plots into ``out_dir``; return paths."""
    out_dir = Path(out_dir)
    paths = [write_results(results, out_dir)]
    paths += plot_results(results, out_dir)
    markdown = out_dir / "report.md"
    markdown.write_text(render_markdown(results, [p.name for p in paths[1:]]), encoding="utf-8")
    paths.append(markdown)
    return paths


def render_markdown(results: Mapping, plot_names: Sequence[str] = ()) -> str:
    schedulers = results["schedulers"]
    lines = [f"# EnvSched run `{results.get('run', '')}`", ""]
    lines += [f"- {note}" for note in results.get("notes", [])]
    lines += ["", "## Held-out reward and the paper's per-step metrics (mean over steps)", ""]
    columns = [
        ("held-out start", "heldout_start", 3),
        ("held-out end", "heldout_end", 3),
        ("held-out best", "heldout_best", 3),
        ("mean reward", "batch/mean_reward", 3),
        ("mean reward var.", "batch/mean_reward_variance", 4),
        ("median reward var.", "batch/median_reward_variance", 4),
        ("median reward", "batch/median_reward", 3),
        ("zero-var. share", "batch/zero_variance_share", 3),
        ("envs covered", "batch/envs_covered", 2),
        ("tools used", "batch/tools_used", 2),
        ("steps", "steps", 0),
        ("rollouts", "rollouts", 0),
    ]
    lines.append("| scheduler | " + " | ".join(title for title, _, _ in columns) + " |")
    lines.append("|---|" + "---|" * len(columns))
    for name, result in schedulers.items():
        row = summarize(result)
        cells = [_fmt(row[key], digits) for _, key, digits in columns]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "## Held-out mean reward at each evaluation", ""]
    lines.append("| step | " + " | ".join(schedulers) + " |")
    lines.append("|---|" + "---|" * len(schedulers))
    by_step: dict[int, dict[str, float]] = {}
    for name, result in schedulers.items():
        for entry in result.get("eval", []):
            by_step.setdefault(int(entry["step"]), {})[name] = entry["mean_reward"]
    for step in sorted(by_step):
        cells = [_fmt(by_step[step].get(name, math.nan), 3) for name in schedulers]
        lines.append(f"| {step} | " + " | ".join(cells) + " |")
    timings = results.get("timings", {})
    if timings:
        lines += ["", "## Wall time", ""]
        lines += [f"- {name}: {seconds:.1f} s" for name, seconds in timings.items()]
    if plot_names:
        lines += ["", "## Plots", ""]
        lines += [f"![{name}]({name})" for name in plot_names]
    lines += ["", "Every number above is in `results.json`, computed by this run.", ""]
    return "\n".join(lines)


def plot_results(results: Mapping, out_dir: str | Path) -> list[Path]:
    """PNG plots: held-out reward against steps, batch reward variance, environments covered."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    out_dir = Path(out_dir)
    paths = []
    for file_name, title, metric in PLOTS:
        figure, axis = plt.subplots(figsize=(6, 4))
        for name, result in results["schedulers"].items():
            if metric is None:
                points = [(e["step"], e["mean_reward"]) for e in result.get("eval", [])]
            else:
                points = [(s["step"], s[metric]) for s in result.get("steps", []) if metric in s]
            if points:
                xs, ys = zip(*points, strict=True)
                axis.plot(xs, ys, marker="o" if metric is None else None, label=name)
        axis.set_xlabel("GRPO step")
        axis.set_ylabel(title)
        axis.set_title(title)
        axis.grid(alpha=0.3)
        axis.legend()
        figure.tight_layout()
        path = out_dir / file_name
        figure.savefig(path, dpi=100)
        plt.close(figure)
        paths.append(path)
    return paths


def _fmt(value: float, digits: int) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}f}"
