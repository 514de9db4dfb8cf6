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


def test_truncation_equals_a_build_at_the_smaller_sizes(tmp_path):
    """Tied similarities (repeating abstracts) included: truncating a (12, 24) build to any
    smaller (k_in, k_cross) keeps exactly the edges a build at those sizes has."""
    from envsched_gnn.graph_store.builder import GraphConfig, build_graph
    from envsched_gnn.graph_store.embeddings import Embedder, EmbeddingConfig
    from tests.graph_store.small_pool import small_pool
    from tests.graph_store.test_growth import with_repeating_abstracts

    pool = with_repeating_abstracts(small_pool(4, 10, seed=3))
    embedder = Embedder(EmbeddingConfig(show_progress=False))

    def built(k_in: int, k_cross: int) -> TaskGraph:
        config = GraphConfig(k_within=k_in, k_cross=k_cross, show_progress=False)
        return build_graph(pool, config, embedder=embedder)

    full = built(12, 24)
    for k_in, k_cross in ((3, 12), (6, 6), (2, 1)):
        assert sorted(truncate_graph(full, k_in, k_cross).edge_rows()) == sorted(
            built(k_in, k_cross).edge_rows()
        )


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
