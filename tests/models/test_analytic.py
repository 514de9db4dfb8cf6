"""The analytic predictor against a plain-loop transcription of spec section 4."""

import numpy as np
import pytest
from scipy.stats import rankdata

from envsched_gnn.graph.hetero import add_adjacency, to_hetero_data
from envsched_gnn.graph.task_graph import RELATIONS, TaskGraph
from envsched_gnn.models.analytic import AnalyticPredictor
from envsched_gnn.models.calibration import TIE_DECIMALS
from envsched_gnn.models.config import PredictorConfig
from envsched_gnn.models.graph_view import GraphView
from envsched_gnn.observations import Observation, ObservationLog, reward_stats

NAMES = ("v", "m", "d")
UPPER = {"v": 0.25, "m": 1.0, "d": 1.0}


def _pr(values):
    if len(values) == 1:
        return [0.5]
    ranks = rankdata(np.round(values, TIE_DECIMALS), method="average")
    return [(r - 1.0) / (len(values) - 1) for r in ranks]


def loop_reference(num_tasks, edges, observations, step, config):
    """Spec section 4 with loops. edges: (j, i, relation, sim); observations: (i, s, m, v, d)."""
    past = [o for o in observations if o[1] < step]
    defaults = {"v": config.default_v, "m": config.default_m, "d": config.default_d}
    lg, ls = config.lambda_g, config.lambda_s
    out = {}
    for label, h in (("long", config.half_life_long), ("short", config.half_life_short)):

        def w(s, h=h):
            return 2.0 ** (-(step - s) / h)

        steps = sorted({o[1] for o in past})
        ybar_s = {}
        for s in steps:
            rows = [o for o in past if o[1] == s]
            ybar_s[s] = {
                y: sum(o[2 + k] for o in rows) / len(rows) for k, y in enumerate(("m", "v", "d"))
            }
        g = {}
        for y in NAMES:
            if not past:
                g[y] = defaults[y]
            else:
                g[y] = sum(w(s) * ybar_s[s][y] for s in steps) / sum(w(s) for s in steps)
        weight = [0.0] * num_tasks
        weighted = [{y: 0.0 for y in NAMES} for _ in range(num_tasks)]
        for i, s, m, v, d in past:
            weight[i] += w(s)
            for y, value in (("v", v), ("m", m), ("d", d)):
                centred = min(max(value - ybar_s[s][y] + g[y], 0.0), UPPER[y])
                weighted[i][y] += w(s) * centred
        own = [
            {y: weighted[i][y] / weight[i] for y in NAMES} if weight[i] > 0 else None
            for i in range(num_tasks)
        ]
        relation = {}
        for r in RELATIONS:
            relation[r] = []
            for i in range(num_tasks):
                num = {y: lg * g[y] for y in NAMES}
                den = lg
                for j, target, rel, sim in edges:
                    if rel == r and target == i and weight[j] > 0:
                        a = sim * weight[j]
                        for y in NAMES:
                            num[y] += a * own[j][y]
                        den += a
                relation[r].append({y: num[y] / den for y in NAMES})
        estimate = []
        for i in range(num_tasks):
            prior = {
                y: sum(config.relation_weights[r] * relation[r][i][y] for r in RELATIONS)
                for y in NAMES
            }
            if weight[i] > 0:
                estimate.append(
                    {y: (weight[i] * own[i][y] + ls * prior[y]) / (weight[i] + ls) for y in NAMES}
                )
            else:
                estimate.append(prior)
        e_v = [e["v"] for e in estimate]
        f = [e["d"] * e["m"] * (1 - e["m"]) for e in estimate]
        pr_v, pr_f = _pr(e_v), _pr(f)
        u = [
            float(
                np.quantile(
                    e_v,
                    config.weight_variance_rank * pr_v[i]
                    + config.weight_reconstructed_rank * pr_f[i],
                )
            )
            for i in range(num_tasks)
        ]
        out[label] = {"G": relation, "E": estimate, "u": u, "g": g, "W": weight}
    u = [
        ul - config.eta * max(ul - us, 0.0)
        for ul, us in zip(out["long"]["u"], out["short"]["u"], strict=True)
    ]
    out["u"] = u
    out["q"] = _pr(u)
    return out


