"""A real two-step GRPO run: tiny SFT-trained policy, the runtime's worker processes, the
EnvSched scheduler, the Lightning module with manual optimisation."""

from __future__ import annotations

import csv

import pytest
import torch

from envsched_gnn.envs.runtime import EnvRuntime
from envsched_gnn.training.grpo.objective import group_advantages
from envsched_gnn.training.policy import load_agent_config, load_policy
from envsched_gnn.training.rng import step_seed
from envsched_gnn.training.rollout import EpisodeSpec, RolloutEngine
from tests.training.grpo_setup import AGENT, POOL, RUNTIME, grpo_policy_dir, run, small_config

pytestmark = pytest.mark.slow  # Lightning fits of the GRPO module

BATCH_METRICS = (
    "batch/mean_reward",
    "batch/mean_reward_variance",
    "batch/median_reward_variance",
    "batch/median_reward",
    "batch/zero_variance_share",
    "batch/envs_covered",
    "batch/tools_used",
)
STEP_METRICS = (
    *BATCH_METRICS,
    "train/loss",
    "train/kl",
    "train/tokens_per_s",
    "time/rollout_s",
    "time/schedule_s",
    "time/update_s",
)


@pytest.fixture(scope="module")
def two_steps(tmp_path_factory):
    out = tmp_path_factory.mktemp("grpo")
    observed = []
    result = run(small_config(eval_every=2, kl_coef=0.05), out, write_observations=observed.extend)
    return out, result, observed


def test_two_steps_train_the_policy_on_scheduled_batches(two_steps):
    out, result, observed = two_steps
    train_ids = {t.task_id for t in POOL.split("train")}
    assert len(result.batches) == 2
    for batch in result.batches:
        assert len(batch) == len(set(batch)) == 2 and set(batch) <= train_ids
    assert result.rollouts == result.local_rollouts == 2 * 2 * 4
    # the rewards reached the store writer, one observation per task and step
    assert sorted((o.step, o.task_id) for o in observed) == sorted(
        (step, task_id) for step, batch in enumerate(result.batches) for task_id in batch
    )
    assert all(len(o.rewards) == 4 for o in observed)
    # the policy moved: its weights differ from the SFT starting point
    start, _ = load_policy(grpo_policy_dir())
    trained, _ = load_policy(out / "policy")
    moved = [
        not torch.equal(a, b)
        for a, b in zip(start.state_dict().values(), trained.state_dict().values(), strict=True)
    ]
    assert any(moved)


def test_metrics_have_stable_names_and_reach_the_csv_log(two_steps):
    out, result, observed = two_steps
    for step, metrics in enumerate(result.steps):
        assert metrics["step"] == step
        assert set(STEP_METRICS) <= set(metrics)
        assert 0.0 <= metrics["batch/mean_reward"] <= 1.0
        assert 1.0 <= metrics["batch/envs_covered"] <= 2.0
        assert metrics["batch/rollouts"] == 8.0 and metrics["train/kl"] >= 0.0
    rewards = {(o.step, o.task_id): o.rewards for o in observed}
    first = result.steps[0]
    means = [sum(r) / 4 for (step, _), r in rewards.items() if step == 0]
    assert first["batch/mean_reward"] == pytest.approx(sum(means) / len(means))
    with (out / "logs" / "metrics.csv").open() as handle:
        columns = set(csv.DictReader(handle).fieldnames)
    assert set(STEP_METRICS) | {"eval/mean_reward"} <= columns


def test_heldout_evaluation_before_training_and_every_n_steps(two_steps):
    _, result, _ = two_steps
    assert [e["step"] for e in result.evals] == [0, 2]
    assert [e["rollouts"] for e in result.evals] == [0, 16]
    for evaluation in result.evals:
        assert evaluation["tasks"] == len(POOL.split("test"))
        assert 0.0 <= evaluation["mean_reward"] <= 1.0


