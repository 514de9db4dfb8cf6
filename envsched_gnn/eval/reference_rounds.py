"""Rounds of scripted rollouts that need no policy: a noisy expert replays each reference
solution, leaving out every call with probability p.

Not a language model: real rewards from the sandboxed runtime with a spread set by each task's
structure, for pools without a trained policy (``eval cold-start --pool P``). Sample k of task
i in round r leaves out call l when u(i, r, k, l) < p, u seeded by (seed, r, the task's
position); round r is recorded at step r.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from envsched_gnn.envs.pool import Pool
from envsched_gnn.observations import DEFAULT_REWARD, Observation
from envsched_gnn.training.rollout_groups import summarize_groups


def reference_rounds(
    runtime,
    pool: Pool,
    task_ids: Sequence[str],
    *,
    k: int = 8,
    rounds: int = 2,
    drop: float = 0.3,
    seed: int = 0,
    reward: str = DEFAULT_REWARD,
) -> list[Observation]:
    """K noisy replays of every task's reference solution per round (module docstring).

    ``runtime`` is an ``EnvRuntime`` over ``pool`` that scores ``reward``; tasks without a
    reference solution are an error (nothing to replay)."""
    if not 0.0 < drop < 1.0:
        raise ValueError(f"drop must be in (0, 1), got {drop}")
    if k < 2:
        raise ValueError(f"k must be >= 2 (a variance needs two rewards), got {k}")
    missing = [t for t in task_ids if not pool.task(t).reference_solution]
    if missing:
        raise ValueError(f"task(s) {missing[:5]} have no reference solution to replay")
    position = {task.task_id: n for n, task in enumerate(pool.tasks)}
    observations = []
    for r in range(rounds):
        started = time.perf_counter()
        runs = []
        for task_id in task_ids:
            calls = list(pool.task(task_id).reference_solution)
            kept = np.random.default_rng([seed, r, position[task_id]]).random((k, len(calls)))
            runs += [(task_id, [c for c, u in zip(calls, row, strict=True) if u >= drop])
                     for row in kept]  # fmt: skip
        rewards = [score.reward for score in runtime.replay(runs)]
        for n, task_id in enumerate(task_ids):
            group = tuple(rewards[n * k : (n + 1) * k])
            observations.append(Observation(task_id, r, group, reward))
        summary = summarize_groups({o.task_id: o.rewards for o in observations[-len(task_ids) :]})
        print(
            f"round {r}: {len(task_ids)} tasks x K={k} noisy reference replays (drop {drop:g}), "
            f"mean reward {summary['mean_reward']:.3f}, zero-variance groups "
            f"{summary['zero_variance_share']:.3f}, "
            f"{time.perf_counter() - started:.0f} s",
            flush=True,
        )
    return observations
