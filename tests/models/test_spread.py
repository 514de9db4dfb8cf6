"""The spread target: z = 1[v > 0] through spec 4.1-4.5, u_h = E_z, then 4.7, by hand."""

import numpy as np
import pytest

from envsched_gnn.graph.hetero import to_hetero_data
from envsched_gnn.graph.task_graph import TaskGraph
from envsched_gnn.models.analytic import AnalyticPredictor
from envsched_gnn.models.config import PredictorConfig
from envsched_gnn.models.history import spread_indicator
from envsched_gnn.observations import Observation, ObservationLog

# a's within in-neighbours are b (sim 1.0) and c (sim 0.5); x sits in another environment
TASKS = [("a", "e1"), ("b", "e1"), ("c", "e1"), ("x", "e2")]
EDGES = [("b", "a", "within", 1.0), ("c", "a", "within", 0.5)]
# step 0: b's group has spread (z = 1), c's and x's do not (z = 0: all 1, all 0.5)
HISTORY = [("b", 0, (0.0, 1.0)), ("c", 0, (1.0, 1.0)), ("x", 0, (0.5, 0.5))]


def _predict(config, history=HISTORY, step=1):
    graph = TaskGraph.from_edge_rows(TASKS, EDGES)
    log = ObservationLog(graph.task_ids)
    log.extend(Observation(t, s, r) for t, s, r in history)
    return AnalyticPredictor(config).predict(to_hetero_data(graph), log, step), graph.index


def _by_hand(h):
    """E_z of a, b, c, x at step 1 with half-life h, worked out from the spec's formulas."""
    w = 2.0 ** (-1.0 / h)  # w_h(1, 0)
    g = 1.0 / 3.0  # ybar_z(0) over b, c, x = (1 + 0 + 0) / 3; one step, so g_z(1) = ybar_z(0)
    # centred z~ = z - ybar(0) + g = z: b 1, c 0, x 0 (all inside [0, 1])
    g_within_a = (1.0 * w * 1.0 + 0.5 * w * 0.0 + 2.0 * g) / (1.0 * w + 0.5 * w + 2.0)
    e_a = 0.5 * g_within_a + 0.5 * g  # unobserved: E = P; no cross neighbour: G_cross = g
    e_b = (w * 1.0 + 2.0 * g) / (w + 2.0)  # own history, shrunk to P = g
    e_c = (w * 0.0 + 2.0 * g) / (w + 2.0)
    return np.array([e_a, e_b, e_c, e_c])  # x: no neighbours, z = 0 like c


def test_the_spread_target_by_hand():
    prediction, index = _predict(PredictorConfig(target="spread"))
    long, short = _by_hand(8.0), _by_hand(2.0)
    order = [index[t] for t in ("a", "b", "c", "x")]
    np.testing.assert_allclose(prediction.E_z[order], long, rtol=1e-14)
    np.testing.assert_allclose(prediction.u_long[order], long, rtol=1e-14)
    np.testing.assert_allclose(prediction.u_short[order], short, rtol=1e-14)
    u = long - 0.5 * np.maximum(long - short, 0.0)  # 4.7 unchanged
    np.testing.assert_allclose(prediction.u[order], u, rtol=1e-14)
    # the numbers (long half-life): a 0.4012, b 0.5429, c and x 0.2285; c's zero counts for
    # a as an observed neighbour's evidence (W > 0), not as an unobserved one
    assert prediction.E_z[order] == pytest.approx([0.40125, 0.54291, 0.22854, 0.22854], abs=1e-5)
    # q = pr(u): c and x tie at the bottom, a above them, b on top
    np.testing.assert_array_equal(prediction.q[order], [2 / 3, 1.0, 1 / 6, 1 / 6])


def test_the_paper_target_is_unchanged_beside_it():
    paper, _ = _predict(PredictorConfig())
    spread, _ = _predict(PredictorConfig(target="spread"))
    assert paper.E_z is None
    # the channels travel independently: v, m and d are the paper's, bit for bit
    for field in ("E_v", "E_m", "E_d"):
        np.testing.assert_array_equal(getattr(spread, field), getattr(paper, field))
    # a wide spread and a narrow one: the variance ranks them apart, P(v > 0) alike
    wide_and_narrow = [("b", 0, (0.0, 1.0)), ("c", 0, (0.4, 0.5)), ("x", 0, (0.5, 0.5))]
    paper, index = _predict(PredictorConfig(), wide_and_narrow)
    spread, _ = _predict(PredictorConfig(target="spread"), wide_and_narrow)
    assert paper.q[index["b"]] > paper.q[index["c"]]
    assert spread.q[index["b"]] == spread.q[index["c"]] > spread.q[index["x"]]


def test_no_history_gives_the_uninformed_probability():
    prediction, _ = _predict(PredictorConfig(target="spread"), history=[])
    np.testing.assert_array_equal(prediction.E_z, np.full(4, 0.5))
    np.testing.assert_array_equal(prediction.q, np.full(4, 0.5))


def test_z_is_whether_the_rewards_differ():
    np.testing.assert_array_equal(
        spread_indicator(np.array([0.0, 1e-30, 0.25, 0.0])), [0.0, 1.0, 1.0, 0.0]
    )


def test_bad_targets_and_the_evidence_view_are_refused():
    with pytest.raises(ValueError, match=r"PredictorConfig\.target = 'mean', expected one of"):
        PredictorConfig(target="mean")
    with pytest.raises(
        ValueError, match=r"PredictorConfig\.default_z = 1\.5, expected a number in \[0, 1\]"
    ):
        PredictorConfig(target="spread", default_z=1.5)
    graph = TaskGraph.from_edge_rows(TASKS, EDGES)
    log = ObservationLog(graph.task_ids)
    with pytest.raises(ValueError, match="the evidence view accounts for the paper's"):
        AnalyticPredictor(PredictorConfig(target="spread")).explain(
            to_hetero_data(graph), log, 1, "a"
        )
