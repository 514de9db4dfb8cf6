"""Confidence intervals for the comparisons the reports make.

- :func:`mean_ci`: the mean of n values with the Student-t 95 % interval,
  ``mean +- t_{0.975, n-1} * sd / sqrt(n)`` (sd with ddof = 1).
- :func:`paired_difference`: the same interval for the per-key differences ``a_k - b_k`` of
  two measurements of the same keys (tasks, seeds): pairing removes what the keys share
  (a task's difficulty, a seed's starting batch) from the noise.
- :func:`verdict`: the words a report says about such an interval.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from scipy.stats import t as student_t


def mean_ci(values: Sequence[float], level: float = 0.95) -> dict:
    """``{"mean", "ci95" (half-width, None for n < 2), "se", "n"}`` of ``values``."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        raise ValueError("mean_ci: no values")
    mean = float(x.mean())
    if x.size < 2:
        return {"mean": mean, "ci95": None, "se": None, "n": 1}
    se = float(x.std(ddof=1) / math.sqrt(x.size))
    half = float(student_t.ppf(0.5 + level / 2, x.size - 1) * se)
    return {"mean": mean, "ci95": half, "se": se, "n": int(x.size)}


def paired_difference(a: Mapping, b: Mapping, per_key: str | None = None) -> dict:
    """:func:`mean_ci` of ``a[k] - b[k]`` over the keys both have (``n`` says how many); with
    ``per_key``, the differences too, in key order, under that name."""
    keys = sorted(set(a) & set(b))
    if not keys:
        raise ValueError("paired_difference: the two measurements share no key")
    differences = [float(a[k] - b[k]) for k in keys]
    stat = mean_ci(differences)
    return stat if per_key is None else {**stat, per_key: differences}


def excludes_zero(stat: Mapping) -> bool:
    """True when the interval lies entirely above or below 0."""
    return stat["ci95"] is not None and abs(stat["mean"]) > stat["ci95"]


def verdict(stat: Mapping, higher: str, lower: str) -> str:
    """``higher`` / ``lower`` when the interval excludes 0, else that it is inside the noise."""
    if stat["ci95"] is None:
        return "no interval (a single pair)"
    if not excludes_zero(stat):
        return "inside the noise (the 95 % interval contains 0)"
    return higher if stat["mean"] > 0 else lower


def format_ci(stat: Mapping | None, digits: int = 3) -> str:
    """``mean ± half-width`` (``mean`` alone without an interval; ``-`` for None)."""
    if stat is None:
        return "-"
    if stat["ci95"] is None:
        return f"{stat['mean']:.{digits}f}"
    return f"{stat['mean']:.{digits}f} ± {stat['ci95']:.{digits}f}"


def task_means(per_task: Mapping[str, Sequence[float]]) -> dict[str, float]:
    """Each task's mean reward m_i = (1/k) sum_k r(i,k)."""
    return {task: float(np.mean(rewards)) for task, rewards in per_task.items()}
