"""What the analytic predictor needs from a ``HeteroData`` graph, computed once per graph.

Per relation, the in-neighbour lists sorted by target as CSR (``crow``, ``col``, ``sim``:
row i lists the neighbours j of target i) as NumPy arrays; each step takes from them the
``torch.sparse_csr_tensor`` of the entries whose neighbour is observed (the fused propagation).
"""

from __future__ import annotations

import warnings
import weakref
from dataclasses import dataclass

import numpy as np
import torch

from envsched_gnn.graph.task_graph import RELATIONS


@dataclass(frozen=True)
class RelationCSR:
    """In-neighbours of one relation: ``col[crow[i]:crow[i+1]]`` with similarities ``sim`` (E,)."""

    crow: np.ndarray
    col: np.ndarray
    sim: np.ndarray

    def neighbours(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(j, sim) of the in-neighbours of target i."""
        lo, hi = self.crow[i], self.crow[i + 1]
        return self.col[lo:hi], self.sim[lo:hi]

    def observed_rows(self, observed: np.ndarray) -> tuple[np.ndarray | None, torch.Tensor]:
        """The targets with an ``observed`` (bool (N,)) in-neighbour, and their adjacency.

        Returns ``rows`` (R,) and the (R, N) sparse CSR of those targets' rows, whole: only they
        have an observed neighbour j in N^r_t(i) (spec 4.4), every other target's sum is
        empty. A row keeps all its entries in order (an unobserved j adds sim x 0), so its
        sum is bit for bit the one over the whole graph. ``rows`` is None when more than half
        the targets qualify: then the whole (N, N) adjacency. O(E) bytes and O(N) to find
        them, plus the kept rows' entries.
        """
        num_nodes = self.crow.shape[0] - 1
        whole = _csr_tensor(self.crow, self.col, self.sim, (num_nodes, num_nodes))
        has = np.zeros(num_nodes, bool)
        filled = np.flatnonzero(self.crow[1:] > self.crow[:-1])
        if filled.shape[0]:
            # any over the non-empty rows (the empty rows between two of them hold no entries)
            has[filled] = np.logical_or.reduceat(observed[self.col], self.crow[filled])
        rows = np.flatnonzero(has)
        if 2 * rows.shape[0] > num_nodes:
            return None, whole
        start, counts = self.crow[rows], self.crow[rows + 1] - self.crow[rows]
        crow = np.zeros(rows.shape[0] + 1, np.int64)
        np.cumsum(counts, out=crow[1:])
        entry = np.repeat(start - crow[:-1], counts) + np.arange(crow[-1])
        return rows, _csr_tensor(crow, self.col[entry], self.sim[entry], (rows.shape[0], num_nodes))


@dataclass(frozen=True)
class GraphView:
    """Node count, node order, environments and per-relation CSR of one graph."""

    num_nodes: int
    task_ids: list[str] | None
    env: np.ndarray | None
    env_names: list[str] | None
    relations: dict[str, RelationCSR]


def _key(data) -> tuple:
    parts: list = [id(data), int(data["task"].num_nodes)]
    for relation in RELATIONS:
        edge_type = ("task", relation, "task")
        if edge_type in data.edge_types:
            store = data[edge_type]
            for tensor in (store.edge_index, getattr(store, "edge_weight", None)):
                parts += [id(tensor), getattr(tensor, "_version", None)]
    return tuple(parts)


def _relation_csr(data, relation: str, num_nodes: int) -> RelationCSR:
    edge_type = ("task", relation, "task")
    if edge_type in data.edge_types:
        store = data[edge_type]
        edge_index = store.edge_index.detach().cpu().numpy().astype(np.int64, copy=False)
        weight = getattr(store, "edge_weight", None)
        if weight is None:
            raise ValueError(f"relation {relation!r}: edge_weight (the similarities) is missing")
        sim = weight.detach().cpu().numpy().astype(np.float64, copy=False)
    else:
        edge_index, sim = np.zeros((2, 0), np.int64), np.zeros(0)
    if edge_index.ndim != 2 or edge_index.shape[0] != 2 or sim.shape != (edge_index.shape[1],):
        raise ValueError(
            f"relation {relation!r}: edge_index must be (2, E) and edge_weight (E,), got "
            f"{tuple(edge_index.shape)} and {tuple(sim.shape)}"
        )
    if edge_index.size and (edge_index.min() < 0 or edge_index.max() >= num_nodes):
        raise ValueError(
            f"relation {relation!r}: edge_index refers to node {int(edge_index.max())}, "
            f"the graph has {num_nodes} task nodes"
        )
    if sim.size and not (np.isfinite(sim).all() and sim.min() > 0):
        raise ValueError(f"relation {relation!r}: similarities must be finite and > 0")
    src, dst = edge_index
    order = np.argsort(dst, kind="stable")
    col, sim = np.ascontiguousarray(src[order]), np.ascontiguousarray(sim[order])
    crow = np.zeros(num_nodes + 1, np.int64)
    np.cumsum(np.bincount(dst, minlength=num_nodes), out=crow[1:])
    return RelationCSR(crow, col, sim)


def _csr_tensor(crow: np.ndarray, col: np.ndarray, sim: np.ndarray, size: tuple[int, int]):
    """The ``torch.sparse_csr_tensor`` of ``size`` sharing the memory of its three arrays."""
    with warnings.catch_warnings():
        # torch flags sparse CSR as "beta" on every first use; the layout is what PyG fuses on
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
        return torch.sparse_csr_tensor(
            torch.from_numpy(crow),
            torch.from_numpy(col),
            torch.from_numpy(sim),
            size=size,
            check_invariants=False,
        )


class GraphViewCache:
    """Holds the :class:`GraphView` of the last graph seen, keyed by the data object.

    The key is the object's identity plus the identity and in-place version counter of each
    edge tensor, so replacing or editing the edges of a ``HeteroData`` rebuilds the view.
    """

    def __init__(self) -> None:
        self._ref: weakref.ref | None = None
        self._key: tuple | None = None
        self._view: GraphView | None = None

    def get(self, data) -> GraphView:
        key = _key(data)
        if (
            self._view is not None
            and self._ref is not None
            and self._ref() is data
            and self._key == key
        ):
            return self._view
        num_nodes = int(data["task"].num_nodes)
        env = getattr(data["task"], "env", None)
        view = GraphView(
            num_nodes=num_nodes,
            task_ids=list(data.task_ids) if "task_ids" in data else None,
            env=None if env is None else env.detach().cpu().numpy().astype(np.int64),
            env_names=list(data.env_names) if "env_names" in data else None,
            relations={r: _relation_csr(data, r, num_nodes) for r in RELATIONS},
        )
        if view.task_ids is not None and len(view.task_ids) != num_nodes:
            raise ValueError(
                f"data.task_ids has {len(view.task_ids)} ids for {num_nodes} task nodes"
            )
        self._ref, self._key, self._view = weakref.ref(data), key, view
        return view
