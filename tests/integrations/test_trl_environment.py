"""Multi-turn through TRL's ``environment_factory``: generated tool methods run in the
runtime, their schemas as transformers renders them, and a real ``GRPOTrainer`` run."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import torch
import trl
from transformers.utils import get_json_schema
from trl import GRPOConfig

from envsched_gnn.envs.runtime import EnvRuntime
from envsched_gnn.envs.runtime_config import RuntimeConfig
from envsched_gnn.integrations.trl import EnvSchedGRPOTrainer, RoundRewards, pool_dataset
from envsched_gnn.integrations.trl.environment import environment_factories, tool_method
from envsched_gnn.scheduler.registry import make_scheduler
from envsched_gnn.training.agent_format import tool_schema
from envsched_gnn.training.policy import load_policy
from tests.integrations.small_setup import small_graph, small_policy_dir, small_pool


@pytest.fixture(scope="module")
def runtime():
    with EnvRuntime(small_pool(), RuntimeConfig(workers=1)) as rt:
        yield rt


def test_tool_schemas_are_the_pool_schemas():
    env = next(iter(small_pool().envs.values()))
    for tool in env.tools:
        original = tool_schema(tool)
        rendered = get_json_schema(tool_method(env.env_id, tool))["function"]
        assert rendered["name"] == original["name"]
        properties = original["parameters"]["properties"]
        assert set(rendered["parameters"]["properties"]) == set(properties)
        assert set(rendered["parameters"].get("required", [])) == set(
            original["parameters"].get("required", properties)
        )


def test_reference_solution_through_the_environment_methods_scores_like_a_replay(runtime):
    pool, rewards = small_pool(), RoundRewards()
    classes = environment_factories(pool, runtime, rewards)
    task = pool.split("train")[0]
    env = classes[task.env_id]()
    rewards.open(0, [task.task_id], 1)
    env.reset(task_id=task.task_id, prompt=[], env_id=task.env_id)
    for call in task.reference_solution:
        assert '"success": true' in getattr(env, call.name)(**call.arguments)
    assert (
        env.get_reward()
        == 1.0
        == runtime.replay([(task.task_id, task.reference_solution)])[0].reward
    )
    assert rewards.take().groups() == {task.task_id: [1.0]}
    env.reset(task_id=task.task_id)  # a reused instance starts a fresh episode
    assert env.get_reward() == runtime.replay([(task.task_id, [])])[0].reward < 1.0


@pytest.mark.slow
def test_grpo_trainer_with_environment_factory(tmp_path, runtime, monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    torch.set_num_threads(1)
    model, tokenizer = load_policy(small_policy_dir())
    # a chat template that renders tool calls, and that TRL knows how to parse
    tokenizer.chat_template = (
        Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja"
    ).read_text()
    tokenizer.padding_side = "left"
    b, k, rewards = 4, 2, RoundRewards()
    trainer = EnvSchedGRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=GRPOConfig(
            output_dir=str(tmp_path),
            per_device_train_batch_size=b * k,
            num_generations=k,
            max_completion_length=32,
            max_tool_calling_iterations=2,
            max_steps=2,
            report_to="none",
            use_cpu=True,
            bf16=False,
            save_strategy="no",
            disable_tqdm=True,
        ),
        train_dataset=pool_dataset(small_pool(), tools_in_prompt=False),
        environment_factory=environment_factories(small_pool(), runtime, rewards),
        scheduler=make_scheduler("envsched", small_graph(), batch_size=b, seed=0),
        rewards=rewards,
    )
    trainer.train()
    run = trainer.envsched
    assert len(run.observed) == 2
    for batch, groups in zip(run.batches, run.observed, strict=True):
        assert Counter({t: len(r) for t, r in groups.items()}) == Counter(dict.fromkeys(batch, k))
