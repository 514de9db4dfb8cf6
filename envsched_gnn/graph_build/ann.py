"""Approximate cross kNN for large pools: HNSW candidates over distinct embeddings, exact re-rank.

Tasks with the same fixed-point embedding form a group; an HNSW index (faiss, one thread,
groups in sorted order: deterministic) over the distinct vectors proposes ``ann_candidates``
groups per group, re-ranked by the exact cosine until every environment sees ``k_cross``
candidates, then cut by :func:`~envsched_gnn.graph_build.neighbours.top_neighbours`. A group
whose candidates leave its top in doubt takes the exact path (docs/design.md §3).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from envsched_gnn.graph_build.embeddings import exact_cosines
from envsched_gnn.graph_build.neighbours import top_shared_neighbours
from envsched_gnn.validation import check_bounds


@dataclass(frozen=True)
class HnswConfig:
    """The HNSW index of the approximate cross kNN (faiss ``IndexHNSWFlat``)."""

    m: int = 32
    """Links per node (faiss ``M``)."""
    ef_construction: int = 200
    """Candidate list size while building."""
    ef_search: int = 256
    """Candidate list size while searching (>= ``candidates``)."""
    candidates: int = 64
    """Distinct embeddings retrieved per distinct embedding."""

    def __post_init__(self) -> None:
        names = ("m", "ef_construction", "ef_search", "candidates")
        check_bounds(self, integers=names, at_least=dict.fromkeys(names, 1))


def embedding_groups(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of ``q`` (sorted) and each row's group: ``(N, D) -> (U, D), (N,)``."""
    distinct, inverse = np.unique(q, axis=0, return_inverse=True)
    return distinct, inverse.reshape(-1)


def hnsw_neighbours(vectors: np.ndarray, config: HnswConfig) -> np.ndarray:
    """Indices of the ``config.candidates`` nearest rows of each row (by inner product),
    ``(U, D) -> (U, min(candidates, U))``; -1 where the search found fewer."""
    import faiss

    x = np.ascontiguousarray(vectors, np.float32)
    x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-30)
    count = min(config.candidates, len(x))
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)  # HNSW insertion is deterministic on one thread only
    try:
        index = faiss.IndexHNSWFlat(x.shape[1], config.m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = config.ef_construction
        index.add(x)
    finally:
        faiss.omp_set_num_threads(threads)
    index.hnsw.efSearch = max(config.ef_search, count)
    _, found = index.search(x, count)  # each query searched alone: the same on any thread count
    return found.astype(np.int64)


def approximate_cross(
    q: np.ndarray,
    env_codes: np.ndarray,
    hashes: np.ndarray,
    k: int,
    config: HnswConfig,
    *,
    group: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Cross in-neighbours of every node, ``(dst, src, sim)`` grouped by dst, best first, plus the
    nodes left to the exact path (ascending). Arguments as
    :func:`~envsched_gnn.graph_build.cross.cross_neighbours` (``q`` as :func:`embedding_groups`).
    """
    distinct, group = embedding_groups(q) if group is None else (q, group)
    order = np.argsort(group, kind="stable")
    starts = np.searchsorted(group[order], np.arange(len(distinct) + 1))
    members = [order[starts[g] : starts[g + 1]] for g in range(len(distinct))]
    found = hnsw_neighbours(distinct, config)
    complete = found.shape[1] == len(distinct)  # every search asked for all U groups
    dst, src, sim, exact = [], [], [], []
    for g, row in enumerate(found):
        found_all = complete and bool((row >= 0).all())  # this group's search returned all U
        chosen = _candidate_groups(g, row[row >= 0], distinct, members, env_codes, k, found_all)
        targets = members[g]
        if chosen is None:
            exact.append(targets)
            continue
        groups, group_sims = chosen
        cols = np.concatenate([members[h] for h in groups])
        col_sims = np.repeat(group_sims, [len(members[h]) for h in groups])
        rows, picked = top_shared_neighbours(
            col_sims, env_codes[targets], env_codes[cols], k, hashes[targets], hashes[cols]
        )
        dst.append(targets[rows])
        src.append(cols[picked])
        sim.append(np.minimum(col_sims[picked], 1.0))
    if dst:
        dst_all, src_all, sim_all = np.concatenate(dst), np.concatenate(src), np.concatenate(sim)
    else:
        dst_all = src_all = np.zeros(0, np.int64)
        sim_all = np.zeros(0, np.float64)
    by_target = np.argsort(dst_all, kind="stable")  # keeps best-first within a target
    left = np.sort(np.concatenate(exact)) if exact else np.zeros(0, np.int64)
    return dst_all[by_target], src_all[by_target], sim_all[by_target], left


def _candidate_groups(
    g: int,
    retrieved: np.ndarray,
    distinct: np.ndarray,
    members: Sequence[np.ndarray],
    env_codes: np.ndarray,
    k: int,
    complete: bool,
) -> tuple[np.ndarray, np.ndarray] | None:
    """Groups holding the top ``k`` cross candidates of every task of group ``g``, with exact
    cosines, best first; None when the retrieved groups cannot settle it.
    """
    groups = np.unique(np.r_[g, retrieved])
    sims = np.minimum(exact_cosines(distinct[g : g + 1], distinct[groups])[0], 1.0)
    best = np.lexsort((groups, -sims))
    groups, sims = groups[best], sims[best]
    retrieved_count = len(groups)
    keep = sims > 0
    groups, sims = groups[keep], sims[keep]
    target_envs = np.unique(env_codes[members[g]])
    sizes = np.array([len(members[h]) for h in groups.tolist()], np.int64)
    tasks = [members[h] for h in groups.tolist()]
    envs = env_codes[np.concatenate(tasks)] if tasks else sizes
    position = np.repeat(np.arange(len(groups)), sizes)
    at = np.minimum(np.searchsorted(target_envs, envs), len(target_envs) - 1)
    inside = target_envs[at] == envs  # tasks of candidate group h in one of g's environments
    cells = position[inside] * len(target_envs) + at[inside]
    counts = np.bincount(cells, minlength=len(groups) * len(target_envs))
    outside = sizes[:, None] - counts.reshape(len(groups), len(target_envs))
    enough = np.flatnonzero((np.cumsum(outside, axis=0) >= k).all(axis=1))
    if len(enough) == 0:
        return (groups, sims) if complete else None
    end = int(np.flatnonzero(sims == sims[enough[0]])[-1]) + 1
    if end == retrieved_count and not complete:
        return None  # groups tied with the last one taken may lie beyond the retrieved ones
    return groups[:end], sims[:end]