def test_loss_is_the_clipped_objective_of_the_episodes(two_steps):
    """At step 0 the update is on-policy (ratio 1, policy = reference: KL 0), so the loss is
    -sum_i A_i n_i / sum_i n_i over episodes i with n_i policy tokens; recomputed here from
    the episodes the engine reproduces from the step's seed."""
    _, result, observed = two_steps
    model, tokenizer = load_policy(grpo_policy_dir())
    with EnvRuntime(POOL, RUNTIME) as runtime:
        engine = RolloutEngine(model, tokenizer, runtime, AGENT, "cpu", POOL)
        specs = [EpisodeSpec(t, k) for t in result.batches[0] for k in range(4)]
        episodes = engine.rollout_episodes(specs, seed=step_seed(3, 0))
    rewards = {(o.step, o.task_id): o.rewards for o in observed}
    assert [e.reward for e in episodes] == [r for t in result.batches[0] for r in rewards[(0, t)]]
    advantages = group_advantages(
        torch.tensor([e.reward for e in episodes], dtype=torch.float64), 4
    )
    tokens = torch.tensor([float(e.policy_mask.sum()) for e in episodes], dtype=torch.float64)
    expected = -float((advantages * tokens).sum() / tokens.sum())
    assert result.steps[0]["train/loss"] == pytest.approx(expected, abs=1e-4)
    assert result.steps[0]["train/kl"] == pytest.approx(0.0, abs=1e-6)
    assert result.steps[0]["train/clip_fraction"] == pytest.approx(0.0, abs=1e-6)


def test_several_passes_per_step_with_warmup(tmp_path):
    """ppo_epochs x mini_batches optimiser steps per GRPO step: the run still takes its
    `steps` batches, later passes see a moved policy (KL to the rollout policy > 0), the
    learning rate warms up linearly, and the saved policy carries its agent format."""
    config = small_config(steps=2, ppo_epochs=2, mini_batches=2, lr_warmup_steps=8)
    result = run(config, tmp_path)
    assert len(result.batches) == 2 and result.rollouts == 2 * 2 * 4
    first, second = result.steps
    assert first["train/optimizer_steps"] == second["train/optimizer_steps"] == 4
    # optimiser steps 1-4 at lr * n / 8, then 5-8
    assert first["train/lr"] == pytest.approx(1e-3 * (1 + 2 + 3 + 4) / 4 / 8)
    assert second["train/lr"] == pytest.approx(1e-3 * (5 + 6 + 7 + 8) / 4 / 8)
    spread = [r for step in result.rewards for r in step.values() if min(r) < max(r)]
    assert spread, "no group with reward spread: the weights would not move"
    assert max(first["train/approx_kl"], second["train/approx_kl"]) > 0.0
    assert first["train/entropy"] > 0.0
    assert load_agent_config(tmp_path / "policy") == AGENT


def test_frozen_embeddings_keep_their_starting_values(tmp_path):
    """freeze_embeddings: the token embeddings and output head stay at the SFT values while
    the transformer blocks train."""
    run(small_config(steps=2, freeze_embeddings=True), tmp_path)
    start, _ = load_policy(grpo_policy_dir())
    trained, _ = load_policy(tmp_path / "policy")
    for get in ("get_input_embeddings", "get_output_embeddings"):
        assert torch.equal(getattr(start, get)().weight, getattr(trained, get)().weight), get
    moved = [
        name
        for (name, before), (_, after) in zip(
            start.named_parameters(), trained.named_parameters(), strict=True
        )
        if not torch.equal(before, after)
    ]
    assert moved and not any("embed" in name or "lm_head" in name for name in moved)


def test_a_scheduler_that_reads_operation_patterns_gets_them_from_the_pool(tmp_path):
    """train_grpo hands the pool's operation patterns to envsched_ops (without them the
    scheduler refuses to start)."""
    result = run(small_config(steps=1, scheduler="envsched_ops"), tmp_path)
    assert result.scheduler == "envsched_ops" and len(result.batches) == 1
