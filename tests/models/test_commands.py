import json

import numpy as np
import pytest

from envsched_gnn.cli import main
from envsched_gnn.graph.hetero import to_hetero_data
from envsched_gnn.graph.task_graph import TaskGraph, write_graph
from envsched_gnn.models.analytic import AnalyticPredictor
from envsched_gnn.observations import Observation, ObservationLog, write_history
from tests.models.test_analytic import HAND_EDGES, HAND_HISTORY, HAND_TASKS


@pytest.fixture
def snapshot(tmp_path):
    graph = TaskGraph.from_edge_rows(HAND_TASKS, HAND_EDGES)
    observations = [Observation(t, s, r) for t, s, r in HAND_HISTORY]
    write_graph(tmp_path / "graph.json", graph)
    write_history(tmp_path / "history.jsonl", observations)
    log = ObservationLog(graph.task_ids)
    log.extend(observations)
    return tmp_path, graph, log


def test_predict_round_trip(snapshot):
    folder, graph, log = snapshot
    out = folder / "out" / "pred.json"
    args = [
        "predict",
        "--graph",
        str(folder / "graph.json"),
        "--history",
        str(folder / "history.jsonl"),
    ]
    assert main([*args, "--step", "3", "--out", str(out)]) == 0
    written = json.loads(out.read_text())
    expected = AnalyticPredictor().predict(to_hetero_data(graph), log, 3)
    assert list(written) == graph.task_ids
    for field in ("q", "u", "u_long", "u_short", "E_v", "E_m", "E_d"):
        np.testing.assert_array_equal(
            [written[t][field] for t in graph.task_ids], getattr(expected, field)
        )


def test_predict_bad_history_writes_nothing(snapshot, capsys):
    folder, _, _ = snapshot
    (folder / "bad.jsonl").write_text('{"task_id": "zz", "step": 0, "rewards": [1.0]}\n')
    out = folder / "pred.json"
    args = [
        "predict",
        "--graph",
        str(folder / "graph.json"),
        "--history",
        str(folder / "bad.jsonl"),
    ]
    assert main([*args, "--step", "1", "--out", str(out)]) == 2
    assert "unknown task 'zz'" in capsys.readouterr().err
    assert not out.exists()


def test_predict_small_groups_and_huge_steps(snapshot, capsys):
    folder, graph, _ = snapshot
    history = (folder / "history.jsonl").read_text()
    single = json.dumps({"task_id": graph.task_ids[0], "step": 2, "rewards": [1.0]})
    (folder / "mixed.jsonl").write_text(history + single + "\n")
    base = ["predict", "--graph", str(folder / "graph.json"), "--step", "3"]
    mixed = [*base, "--history", str(folder / "mixed.jsonl")]
    assert main([*mixed, "--out", str(folder / "x.json")]) == 2
    assert "1 reward(s), fewer than 2" in capsys.readouterr().err
    assert main([*mixed, "--small-groups", "ignore", "--out", str(folder / "ignored.json")]) == 0
    plain = [*base, "--history", str(folder / "history.jsonl"), "--out", str(folder / "p.json")]
    assert main(plain) == 0
    assert json.loads((folder / "ignored.json").read_text()) == json.loads(
        (folder / "p.json").read_text()
    )
    # a step of 2,000,000,000 once made predict allocate 14.9 GiB
    far = [json.loads(line) for line in history.splitlines()]
    for row in far:
        row["step"] += 2_000_000_000
    (folder / "far.jsonl").write_text("".join(json.dumps(row) + "\n" for row in far))
    shifted = ["--history", str(folder / "far.jsonl"), "--out", str(folder / "far.json")]
    assert main([*base[:-1], "2000000003", *shifted]) == 0
    assert json.loads((folder / "far.json").read_text()) == json.loads(
        (folder / "p.json").read_text()
    )


def test_explain_table_and_json(snapshot, capsys):
    folder, _, _ = snapshot
    files = ["--graph", str(folder / "graph.json"), "--history", str(folder / "history.jsonl")]
    assert main(["explain", "a0", "--step", "3", *files]) == 0
    table = capsys.readouterr().out
    assert "task a0 (env A) at step 3" in table and "a1" in table and "shrinkage share" in table
    assert main(["explain", "a0", "--step", "3", *files, "--json"]) == 0
    evidence = json.loads(capsys.readouterr().out)
    assert evidence["task_id"] == "a0" and evidence["own_W"] == 0.0
    assert main(["explain", "nope", "--step", "3", *files]) == 2
    assert "unknown task 'nope'" in capsys.readouterr().err
    assert main(["explain", "a0", "--step", "3", "--graph", str(folder / "graph.json")]) == 2
    assert main(["explain", "a0", "--step", "3", *files, "--store-evidence"]) == 2


@pytest.mark.store
def test_explain_from_the_store_stores_the_evidence(store, store_server, monkeypatch, capsys):
    graph = TaskGraph.from_edge_rows(HAND_TASKS, HAND_EDGES)
    store.write_graph(graph)
    store.write_observations(Observation(t, s, r) for t, s, r in HAND_HISTORY)
    monkeypatch.setenv("NEO4J_USER", store_server.auth[0])
    monkeypatch.setenv("NEO4J_PASSWORD", store_server.auth[1])
    monkeypatch.setenv("NEO4J_DATABASE", store_server.database)
    args = [
        "explain",
        "a0",
        "--step",
        "3",
        "--store",
        store_server.uri,
        "--json",
        "--store-evidence",
    ]
    assert main(args) == 0
    evidence = json.loads(capsys.readouterr().out)
    stored = store.prediction_evidence("a0", 3)
    assert {(row["task_id"], row["relation"]) for row in stored} == {
        ("a1", "within"),
        ("a2", "within"),
        ("b0", "cross"),
    }
    shares = {
        n["task_id"]: n["share"]
        for n in evidence["half_lives"]["long"]["relations"]["within"]["neighbours"]
    }
    assert {
        row["task_id"]: row["share"] for row in stored if row["relation"] == "within"
    } == pytest.approx(shares)
    assert store.read_prediction("a0", 3)["q"] == pytest.approx(evidence["q"])
    assert store.count_nodes("Prediction") == len(HAND_TASKS)
