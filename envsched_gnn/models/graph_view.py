"""What the predictors read from a ``HeteroData`` graph: NumPy views of its ``adj_t``
(``crow``, ``col``, ``sim`` per relation), no copy, so a :class:`GraphView` per step is O(1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from envsched_gnn.graph.hetero import csr_tensor
from envsched_gnn.graph.task_graph import RELATIONS


@dataclass(frozen=True)
class RelationCSR:
    """In-neighbours of one relation, ``col[crow[i]:crow[i+1]]`` with ``sim``; views of adj_t."""

    crow: np.ndarray
    col: np.ndarray
    sim: np.ndarray
    adj_t: torch.Tensor
    source_ptr: np.ndarray | None = None
    source_targets: np.ndarray | None = None

    @classmethod
    def of(cls, adj_t: torch.Tensor, by_source=None) -> RelationCSR:
        ptr, targets = by_source if by_source is not None else (None, None)
        return cls(
            adj_t.crow_indices().numpy(),
            adj_t.col_indices().numpy(),
            adj_t.values().numpy(),
            adj_t,
            None if ptr is None else ptr.numpy(),
            None if targets is None else targets.numpy(),
        )

    def neighbours(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(j, sim) of the in-neighbours of target i."""
        lo, hi = self.crow[i], self.crow[i + 1]
        return self.col[lo:hi], self.sim[lo:hi]

    def observed_rows(self, observed: np.ndarray) -> tuple[np.ndarray | None, torch.Tensor]:
        """The targets with an ``observed`` (bool (N,)) in-neighbour, and their adjacency.

        Returns ``rows`` (R,) and those targets' whole rows of ``adj_t`` as an (R, N) CSR, so each
        row's sum is bit for bit the one over the whole graph (every other target's sum is empty);
        ``rows`` is None, with the whole ``adj_t``, when more than half the targets qualify.
        """
        num_nodes = self.crow.shape[0] - 1
        rows = self._rows_entered_by(observed)
        if rows is None:
            has = np.zeros(num_nodes, bool)
            filled = np.flatnonzero(self.crow[1:] > self.crow[:-1])
            if filled.shape[0]:
                # any over the non-empty rows (the empty rows between two of them hold none)
                has[filled] = np.logical_or.reduceat(observed[self.col], self.crow[filled])
            rows = np.flatnonzero(has)
        if 2 * rows.shape[0] > num_nodes:
            return None, self.adj_t
        start, counts = self.crow[rows], self.crow[rows + 1] - self.crow[rows]
        crow = np.zeros(rows.shape[0] + 1, np.int64)
        np.cumsum(counts, out=crow[1:])
        entry = np.repeat(start - crow[:-1], counts) + np.arange(crow[-1])
        return rows, csr_tensor(crow, self.col[entry], self.sim[entry], (rows.shape[0], num_nodes))

    def _rows_entered_by(self, observed: np.ndarray) -> np.ndarray | None:
        """The targets of the observed sources (sorted, distinct) from the by-source index,
        O(observed entries); None without the index or when most nodes are observed."""
        if self.source_ptr is None:
            return None
        sources = np.flatnonzero(observed)
        if 8 * sources.shape[0] > observed.shape[0]:
            return None
        start = self.source_ptr[sources]
        counts = self.source_ptr[sources + 1] - start
        offsets = np.cumsum(counts) - counts
        entry = np.repeat(start - offsets, counts) + np.arange(int(counts.sum()))
        return np.unique(self.source_targets[entry])


@dataclass(frozen=True)
class GraphView:
    """Node count, node order, environments and per-relation CSR of one graph."""

    num_nodes: int
    task_ids: list[str] | None
    env: np.ndarray | None
    env_names: list[str] | None
    relations: dict[str, RelationCSR]

    @classmethod
    def of(cls, data) -> GraphView:
        """The view of ``data``; both relations need the ``adj_t`` of ``add_adjacency``."""
        # tens of microseconds a step: PyG's attribute lookups and tensor -> NumPy views
        task = data["task"]
        num_nodes = int(task.num_nodes)
        env = getattr(task, "env", None)
        view = cls(
            num_nodes=num_nodes,
            task_ids=getattr(data, "task_ids", None),
            env=None if env is None else env.cpu().numpy().astype(np.int64, copy=False),
            env_names=getattr(data, "env_names", None),
            relations={r: _relation(data, r, num_nodes) for r in RELATIONS},
        )
        if view.task_ids is not None and len(view.task_ids) != num_nodes:
            raise ValueError(
                f"data.task_ids has {len(view.task_ids)} ids for {num_nodes} task nodes"
            )
        return view


def _relation(data, relation: str, num_nodes: int) -> RelationCSR:
    edge_type = ("task", relation, "task")
    adj_t = getattr(data[edge_type], "adj_t", None) if edge_type in data.edge_types else None
    if adj_t is None:
        raise ValueError(
            f"relation {relation!r}: data{edge_type} has no adj_t; load the graph with "
            "envsched_gnn.graph.hetero.to_hetero_data, or call add_adjacency(data) on a "
            "HeteroData built by hand"
        )
    if adj_t.layout != torch.sparse_csr or tuple(adj_t.shape) != (num_nodes, num_nodes):
        raise ValueError(
            f"relation {relation!r}: adj_t must be a ({num_nodes}, {num_nodes}) sparse CSR "
            f"tensor, got {adj_t.layout} of shape {tuple(adj_t.shape)}"
        )
    if adj_t.dtype != torch.float64:
        raise ValueError(f"relation {relation!r}: adj_t must be float64, got {adj_t.dtype}")
    store = data[edge_type]
    ptr, targets = getattr(store, "source_ptr", None), getattr(store, "source_targets", None)
    by_source = None if ptr is None or targets is None else (ptr.cpu(), targets.cpu())
    return RelationCSR.of(adj_t.cpu(), by_source)
