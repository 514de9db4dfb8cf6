"""The task graph as a PyTorch Geometric ``HeteroData``, with its sparse adjacency built once.

Per relation: ``edge_index``, ``edge_weight``, the float64 CSR ``adj_t`` (row i holds sim_r(i, j)
for its in-neighbours j, as PyG's ``ToSparseTensor`` stores it) and the entries by source
(``source_ptr``, ``source_targets``). Edit the edges and call :func:`add_adjacency` again.
"""

from __future__ import annotations

import warnings

import numpy as np

from envsched_gnn.graph.task_graph import RELATIONS, TaskGraph


def to_hetero_data(graph: TaskGraph):
    """Load the graph into a PyTorch Geometric ``HeteroData``, full batch, float64 weights:
    ``data['task'].env`` (N,); per relation ``edge_index`` (2, E_r) (row 0 the neighbour j),
    ``edge_weight`` (E_r,), ``adj_t`` (:func:`add_adjacency`); node order in ``data.task_ids``.
    """
    import torch
    from torch_geometric.data import HeteroData

    data = HeteroData()
    env_names, env_codes = graph.env_index()
    data["task"].num_nodes = graph.num_tasks
    data["task"].env = torch.from_numpy(env_codes)
    for relation in RELATIONS:
        e = graph.edges[relation]
        store = data["task", relation, "task"]
        store.edge_index = torch.from_numpy(np.stack([e.src, e.dst])).long()
        store.edge_weight = torch.from_numpy(e.sim).double()
    data.task_ids = list(graph.task_ids)
    data.env_names = env_names
    return add_adjacency(data)


def add_adjacency(data):
    """Store ``adj_t`` on each relation's ``('task', r, 'task')`` edges of ``data``; returns it.

    Row i lists target i's in-neighbours in edge-list order (a stable sort by target), so float64
    row sums keep one order; a relation without ``edge_index`` keeps its ``adj_t`` or gets an
    empty one. Checks the edges fit the nodes and similarities are finite and > 0. O(E log E).
    """
    num_nodes = int(data["task"].num_nodes)
    for relation in RELATIONS:
        store = data["task", relation, "task"]
        if "edge_index" in store:
            crow, col, sim = _sorted_by_target(store, relation, num_nodes)
        elif "adj_t" in store:
            continue
        else:
            crow, col, sim = np.zeros(num_nodes + 1, np.int64), np.zeros(0, np.int64), np.zeros(0)
        store.adj_t = csr_tensor(crow, col, sim, (num_nodes, num_nodes))
        store.source_ptr, store.source_targets = _by_source(crow, col, num_nodes)
    return data


def _by_source(crow: np.ndarray, col: np.ndarray, num_nodes: int):
    """The targets of each source j, ``source_targets[source_ptr[j]:source_ptr[j+1]]``
    (int64 tensors): which rows of ``adj_t`` an observed j enters, without a pass over E."""
    import torch

    targets = np.repeat(np.arange(num_nodes, dtype=np.int64), np.diff(crow))
    order = np.argsort(col, kind="stable")
    ptr = np.zeros(num_nodes + 1, np.int64)
    np.cumsum(np.bincount(col, minlength=num_nodes), out=ptr[1:])
    return torch.from_numpy(ptr), torch.from_numpy(np.ascontiguousarray(targets[order]))


def _sorted_by_target(store, relation: str, num_nodes: int):
    """(crow, col, sim) of one relation's edges: ``col[crow[i]:crow[i+1]]`` are i's sources."""
    edge_index = store.edge_index.detach().cpu().numpy().astype(np.int64, copy=False)
    weight = getattr(store, "edge_weight", None)
    if weight is None:
        raise ValueError(f"relation {relation!r}: edge_weight (the similarities) is missing")
    sim = weight.detach().cpu().numpy().astype(np.float64, copy=False)
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
    return crow, col, sim


def csr_tensor(crow: np.ndarray, col: np.ndarray, values: np.ndarray, size: tuple[int, int]):
    """The ``torch.sparse_csr_tensor`` of ``size`` sharing the memory of its three arrays."""
    import torch

    with warnings.catch_warnings():
        # torch flags sparse CSR as "beta" on every first use; the layout is what PyG fuses on
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
        return torch.sparse_csr_tensor(
            torch.from_numpy(crow),
            torch.from_numpy(col),
            torch.from_numpy(values),
            size=size,
            check_invariants=False,
        )
