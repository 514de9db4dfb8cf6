"""The task graph as a PyTorch Geometric ``HeteroData`` (the form the propagation layers read)."""

from __future__ import annotations

import numpy as np

from envsched_gnn.graph.task_graph import RELATIONS, TaskGraph


def to_hetero_data(graph: TaskGraph):
    """Load the graph into a PyTorch Geometric ``HeteroData``, full batch, float64 weights.

    ``data['task'].num_nodes`` is N; ``data['task'].env`` (int64, N) the environment
    index; ``data['task', r, 'task'].edge_index`` (2, E_r) with row 0 the neighbour j
    (source) and row 1 the target i, and ``edge_weight`` (E_r,) float64 the similarity.
    The node order is ``graph.task_ids``; ``data.task_ids`` and ``data.env_names`` keep it.
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
    return data
