"""Per-batch metrics under stable names (spec section 6), shared by logs, reports and benchmarks.

Per task m = mean, v = population variance: ``batch/mean_reward``, ``batch/median_reward``,
``batch/mean_reward_variance``, ``batch/median_reward_variance``, ``batch/zero_variance_share``
(all K rewards equal), ``batch/envs_covered``, ``batch/tools_used`` (when the caller knows).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from envsched_gnn.observations import reward_stats, validate_rewards

BATCH_METRICS = (
    "batch/mean_reward",
    "batch/mean_reward_variance",
    "batch/median_reward_variance",
    "batch/median_reward",
    "batch/zero_variance_share",
    "batch/envs_covered",
    "batch/tools_used",
)
"""The stable metric names, in report order."""


def batch_metrics(
    rewards: Mapping[str, Sequence[float]],
    env_of: Mapping[str, str],
    tools_used: int | None = None,
) -> dict[str, float]:
    """Metrics of one batch from ``{task_id: [r_1..r_K]}`` and each task's environment."""
    if not rewards:
        raise ValueError("batch_metrics: the batch has no tasks")
    means, variances, zero = [], [], 0
    for task_id, group in rewards.items():
        validate_rewards(group, task_id=task_id, step=-1)
        m, v, _ = reward_stats(group)
        means.append(m)
        variances.append(v)
        zero += int(min(group) == max(group))
    missing = [t for t in rewards if t not in env_of]
    if missing:
        raise KeyError(f"batch_metrics: no environment known for task {missing[0]!r}")
    out = {
        "batch/mean_reward": float(np.mean(means)),
        "batch/median_reward": float(np.median(means)),
        "batch/mean_reward_variance": float(np.mean(variances)),
        "batch/median_reward_variance": float(np.median(variances)),
        "batch/zero_variance_share": zero / len(rewards),
        "batch/envs_covered": float(len({env_of[t] for t in rewards})),
    }
    if tools_used is not None:
        out["batch/tools_used"] = float(tools_used)
    return out
