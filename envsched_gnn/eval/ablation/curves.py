"""Reward against rollouts: paired-by-seed margin curves and rollouts to reach random's final.

A run's evaluations are (budget step b_j, reward y_j) with y ``score`` or ``pool_score`` and
rollouts = b B K; every scheduler of one seed shares the seed, so comparisons pair by seed.

- :func:`paired_curve`: at each grid step, the curve through the evaluations
  (:func:`scores_at`), scheduler minus reference per seed, mean and Student-t 95 % interval
  over seeds.
- :func:`rollouts_to_match`: per seed, the first point where the piecewise-linear curve reaches
  the reference's final reward,
  b* = b_{j-1} + (target - y_{j-1}) / (y_j - y_{j-1}) (b_j - b_{j-1}) for the first j with
  y_j >= target (b_0 if y_0 does; "not reached" if none does), against the reference's own
  first reach of it (paired by seed; an interval only when every seed reached). Over seeds:
  how many reached, the median (unreached seeds count beyond all) and the mean of the reached.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from envsched_gnn.eval.stats import paired_difference, verdict

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


def rollouts_to_match(
    runs: Sequence[dict], reference: Sequence[dict], per_budget_step: int, key: str = "score"
) -> dict:
    """Rollouts the scheduler's ``runs`` need to reach the ``reference`` runs' final ``key`` of
    the same seed (module doc), per seed and over seeds; ``per_budget_step`` = B K."""
    theirs = {r["seed"]: evaluations(r["records"], key) for r in reference}
    per_seed = []
    for run in sorted(runs, key=lambda r: r["seed"]):
        if run["seed"] not in theirs:
            continue
        ref_steps, ref_rewards = theirs[run["seed"]]
        steps, rewards = evaluations(run["records"], key)
        target = float(ref_rewards[-1])
        reached = first_reach(steps, rewards, target)
        first = np.flatnonzero(rewards >= target - 1e-12)
        per_seed.append(
            {
                "seed": run["seed"],
                "target": target,
                "budget_step": reached,
                "first_evaluation": float(steps[first[0]]) if first.size else None,
                "rollouts": None if reached is None else reached * per_budget_step,
                "reference_rollouts": first_reach(ref_steps, ref_rewards, target) * per_budget_step,
            }
        )
    return {"per_seed": per_seed, **_over_seeds(per_seed)}


def _over_seeds(per_seed: Sequence[Mapping]) -> dict:
    """Reached count, median (not reached = beyond every reached), mean over the reached, and
    scheduler minus reference paired by seed when every seed reached, with its words."""
    rollouts = [p["rollouts"] for p in per_seed]
    reached = [r for r in rollouts if r is not None]
    median = float(np.median([np.inf if r is None else r for r in rollouts])) if rollouts else None
    out = {
        "seeds": len(per_seed),
        "reached": len(reached),
        "median_rollouts": median if median is not None and np.isfinite(median) else None,
        "mean_rollouts_reached": float(np.mean(reached)) if reached else None,
        "minus_reference": None,
    }
    if not per_seed:
        out["verdict"] = "no seed in common"
    elif len(reached) < len(per_seed):
        missing = len(per_seed) - len(reached)
        out["verdict"] = (
            f"not reached on {missing} of {len(per_seed)} seeds: no evidence that it gets "
            "there sooner"
        )
    else:
        diff = paired_difference(
            {p["seed"]: p["rollouts"] for p in per_seed},
            {p["seed"]: p["reference_rollouts"] for p in per_seed},
        )
        out["minus_reference"] = diff
        out["verdict"] = verdict(
            diff,
            "later than the reference got there itself (95 % interval above 0)",
            "sooner than the reference got there itself (95 % interval below 0)",
        )
    return out
