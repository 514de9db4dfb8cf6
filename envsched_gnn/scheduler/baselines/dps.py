"""DPS-style selection: predict from a task's own history whether it is "partially solved".

Dynamics-Predictive Sampling (Mao et al., 2026, ICLR 2026, arXiv 2603.10887): states unsolved
(m = 0), partial (0 < m < 1), solved (m = 1), read off each observation; task i's transition
row is the Dirichlet posterior mean

    P_i(s -> s') = (kappa * T(s, s') + n_i(s, s')) / (kappa + sum_s'' n_i(s, s''))

(n_i its decayed counts, T the pool-wide matrix); the B tasks of largest
P_i(last state -> partial) are selected, unobserved tasks at the prior, filled at random.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from envsched_gnn.config_cli import check_bounds
from envsched_gnn.observations import Observation
from envsched_gnn.scheduler.base import BaseScheduler

UNSOLVED, PARTIAL, SOLVED = 0, 1, 2
PREDICTED = "predicted"
UNSEEN = "unseen"


def solving_state(mean: float) -> int:
    """0 unsolved (m = 0), 1 partially solved (0 < m < 1), 2 solved (m = 1)."""
    return UNSOLVED if mean <= 0.0 else SOLVED if mean >= 1.0 else PARTIAL


@dataclass(frozen=True)
class DpsConfig:
    """Transition-estimate settings."""

    kappa: float = 2.0
    """Strength of the pool-wide transition prior in each task's row (> 0)."""
    decay: float = 0.9
    """Forgetting of a task's own transition counts per new transition, in [0, 1]."""

    def __post_init__(self) -> None:
        check_bounds(self, positive=("kappa",), unit=("decay",))


class DpsScheduler(BaseScheduler):
    """Top-B by predicted probability of the partially-solved state, random fill when unseen."""

    name = "dps"

    def __init__(
        self, graph, *, batch_size: int = 64, seed: int = 0, config: DpsConfig | None = None
    ) -> None:
        super().__init__(graph, batch_size=batch_size, seed=seed)
        self.config = config if config is not None else DpsConfig()
        self._reset_stats()

    def _reset_stats(self) -> None:
        n = len(self.task_ids)
        self.last_state = np.full(n, -1, np.int64)
        self.task_counts = np.zeros((n, 3, 3), np.float64)
        self.pool_counts = np.zeros((3, 3), np.float64)
        self.state_counts = np.zeros(3, np.float64)

    def _on_observe(self, step: int, observations: list[Observation]) -> None:
        for o in observations:
            i = self.log.index_of(o.task_id)
            state = solving_state(o.mean)
            previous = self.last_state[i]
            if previous >= 0:
                row = self.config.decay * self.task_counts[i, previous]
                row[state] += 1.0
                self.task_counts[i, previous] = row
                self.pool_counts[previous, state] += 1.0
            self.last_state[i] = state
            self.state_counts[state] += 1.0

    def predicted_partial(self) -> np.ndarray:
        """P(partially solved at the next sampling) per task, (N,); unseen tasks the prior."""
        prior = (self.pool_counts + 1.0) / (self.pool_counts + 1.0).sum(axis=1, keepdims=True)
        seen = self.last_state >= 0
        unseen_prior = (self.state_counts[PARTIAL] + 1.0) / (self.state_counts.sum() + 3.0)
        out = np.full(len(self.task_ids), unseen_prior)
        last = self.last_state[seen]
        own = self.task_counts[np.flatnonzero(seen), last]
        kappa = self.config.kappa
        out[seen] = (kappa * prior[last, PARTIAL] + own[:, PARTIAL]) / (kappa + own.sum(axis=1))
        return out

    def _select(self, step: int, size: int):
        rng = self.rng(step)
        score = np.where(self.eligible, self.predicted_partial(), -np.inf)
        tie = rng.random(score.shape[0])
        order = np.lexsort((tie, -score))
        indices = order[:size]
        seen = self.last_state >= 0
        stages = [PREDICTED if seen[i] else UNSEEN for i in indices]
        extra = {"dps/mean_predicted_partial": float(score[indices].mean())}
        return indices, stages, [], extra
