"""MoPPS-style selection: a Beta posterior per task on its success rate, Thompson-sampled.

Model Predictive Prompt Selection (Qu et al., 2025, arXiv 2507.04632): one posterior sample per
task, the B samples closest to 0.5 selected. Rewards enter as fractional successes, with
forgetting towards the prior at each update (observations in step order):

    alpha_i <- decay * alpha_i + (1 - decay) * alpha_0 + K m(i,s)
    beta_i  <- decay * beta_i  + (1 - decay) * beta_0  + K (1 - m(i,s))
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from envsched_gnn.config_cli import check_bounds
from envsched_gnn.observations import Observation
from envsched_gnn.scheduler.base import BaseScheduler

THOMPSON = "thompson"


@dataclass(frozen=True)
class MoppsConfig:
    """Posterior and target settings."""

    target: float = 0.5
    """Success rate aimed at: tasks with posterior samples closest to it are picked."""
    decay: float = 0.9
    """Forgetting factor of the streaming update, in [0, 1] (1 = no forgetting)."""
    prior_alpha: float = 1.0
    """alpha_0 of the Beta prior (> 0)."""
    prior_beta: float = 1.0
    """beta_0 of the Beta prior (> 0)."""

    def __post_init__(self) -> None:
        check_bounds(self, positive=("prior_alpha", "prior_beta"), unit=("target", "decay"))


class MoppsScheduler(BaseScheduler):
    """Thompson sampling of per-task Beta posteriors, picking samples closest to the target."""

    name = "mopps"

    def __init__(
        self, graph, *, batch_size: int = 64, seed: int = 0, config: MoppsConfig | None = None
    ) -> None:
        super().__init__(graph, batch_size=batch_size, seed=seed)
        self.config = config if config is not None else MoppsConfig()
        self._reset_stats()

    def _reset_stats(self) -> None:
        n = len(self.task_ids)
        self.alpha = np.full(n, self.config.prior_alpha, np.float64)
        self.beta = np.full(n, self.config.prior_beta, np.float64)

    def _on_observe(self, step: int, observations: list[Observation]) -> None:
        c = self.config
        for o in observations:
            i = self.log.index_of(o.task_id)
            k = len(o.rewards)
            self.alpha[i] = c.decay * self.alpha[i] + (1 - c.decay) * c.prior_alpha + k * o.mean
            self.beta[i] = c.decay * self.beta[i] + (1 - c.decay) * c.prior_beta + k * (1 - o.mean)

    def posterior_mean(self) -> np.ndarray:
        """E[p_i] = alpha_i / (alpha_i + beta_i), (N,)."""
        return self.alpha / (self.alpha + self.beta)

    def _select(self, step: int, size: int):
        rng = self.rng(step)
        sample = rng.beta(self.alpha, self.beta)
        distance = np.where(self.eligible, np.abs(sample - self.config.target), np.inf)
        order = np.lexsort((np.arange(distance.shape[0]), distance))
        indices = order[:size]
        extra = {"mopps/mean_sampled_rate": float(sample[indices].mean())}
        return indices, [THOMPSON] * size, [], extra
