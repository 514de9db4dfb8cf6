"""The graph.json snapshot (spec section 8) and its HeteroData view."""

import json

import pytest
import torch

from envsched_gnn.graph.hetero import to_hetero_data
from envsched_gnn.graph.task_graph import GraphError, TaskGraph, read_graph, write_graph

TASKS = [("a", "e1"), ("b", "e1"), ("c", "e2")]


def test_round_trip_and_hetero_data(tmp_path):
    graph = TaskGraph.from_edge_rows(TASKS, [("a", "b", "within", 0.5), ("c", "a", "cross", 0.25)])
    write_graph(tmp_path / "graph.json", graph)
    again = read_graph(tmp_path / "graph.json")
    assert again.task_ids == ["a", "b", "c"]
    assert sorted(again.edge_rows()) == sorted(graph.edge_rows())
    data = to_hetero_data(again)
    assert data["task"].num_nodes == 3
    assert data["task"].env.tolist() == [0, 0, 1]
    within = data["task", "within", "task"]
    assert within.edge_index.tolist() == [[0], [1]]
    assert within.edge_weight.dtype == torch.float64
    assert data["task", "cross", "task"].edge_weight.tolist() == [0.25]


@pytest.mark.parametrize(
    ("edge", "message"),
    [
        (("a", "zz", "within", 0.5), "unknown task 'zz'"),
        (("a", "b", "friends", 0.5), "relation 'friends'"),
        (("a", "b", "within", 0.0), r"outside \(0, 1\]"),
        (("a", "b", "within", float("nan")), "not a finite number"),
        (("a", "a", "within", 0.3), "self-loop"),
    ],
)
def test_bad_edges_are_named(tmp_path, edge, message):
    src, dst, relation, sim = edge
    data = {
        "tasks": [{"id": t, "env": e} for t, e in TASKS],
        "edges": [{"src": src, "dst": dst, "relation": relation, "sim": sim}],
    }
    path = tmp_path / "graph.json"
    path.write_text(json.dumps(data))
    with pytest.raises(GraphError, match=message):
        read_graph(path)


def test_duplicate_tasks_and_missing_fields(tmp_path):
    with pytest.raises(GraphError, match="duplicate task id 'a'"):
        TaskGraph(["a", "a"], ["e", "e"])
    path = tmp_path / "g.json"
    path.write_text(json.dumps({"tasks": [{"id": "a"}], "edges": []}))
    with pytest.raises(GraphError, match="g.json: .*missing or malformed field 'env'"):
        read_graph(path)


def test_a_subgraph_keeps_its_tasks_in_order_and_the_edges_between_them():
    rows = [("a", "b", "within", 0.5), ("c", "a", "cross", 0.25), ("b", "c", "cross", 0.75)]
    graph = TaskGraph.from_edge_rows(TASKS, rows)
    sub = graph.subgraph(["c", "a"])
    assert (sub.task_ids, sub.env_ids) == (["a", "c"], ["e1", "e2"])
    assert list(sub.edge_rows()) == [("c", "a", "cross", 0.25)]
    with pytest.raises(GraphError, match=r"task\(s\) \['zz'\] .*not nodes of the graph"):
        graph.subgraph(["a", "zz"])
