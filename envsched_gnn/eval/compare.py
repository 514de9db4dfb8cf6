"""Analytic against learned propagation, step by step on a logged run (``eval compare-predictors``).

At every step t both predictors see only observations with s < t (the learned one trained
online on them); their u(i,t) (spec 4.6-4.7) is scored against v(i,t) of the tasks selected
at t: ``spearman`` (NaN when either side is constant), ``mae`` = mean |u - v|, ``auc`` for
"v > 0" (NaN unless both classes occur) and ``precision_top25``: with k = ceil(n / 4), the
share of the k highest u (ties by node order) whose v reaches the k-th largest v (ties count).
"overall" pools every (step, task) pair; per-step rows keep each step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

from envsched_gnn.eval.stats import spearman
from envsched_gnn.graph.hetero import to_hetero_data
from envsched_gnn.graph.task_graph import TaskGraph
from envsched_gnn.json_files import write_json_atomically
from envsched_gnn.observations import Observation, ObservationLog
from envsched_gnn.plots import pyplot, save_figure

METRICS = ("spearman", "mae", "auc", "precision_top25")


def score_predictions(predicted: np.ndarray, observed: np.ndarray) -> dict[str, float]:
    """The four metrics of one set of predictions against observed variances (module doc)."""
    predicted = np.asarray(predicted, dtype=np.float64)
    observed = np.asarray(observed, dtype=np.float64)
    n = observed.shape[0]
    if n == 0:
        return dict.fromkeys(METRICS, math.nan)
    positive = observed > 0.0
    both = positive.any() and not positive.all()
    auc = float(roc_auc_score(positive, predicted)) if both else math.nan
    k = math.ceil(n / 4)
    top = np.argsort(-predicted, kind="stable")[:k]
    threshold = np.sort(observed)[::-1][k - 1]
    return {
        "spearman": spearman(predicted, observed, min_pairs=2),
        "mae": float(np.mean(np.abs(predicted - observed))),
        "auc": auc,
        "precision_top25": float(np.mean(observed[top] >= threshold)),
    }


@dataclass
class Comparison:
    """Per-step and overall scores of each predictor; ``per_step[name]`` is a list of rows."""

    steps: list[int]
    n_tasks: list[int]
    per_step: dict[str, list[dict[str, float]]]
    overall: dict[str, dict[str, float]]

    def to_json(self) -> dict:
        return {
            "metric_of": "calibrated prediction u against the observed variance v",
            "steps": self.steps,
            "n_tasks": self.n_tasks,
            "per_step": self.per_step,
            "overall": self.overall,
        }

    def table(self) -> str:
        """A Markdown table: overall, then the mean of the per-step values, per predictor."""
        lines = [
            "| predictor | scope | " + " | ".join(METRICS) + " |",
            "|---|---|" + "---|" * len(METRICS),
        ]
        for name in self.overall:
            mean_step = {
                m: float(np.nanmean([r[m] for r in self.per_step[name]]))
                if any(not math.isnan(r[m]) for r in self.per_step[name])
                else math.nan
                for m in METRICS
            }
            for scope, row in (("overall", self.overall[name]), ("mean per step", mean_step)):
                cells = " | ".join(f"{row[m]:.4f}" for m in METRICS)
                lines.append(f"| {name} | {scope} | {cells} |")
        return "\n".join(lines)


def compare_predictors(
    graph: TaskGraph, observations: Sequence[Observation], predictors: dict | None = None
) -> Comparison:
    """Walk through ``observations`` step by step and score each predictor from the past only.

    ``predictors`` maps a name to an object with ``predict(data, log, step)`` (and, for
    learned ones, ``update``); default: ``analytic`` and ``learned`` with their defaults.
    """
    if predictors is None:
        from envsched_gnn.models.analytic import AnalyticPredictor
        from envsched_gnn.models.learned import LearnedPropagation

        predictors = {"analytic": AnalyticPredictor(), "learned": LearnedPropagation()}
    if not observations:
        raise ValueError("compare-predictors: the history is empty")
    data = to_hetero_data(graph)
    log = ObservationLog(graph.task_ids)
    log.extend(observations)
    columns = log.arrays()
    steps = sorted(set(columns["step"].tolist()))
    per_step: dict[str, list[dict[str, float]]] = {name: [] for name in predictors}
    pooled: dict[str, list[np.ndarray]] = {name: [] for name in predictors}
    truth, counts = [], []
    for step in steps:
        rows = columns["step"] == step
        tasks, observed = columns["task"][rows], columns["v"][rows]
        truth.append(observed)
        counts.append(int(rows.sum()))
        for name, predictor in predictors.items():
            if hasattr(predictor, "update"):
                predictor.update(data, log, step)
            predicted = np.asarray(predictor.predict(data, log, step).u)[tasks]
            pooled[name].append(predicted)
            per_step[name].append(score_predictions(predicted, observed))
    all_truth = np.concatenate(truth)
    overall = {name: score_predictions(np.concatenate(p), all_truth) for name, p in pooled.items()}
    return Comparison(steps, counts, per_step, overall)


def plot_comparison(comparison: Comparison, path: str | Path) -> None:
    """One panel per metric: per-step value of each predictor, overall value in the legend."""
    plt = pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True)
    for ax, metric in zip(axes.flat, METRICS, strict=True):
        for name, rows in comparison.per_step.items():
            overall = comparison.overall[name][metric]
            ax.plot(
                comparison.steps,
                [r[metric] for r in rows],
                marker=".",
                label=f"{name} (overall {overall:.3f})",
            )
        ax.set_title(metric)
        ax.legend(fontsize=8)
    for ax in axes[1]:
        ax.set_xlabel("step")
    fig.suptitle("Predicted u against observed reward variance, from the past only")
    save_figure(fig, path)


def write_comparison(comparison: Comparison, out: str | Path) -> dict[str, Path]:
    """Write ``compare.json``, ``compare.md`` and ``compare.png`` under ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "compare.json", "md": out / "compare.md", "png": out / "compare.png"}
    write_json_atomically(paths["json"], comparison.to_json())
    per_step = ["| step | tasks | predictor | " + " | ".join(METRICS) + " |"]
    per_step.append("|---|---|---|" + "---|" * len(METRICS))
    for k, step in enumerate(comparison.steps):
        for name, rows in comparison.per_step.items():
            cells = " | ".join(f"{rows[k][m]:.4f}" for m in METRICS)
            per_step.append(f"| {step} | {comparison.n_tasks[k]} | {name} | {cells} |")
    paths["md"].write_text(
        "# Analytic vs learned propagation\n\n## Overall\n\n"
        + comparison.table()
        + "\n\n## Per step\n\n"
        + "\n".join(per_step)
        + "\n",
        encoding="utf-8",
    )
    plot_comparison(comparison, paths["png"])
    return paths
