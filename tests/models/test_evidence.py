import numpy as np
import pytest

from envsched_gnn.graph.hetero import to_hetero_data
from envsched_gnn.graph.task_graph import RELATIONS, TaskGraph
from envsched_gnn.models.analytic import AnalyticPredictor
from envsched_gnn.models.config import Y_NAMES, PredictorConfig
from envsched_gnn.models.explain_table import render
from envsched_gnn.observations import Observation, ObservationLog
from tests.models.test_analytic import HAND_EDGES, HAND_HISTORY, HAND_TASKS, _random_case


def _setup(tasks, edges, history):
    graph = TaskGraph.from_edge_rows(tasks, edges)
    log = ObservationLog(graph.task_ids)
    log.extend(Observation(t, s, r) for t, s, r in history)
    return graph, to_hetero_data(graph), log


@pytest.mark.parametrize("config", [PredictorConfig(), PredictorConfig.cross_only(lambda_g=0.7)])
def test_shares_sum_to_one_and_rebuild_every_estimate(config):
    graph, data, log = _setup(*_random_case(5))
    predictor = AnalyticPredictor(config)
    prediction = predictor.predict(data, log, 6)
    for task_id in graph.task_ids:
        evidence = predictor.explain(data, log, 6, task_id)
        i = graph.index[task_id]
        assert evidence["q"] == prediction.q[i] and evidence["E_v"] == prediction.E_v[i]
        for part in evidence["half_lives"].values():
            prior = dict.fromkeys(Y_NAMES, 0.0)
            for relation in RELATIONS:
                rel = part["relations"][relation]
                shares = [n["share"] for n in rel["neighbours"]]
                assert sum(shares) + rel["global_share"] == pytest.approx(1.0, abs=1e-14)
                assert all(n["W"] > 0 for n in rel["neighbours"])
                for y in Y_NAMES:
                    rebuilt = sum(n["share"] * n[f"y_{y}"] for n in rel["neighbours"])
                    rebuilt += rel["global_share"] * part["g"][y]
                    assert rebuilt == pytest.approx(rel["G"][y], rel=1e-12)
                    prior[y] += rel["weight"] * rel["G"][y]
            assert part["shrink_share"] + part["prior_share"] == pytest.approx(1.0, abs=1e-15)
            for y in Y_NAMES:
                assert prior[y] == pytest.approx(part["prior"][y], rel=1e-12)
                own = part["own_ybar"][y] if part["own_ybar"] else 0.0
                rebuilt = part["shrink_share"] * own + part["prior_share"] * part["prior"][y]
                assert rebuilt == pytest.approx(part["E"][y], rel=1e-12)


def test_explain_lists_own_history_and_observed_neighbours_only():
    _, data, log = _setup(HAND_TASKS, HAND_EDGES, HAND_HISTORY)
    evidence = AnalyticPredictor().explain(data, log, 3, "a0")
    within = evidence["half_lives"]["long"]["relations"]["within"]["neighbours"]
    # a3 is an in-neighbour of a0 but observed only at step 3, which is not before t = 3
    assert {n["task_id"] for n in within} == {"a1", "a2"}
    assert {n["env"] for n in within} == {"A"}
    assert evidence["own_history"] == [] and evidence["own_W"] == 0.0
    b0 = AnalyticPredictor().explain(data, log, 3, "b0")
    assert [row["step"] for row in b0["own_history"]] == [0, 1, 2]
    assert b0["own_history"][-1]["w_long"] == pytest.approx(2.0 ** (-1 / 8))
    text = render(evidence)
    assert "a1" in text and "q=" in text and "within" in text
    with pytest.raises(ValueError, match="unknown task 'nope'"):
        AnalyticPredictor().explain(data, log, 3, "nope")


def test_evidence_rows_have_the_store_format():
    graph, data, log = _setup(HAND_TASKS, HAND_EDGES, HAND_HISTORY)
    predictor = AnalyticPredictor()
    rows = predictor.evidence_rows(data, log, 3)
    assert [row["task_id"] for row in rows] == graph.task_ids
    keys = {"task_id", "q", "u", "u_long", "u_short", "E_v", "E_m", "E_d", "G_within", "G_cross"}
    keys |= {"prior", "own_W", "shrink_share", "rank", "neighbours"}
    assert all(set(row) == keys for row in rows)
    a0 = rows[graph.index["a0"]]
    assert {(n["task_id"], n["relation"]) for n in a0["neighbours"]} == {
        ("a1", "within"),
        ("a2", "within"),
        ("b0", "cross"),
    }
    for n in a0["neighbours"]:
        assert set(n) == {"task_id", "relation", "sim", "W", "y_v", "y_m", "y_d", "share"}
    prediction = predictor.predict(data, log, 3)
    np.testing.assert_array_equal([row["q"] for row in rows], prediction.q)
    assert predictor.evidence_rows(data, log, 3, ["b1"])[0]["task_id"] == "b1"
