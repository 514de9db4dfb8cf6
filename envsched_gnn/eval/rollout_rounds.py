"""Rounds of K sampled episodes per task of a split, written as a history (``history.jsonl``).

Round r (A, B, ...) samples with seed ``seed + r`` and is recorded at step r, so round A is the
past of round B (``eval graph-signal``); any round alone is spread over steps by
:func:`assign_steps`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from envsched_gnn.envs.pool import Pool
from envsched_gnn.observations import DEFAULT_REWARD, Observation
from envsched_gnn.validation import ConfigError, check_bounds


@dataclass
class RoundsConfig:
    """Which tasks, how many samples, and how the policy runs."""

    split: str = "train"
    """Split whose tasks are rolled out."""
    k: int = 8
    """Samples per task and round (the paper's K)."""
    rounds: int = 2
    """Rounds (A, B, ...)."""
    seed: int = 0
    """Sampling seed of round A; round r uses seed + r."""
    tasks_per_batch: int = 64
    """Tasks per rollout batch (x k episodes)."""
    limit: int | None = None
    """Roll out only the first N tasks of the split."""

    def __post_init__(self) -> None:
        check_bounds(
            self,
            integers=("k", "rounds", "seed", "tasks_per_batch", "limit"),
            at_least={"k": 2, "rounds": 1, "tasks_per_batch": 1, "limit": 1},
            non_negative=("seed",),
            optional=("limit",),
        )


def round_tasks(pool: Pool, config: RoundsConfig) -> list[str]:
    """The tasks each round rolls out: the split's first ``limit``; :class:`ConfigError` for
    none (a caller checks this before it opens the policy)."""
    tasks = [task.task_id for task in pool.split(config.split)][: config.limit]
    if not tasks:
        raise ConfigError(f"the pool has no task in split {config.split!r}")
    return tasks


def rollout_rounds(
    engine, pool: Pool, config: RoundsConfig, reward: str = DEFAULT_REWARD
) -> tuple[list[Observation], list]:
    """Observations of every round (round r at step r) and each round's summary.

    ``engine`` is a ``RolloutEngine`` over ``pool`` whose runtime scores ``reward``.
    """
    from envsched_gnn.training.rollout_groups import rollout_groups, summarize_groups

    tasks = round_tasks(pool, config)
    observations, summaries = [], []
    for r in range(config.rounds):
        seed = config.seed + r
        rolled = rollout_groups(
            engine, tasks, config.k, seed, config.tasks_per_batch, progress=f"round {r}"
        )
        observations += [
            Observation(task_id, r, tuple(rolled.rewards[task_id]), reward) for task_id in tasks
        ]
        summaries.append(
            {
                "round": r,
                "seed": seed,
                **summarize_groups(rolled.rewards),
                "malformed_call_rate": rolled.malformed_call_rate,
                "finish_reasons": dict(sorted(rolled.finish_reasons.items())),
                "rollout_s": rolled.rollout_s,
            }
        )
    return observations, summaries


def assign_steps(
    observations: Sequence[Observation], steps: int, seed: int = 0
) -> list[Observation]:
    """The observations of one round, each task moved to one of ``steps`` steps at random
    (a seeded permutation cut into near-equal parts), so each step's tasks are unseen before."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    order = np.random.default_rng(seed).permutation(len(observations))
    step_of = np.empty(len(observations), np.int64)
    for step, part in enumerate(np.array_split(order, steps)):
        step_of[part] = step
    return [
        Observation(o.task_id, int(s), o.rewards, o.reward)
        for o, s in zip(observations, step_of.tolist(), strict=True)
    ]
