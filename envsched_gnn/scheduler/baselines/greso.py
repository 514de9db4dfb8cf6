"""GRESO-style pre-rollout filtering: skip tasks that were zero-variance in their recent history.

GRESO (Zheng et al., 2025, arXiv 2506.02177): a task whose last z_i observations were all
zero-variance is skipped with probability 1 - p^z_i; p is kept for easy (mean >= 0.5) and hard
tasks and moves by ``step_p`` against its target share (clipped to [p_min, 1]). Tasks are
visited in a random order, the first B admitted form the batch, skipped ones fill the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from envsched_gnn.config_cli import check_bounds, config_error
from envsched_gnn.observations import Observation
from envsched_gnn.scheduler.base import BaseScheduler

ADMITTED = "admitted"
READMITTED = "filled"


@dataclass(frozen=True)
class GresoConfig:
    """Exploration-probability settings."""

    p_init: float = 0.5
    """Initial exploration probability of easy and of hard zero-variance tasks."""
    step_p: float = 0.05
    """Adjustment of each exploration probability per step."""
    target_easy_share: float = 0.125
    """Target share of all-solved (easy) zero-variance groups in a batch."""
    target_hard_share: float = 0.125
    """Target share of all-failed (hard) zero-variance groups in a batch."""
    p_min: float = 0.05
    """Floor of the exploration probabilities (> 0: every task can come back)."""

    def __post_init__(self) -> None:
        check_bounds(self, positive=("p_min",), non_negative=("step_p",), unit=("p_init",))
        if self.p_min > self.p_init:
            raise config_error(self, "p_min", self.p_min, f"<= p_init (= {self.p_init!r})")


class GresoScheduler(BaseScheduler):
    """Probabilistic skipping of recently zero-variance tasks with adaptive re-admission."""

    name = "greso"

    def __init__(
        self, graph, *, batch_size: int = 64, seed: int = 0, config: GresoConfig | None = None
    ) -> None:
        super().__init__(graph, batch_size=batch_size, seed=seed)
        self.config = config if config is not None else GresoConfig()
        self._reset_stats()

    def _reset_stats(self) -> None:
        n = len(self.task_ids)
        self.zero_streak = np.zeros(n, np.int64)
        self.last_easy = np.zeros(n, bool)
        self._step_shares: dict[int, list[int]] = {}

    def _on_observe(self, step: int, observations: list[Observation]) -> None:
        counts = self._step_shares.setdefault(step, [0, 0, 0])
        for o in observations:
            i = self.log.index_of(o.task_id)
            zero = min(o.rewards) == max(o.rewards)
            self.zero_streak[i] = self.zero_streak[i] + 1 if zero else 0
            self.last_easy[i] = o.mean >= 0.5
            counts[0] += 1
            counts[1] += int(zero and o.mean >= 0.5)
            counts[2] += int(zero and o.mean < 0.5)

    def exploration_probabilities(self, step: int) -> tuple[float, float]:
        """(p_easy, p_hard) in force at ``step``, adapted over the steps observed before it."""
        c = self.config
        p_easy = p_hard = c.p_init
        for s in sorted(s for s in self._step_shares if s < step):
            total, easy, hard = self._step_shares[s]
            if total:
                p_easy += -c.step_p if easy / total > c.target_easy_share else c.step_p
                p_hard += -c.step_p if hard / total > c.target_hard_share else c.step_p
                p_easy = min(1.0, max(c.p_min, p_easy))
                p_hard = min(1.0, max(c.p_min, p_hard))
        return p_easy, p_hard

    def _select(self, step: int, size: int):
        rng = self.rng(step)
        p_easy, p_hard = self.exploration_probabilities(step)
        p = np.where(self.last_easy, p_easy, p_hard)
        admit_probability = np.power(p, self.zero_streak)
        admitted = rng.random(len(self.task_ids)) < admit_probability
        order = rng.permutation(len(self.task_ids))
        order = order[self.eligible[order]]
        ranked = np.concatenate([order[admitted[order]], order[~admitted[order]]])
        indices = ranked[:size]
        stages = [ADMITTED if admitted[i] else READMITTED for i in indices]
        extra = {
            "greso/p_easy": p_easy,
            "greso/p_hard": p_hard,
            "greso/skipped": float((~admitted & self.eligible).sum()),
        }
        return indices, stages, [], extra
