"""DUMP-style selection: a UCB bandit over environments, scored by mean absolute advantage.

DUMP (Wang et al., 2025, arXiv 2504.09710), with c = 1.0, W = 300, tau = 0.1, eps = 1e-6:

    A(i,k)  = (r(i,k) - mean_k r(i,.)) / (std_k r(i,.) + eps)     (sample std, as verl's GRPO)
    L_e     = mean of |A| over the last W rollouts of e            (0 before any)
    UCB_e   = L_e + c * sqrt(2 ln(N + 1) / (n_e + 1))              (N = sum_e n_e rollouts)
    p_e     = exp(UCB_e / tau) / sum_e' exp(UCB_e' / tau)

Each slot samples an environment from p (among those with tasks left), then a task uniformly.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from envsched_gnn.config_cli import check_bounds
from envsched_gnn.observations import Observation
from envsched_gnn.scheduler.base import BaseScheduler

BANDIT = "bandit"


@dataclass(frozen=True)
class DumpConfig:
    """UCB and sampling settings (DUMP's code defaults)."""

    exploration_weight: float = 1.0
    """c: weight of the UCB exploration bonus sqrt(2 ln(N + 1) / (n_e + 1)) (>= 0)."""
    window_size: int = 300
    """W: an environment's learnability is the mean |advantage| of its last W rollouts."""
    temperature: float = 0.1
    """tau of the softmax that turns UCB scores into environment probabilities (> 0)."""
    normalize_std: bool = True
    """Divide centred rewards by the group's sample std (GRPO, as DUMP); False: Dr. GRPO."""
    eps: float = 1e-6
    """Added to the group std before dividing (> 0)."""

    def __post_init__(self) -> None:
        check_bounds(
            self,
            positive=("temperature", "eps"),
            non_negative=("exploration_weight",),
            at_least={"window_size": 1},
        )


def absolute_advantages(
    rewards: Sequence[float], normalize_std: bool = True, eps: float = 1e-6
) -> np.ndarray:
    """|A(k)| of one group: ``|r_k - mean(r)| / (std(r) + eps)`` (sample std), or undivided;
    ``(K,) -> (K,)``. A copy of :func:`~envsched_gnn.training.grpo.objective.group_advantages`
    (a lower layer), held equal by a test.
    """
    r = np.asarray(rewards, np.float64)
    if r.size < 2 or np.all(r == r[0]):
        return np.zeros_like(r)
    centred = np.abs(r - r.mean())
    return centred / (r.std(ddof=1) + eps) if normalize_std else centred


class DumpScheduler(BaseScheduler):
    """Environments sampled from a softmax over UCB scores; tasks uniform within them."""

    name = "dump"

    def __init__(
        self, graph, *, batch_size: int = 64, seed: int = 0, config: DumpConfig | None = None
    ) -> None:
        super().__init__(graph, batch_size=batch_size, seed=seed)
        self.config = config if config is not None else DumpConfig()
        self._graph_changed()
        self._reset_stats()

    def _graph_changed(self) -> None:
        self.members = [np.flatnonzero(self.env == e) for e in range(self.num_envs)]

    def _reset_stats(self) -> None:
        self.rollouts = np.zeros(self.num_envs, np.int64)
        self.windows = [deque(maxlen=self.config.window_size) for _ in range(self.num_envs)]

    def _on_observe(self, step: int, observations: list[Observation]) -> None:
        c = self.config
        for o in sorted(observations, key=lambda o: self.log.index_of(o.task_id)):
            e = self.env[self.log.index_of(o.task_id)]
            self.windows[e].extend(absolute_advantages(o.rewards, c.normalize_std, c.eps).tolist())
            self.rollouts[e] += len(o.rewards)

    def learnability(self) -> np.ndarray:
        """L_e: mean |advantage| over each environment's window, 0 before any rollout, (E,)."""
        return np.array([np.mean(w) if w else 0.0 for w in self.windows], np.float64)

    def ucb_scores(self) -> np.ndarray:
        """UCB_e = L_e + c sqrt(2 ln(N + 1) / (n_e + 1)), (E,)."""
        bonus = np.sqrt(2.0 * np.log(self.rollouts.sum() + 1.0) / (self.rollouts + 1.0))
        return self.learnability() + self.config.exploration_weight * bonus

    def env_probabilities(self) -> np.ndarray:
        """p_e = softmax(UCB / tau), (E,)."""
        logits = self.ucb_scores() / self.config.temperature
        weights = np.exp(logits - logits.max())
        return weights / weights.sum()

    def _select(self, step: int, size: int):
        rng = self.rng(step)
        p = self.env_probabilities()
        members = [m[self.eligible[m]] for m in self.members]  # retired environments: none
        left = np.array([len(m) for m in members], np.int64)
        order: dict[int, np.ndarray] = {}
        indices = []
        for _ in range(size):
            open_p = np.where(left > 0, p, 0.0)
            if open_p.sum() <= 0.0:  # the softmax underflowed on every open environment
                open_p = (left > 0).astype(np.float64)
            e = int(rng.choice(self.num_envs, p=open_p / open_p.sum()))
            if e not in order:
                order[e] = rng.permutation(members[e])
            indices.append(int(order[e][len(members[e]) - left[e]]))
            left[e] -= 1
        chosen = np.asarray(indices, np.int64)
        extra = {
            "dump/max_env_probability": float(p.max()),
            "dump/mean_learnability": float(self.learnability()[self.env[chosen]].mean()),
        }
        return chosen, [BANDIT] * size, [], extra
