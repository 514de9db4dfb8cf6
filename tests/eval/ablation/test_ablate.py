"""A tiny ablation run end to end: every scheduler key, the table, the control graphs."""

import json
from collections import Counter

import numpy as np
import pytest

from envsched_gnn.cli import main
from envsched_gnn.eval.ablation.ablate import run_ablation, truncate_graph
from envsched_gnn.eval.ablation.config import AblationConfig, PolicyLearnerConfig, run_names
from envsched_gnn.graph.task_graph import TaskGraph
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
    "dump",
    "learned",
    "k3_12",
    "k12_12",
    "k6_6",
    "k6_24",
    "envsched_relabelled",
    "envsched_relabelled_predictor",
    "envsched_permuted",
    "envsched_permuted_within",
    "envsched_permuted_cross",
    "envsched_permuted_all",
    "envsched_permuted_predictor",
    "envsched_shuffled",
    "envsched_oracle",
}


@pytest.mark.slow  # simulated training runs
def test_tiny_ablation_writes_every_key(tmp_path, capsys):
    pool_dir = write_handmade_pool(tmp_path / "pool")
    out = tmp_path / "out"
    argv = ["eval", "ablate", "--pool", str(pool_dir), "--seeds", "2", "--steps", "3"]
    argv += ["--batch-size", "2", "--workers", "1", "--controls", "relabelled,permuted"]
    argv += ["relabelled_predictor", "permuted_within", "permuted_cross", "permuted_all"]
    argv += ["permuted_predictor", "--shuffle-graph"]
    argv += ["--oracle-graph"]
    argv += ["--kappa", "0.75", "--out", str(out)]
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
        assert "margin_over_random" in entry and "curve_margins" in entry
    assert results["dapo"]["updates"]["mean"] < results["random"]["updates"]["mean"]
    report = (out / "report.md").read_text()
    assert "learner: simulator" in report and "| envsched |" in report
    assert "EnvSched on the SHUFFLED graph (secondary control" in report
    assert "EnvSched minus EnvSched on the relabelled graph (primary control)" in report
    assert "EnvSched minus EnvSched on the label-permuted graph (secondary control" in report
    assert "Simulator world: structure, kappa = 0.75" in report
    assert "predict/spearman_true" in results["envsched"]["prediction"]
    assert "prediction" not in results["random"]
    margins = results["envsched"]["margin_over_controls"]
    assert set(margins) == {name for name in EXPECTED if name.startswith("envsched_")} - {
        "envsched_oracle"
    }
    assert (out / "score.png").stat().st_size > 0 and (out / "batch_metrics.png").exists()
    assert sorted(p.name for p in (out / "graphs").iterdir()) == [
        "graph_k12_24.json",
        "graph_shuffled0_k6_12.json",
    ]
    assert "| learned |" in capsys.readouterr().out


@pytest.mark.slow  # simulated training runs
def test_truncation_equals_a_build_at_the_smaller_sizes(tmp_path):
    """Tied similarities (repeating abstracts) included: truncating a (12, 24) build to any
    smaller (k_in, k_cross) keeps exactly the edges a build at those sizes has."""
    from envsched_gnn.graph_build.builder import GraphConfig, build_graph
    from envsched_gnn.graph_build.embeddings import Embedder, EmbeddingConfig
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


def test_bad_options_are_clear_errors(tmp_path):
    with pytest.raises(
        ValueError, match=r"AblationConfig\.learner = 'gpt', expected 'sim' or 'policy'"
    ):
        AblationConfig(learner="gpt")
    with pytest.raises(ValueError, match=r"AblationConfig\.seeds = 0, expected a number >= 1"):
        AblationConfig(seeds=0)
    with pytest.raises(
        ValueError, match=r"AblationConfig\.schedulers = \('envsched', 'rando'\), .*not \['rando'\]"
    ):
        AblationConfig(schedulers=("envsched", "rando"))
    with pytest.raises(
        ValueError,
        match=r"AblationConfig\.controls = \('permuted_predictor',\), .*need learner 'sim'",
    ):
        AblationConfig(learner="policy", controls=("permuted_predictor",))
    with pytest.raises(
        ValueError, match=r"AblationConfig\.controls = \('permute',\), .*not \['permute'\]"
    ):
        AblationConfig(controls=("permute",))
    with pytest.raises(
        ValueError, match=r"PolicyLearnerConfig\.sft_steps = 0, expected > 0 without model"
    ):
        PolicyLearnerConfig(sft_steps=0)
    assert run_names(AblationConfig(k_grid=())) == list(AblationConfig().schedulers)
    config = AblationConfig(
        learner="policy", policy=PolicyLearnerConfig(model=str(tmp_path), sft_steps=0)
    )
    with pytest.raises(ValueError, match="not a local model folder"):
        run_ablation(handmade_pool(), config, tmp_path / "out")
    assert not (tmp_path / "out").exists()  # nothing written


