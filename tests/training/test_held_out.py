"""Held-out evaluation inside training: the evaluator a GRPO run calls, and its task subset."""

from __future__ import annotations

import pytest

from envsched_gnn.envs.runtime import EnvRuntime
from envsched_gnn.envs.runtime_config import RuntimeConfig
from envsched_gnn.eval.policy_eval import evaluate_policy
from envsched_gnn.training.agent_format import AgentConfig, format_tool_call
from envsched_gnn.training.held_out import heldout_evaluator, split_subset
from envsched_gnn.training.policy import load_policy
from envsched_gnn.training.rollout import RolloutEngine
from tests.envs.handmade_pool import handmade_pool
from tests.training.scripted_policy import ScriptedLM
from tests.training.tiny_policy import untrained_policy_dir

POOL = handmade_pool()
TASKS = [t.task_id for t in POOL.tasks]


def test_evaluator_reports_the_summary_of_the_policy_evaluation():
    """A solving and a giving-up script per task: the evaluator's numbers are the ``eval
    policy`` result's, in the order a GRPO result stores them."""
    _, tokenizer = load_policy(untrained_policy_dir())
    scripts = {
        t: [[format_tool_call(c) for c in POOL.task(t).reference_solution] + ["Done."], ["Done."]]
        for t in TASKS
    }
    with EnvRuntime(POOL, RuntimeConfig(workers=1)) as runtime:
        engine = RolloutEngine(
            ScriptedLM(tokenizer, POOL, scripts), tokenizer, runtime, AgentConfig(), pool=POOL
        )
        result = heldout_evaluator(TASKS, 4, seed=2)(engine, 0)
        full = evaluate_policy(engine, TASKS, 4, seed=2)
    keys = ["mean_reward", "full_success_rate", "zero_variance_share", "malformed_call_rate"]
    assert list(result) == [*keys[:1], "mean_check_fraction", *keys[1:], "rollout_s", "tasks"] + [
        "k",
        "per_task",
    ]
    assert {key: result[key] for key in keys} == {key: full[key] for key in keys}
    # under the fraction reward the share of checks passed is the reward itself
    assert result["mean_check_fraction"] == pytest.approx(result["mean_reward"])
    with EnvRuntime(POOL, RuntimeConfig(workers=1, reward="success")) as runtime:
        engine = RolloutEngine(
            ScriptedLM(tokenizer, POOL, scripts), tokenizer, runtime, AgentConfig(), pool=POOL
        )
        success = heldout_evaluator(TASKS, 4, seed=2)(engine, 0)
    # the same episodes scored all or nothing: the success rate, and their partial credit beside
    assert success["mean_reward"] == success["full_success_rate"] <= result["mean_reward"]
    assert success["mean_check_fraction"] == pytest.approx(result["mean_reward"])
    assert result["per_task"] == full["per_task"] and list(result["per_task"]) == TASKS
    assert (result["tasks"], result["k"]) == (len(TASKS), 4)
    assert 0 < result["mean_reward"] < 1 and result["zero_variance_share"] < 1


def test_split_subset_is_the_split_or_a_seeded_subset_in_split_order():
    split = [t.task_id for t in POOL.split("train")]
    assert split_subset(POOL, "train", 0, seed=1) == split
    assert split_subset(POOL, "train", len(split), seed=1) == split
    subset = split_subset(POOL, "train", 2, seed=1)
    assert len(subset) == 2 and subset == [t for t in split if t in subset]
    assert subset == split_subset(POOL, "train", 2, seed=1)
    with pytest.raises(ValueError, match="no task in split 'nope'"):
        split_subset(POOL, "nope", 0, seed=1)
