"""Held-out evaluation of a policy: K sampled episodes per task, rewards summarised.

For task i with rewards r(i,1..K) (spec section 2): group mean m_i, population variance
v_i. Reported over the N evaluated tasks:

- ``mean_reward``          = (1/N) sum_i m_i
- ``full_success_rate``    = share of episodes with reward 1
- ``nonzero_variance_share`` = share of tasks with v_i > 0 (groups that would give GRPO a
  learning signal)
- ``mean_reward_variance`` = (1/N) sum_i v_i

and the same per environment, plus finish reasons, malformed calls and timings.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from envsched_gnn.observations import group_stats


def _summary(groups: dict[str, list[float]]) -> dict[str, float]:
    rewards = np.array(list(groups.values()), dtype=np.float64)
    m, v, _ = group_stats(rewards)
    return {
        "tasks": len(groups),
        "mean_reward": float(m.mean()),
        "full_success_rate": float(np.mean(rewards == 1.0)),
        "nonzero_variance_share": float(np.mean(v > 0)),
        "mean_reward_variance": float(v.mean()),
    }


def evaluate_policy(
    engine: Any, tasks: Sequence[str], k: int, seed: int, tasks_per_batch: int = 16
) -> dict[str, Any]:
    """Roll out ``k`` samples of each task id with ``engine`` (a ``RolloutEngine``).

    Tasks go in batches of ``tasks_per_batch`` (x k episodes); the rewards do not depend on
    it (each episode has its own seed). Measured with the demo SFT policy, 64 tasks x 4 at one
    thread: 16 tasks per batch 23 s, 64 per batch 37 s, 8 per batch 37 s (a batch's decode
    runs until its longest episode ends, padding included). Returns the overall
    summary (see the module docstring), ``per_env`` summaries, ``per_task`` rewards (task id
    -> its k rewards, so that comparisons can be paired by task), ``finish_reasons`` counts,
    ``malformed_call_rate`` (malformed calls per episode), ``rollout_s`` and ``k``.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if not tasks:
        raise ValueError("no task to evaluate")
    if len(set(tasks)) < len(tasks):
        raise ValueError("evaluate_policy: task ids must be distinct")
    groups: dict[str, list[float]] = defaultdict(list)
    finish: Counter[str] = Counter()
    malformed = 0
    start = time.perf_counter()
    for first in range(0, len(tasks), tasks_per_batch):
        for episode in engine.rollout(tasks[first : first + tasks_per_batch], k=k, seed=seed):
            groups[episode.task_id].append(episode.reward)
            finish[episode.finish_reason] += 1
            malformed += episode.malformed_calls
    rollout_s = time.perf_counter() - start
    env_of = {task_id: engine.pool.task(task_id).env_id for task_id in groups}
    per_env: dict[str, dict[str, list[float]]] = defaultdict(dict)
    for task_id, rewards in groups.items():
        per_env[env_of[task_id]][task_id] = rewards
    episodes = sum(len(g) for g in groups.values())
    return {
        **_summary(groups),
        "k": k,
        "seed": seed,
        "episodes": episodes,
        "malformed_call_rate": malformed / episodes,
        "finish_reasons": dict(sorted(finish.items())),
        "rollout_s": rollout_s,
        "per_env": {env: _summary(g) for env, g in sorted(per_env.items())},
        "per_task": {task_id: list(groups[task_id]) for task_id in tasks},
    }
