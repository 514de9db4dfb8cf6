"""A pool as prompt rows for a trainer's dataset, one row per task, framework-free.

Columns: ``prompt`` (the system and user messages of :mod:`envsched_gnn.training.agent_format`;
with ``tools_in_prompt=False`` the system message is the environment's introduction only),
``task_id``, ``env_id`` and ``environment`` (= ``env_id``, what TRL's ``environment_factory``
routes on).
"""

from __future__ import annotations

from typing import Any

from envsched_gnn.envs.pool import Pool
from envsched_gnn.training.agent_format import AgentConfig, system_message, user_message


def task_prompt(
    pool: Pool, task_id: str, agent: AgentConfig, tools_in_prompt: bool = True
) -> list[dict[str, str]]:
    """The chat messages of one task's episode start (system, then user)."""
    task = pool.task(task_id)
    env = pool.envs[task.env_id]
    system = (
        system_message(env, agent.tool_format)
        if tools_in_prompt
        else env.environment_introduction.strip()
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user_message(task)}]


def pool_rows(
    pool: Pool,
    split: str | None = "train",
    agent: AgentConfig | None = None,
    tools_in_prompt: bool = True,
) -> dict[str, list[Any]]:
    """The columns of ``pool``'s tasks in ``split`` (all tasks when None), in pool order."""
    agent = agent or AgentConfig()
    tasks = pool.tasks if split is None else pool.split(split)
    if not tasks:
        raise ValueError(f"the pool has no task in split {split!r}")
    return {
        "prompt": [task_prompt(pool, t.task_id, agent, tools_in_prompt) for t in tasks],
        "task_id": [t.task_id for t in tasks],
        "env_id": [t.env_id for t in tasks],
        "environment": [t.env_id for t in tasks],
    }
