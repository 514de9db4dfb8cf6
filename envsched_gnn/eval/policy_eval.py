"""``eval policy``: a policy's held-out evaluation, overall and per environment.

The summary (mean reward, full success rate, share of groups without reward spread, mean reward
variance) is :func:`~envsched_gnn.training.rollout_groups.summarize_groups`, over the K sampled
episodes of every task; this report adds it per environment, with finish reasons, malformed
calls and timings.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from envsched_gnn.training.rollout_groups import rollout_groups, summarize_groups


def evaluate_policy(
    engine: Any, tasks: Sequence[str], k: int, seed: int, tasks_per_batch: int = 16
) -> dict[str, Any]:
    """Roll out ``k`` samples of each task id with ``engine`` (a ``RolloutEngine``).

    Tasks go in batches of ``tasks_per_batch`` (x k episodes; see
    :func:`~envsched_gnn.training.rollout_groups.rollout_groups`). Returns the overall summary (see
    the module docstring), ``per_env`` summaries, ``per_task`` rewards (task id -> its k
    rewards, so that comparisons can be paired by task), ``finish_reasons`` counts,
    ``malformed_call_rate`` (malformed calls per episode), ``rollout_s`` and ``k``.
    """
    rolled = rollout_groups(engine, tasks, k, seed, tasks_per_batch)
    groups = rolled.rewards
    env_of = {task_id: engine.pool.task(task_id).env_id for task_id in groups}
    per_env: dict[str, dict[str, list[float]]] = defaultdict(dict)
    for task_id, rewards in groups.items():
        per_env[env_of[task_id]][task_id] = rewards
    return {
        **summarize_groups(groups),
        "k": k,
        "seed": seed,
        "episodes": rolled.episodes,
        "malformed_call_rate": rolled.malformed_call_rate,
        "finish_reasons": dict(sorted(rolled.finish_reasons.items())),
        "rollout_s": rolled.rollout_s,
        "per_env": {env: summarize_groups(g) for env, g in sorted(per_env.items())},
        "per_task": {task_id: list(groups[task_id]) for task_id in tasks},
    }
