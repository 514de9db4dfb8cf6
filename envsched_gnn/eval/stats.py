"""Confidence intervals, the inside-the-noise rule and the correlations the reports use.

Every report calls a difference inside the noise by one rule, :func:`inside_noise`: it has an
interval (Student-t half-width or bootstrap ``[lo, hi]``) and the interval contains 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from scipy.stats import spearmanr
from scipy.stats import t as student_t


def mean_ci(values: Sequence[float], level: float = 0.95) -> dict:
    """``{"mean", "ci95" (half-width, None for n < 2), "se", "n"}`` of ``values``, the Student-t
    interval ``mean +- t_{0.975, n-1} * sd / sqrt(n)`` (sd with ddof = 1)."""
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
    """:func:`mean_ci` of ``a[k] - b[k]`` over the keys both have (``n`` says how many): pairing
    removes what the keys share from the noise. With ``per_key``, the differences too, in key
    order, under that name."""
    keys = sorted(set(a) & set(b))
    if not keys:
        raise ValueError("paired_difference: the two measurements share no key")
    differences = [float(a[k] - b[k]) for k in keys]
    stat = mean_ci(differences)
    return stat if per_key is None else {**stat, per_key: differences}


def percentile_ci(draws: Sequence[float]) -> list[float]:
    """``[lo, hi]``: the 2.5th and 97.5th percentiles of the finite ``draws`` (NaN, NaN when
    none is finite)."""
    x = np.asarray(draws, dtype=np.float64)
    finite = x[np.isfinite(x)]
    if not finite.size:
        return [math.nan, math.nan]
    return [float(v) for v in np.quantile(finite, [0.025, 0.975])]


def permutation_p(null: Sequence[float], observed: float) -> float:
    """One-sided permutation p-value ``(1 + #{null >= observed}) / (1 + P)`` of ``observed``
    against P draws of its null (``>=`` with a 1e-12 tolerance, so that ties count)."""
    draws = np.asarray(null, dtype=np.float64)
    return (1 + int(np.sum(draws >= observed - 1e-12))) / (1 + draws.size)


def env_bootstrap(
    env_of_rows: Sequence[np.ndarray],
    count: int,
    rng: np.random.Generator,
    score: Callable[[list[np.ndarray], np.random.Generator], np.ndarray],
    keep: Sequence[np.ndarray] | None = None,
) -> np.ndarray:
    """``count`` draws of ``score`` over sets of rows resampled by environment.

    ``env_of_rows[j]`` gives the environment of each row of set j (``keep[j]``: the rows that
    may be drawn, every row when None). Each draw picks E environments with replacement from
    the E that the kept rows hold, and calls ``score(rows, rng)`` with ``rows[j]`` the kept rows
    of set j in the drawn environments, in draw order (an environment drawn twice, twice);
    ``score`` may draw more from ``rng``. Returns the stacked scores, shape (count, ...).
    """
    masks = keep if keep is not None else [np.ones(len(e), bool) for e in env_of_rows]
    kept = [np.asarray(e)[k] for e, k in zip(env_of_rows, masks, strict=True)]
    envs = np.unique(np.concatenate(kept))
    members = [
        {e: np.flatnonzero(k & (np.asarray(env) == e)) for e in envs}
        for env, k in zip(env_of_rows, masks, strict=True)
    ]
    draws = []
    for _ in range(count):
        drawn = rng.choice(envs, envs.shape[0], replace=True)
        draws.append(score([np.concatenate([m[e] for e in drawn]) for m in members], rng))
    return np.asarray(draws, dtype=np.float64)


def _interval(stat: Mapping | Sequence[float] | None) -> tuple[float, float] | None:
    """``stat``'s interval as (lo, hi): from a :func:`mean_ci` mapping or a ``[lo, hi]``
    pair; None without one (no half-width, or a NaN bound)."""
    if stat is None:
        return None
    if isinstance(stat, Mapping):
        if stat["ci95"] is None:
            return None
        return stat["mean"] - stat["ci95"], stat["mean"] + stat["ci95"]
    lo, hi = stat
    return None if math.isnan(lo) or math.isnan(hi) else (lo, hi)


def inside_noise(stat: Mapping | Sequence[float] | None) -> bool:
    """True when ``stat`` (a :func:`mean_ci` mapping or a ``[lo, hi]`` interval) has an
    interval and it contains 0 (no interval: no verdict)."""
    interval = _interval(stat)
    return interval is not None and interval[0] <= 0.0 <= interval[1]


def excludes_zero(stat: Mapping | Sequence[float] | None) -> bool:
    """True when ``stat`` has an interval and it does not contain 0 (no interval: no
    verdict)."""
    return _interval(stat) is not None and not inside_noise(stat)


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

    and p its :func:`permutation_p` against ``permutations`` shuffles of ``labels``, drawn with
    ``seed``. Undefined (NaN) when every value is equal; epsilon^2 when every group
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
    shuffled = [eta2(rng.permutation(group)) for _ in range(permutations)]
    p_value = permutation_p(shuffled, observed)
    return out | {"eta2": observed, "epsilon2": float(epsilon), "p_value": p_value}
