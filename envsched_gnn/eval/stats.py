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
- :func:`between_group_share`: how much of the variance of per-task values lies between the
  groups of a partition (environments, operation kinds): eta^2, the same adjusted for the
  number of groups, what chance alone gives, and a permutation p-value.
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


def between_group_share(
    values: Sequence[float], labels: Sequence, permutations: int = 999, seed: int = 0
) -> dict:
    """The share of the variance of ``values`` between the groups ``labels`` gives them.

    With N values y_i in g groups j of n_j values and mean y_j, grand mean y:

        SS_t = sum_i (y_i - y)^2      SS_b = sum_j n_j (y_j - y)^2      SS_w = SS_t - SS_b
        eta^2     = SS_b / SS_t
        epsilon^2 = (SS_b - (g - 1) SS_w / (N - g)) / SS_t      (eta^2 less what noise gives)
        chance    = (g - 1) / (N - 1)                           (E[eta^2] with no group effect)

    and p = (1 + #{eta^2 of ``labels`` shuffled >= eta^2}) / (1 + ``permutations``), the shuffles
    drawn with ``seed``. Undefined (NaN) when every value is equal; epsilon^2 when every group
    holds one value (N = g).
    """
    y = np.asarray(values, dtype=np.float64)
    if y.size != len(labels):
        raise ValueError(f"between_group_share: {y.size} values but {len(labels)} labels")
    if y.size < 2:
        raise ValueError("between_group_share: needs at least 2 values")
    _, group = np.unique(np.asarray([str(label) for label in labels]), return_inverse=True)
    n, g = y.size, int(group.max()) + 1
    centred = y - y.mean()
    total = float(centred @ centred)
    out = {"values": int(n), "groups": g, "chance": (g - 1) / (n - 1)}
    if total == 0.0:
        return out | {"eta2": math.nan, "epsilon2": math.nan, "p_value": math.nan}

    def eta2(assignment: np.ndarray) -> float:
        sums = np.bincount(assignment, weights=centred, minlength=g)
        counts = np.bincount(assignment, minlength=g)
        return float(np.sum(sums**2 / counts) / total)

    observed = eta2(group)
    within = (1.0 - observed) * total
    epsilon = (observed * total - (g - 1) * within / (n - g)) / total if n > g else math.nan
    rng = np.random.default_rng(seed)
    shuffled = np.array([eta2(rng.permutation(group)) for _ in range(permutations)])
    p_value = (1 + int(np.sum(shuffled >= observed - 1e-12))) / (1 + permutations)
    return out | {"eta2": observed, "epsilon2": float(epsilon), "p_value": p_value}
