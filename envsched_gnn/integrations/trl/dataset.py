"""A pool as a TRL prompt dataset (conversational ``prompt``, ``task_id``, ``env_id``,
``environment`` columns; see :mod:`envsched_gnn.integrations.dataset`). TRL hands every
non-prompt column to reward functions, so a reward function knows each completion's task."""

from __future__ import annotations

from envsched_gnn.envs.pool import Pool
from envsched_gnn.integrations.dataset import pool_rows
from envsched_gnn.training.agent_format import AgentConfig


def pool_dataset(
    pool: Pool,
    split: str | None = "train",
    agent: AgentConfig | None = None,
    tools_in_prompt: bool = True,
):
    """A ``datasets.Dataset`` of :func:`pool_rows`, built in memory."""
    from datasets import Dataset

    return Dataset.from_dict(pool_rows(pool, split, agent, tools_in_prompt))
