"""Reward against rollouts: paired-by-seed margin curves and where a curve first reaches a target.

A run's evaluations are (budget step b_j, reward y_j) with y one of :data:`REWARD_KEYS` and
rollouts = b B K; every scheduler of one seed shares the seed, so comparisons pair by seed.

- :func:`paired_curve`: at each grid step, the curve through the evaluations
  (:func:`scores_at`), scheduler minus reference per seed, mean and Student-t 95 % interval
  over seeds.
- :func:`first_reach`: the first point where the piecewise-linear curve reaches a target,
  b* = b_{j-1} + (target - y_{j-1}) / (y_j - y_{j-1}) (b_j - b_{j-1}) for the first j with
  y_j >= target (b_0 if y_0 does; "not reached" if none does); the targets and what is paired
  are :mod:`~envsched_gnn.eval.ablation.targets`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from envsched_gnn.eval.stats import paired_difference

REWARD_KEYS = ("score", "pool_score", "check_fraction")
"""The rewards a run's records may carry: held-out, pool, and the held-out mean fraction of
checks passed (beside a held-out success rate)."""


def evaluations(records: Sequence[dict], key: str = "score") -> tuple[np.ndarray, np.ndarray]:
    """(budget steps, rewards) of the records that carry ``key``, in budget order."""
    scored = [r for r in records if r.get(key) is not None]
    return (
        np.array([r["budget_step"] for r in scored], dtype=np.float64),
        np.array([r[key] for r in scored], dtype=np.float64),
    )


def scores_at(
    records: Sequence[dict], budget_steps: Sequence[float], key: str = "score"
) -> np.ndarray:
    """Score (``key``) at each budget step, piecewise-linear between the evaluations and the
    last one beyond them (records in budget order; records without it, updates the policy
    learner did not evaluate after, are skipped). Runs whose evaluations fall at other
    rollouts (a scheduler behind dynamic sampling spends more a step) are compared at the
    same points."""
    spent, score = evaluations(records, key)
    return np.interp(np.asarray(budget_steps, dtype=np.float64), spent, score)


def paired_curve(
    runs: Sequence[dict], reference: Sequence[dict], grid: Sequence[float], key: str = "score"
) -> dict:
    """Scheduler minus reference at each budget step of ``grid``, paired by seed (runs with
    ``seed`` and ``records``): ``budget_step``, ``mean``, ``ci95`` (None for one seed) and
    ``seeds``, the seeds both have."""
    mine = {r["seed"]: scores_at(r["records"], grid, key) for r in runs}
    theirs = {r["seed"]: scores_at(r["records"], grid, key) for r in reference}
    seeds = sorted(set(mine) & set(theirs))
    stats = [
        paired_difference({s: mine[s][i] for s in seeds}, {s: theirs[s][i] for s in seeds})
        for i in range(len(grid))
    ]
    return {
        "budget_step": [float(b) for b in grid],
        "mean": [s["mean"] for s in stats],
        "ci95": [s["ci95"] for s in stats],
        "seeds": seeds,
    }


def first_reach(budget_steps: np.ndarray, rewards: np.ndarray, target: float) -> float | None:
    """The budget step at which the piecewise-linear curve through the evaluations first
    reaches ``target`` (module doc); None when no evaluation does."""
    reached = np.flatnonzero(rewards >= target - 1e-12)
    if reached.size == 0:
        return None
    j = int(reached[0])
    if j == 0:
        return float(budget_steps[0])
    (b0, b1), (y0, y1) = budget_steps[j - 1 : j + 1], rewards[j - 1 : j + 1]
    return float(b0 + (target - y0) / (y1 - y0) * (b1 - b0))
