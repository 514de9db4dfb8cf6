"""Uniform random selection: B distinct tasks drawn uniformly without replacement each step
(the paper's "random" baseline; per step, not shuffled epochs).
"""

from __future__ import annotations

import numpy as np

from envsched_gnn.scheduler.base import BaseScheduler

RANDOM = "random"


class UniformScheduler(BaseScheduler):
    """B tasks uniformly at random without replacement, from a generator seeded by (seed, step)."""

    name = "random"

    def __init__(self, graph, *, batch_size: int = 64, seed: int = 0, config: None = None) -> None:
        super().__init__(graph, batch_size=batch_size, seed=seed)

    def _select(self, step: int, size: int):
        eligible = np.flatnonzero(self.eligible)
        indices = self.rng(step).choice(eligible, size, replace=False)
        return indices, [RANDOM] * size, [], {}