HAND_TASKS = [
    ("a0", "A"),
    ("a1", "A"),
    ("a2", "A"),
    ("a3", "A"),
    ("b0", "B"),
    ("b1", "B"),
    ("b2", "B"),
    ("c0", "C"),
]
HAND_EDGES = [
    ("a1", "a0", "within", 0.8),
    ("a2", "a0", "within", 0.6),
    ("a3", "a0", "within", 0.4),
    ("a0", "a1", "within", 0.8),
    ("a2", "a1", "within", 0.5),
    ("a0", "a3", "within", 0.4),
    ("b1", "b0", "within", 0.7),
    ("b2", "b0", "within", 0.3),
    ("b0", "b1", "within", 0.7),
    ("b0", "a0", "cross", 0.5),
    ("b1", "a1", "cross", 0.45),
    ("a1", "b0", "cross", 0.5),
    ("b2", "a2", "cross", 0.6),
    ("b1", "a2", "cross", 0.2),
]
# a0 is never observed but has observed neighbours; a3 is observed only at step 3 (ignored
# at t = 3) and its only neighbour a0 is unobserved; b2 and c0 have no observed neighbour
# and no history, so they tie.
HAND_HISTORY = [
    ("a1", 0, (0.0, 1.0, 1.0, 0.0)),
    ("a1", 2, (1.0, 1.0, 1.0, 0.0)),
    ("a2", 1, (0.5, 0.5, 0.0, 1.0)),
    ("b0", 0, (0.0, 0.0, 0.0, 0.0)),
    ("b0", 1, (0.0, 0.0, 1.0, 0.0)),
    ("b0", 2, (0.2, 0.4, 0.6, 0.8)),
    ("b1", 2, (1.0, 1.0, 1.0, 1.0)),
    ("a3", 3, (0.0, 1.0, 0.0, 1.0)),
]

CONFIGS = {
    "default": PredictorConfig(),
    "within_only": PredictorConfig.within_only(),
    "cross_only": PredictorConfig.cross_only(),
    "half_lives_4_1": PredictorConfig(half_life_long=4.0, half_life_short=1.0),
    "lambdas_0.5_5": PredictorConfig(lambda_g=0.5, lambda_s=5.0),
    "no_decline_penalty": PredictorConfig(eta=0.0),
    "variance_rank_only": PredictorConfig(weight_variance_rank=1.0, weight_reconstructed_rank=0.0),
}


def _random_case(seed, num_tasks=40, num_steps=6, per_step=7):
    rng = np.random.default_rng(seed)
    tasks = [(f"t{i}", f"e{i % 4}") for i in range(num_tasks)]
    edges = []
    for i in range(num_tasks):
        same = [j for j in range(num_tasks) if j != i and j % 4 == i % 4]
        other = [j for j in range(num_tasks) if j % 4 != i % 4]
        for j in rng.choice(same, 3, replace=False):
            edges.append((f"t{j}", f"t{i}", "within", float(rng.uniform(0.1, 1.0))))
        for j in rng.choice(other, 4, replace=False):
            edges.append((f"t{j}", f"t{i}", "cross", float(rng.uniform(0.1, 1.0))))
    history = []
    for s in range(num_steps):
        for i in rng.choice(num_tasks, per_step, replace=False):
            rewards = tuple(float(x) for x in rng.choice([0.0, 0.25, 0.5, 1.0], size=4))
            history.append((f"t{i}", s, rewards))
    return tasks, edges, history


CASES = {
    "hand": (HAND_TASKS, HAND_EDGES, HAND_HISTORY, 3),
    "no_history": (HAND_TASKS, HAND_EDGES, [], 3),
    "single_step": (HAND_TASKS, HAND_EDGES, [o for o in HAND_HISTORY if o[1] == 2], 3),
    "no_cross_edges": (HAND_TASKS, [e for e in HAND_EDGES if e[2] == "within"], HAND_HISTORY, 4),
    "single_task": ([("solo", "S")], [], [("solo", 0, (0.0, 1.0))], 1),
    "random": (*_random_case(7), 6),
}


def _run(tasks, edge_rows, history, step, config):
    graph = TaskGraph.from_edge_rows(tasks, edge_rows)
    log = ObservationLog(graph.task_ids)
    log.extend(Observation(t, s, r) for t, s, r in history)
    prediction = AnalyticPredictor(config).predict(to_hetero_data(graph), log, step)
    index = graph.index
    edges = [(index[s], index[d], r, sim) for s, d, r, sim in edge_rows]
    observations = [(index[t], s, *reward_stats(r)) for t, s, r in history]
    return prediction, loop_reference(len(tasks), edges, observations, step, config)


@pytest.mark.parametrize("config_name", list(CONFIGS))
@pytest.mark.parametrize("case", list(CASES))
def test_prediction_matches_loop_reference(case, config_name):
    prediction, expected = _run(*CASES[case], CONFIGS[config_name])
    close = {"rtol": 1e-12, "atol": 1e-15}
    np.testing.assert_allclose(prediction.E_v, [e["v"] for e in expected["long"]["E"]], **close)
    np.testing.assert_allclose(prediction.E_m, [e["m"] for e in expected["long"]["E"]], **close)
    np.testing.assert_allclose(prediction.E_d, [e["d"] for e in expected["long"]["E"]], **close)
    np.testing.assert_allclose(prediction.u_long, expected["long"]["u"], **close)
    np.testing.assert_allclose(prediction.u_short, expected["short"]["u"], **close)
    np.testing.assert_allclose(prediction.u, expected["u"], **close)
    np.testing.assert_allclose(prediction.q, expected["q"], **close)
    for field in ("q", "u", "u_long", "u_short", "E_v", "E_m", "E_d"):
        assert getattr(prediction, field).dtype == np.float64