@pytest.mark.slow  # simulated training runs
def test_runs_record_the_predictors_spearman_against_realised_and_true_variance():
    """On a generated pool in the structure world, EnvSched's q is scored every step against
    the batch's realised variance and every task's true expected variance."""
    from envsched_gnn.envs.generator import generate_pool
    from envsched_gnn.eval.ablation.ablate import JobContext, build_pool_graph, run_job, train_pool
    from envsched_gnn.eval.ablation.config import Job
    from envsched_gnn.eval.simulator.config import SimulatorConfig
    from envsched_gnn.eval.simulator.simulate import build_world

    pool = generate_pool(n_envs=4, tasks_per_env=16, seed=0, test_per_env=4)
    config = AblationConfig(steps=5, batch_size=16, simulator=SimulatorConfig(kappa=1.0))
    train = train_pool(pool)
    graph = build_pool_graph(train, 6, 12)
    context = JobContext(pool, build_world(pool, config.simulator), {"g": graph}, config)
    records = run_job(Job("envsched", "envsched", "g", 0), context)["records"][1:]
    true = [r["predict/spearman_true"] for r in records]
    batch = [r["predict/spearman_batch"] for r in records]
    assert np.isnan(true[0])  # step 0: no history, q is constant
    assert all(np.isfinite(true[1:])) and all(-1 <= v <= 1 for v in true[1:])
    assert np.isfinite(batch[1:]).any()
    # the batch split by whether its tasks were observed before: none at step 0, then some
    seen = [r["predict/seen_share"] for r in records]
    assert seen[0] == 0.0 and np.isnan(records[0]["predict/spearman_batch_seen"])
    assert (
        0.0 < seen[-1] <= 1.0
        and np.isfinite([r["predict/spearman_batch_seen"] for r in records[1:]]).any()
    )
    baseline = run_job(Job("random", "random", "g", 0), context)["records"][1:]
    assert not any(key.startswith("predict/") for key in baseline[0])


def test_the_operation_coverage_scheduler_runs_on_the_pools_patterns():
    """``envsched_ops`` reads each task's operation pattern from the pool's abstracts (without
    them it refuses to start); its first coverage slots share the 4 patterns evenly."""
    from envsched_gnn.envs.abstract import operation_patterns
    from envsched_gnn.envs.generator import generate_pool
    from envsched_gnn.eval.ablation.ablate import JobContext, build_pool_graph, run_job, train_pool
    from envsched_gnn.eval.ablation.config import Job
    from envsched_gnn.eval.simulator.config import SimulatorConfig
    from envsched_gnn.eval.simulator.simulate import build_world
    from envsched_gnn.scheduler.registry import make_scheduler

    # one call of three operations: four patterns, as the generator names them
    pool = generate_pool(
        n_envs=4, tasks_per_env=16, seed=0, test_per_env=4, max_calls=1,
        operations=("update", "create", "delete"),
    )  # fmt: skip
    config = AblationConfig(steps=2, batch_size=8, simulator=SimulatorConfig(rollouts=2))
    graph = build_pool_graph(train_pool(pool), 6, 12)
    context = JobContext(pool, build_world(pool, config.simulator), {"g": graph}, config)
    assert run_job(Job("envsched_ops", "envsched_ops", "g", 0), context)["rollouts"] == 32
    patterns = operation_patterns(pool.tasks)
    scheduler = make_scheduler("envsched_ops", graph, batch_size=16, operations=patterns)
    coverage = scheduler.next_batch(0)[:8]  # round(0.5 * 16) coverage slots come first
    assert sorted(Counter(patterns[t] for t in coverage).values()) == [2, 2, 2, 2]


@pytest.mark.slow  # simulated training runs
def test_dapo_at_equal_rollouts_counts_dropped_groups_and_stops_at_the_budget():
    """Issue 37: every rollout DAPO generates (zero-variance, dropped or pending) counts
    against the budget S x B x K, its run stops there as random's does, a generation batch
    short of B groups with spread makes no update (the simulated learner stays put), and the
    last batch the budget allows trains what is pending. K = 2 makes zero-variance groups
    common, so refills happen."""
    from envsched_gnn.envs.generator import generate_pool
    from envsched_gnn.eval.ablation.ablate import JobContext, build_pool_graph, run_job, train_pool
    from envsched_gnn.eval.ablation.config import Job
    from envsched_gnn.eval.simulator.config import SimulatorConfig
    from envsched_gnn.eval.simulator.simulate import build_world

    pool = generate_pool(n_envs=4, tasks_per_env=16, seed=0, test_per_env=4)
    config = AblationConfig(steps=5, batch_size=8, simulator=SimulatorConfig(rollouts=2))
    budget = 5 * 8 * 2
    graph = build_pool_graph(train_pool(pool), 6, 12)
    context = JobContext(pool, build_world(pool, config.simulator), {"g": graph}, config)
    refills = 0
    for seed in range(3):
        random = run_job(Job("random", "random", "g", seed), context)
        dapo = run_job(Job("dapo", "dapo", "g", seed), context)
        assert dapo["rollouts"] == random["rollouts"] == budget
        records = dapo["records"][1:]
        # generation batches of 2 B; the third is cut to the budget's last B tasks
        assert [r["sampling/groups_generated"] for r in records] == [16, 16, 8]
        assert [r["budget_step"] for r in records] == [2, 4, 5]
        last = records[-1]
        assert last["sampling/rollouts_spent_total"] == budget
        assert last["sampling/groups_pending"] == 0  # the last batch trained what was pending
        dropped = sum(
            r["sampling/groups_zero_variance"] + r["sampling/groups_dropped"] for r in records
        )
        assert dropped > 0 and last["sampling/rollouts_wasted_total"] == 2 * dropped
        trained = sum(r["trained_groups"] for r in records)
        assert last["sampling/rollouts_trained_total"] == 2 * trained == budget - 2 * dropped
        for before, record in zip(dapo["records"], records, strict=False):
            if record["trained_groups"] == 0:
                refills += 1
                assert record["sampling/groups_pending"] > 0 and record["score"] == before["score"]
    assert refills > 0
