"""DAPO-style dynamic sampling: over-sample uniformly, roll out all, drop zero-variance groups.

Keeps: DAPO's dynamic sampling (Yu et al., 2025, "DAPO: An Open-Source LLM Reinforcement
Learning System at Scale", section 3.2): a generation batch larger than the training batch
is rolled out, groups whose K rewards are all equal (zero advantage) are filtered out after
the rollouts, and at most B of the remaining groups are trained on. Every rollout of the
generation batch is counted as spent, the filtered and the surplus ones included.
Simplifies: one generation batch of ``ceil(oversample * B)`` tasks per step (DAPO repeats
generation batches until B groups survive, up to ``max_num_gen_batches``); when fewer than
B groups survive, the step trains on fewer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from envsched_gnn.observations import validate_rewards
from envsched_gnn.scheduler.base import BaseScheduler

OVERSAMPLED = "oversampled"


@dataclass(frozen=True)
class DapoConfig:
    """Dynamic-sampling settings."""

    oversample: float = 2.0
    """Generation batch = ceil(oversample * B) tasks (capped at the pool size); >= 1."""

    def __post_init__(self) -> None:
        if not self.oversample >= 1.0:
            raise ValueError(f"DapoConfig.oversample = {self.oversample!r}, expected >= 1")


class DapoScheduler(BaseScheduler):
    """Over-samples with ``next_batch``; ``filter_groups`` keeps at most B non-zero-variance groups.

    ``rollouts_spent`` / ``rollouts_kept`` count rollouts (groups times K) over the run.
    """

    name = "dapo"
    over_samples = True

    def __init__(
        self, graph, *, batch_size: int = 64, seed: int = 0, config: DapoConfig | None = None
    ) -> None:
        super().__init__(graph, batch_size=batch_size, seed=seed)
        self.config = config if config is not None else DapoConfig()
        self.rollouts_spent = 0
        self.rollouts_kept = 0
        self._step_counts: dict[str, float] = {}

    @property
    def generation_size(self) -> int:
        """ceil(oversample * B), capped at the selectable tasks."""
        wanted = math.ceil(self.config.oversample * self.batch_size)
        return min(int(self.eligible.sum()), wanted)

    def _select(self, step: int):
        size = self.generation_size
        indices = self.rng(step).choice(np.flatnonzero(self.eligible), size, replace=False)
        return indices, [OVERSAMPLED] * size, [], {}

    def filter_groups(self, step: int, rewards: Mapping[str, Sequence[float]]) -> list[str]:
        """Record every group rolled out at ``step``; return the kept ids (<= B, in order).

        A group is dropped when its K rewards are all equal; beyond B surviving groups the
        rest are dropped too. All their rollouts count as spent.
        """
        for task_id, group in rewards.items():
            validate_rewards(group, task_id=task_id, step=step)
        self.observe(step, rewards)
        informative = [t for t, group in rewards.items() if min(group) != max(group)]
        kept = informative[: self.batch_size]
        spent = sum(len(group) for group in rewards.values())
        kept_rollouts = sum(len(rewards[t]) for t in kept)
        self.rollouts_spent += spent
        self.rollouts_kept += kept_rollouts
        self._step_counts = {
            "dapo/groups_generated": float(len(rewards)),
            "dapo/groups_zero_variance": float(len(rewards) - len(informative)),
            "dapo/groups_kept": float(len(kept)),
            "dapo/rollouts_spent": float(spent),
            "dapo/rollouts_wasted": float(spent - kept_rollouts),
            "dapo/rollouts_spent_total": float(self.rollouts_spent),
            "dapo/rollouts_kept_total": float(self.rollouts_kept),
        }
        return kept

    def metrics(self) -> dict[str, float]:
        return {**super().metrics(), **self._step_counts}

    def _extra_state(self) -> dict:
        return {"rollouts_spent": self.rollouts_spent, "rollouts_kept": self.rollouts_kept}

    def _load_extra_state(self, state: dict) -> None:
        self.rollouts_spent = int(state.get("rollouts_spent", 0))
        self.rollouts_kept = int(state.get("rollouts_kept", 0))
        self._step_counts = {}
