"""Confidence intervals for the comparisons the reports make.

- :func:`mean_ci`: the mean of n values with the Student-t 95 % interval,
  ``mean +- t_{0.975, n-1} * sd / sqrt(n)`` (sd with ddof = 1).
- :func:`paired_difference`: the same interval for the per-key differences ``a_k - b_k`` of
  two measurements of the same keys (tasks, seeds): pairing removes what the keys share
  (a task's difficulty, a seed's starting batch) from the noise.
- :func:`inside_noise`: the one rule by which every report calls a difference inside the
  noise: it has an interval, and the interval contains 0 (:func:`verdict` and
  :func:`format_ci` write it).
- :func:`spearman`: Spearman's rho of a prediction against what was realised, undefined (NaN)
  over too few pairs or with a constant side.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from scipy.stats import spearmanr
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


def inside_noise(stat: Mapping | None) -> bool:
    """True when ``stat`` has an interval and it contains 0 (no interval: no verdict)."""
    return stat is not None and stat["ci95"] is not None and abs(stat["mean"]) <= stat["ci95"]


NOISE_MARK = " (inside the noise)"
"""What a table writes after a difference that is :func:`inside_noise`."""


def verdict(stat: Mapping, higher: str, lower: str) -> str:
    """``higher`` / ``lower`` when the interval excludes 0, else that it is inside the noise."""
    if stat["ci95"] is None:
        return "no interval (a single pair)"
    if inside_noise(stat):
        return "inside the noise (the 95 % interval contains 0)"
    return higher if stat["mean"] > 0 else lower


def format_ci(
    stat: Mapping | None, digits: int = 3, missing: str = "-", *, sign=False, noise=False
) -> str:
    """``mean ± half-width`` (``mean`` alone without an interval; ``missing`` for None);
    ``sign``: the mean with its sign; ``noise``: :data:`NOISE_MARK` after it when it is
    :func:`inside_noise` (for a difference)."""
    if stat is None:
        return missing
    text = f"{stat['mean']:{'+' if sign else ''}.{digits}f}"
    if stat["ci95"] is not None:
        text += f" ± {stat['ci95']:.{digits}f}"
    return text + (NOISE_MARK if noise and inside_noise(stat) else "")


def spearman(a: Sequence[float], b: Sequence[float], min_pairs: int = 3) -> float:
    """Spearman's rho of ``a`` and ``b``; NaN (undefined) over fewer than ``min_pairs`` pairs
    or when either side is constant."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if len(a) < min_pairs or np.ptp(a) == 0.0 or np.ptp(b) == 0.0:
        return math.nan
    return float(spearmanr(a, b).statistic)


def task_means(per_task: Mapping[str, Sequence[float]]) -> dict[str, float]:
    """Each task's mean reward m_i = (1/k) sum_k r(i,k)."""
    return {task: float(np.mean(rewards)) for task, rewards in per_task.items()}
