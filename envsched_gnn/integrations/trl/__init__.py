"""TRL (``pip install envsched-gnn[trl]``): EnvSched choosing the prompts of ``GRPOTrainer``.

A few lines turn a TRL GRPO run into an EnvSched one::

    rewards = RoundRewards()
    trainer = EnvSchedGRPOTrainer(
        model=model, processing_class=tokenizer, args=GRPOConfig(...),
        train_dataset=pool_dataset(pool),
        reward_funcs=RuntimeReward(runtime, rewards),
        scheduler=make_scheduler("envsched", graph, batch_size=B), rewards=rewards,
    )
    trainer.train()

Multi-turn episodes go through TRL's ``environment_factory`` instead of a reward function:
``environment_factory=environment_factories(pool, runtime, rewards)`` with
``pool_dataset(pool, tools_in_prompt=False)`` and a tool-calling chat template.
"""

from envsched_gnn.integrations.dataset import pool_rows
from envsched_gnn.integrations.rewards import RoundRewards
from envsched_gnn.integrations.trl.callback import EnvSchedCallback
from envsched_gnn.integrations.trl.dataset import pool_dataset
from envsched_gnn.integrations.trl.environment import environment_factories
from envsched_gnn.integrations.trl.reward import RuntimeReward
from envsched_gnn.integrations.trl.sampler import ScheduledSlots
from envsched_gnn.integrations.trl.trainer import EnvSchedGRPOTrainer

__all__ = [
    "EnvSchedCallback",
    "EnvSchedGRPOTrainer",
    "RoundRewards",
    "RuntimeReward",
    "ScheduledSlots",
    "environment_factories",
    "pool_dataset",
    "pool_rows",
]
