"""Sparse symmetric similarity neighbourhoods for the selector's penalty (spec section 5):
sim(i, j) is the largest similarity of an edge between i and j, 0 without one; one CSR, never N x N.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from envsched_gnn.graph.task_graph import TaskGraph


class SimilarityNeighbours:
    """Row i of the CSR holds the tasks joined to i by an edge, with the edge similarity
    (duplicates kept; :meth:`raise_penalty` folds them with ``max``).

    Args:
        graph: the task graph.
        relations: the relations whose edges count (default both).
    """

    def __init__(self, graph: TaskGraph, relations: Sequence[str] = ("within", "cross")) -> None:
        n = graph.num_tasks
        index_type = np.int32 if n < 2**31 else np.int64
        rows, cols, sims = [], [], []
        for relation in relations:
            e = graph.edges[relation]
            rows += [e.dst, e.src]
            cols += [e.src, e.dst]
            sims += [e.sim, e.sim]
        row = np.concatenate(rows).astype(index_type) if rows else np.zeros(0, index_type)
        col = np.concatenate(cols).astype(index_type) if cols else np.zeros(0, index_type)
        sim = np.concatenate(sims).astype(np.float64) if sims else np.zeros(0, np.float64)
        order = np.argsort(row)
        self.indices = col[order]
        self.sims = sim[order]
        self.indptr = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(row, minlength=n), out=self.indptr[1:])
        self.num_tasks = n

    def row(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """The tasks joined to task ``i`` and the similarities of those edges."""
        start, stop = self.indptr[i], self.indptr[i + 1]
        return self.indices[start:stop], self.sims[start:stop]

    def raise_penalty(self, penalty: np.ndarray, i: int) -> None:
        """After task ``i`` joins the batch: ``penalty[j] = max(penalty[j], sim(i, j))``."""
        cols, sims = self.row(i)
        np.maximum.at(penalty, cols, sims)

    def sim(self, i: int, j: int) -> float:
        """sim(i, j): the largest similarity of an edge between i and j, 0 if none."""
        cols, sims = self.row(i)
        hit = sims[cols == j]
        return float(hit.max()) if hit.size else 0.0
