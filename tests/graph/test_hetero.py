"""The HeteroData loader's sparse adjacency (``adj_t``), built once with the graph."""

import numpy as np
import pytest
import torch
from torch_geometric.data import HeteroData

from envsched_gnn.graph.hetero import add_adjacency, to_hetero_data
from envsched_gnn.graph.task_graph import RelationEdges, TaskGraph


def _graph():
    # targets out of order, and two in-neighbours of b listed c before a
    edges = {
        "within": RelationEdges(
            np.array([2, 1, 0, 3]), np.array([1, 0, 1, 2]), np.array([0.5, 0.25, 0.75, 1.0])
        ),
    }
    return TaskGraph(["a", "b", "c", "d"], ["e", "e", "e", "e"], edges)


def test_adj_t_rows_are_targets_in_edge_list_order():
    data = to_hetero_data(_graph())
    adj_t = data["task", "within", "task"].adj_t
    assert adj_t.layout == torch.sparse_csr and adj_t.dtype == torch.float64
    assert adj_t.crow_indices().tolist() == [0, 1, 3, 4, 4]
    assert adj_t.col_indices().tolist() == [1, 2, 0, 3]  # row b: c then a, as listed
    assert adj_t.values().tolist() == [0.25, 0.5, 0.75, 1.0]
    dense = torch.zeros(4, 4, dtype=torch.float64)
    src, dst = data["task", "within", "task"].edge_index
    dense[dst, src] = data["task", "within", "task"].edge_weight
    assert torch.equal(adj_t.to_dense(), dense)
    cross = data["task", "cross", "task"].adj_t
    assert cross.shape == (4, 4) and cross.values().numel() == 0


def test_hand_built_data_gets_its_adjacency_and_a_missing_relation_an_empty_one():
    data = HeteroData()
    data["task"].num_nodes = 3
    store = data["task", "within", "task"]
    store.edge_index = torch.tensor([[0, 2], [1, 1]])
    store.edge_weight = torch.tensor([0.5, 0.25], dtype=torch.float32)
    assert add_adjacency(data) is data
    assert data["task", "within", "task"].adj_t.dtype == torch.float64
    assert data["task", "cross", "task"].adj_t.crow_indices().tolist() == [0, 0, 0, 0]
    cross = data["task", "cross", "task"].adj_t
    add_adjacency(data)
    assert data["task", "cross", "task"].adj_t is cross


@pytest.mark.parametrize(
    ("edge_index", "edge_weight", "message"),
    [
        ([[0], [3]], [0.5], "edge_index refers to node 3, the graph has 3 task nodes"),
        ([[0], [1]], [0.0], "similarities must be finite and > 0"),
        ([[0], [1]], [float("nan")], "similarities must be finite and > 0"),
        ([[0, 1], [1, 2]], [0.5], r"edge_index must be \(2, E\) and edge_weight \(E,\)"),
        ([[0], [1]], None, "edge_weight .* is missing"),
    ],
)
def test_bad_edges_are_named(edge_index, edge_weight, message):
    data = HeteroData()
    data["task"].num_nodes = 3
    store = data["task", "cross", "task"]
    store.edge_index = torch.tensor(edge_index)
    if edge_weight is not None:
        store.edge_weight = torch.tensor(edge_weight, dtype=torch.float64)
    with pytest.raises(ValueError, match=f"relation 'cross': {message}"):
        add_adjacency(data)
