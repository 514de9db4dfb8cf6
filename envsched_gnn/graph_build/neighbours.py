"""Each target's top-k neighbours: by similarity, ties by a hash of the pair (spec section 3),
``pair_key(i, j) = mix64(h(i) XOR mix64(h(j)))`` (``h`` = :func:`task_hashes`, ``mix64``
splitmix64's finaliser), smaller first. :func:`rank_candidates` is the one place that rule is
written: a build, a growth and a truncation all rank by it, so that they agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from hashlib import blake2b

import numpy as np

SHARED_CELLS = 4_000_000
"""(row, column) pairs keyed at once by :func:`top_shared_neighbours` (a few 32 MB arrays)."""


def task_hashes(ids: Sequence[str]) -> np.ndarray:
    """h(x): the first 8 bytes of blake2b(x), little-endian, per task id; ``(N,)`` uint64."""
    return np.array(
        [int.from_bytes(blake2b(t.encode(), digest_size=8).digest(), "little") for t in ids],
        dtype=np.uint64,
    )


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, a bijection of uint64 with full avalanche (wrapping arithmetic)."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def pair_keys(target: np.ndarray, candidate: np.ndarray) -> np.ndarray:
    """Tie-break key of the pairs (target i, candidate j): ``mix64(h(i) XOR mix64(h(j)))``.

    ``target``, ``candidate``: broadcastable uint64 arrays of :func:`task_hashes`; a function of
    the pair only, at N hashes instead of one per pair.
    """
    return _mix64(np.asarray(target, np.uint64) ^ _mix64(np.asarray(candidate, np.uint64)))


def rank_candidates(
    sims: np.ndarray,
    target_hashes: np.ndarray,
    candidate_hashes: np.ndarray,
    k: int,
    groups: np.ndarray | None = None,
) -> np.ndarray:
    """Each target's best ``k`` candidates: higher similarity first, ties by the smaller
    :func:`pair_keys` of (target, candidate).

    A table, one row per target (``groups`` None): ``sims, candidate_hashes (R, C);
    target_hashes (R, 1) -> (R, min(k, C))`` column indices, best first.
    A flat list: ``sims, target_hashes, candidate_hashes, groups (E,) -> (E',)`` indices of the
    entries kept, grouped by ascending ``groups`` (the target), best first within each.
    """
    keys = pair_keys(target_hashes, candidate_hashes)
    if groups is None:
        return np.lexsort((keys, -sims), axis=1)[:, :k]
    order = np.lexsort((keys, -sims, groups))
    grouped = groups[order]  # each entry's rank in its group: position less its group's start
    starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]]) if len(order) else order
    return order[np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)])) < k]


def top_neighbours(
    sims: np.ndarray,
    valid: np.ndarray,
    k: int,
    row_hashes: np.ndarray,
    col_hashes: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the ``k`` best valid columns with sim > 0 (clipped to 1), by
    :func:`rank_candidates`; grouped by row, best first.
    Shapes: ``sims, valid (R, C); row_hashes (R,); col_hashes (C,) -> rows (E,), cols (E,)``.
    """
    n_rows, n_cols = sims.shape
    if n_rows == 0 or n_cols == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    masked = np.where(valid, np.minimum(sims, 1.0), -np.inf)
    k = min(k, n_cols)
    kth = np.partition(masked, n_cols - k, axis=1)[:, n_cols - k]
    rows, cols = np.nonzero((masked >= kth[:, None]) & (masked > 0))
    best = rank_candidates(masked[rows, cols], row_hashes[rows], col_hashes[cols], k, rows)
    return rows[best], cols[best]


def top_shared_neighbours(
    col_sims: np.ndarray,
    row_envs: np.ndarray,
    col_envs: np.ndarray,
    k: int,
    row_hashes: np.ndarray,
    col_hashes: np.ndarray,
    *,
    cells: int = SHARED_CELLS,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`top_neighbours` of rows that all see the same similarities ``col_sims`` (C,), a
    column valid for a row when its environment differs, without sorting every pair.

    With M the most columns of one environment, a row's k-th valid value is at least the
    (k + M)-th best overall, so only that prefix counts; per row, the tie block holding its k-th
    valid column is cut by smallest :func:`pair_keys` (an ``argpartition``) and the columns
    picked are ordered by :func:`rank_candidates`, in chunks of at most ``cells``. Output as
    :func:`top_neighbours`.
    """
    empty = np.zeros(0, np.int64), np.zeros(0, np.int64)
    clipped = np.minimum(col_sims, 1.0)
    by_sim = np.argsort(-clipped, kind="stable")
    positive = int(np.count_nonzero(clipped > 0))
    if positive == 0 or row_envs.shape[0] == 0:
        return empty
    most = int(np.unique(col_envs, return_counts=True)[1].max())
    last = clipped[by_sim[min(k + most, positive) - 1]]
    cols = by_sim[: int(np.count_nonzero(clipped >= last))]
    values = clipped[cols]
    block = np.r_[0, np.cumsum(values[1:] != values[:-1])]
    envs, hashes = col_envs[cols], col_hashes[cols]
    take = min(k, cols.shape[0])
    out_rows, out_cols = [empty[0]], [empty[1]]
    step = max(1, cells // cols.shape[0])
    for start in range(0, row_envs.shape[0], step):
        chunk = np.arange(start, min(start + step, row_envs.shape[0]))
        valid = row_envs[chunk][:, None] != envs[None, :]
        counts = np.cumsum(valid, axis=1)
        reaches = counts[:, -1] >= k
        cut = block[np.where(reaches, np.argmax(counts >= k, axis=1), cols.shape[0] - 1)]
        keys = pair_keys(row_hashes[chunk][:, None], hashes[None, :])
        above = block[None, :] < cut[:, None]
        eligible = valid & (block[None, :] <= cut[:, None])
        rank = np.where(valid & above, np.uint64(0), keys)
        rank[~eligible] = np.iinfo(np.uint64).max
        picked = np.argpartition(rank, take - 1, axis=1)[:, :take]
        order = rank_candidates(values[picked], row_hashes[chunk][:, None], hashes[picked], take)
        picked = np.take_along_axis(picked, order, 1)
        chosen = np.take_along_axis(eligible, picked, 1)
        out_rows.append(np.broadcast_to(chunk[:, None], picked.shape)[chosen])
        out_cols.append(cols[picked[chosen]])
    return np.concatenate(out_rows), np.concatenate(out_cols)
