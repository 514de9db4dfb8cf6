"""The output of ``eval cold-start``: a Markdown table with intervals, verdicts in words, JSON."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from envsched_gnn.eval.cold_start.measure import ESTIMATES, MIN_CLASS
from envsched_gnn.eval.stats import excludes_zero
from envsched_gnn.json_files import write_json_atomically

if TYPE_CHECKING:
    from envsched_gnn.eval.cold_start.measure import ColdStart

LABELS = {
    "q": "EnvSched q (real graph)",
    "cross": "cross estimate G_cross (real graph)",
    "global": "environment-free prior g_v (constant)",
    "relabelled_q": "relabelled control: q",
    "relabelled_cross": "relabelled control: G_cross",
}
ROWS = ("q", "cross", "global", "relabelled_q", "relabelled_cross")


def _value(row: dict, metric: str) -> str:
    value, (lo, hi) = row[metric], row[f"{metric}_ci"]
    if math.isnan(value):
        return "n/a"
    return (
        f"{value:+.3f} [{lo:+.3f}, {hi:+.3f}]"
        if metric == "spearman"
        else (f"{value:.3f} [{lo:.3f}, {hi:.3f}]")
    )


def table(result: ColdStart) -> str:
    """Markdown: each estimate's Spearman and AUC with 95 % intervals, then the paired
    differences from the relabelled control."""
    lines = ["| estimate | Spearman [95% CI] | AUC (v > 0) [95% CI] |", "|---|---|---|"]
    for name in ROWS:
        row = result.rows[name]
        lines.append(f"| {LABELS[name]} | {_value(row, 'spearman')} | {_value(row, 'auc')} |")
    for name in ESTIMATES:
        diff = result.differences[name]
        lines.append(
            f"| {name} - relabelled {name} (paired) | {_value(diff, 'spearman')} | "
            f"{_value(diff, 'auc')} |"
        )
    return "\n".join(lines)


def verdicts(result: ColdStart) -> list[str]:
    """In words: does each estimate beat the environment-free prior, and the control?"""
    out = []
    for name in ESTIMATES:
        row, diff = result.rows[name], result.differences[name]
        rho, interval = row["spearman"], row["spearman_ci"]
        if math.isnan(rho):
            out.append(f"{LABELS[name]}: Spearman undefined (no spread to rank).")
            continue
        if excludes_zero(interval):
            head = (
                f"{LABELS[name]} ranks the new environments' first-visit variance "
                f"{'better' if rho > 0 else 'worse'} than the environment-free prior (Spearman "
                f"{rho:+.3f}, CI excludes 0)"
            )
        else:
            head = (
                f"{LABELS[name]}: no evidence that it ranks the new environments' first-visit "
                f"variance better than the environment-free prior (Spearman {rho:+.3f}, CI "
                "includes 0)"
            )
        delta, delta_ci = diff["spearman"], diff["spearman_ci"]
        if excludes_zero(delta_ci):
            tail = (
                f"; it is {'above' if delta > 0 else 'below'} the relabelled control by "
                f"{delta:+.3f} (paired CI excludes 0)."
            )
        else:
            tail = (
                f"; its margin over the relabelled control, {delta:+.3f}, is inside the noise "
                "(paired CI includes 0)."
            )
        out.append(head + tail)
    return out


def render(result: ColdStart, command: str = "") -> str:
    """The Markdown note: what was measured, the table, the verdicts, the command."""
    lines = [
        f"{result.targets} first visits of tasks in {result.environments} environments that "
        f"joined the pool in {len(result.folds)} folds at steps {result.steps}; each predicted "
        "from the other environments' observations only (no observation of its own "
        f"environment), so the cross relation carries the prediction alone. {result.spread} of "
        f"the {result.targets} first visits showed reward spread (v > 0); the AUC needs at "
        f"least {MIN_CLASS} with and {MIN_CLASS} without (else n/a).",
        "",
        table(result),
        "",
        *[f"- {line}" for line in verdicts(result)],
        "",
        f"Intervals: 95 % percentile bootstrap over the new environments "
        f"({result.config['bootstrap']} resamples); the control is the mean of "
        f"{result.config['control_draws']} relabelled graphs (one draw per resample).",
    ]
    if command:
        lines += ["", f"Command: `{command}`"]
    return "\n".join(lines)


def write(result: ColdStart, out_dir: str | Path, command: str = "") -> dict[str, Path]:
    """``cold_start.json`` and ``cold_start.md`` in ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "cold_start.json", "md": out / "cold_start.md"}
    write_json_atomically(paths["json"], {**result.to_json(), "command": command}, indent=1)
    paths["md"].write_text(render(result, command) + "\n", encoding="utf-8")
    return paths
