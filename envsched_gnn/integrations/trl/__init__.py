"""TRL (``pip install envsched-gnn[trl]``): EnvSched choosing the prompts of ``GRPOTrainer``.

Usage, single-turn (``RuntimeReward``) and multi-turn (``environment_factories``): docs/trainers.md.
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
