"""Fusion, self-history shrinkage, dispersion reconstruction and calibration (spec 4.5-4.7).

    P_y(i,t) = w_within G_within(i,t) + w_cross G_cross(i,t)                (0.5 / 0.5)
    E_y(i,t) = (W(i,t) ybar(i,t) + lambda_s P_y(i,t)) / (W(i,t) + lambda_s)
    f(i,t)   = E_d E_m (1 - E_m)
    u_h(i,t) = Q_v(0.65 pr(E_v)(i) + 0.35 pr(f)(i))
    u(i,t)   = u_long - eta max(u_long - u_short, 0),     q(i,t) = pr(u)(i)

pr and Q_v as in docs/design.md §4.6 (ties to :data:`TIE_DECIMALS` decimals); float64,
vectorised, O(N log N).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

TIE_DECIMALS = 12
"""Values (all in [0, 1]) that agree to this many decimals share an average rank. **[decision]**
Tasks tied in exact arithmetic (say, two never-observed tasks whose estimates both equal g)
can differ in the last bit after float64 sums taken in different orders; without this the
rank, and so q, of such tasks would depend on summation order."""

_INDEX_BITS = 23
_PACK_LIMIT = 1 << _INDEX_BITS
_KEY_BITS = 63 - _INDEX_BITS

SINGLE_TASK_PERCENTILE = 0.5
"""pr of the only task when N = 1, where (rank - 1) / (N - 1) is 0 / 0: the value every task
gets when all N tasks tie, which is the limit a single task belongs to."""


def graph_prior(
    relation_estimates: Mapping[str, np.ndarray], weights: Mapping[str, float]
) -> np.ndarray:
    """P_y = sum_r w_r G_r. Shapes: every G_r of one shape, say (N, 3) -> the same."""
    terms = (w * relation_estimates[relation] for relation, w in weights.items())
    prior = next(terms)
    for term in terms:
        prior += term
    return prior


def shrink(
    weighted_sum: np.ndarray, weight: np.ndarray, prior: np.ndarray, lambda_s: float
) -> np.ndarray:
    """E_y = (W ybar + lambda_s P_y) / (W + lambda_s).

    Shapes: ``weighted_sum``, ``prior`` (N, C) or (H, C, N); ``weight`` broadcastable, (N, 1) or
    (H, 1, N) -> the shape of ``weighted_sum``.
    """
    return (weighted_sum + lambda_s * prior) / (weight + lambda_s)


def reconstructed_variance(e_m: np.ndarray, e_d: np.ndarray) -> np.ndarray:
    """f = E_d E_m (1 - E_m): the variance implied by the mean and the dispersion. Shapes: (N,)."""
    return e_d * e_m * (1.0 - e_m)


def average_rank(x: np.ndarray, repeats: int = 1) -> np.ndarray:
    """1-based ranks of ``x``, ties (equal to :data:`TIE_DECIMALS` decimals) sharing their average.

    Equal to ``scipy.stats.rankdata(np.round(x, TIE_DECIMALS), method="average")``, with the last
    entry standing for ``repeats`` equal tasks (placed as a block, the others sorted).
    Shapes: (M,) -> (M,).
    """
    x = np.asarray(x, dtype=np.float64)
    # np.round(x, 12) is rint(x * 10^12) / 10^12, so these integers tie exactly when the
    # rounded values do
    key = np.rint(x * 10.0**TIE_DECIMALS)
    if repeats == 1:
        return _sorted_ranks(key)
    common = key == key[-1]
    rest = np.flatnonzero(~common)
    ranks = np.empty(key.shape[0])
    block = repeats - 1 + int(np.count_nonzero(common))
    ranks[rest], ranks[common] = _ranks_beside_block(key[rest], key[-1], block)
    return ranks


def _ranks_beside_block(key: np.ndarray, block_key: float, count: int) -> tuple[np.ndarray, float]:
    """:func:`average_rank` of the integer keys ``key`` among them and ``count`` more entries
    of ``block_key`` (which none of ``key`` equals): the ranks of ``key`` and of the block."""
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    starts = np.concatenate(([0], np.flatnonzero(sorted_key[1:] != sorted_key[:-1]) + 1))
    ends = np.append(starts[1:], key.shape[0])
    below = int(np.searchsorted(sorted_key, block_key, side="left"))
    shift = np.where(starts >= below, count, 0)  # blocks of larger keys
    starts += shift
    ends += shift
    ranks = np.empty(key.shape[0])
    ranks[order] = np.repeat((starts + 1 + ends) / 2.0, ends - starts)
    return ranks, (below + 1 + below + count) / 2.0


def _sorted_ranks(key: np.ndarray) -> np.ndarray:
    """:func:`average_rank` of the integer-valued float keys ``key`` by one full sort."""
    n = key.shape[0]
    if 0 < n <= _PACK_LIMIT and key.min() >= 0 and key.max() < 2.0**_KEY_BITS:
        # one value sort of (key << 23 | index) is several times faster than an argsort
        packed = key.astype(np.int64)
        packed <<= _INDEX_BITS
        packed |= np.arange(n, dtype=np.int64)
        packed.sort()
        order = packed & (_PACK_LIMIT - 1)
        packed >>= _INDEX_BITS
        key = packed
    else:
        order = np.argsort(key, kind="stable")
        key = key[order]
    ranks = np.empty(n)
    starts = np.flatnonzero(key[1:] != key[:-1]) + 1
    if starts.shape[0] == n - 1:
        ranks[order] = np.arange(1.0, n + 1.0)
        return ranks
    starts = np.concatenate(([0], starts))
    ends = np.append(starts[1:], n)
    # sorted positions starts+1 .. ends (1-based) share the mean of their ranks
    ranks[order] = np.repeat((starts + 1 + ends) / 2.0, ends - starts)
    return ranks


def percentile_from_rank(ranks: np.ndarray, population: int | None = None) -> np.ndarray:
    """pr = (rank - 1) / (N - 1) in [0, 1] (``population`` N, default the number of ranks);
    :data:`SINGLE_TASK_PERCENTILE` when N = 1.
    """
    n = ranks.shape[0] if population is None else population
    if n == 1:
        return np.full(ranks.shape[0], SINGLE_TASK_PERCENTILE)
    return (ranks - 1.0) / max(n - 1, 1)


def percentile_rank(x: np.ndarray, repeats: int = 1) -> np.ndarray:
    """pr(x): percentile rank of each entry among all N = M - 1 + ``repeats`` (average rank for
    ties, :func:`average_rank`). Shapes: (M,).
    """
    return percentile_from_rank(average_rank(x, repeats), x.shape[0] - 1 + repeats)


@dataclass(frozen=True)
class SortedWithBlock:
    """Sorted values whose block of ``count`` copies of ``value`` at ``below`` is not stored
    (``rest`` holds the others); reads like the whole array for :func:`quantile_map`.
    """

    rest: np.ndarray
    value: float
    count: int
    below: int

    @property
    def shape(self) -> tuple[int]:
        return (self.rest.shape[0] + self.count,)

    def __getitem__(self, positions: np.ndarray) -> np.ndarray:
        out = np.full(positions.shape, self.value)
        before, after = positions < self.below, positions >= self.below + self.count
        out[before] = self.rest[positions[before]]
        out[after] = self.rest[positions[after] - self.count]
        return out


def sorted_values(x: np.ndarray, repeats: int = 1) -> np.ndarray | SortedWithBlock:
    """``x`` sorted, the last entry standing for ``repeats`` tasks (a :class:`SortedWithBlock`
    when more than one). Shapes: (M,) -> (M - 1 + repeats,).
    """
    if repeats == 1:
        return np.sort(x)
    common = x == x[-1]
    rest = np.sort(x[~common])
    below = int(np.searchsorted(rest, x[-1], side="left"))
    count = repeats - 1 + int(np.count_nonzero(common))
    return SortedWithBlock(rest, float(x[-1]), count, below)


def quantile_map(ordered: np.ndarray | SortedWithBlock, p: np.ndarray) -> np.ndarray:
    """Q(p): empirical quantiles of the sorted values ``ordered`` at levels ``p`` in [0, 1], the
    numbers of ``np.quantile(values, p)`` (linear) without re-sorting. Shapes: (N,), (M,) -> (M,).
    """
    n = ordered.shape[0]
    if n == 0:
        return np.zeros(p.shape[0])
    gamma = (n - 1) * p
    lower = np.floor(gamma)
    np.clip(lower, 0, n - 1, out=lower)
    gamma -= lower
    index = lower.astype(np.int64)
    a = ordered[index]
    index += 1
    np.minimum(index, n - 1, out=index)
    b = ordered[index]
    diff = b - a
    # numpy's lerp: a + (b - a) gamma below one half, b - (b - a)(1 - gamma) from one half on
    upper_half = gamma >= 0.5
    out = diff * gamma
    out += a
    np.subtract(1.0, gamma, out=gamma)
    gamma *= diff
    b -= gamma
    np.copyto(out, b, where=upper_half)
    return out


def calibrate(
    e_v: np.ndarray,
    f: np.ndarray,
    weight_variance: float,
    weight_reconstructed: float,
    repeats: int = 1,
) -> dict[str, np.ndarray]:
    """u_h = Q_v(w_v pr(E_v) + w_f pr(f)), with the intermediate percentiles. Shapes: (M,).

    Returns ``pr_E_v``, ``pr_f``, ``percentile`` (the mixed level) and ``u``; ``repeats`` as in
    :func:`average_rank`.
    """
    pr_v = percentile_rank(e_v, repeats)
    pr_f = percentile_rank(f, repeats)
    level = weight_variance * pr_v + weight_reconstructed * pr_f
    u = quantile_map(sorted_values(e_v, repeats), level)
    return {"pr_E_v": pr_v, "pr_f": pr_f, "percentile": level, "u": u}


def decline_penalty(u_long: np.ndarray, u_short: np.ndarray, eta: float) -> np.ndarray:
    """u = u_long - eta max(u_long - u_short, 0): tasks whose recent view fell are pushed down."""
    return u_long - eta * np.maximum(u_long - u_short, 0.0)