def test_hand_case_special_tasks():
    graph = TaskGraph.from_edge_rows(HAND_TASKS, HAND_EDGES)
    prediction, expected = _run(HAND_TASKS, HAND_EDGES, HAND_HISTORY, 3, PredictorConfig())
    i = graph.index
    g = expected["long"]["g"]
    # no observed neighbour under either relation and no history: E = g exactly
    for task in ("b2", "c0", "a3"):
        assert prediction.E_v[i[task]] == pytest.approx(g["v"], rel=1e-14)
    # b2 and c0 tie on everything, so they share an average rank
    assert prediction.q[i["b2"]] == prediction.q[i["c0"]]
    # a0 was never sampled but its observed neighbours move it away from g
    assert prediction.E_v[i["a0"]] != pytest.approx(g["v"], rel=1e-6)


def test_no_history_gives_defaults_and_ties_everywhere():
    prediction, _ = _run(HAND_TASKS, HAND_EDGES, [], 3, PredictorConfig())
    np.testing.assert_array_equal(prediction.E_v, np.full(8, 0.125))
    np.testing.assert_array_equal(prediction.E_m, np.full(8, 0.5))
    np.testing.assert_array_equal(prediction.q, np.full(8, 0.5))


def test_future_observations_are_ignored():
    base, _ = _run(HAND_TASKS, HAND_EDGES, HAND_HISTORY, 3, PredictorConfig())
    future = [*HAND_HISTORY, ("c0", 3, (0.0, 1.0)), ("b2", 7, (1.0, 0.0))]
    later, _ = _run(HAND_TASKS, HAND_EDGES, future, 3, PredictorConfig())
    for field in ("q", "u", "E_v", "E_m", "E_d"):
        np.testing.assert_array_equal(getattr(base, field), getattr(later, field))


def test_bit_reproducible():
    tasks, edges, history = _random_case(11, num_tasks=200, num_steps=20, per_step=30)
    first, _ = _run(tasks, edges, history, 20, PredictorConfig())
    second, _ = _run(tasks, edges, history, 20, PredictorConfig())
    for field in ("q", "u", "u_long", "u_short", "E_v", "E_m", "E_d"):
        assert np.array_equal(getattr(first, field), getattr(second, field))


def test_the_adjacency_is_the_graphs_and_rebuilt_only_with_the_graph():
    graph = TaskGraph.from_edge_rows(HAND_TASKS, HAND_EDGES)
    data = to_hetero_data(graph)
    log = ObservationLog(graph.task_ids)
    log.extend(Observation(t, s, r) for t, s, r in HAND_HISTORY)
    predictor = AnalyticPredictor()
    first = predictor.predict(data, log, 3)
    # each step reads the adj_t built with the HeteroData, without a copy
    within = GraphView.of(data).relations["within"]
    assert within.adj_t is data["task", "within", "task"].adj_t
    assert np.shares_memory(within.sim, data["task", "within", "task"].adj_t.values().numpy())
    data["task", "within", "task"].edge_weight.mul_(0.5)
    add_adjacency(data)
    second = predictor.predict(data, log, 3)
    assert GraphView.of(data).relations["within"].adj_t is not within.adj_t
    assert not np.array_equal(first.E_v, second.E_v)
    halved = TaskGraph.from_edge_rows(
        HAND_TASKS, [(j, i, r, sim * 0.5 if r == "within" else sim) for j, i, r, sim in HAND_EDGES]
    )
    assert np.array_equal(predictor.predict(to_hetero_data(halved), log, 3).E_v, second.E_v)


def test_a_hand_built_hetero_data_needs_its_adjacency():
    graph = TaskGraph.from_edge_rows(HAND_TASKS, HAND_EDGES)
    data = to_hetero_data(graph)
    log = ObservationLog(graph.task_ids)
    log.extend(Observation(t, s, r) for t, s, r in HAND_HISTORY)
    expected = AnalyticPredictor().predict(data, log, 3)
    del data["task", "cross", "task"].adj_t
    with pytest.raises(ValueError, match="'cross'.*no adj_t.*add_adjacency"):
        AnalyticPredictor().predict(data, log, 3)
    assert np.array_equal(AnalyticPredictor().predict(add_adjacency(data), log, 3).q, expected.q)


def test_empty_graph_and_bad_inputs():
    empty = AnalyticPredictor().predict(to_hetero_data(TaskGraph([], [])), ObservationLog([]), 0)
    assert empty.q.shape == (0,)
    graph = TaskGraph.from_edge_rows(HAND_TASKS, HAND_EDGES)
    with pytest.raises(ValueError, match="task ids"):
        AnalyticPredictor().predict(to_hetero_data(graph), ObservationLog(["x"]), 1)
    with pytest.raises(ValueError, match="step"):
        AnalyticPredictor().predict(to_hetero_data(graph), ObservationLog(graph.task_ids), -1)
    with pytest.raises(
        ValueError,
        match=r"PredictorConfig\.relation_weights = \{'within': 0\.5, 'cross': 0\.6\}, "
        r"expected weights that sum to 1",
    ):
        PredictorConfig(relation_weights={"within": 0.5, "cross": 0.6})
