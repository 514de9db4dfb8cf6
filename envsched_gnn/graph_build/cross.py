"""The cross relation's kNN (spec section 3): each target's top ``k_cross`` tasks of other
environments by ``cos(e(a_i), e(a_j))``, exact below the ANN threshold, else approximate.
Embeddings come as the distinct fixed-point vectors ``q`` (U, D) and each node's ``group``
(N,); fixed-point dot products are exact, so this is bit for bit the per-node result.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from envsched_gnn.graph_build.ann import HnswConfig, approximate_cross
from envsched_gnn.graph_build.embeddings import exact_cosines
from envsched_gnn.graph_build.neighbours import top_neighbours

EdgeRow = tuple[str, str, str, float]

CELLS_PER_BLOCK = 32_000_000
"""Target rows x nodes scored at once by the exact kNN (about 1 GB of float64 working arrays):
1,024 rows of the 2,550-100,000-task pools, 32 rows at 1M tasks."""


def cross_neighbours(
    q: np.ndarray,
    env_codes: np.ndarray,
    hashes: np.ndarray,
    targets: Sequence[int],
    k: int,
    *,
    group: np.ndarray | None = None,
    block: int = 1024,
    progress: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact cross in-neighbours of the ``targets`` among all nodes of other environments:
    ``(dst, src, sim)`` grouped by target in the order given, best first.

    ``q``: fixed-point embeddings (N, D), or the distinct vectors (U, D) with ``group`` (N,);
    ``env_codes``: environment per node; ``hashes``: :func:`~.neighbours.task_hashes`. At most
    ``block`` targets and :data:`CELLS_PER_BLOCK` cells at a time.
    """
    from tqdm.auto import tqdm

    targets = np.asarray(targets, np.int64)
    n = env_codes.shape[0]
    block = max(1, min(block, CELLS_PER_BLOCK // max(n, 1)))
    dst, src, sim = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)], [np.zeros(0)]
    starts = range(0, len(targets), block)
    for start in tqdm(starts, desc="cross kNN", unit="block", disable=not progress):
        part = targets[start : start + block]
        if group is None:
            sims = exact_cosines(q[part], q)
        else:
            sims = exact_cosines(q[group[part]], q)[:, group]
        valid = env_codes[part][:, None] != env_codes[None, :]
        found_rows, cols = top_neighbours(sims, valid, k, hashes[part], hashes)
        dst.append(part[found_rows])
        src.append(cols)
        sim.append(np.minimum(sims[found_rows, cols], 1.0))
    return np.concatenate(dst), np.concatenate(src), np.concatenate(sim)


def distinct_groups(vectors: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of ``vectors[codes]``, sorted, and each node's row, ``(T, D), (N,) -> (U, D),
    (N,)``: :func:`~envsched_gnn.graph_build.ann.embedding_groups` without the (N, D) matrix.
    """
    distinct, inverse = np.unique(vectors, axis=0, return_inverse=True)
    used = np.unique(inverse.reshape(-1)[codes])  # rows of vectors no node uses drop out
    renumber = np.full(distinct.shape[0], -1, np.int64)
    renumber[used] = np.arange(used.shape[0])
    return distinct[used], renumber[inverse.reshape(-1)[codes]]


def cross_blocks(
    q: np.ndarray,
    group: np.ndarray,
    env_codes: np.ndarray,
    hashes: np.ndarray,
    k: int,
    *,
    block: int,
    ann_threshold: int,
    hnsw: HnswConfig,
    progress: bool = False,
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Cross in-neighbours of every node, ``(dst, src, sim)`` blocks in node order (about
    ``block`` targets each): exact below ``ann_threshold`` nodes, else the approximate kNN of
    :mod:`~envsched_gnn.graph_build.ann` (and the exact one for the nodes it leaves).

    ``q`` (U, D) the distinct fixed-point vectors of :func:`distinct_groups`, ``group`` (N,).
    """
    n = group.shape[0]
    if n < ann_threshold:
        from tqdm.auto import tqdm

        for start in tqdm(range(0, n, block), desc="cross kNN", unit="block", disable=not progress):
            targets = range(start, min(start + block, n))
            yield cross_neighbours(q, env_codes, hashes, targets, k, group=group, block=block)
        return
    *approximate, left = approximate_cross(q, env_codes, hashes, k, hnsw, group=group)
    exact = cross_neighbours(q, env_codes, hashes, left, k, group=group, block=block)
    dst, src, sim = (np.concatenate(pair) for pair in zip(approximate, exact, strict=True))
    by_target = np.argsort(dst, kind="stable")
    dst, src, sim = dst[by_target], src[by_target], sim[by_target]
    for start in range(0, len(dst), block * k):
        part = slice(start, start + block * k)
        yield dst[part], src[part], sim[part]


def index_rows(
    ids: Sequence[str], dst: np.ndarray, src: np.ndarray, sim: np.ndarray, relation: str
) -> list[EdgeRow]:
    """Index arrays as ``(src id, dst id, relation, sim)`` rows."""
    return [
        (ids[s], ids[d], relation, w)
        for d, s, w in zip(dst.tolist(), src.tolist(), sim.tolist(), strict=True)
    ]
