"""A tiny ablation run end to end: every scheduler key, the table, the shuffled control."""

import json

import numpy as np
import pytest

from envsched_gnn.cli import main
from envsched_gnn.eval.ablate import (
    AblationConfig,
    eval_every_for,
    run_ablation,
    run_names,
    score_steps_for,
    shuffled_pool,
    train_pool,
    truncate_graph,
)
from envsched_gnn.eval.policy_learner import PolicyLearnerConfig
from envsched_gnn.graph_store.snapshot import TaskGraph
from tests.envs.handmade_pool import handmade_pool, write_handmade_pool

EXPECTED = {
    "envsched",
    "within_only",
    "cross_only",
    "rho0",
    "rho1",
    "random",
    "dapo",
    "mopps",
    "greso",
    "dps",
    "learned",
    "k3_12",
    "k12_12",
    "k6_6",
    "k6_24",
    "envsched_shuffled",
}


def test_tiny_ablation_writes_every_key(tmp_path, capsys):
    pool_dir = write_handmade_pool(tmp_path / "pool")
    out = tmp_path / "out"
    argv = ["eval", "ablate", "--pool", str(pool_dir), "--seeds", "2", "--steps", "3"]
    argv += ["--batch-size", "2", "--workers", "1", "--shuffle-graph", "--out", str(out)]
    assert main(argv) == 0
    results = json.loads((out / "results.json").read_text())
    assert set(results) == EXPECTED
    for name, entry in results.items():
        assert entry["learner"] == "simulator"
        assert entry["seeds"] == [0, 1], name
        assert entry["rollouts"] == 3 * 2 * 8, name  # the same budget for every scheduler
        score = entry["score"]["3"]
        assert 0.0 <= score["mean"] <= 1.0 and score["ci95"] is not None
        for metric in ("batch/mean_reward_variance", "batch/envs_covered", "batch/tools_used"):
            assert np.isfinite(entry["metrics"][metric]["mean"]), (name, metric)
        assert "steps_to_random_best" in entry and "margin_over_random" in entry
    assert results["dapo"]["updates"]["mean"] < results["random"]["updates"]["mean"]
    report = (out / "report.md").read_text()
    assert "learner: simulator" in report and "| envsched |" in report
    assert "EnvSched on the SHUFFLED graph minus random" in report
    assert (out / "score.png").stat().st_size > 0 and (out / "batch_metrics.png").exists()
    assert sorted(p.name for p in (out / "graphs").iterdir()) == [
        "graph_k12_24.json",
        "graph_shuffled0_k6_12.json",
    ]
    assert "| learned |" in capsys.readouterr().out


def test_truncation_keeps_the_top_k_by_similarity_then_task_id():
    tasks = [(f"t{i}", "e") for i in range(5)]
    rows = [("t1", "t0", "within", 0.9), ("t2", "t0", "within", 0.5), ("t3", "t0", "within", 0.5)]
    rows += [("t4", "t0", "within", 0.2), ("t2", "t1", "cross", 0.3)]
    graph = truncate_graph(TaskGraph.from_edge_rows(tasks, rows), 2, 1)
    kept = sorted((s, d, r) for s, d, r, _ in graph.edge_rows())
    assert kept == [("t1", "t0", "within"), ("t2", "t0", "within"), ("t2", "t1", "cross")]


def test_shuffled_pool_keeps_environment_sizes_and_moves_abstracts():
    pool = train_pool(handmade_pool())
    shuffled = shuffled_pool(pool, seed=1)
    assert sorted(t.env_id for t in shuffled.tasks) == sorted(t.env_id for t in pool.tasks)
    assert [t.task_id for t in shuffled.tasks] == [t.task_id for t in pool.tasks]
    for task in shuffled.tasks:
        assert task.env_class_name == next(
            t.env_class_name for t in pool.tasks if t.env_id == task.env_id
        )


def test_bad_options_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="--learner"):
        AblationConfig(learner="gpt")
    with pytest.raises(ValueError, match="--seeds"):
        AblationConfig(seeds=0)
    with pytest.raises(ValueError, match=r"--schedulers: unknown \['rando'\]"):
        AblationConfig(schedulers=("envsched", "rando"))
    with pytest.raises(ValueError, match="--sft-steps 0 needs --model"):
        PolicyLearnerConfig(sft_steps=0)
    assert run_names(AblationConfig(k_grid=())) == list(AblationConfig().schedulers)
    config = AblationConfig(
        learner="policy", policy=PolicyLearnerConfig(model=str(tmp_path), sft_steps=0)
    )
    with pytest.raises(ValueError, match="not a local model folder"):
        run_ablation(handmade_pool(), config, tmp_path / "out")
    assert not (tmp_path / "out").exists()  # nothing written


@pytest.mark.parametrize(
    ("steps", "columns", "every"),
    [(200, (40, 120, 200), 40), (10, (2, 6, 10), 2), (2, (1, 2), 1), (7, (2, 6, 7), 2)],
)
def test_score_columns_scale_the_papers_40_120_200(steps, columns, every):
    assert score_steps_for(steps) == columns
    assert eval_every_for(steps) == every
    assert AblationConfig(steps=steps).score_steps == columns


def test_fewer_evaluations_score_at_them():
    """evaluations = 2 at S = 50: held-out at 25 and 50, the score columns follow."""
    config = AblationConfig(steps=50, evaluations=2)
    assert eval_every_for(50, 2) == 25
    assert config.score_steps == (25, 50)
    assert AblationConfig.evaluations == 5  # the CLI's --evaluations default
