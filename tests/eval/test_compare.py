"""compare-predictors on hand-made histories with a known answer."""

import json
import math

import numpy as np
import pytest

from envsched_gnn.cli import main
from envsched_gnn.eval.compare import compare_predictors, score_predictions
from envsched_gnn.graph.task_graph import TaskGraph, write_graph
from envsched_gnn.models.analytic import AnalyticPredictor
from envsched_gnn.observations import Observation, write_history

TASKS = [(f"t{i}", "e0" if i < 3 else "e1") for i in range(5)]


def group(variance: float) -> tuple[float, ...]:
    """Four rewards with mean 0.5 and population variance ``variance``."""
    a = math.sqrt(variance)
    return (0.5 - a, 0.5 + a, 0.5 - a, 0.5 + a)


def hand_made(order_at_step1: list[int]) -> tuple[TaskGraph, list[Observation]]:
    """No edges; step 0: t_i shows variance 0.01 (i + 1); step 1: the variances permuted."""
    graph = TaskGraph.from_edge_rows(TASKS, [])
    variances = [0.01 * (i + 1) for i in range(5)]
    observations = [Observation(f"t{i}", 0, group(variances[i])) for i in range(5)]
    observations += [Observation(f"t{i}", 1, group(variances[order_at_step1[i]])) for i in range(5)]
    return graph, observations


@pytest.mark.parametrize(
    ("order", "expected"),
    [
        ([0, 1, 2, 3, 4], 1.0),  # same order: rho = 1
        ([1, 0, 2, 3, 4], 0.9),  # one adjacent swap: 1 - 6 * 2 / (5 * 24)
        ([4, 3, 2, 1, 0], -1.0),  # reversed
        ([2, 0, 4, 1, 3], 0.3),  # d = (2, 1, 2, 2, 1): 1 - 6 * 14 / 120
    ],
)
def test_spearman_of_the_analytic_replay(order, expected):
    # Without edges the analytic u is monotone in each task's own step-0 variance (m = 0.5
    # for all, d = v / 0.25), so its Spearman at step 1 is that of the two orders.
    graph, observations = hand_made(order)
    comparison = compare_predictors(graph, observations, {"analytic": AnalyticPredictor()})
    assert comparison.steps == [0, 1]
    assert math.isnan(comparison.per_step["analytic"][0]["spearman"])  # no history: constant
    assert comparison.per_step["analytic"][1]["spearman"] == pytest.approx(expected)


def test_metric_definitions_on_hand_made_numbers():
    predicted = np.array([0.4, 0.3, 0.2, 0.1, 0.0, 0.05, 0.02, 0.01])
    observed = np.array([0.2, 0.0, 0.1, 0.0, 0.0, 0.3, 0.0, 0.0])
    scores = score_predictions(predicted, observed)
    assert scores["mae"] == pytest.approx(np.mean(np.abs(predicted - observed)))
    # top 2 by prediction: tasks 0, 1; threshold = 2nd largest observed = 0.2 -> hits 1 of 2
    assert scores["precision_top25"] == 0.5
    # positives (0.4, 0.2, 0.05) vs negatives (0.3, 0.1, 0.0, 0.02, 0.01): 12 of 15 pairs won
    assert scores["auc"] == pytest.approx(12 / 15)


def test_cli_writes_table_json_and_plot(tmp_path, capsys):
    graph, observations = hand_made([1, 0, 2, 3, 4])
    observations += [Observation(f"t{i}", 2, group(0.01 * (i + 1))) for i in range(5)]
    write_graph(tmp_path / "graph.json", graph)
    write_history(tmp_path / "history.jsonl", observations)
    out = tmp_path / "cmp"
    code = main(
        [
            "eval",
            "compare-predictors",
            "--history",
            str(tmp_path / "history.jsonl"),
            "--graph",
            str(tmp_path / "graph.json"),
            "--out",
            str(out),
        ]
    )
    assert code == 0
    assert "| analytic | overall |" in capsys.readouterr().out
    result = json.loads((out / "compare.json").read_text())
    assert set(result["overall"]) == {"analytic", "learned"}
    assert result["per_step"]["analytic"][1]["spearman"] == pytest.approx(0.9)
    assert (out / "compare.png").stat().st_size > 0 and (out / "compare.md").exists()


def test_cli_replays_one_round_spread_over_steps(tmp_path, capsys):
    from tests.models.variance_world import N_ENVS, PER_ENV, world

    graph, observations = world(seed=2, shared=True)
    write_graph(tmp_path / "graph.json", graph)
    write_history(tmp_path / "history.jsonl", observations)
    out = tmp_path / "replay"
    argv = ["eval", "compare-predictors", "--history", str(tmp_path / "history.jsonl")]
    argv += ["--graph", str(tmp_path / "graph.json"), "--replay-steps", "4"]
    assert main([*argv, "--replay-round", "1", "--learned-steps", "1", "--out", str(out)]) == 0
    result = json.loads((out / "compare.json").read_text())
    assert result["steps"] == [0, 1, 2, 3] and sum(result["n_tasks"]) == N_ENVS * PER_ENV
    replay = [json.loads(line) for line in (out / "replay_history.jsonl").read_text().splitlines()]
    round_b = {o.task_id: list(o.rewards) for o in observations if o.step == 1}
    assert {r["task_id"]: r["rewards"] for r in replay} == round_b
    assert min(result["per_step"]["analytic"][k]["spearman"] for k in (1, 2, 3)) > 0.3
    assert main([*argv, "--replay-round", "7"]) == 2
