"""DAPO's dynamic sampling: over-sample uniformly, drop zero-variance groups, refill.

Yu et al., 2025, "DAPO: An Open-Source LLM Reinforcement Learning System at Scale", section
3.2, as verl's DAPO recipe runs it. Each step draws G = min(ceil(oversample * B), selectable)
tasks uniformly; with P the pending groups and I(s) step s's groups with reward spread,
P' = P + I(s). If |P'| >= B the step updates on the first B (the rest wasted); else if P' waited
``max_generation_batches`` or the step is ``final`` it updates on all of P'; else P' stays
pending. ``dapo/rollouts_spent_total`` = ``trained`` + ``wasted`` + ``dapo/rollouts_pending``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from envsched_gnn.observations import validate_rewards
from envsched_gnn.scheduler.base import BaseScheduler
from envsched_gnn.scheduler.groups import GroupKey, GroupSelection
from envsched_gnn.validation import check_bounds

OVERSAMPLED = "oversampled"


@dataclass(frozen=True)
class DapoConfig:
    """Dynamic-sampling settings."""

    oversample: float = 2.0
    """Generation batch = ceil(oversample * B) tasks (capped at the pool size); >= 1."""
    max_generation_batches: int = 10
    """DAPO's ``max_num_gen_batches``: after this many generation batches without B groups
    with spread, the update takes the groups pending (verl raises an error there instead,
    "Generated too many"; a comparison at a fixed budget has to go on). 10 is the value of
    verl's DAPO recipe scripts; with ``oversample`` 2 it is 20 B groups drawn, reached only
    where fewer than one group in 20 has spread; >= 1."""

    def __post_init__(self) -> None:
        check_bounds(self, at_least={"oversample": 1, "max_generation_batches": 1})


@dataclass(frozen=True)
class Refill:
    """One generation batch through :class:`DynamicSampling`: its selection, zero-variance task ids,
    trimmed pending groups, and the rollouts of every group named.
    """

    selection: GroupSelection
    zero_variance: tuple[str, ...]
    trimmed: tuple[GroupKey, ...]
    rollouts: Mapping[GroupKey, int]


class DynamicSampling:
    """DAPO's accumulation rule (module docstring) on group rewards alone.

    Args:
        batch_size: B, the groups of a full update.
        max_generation_batches: generation batches after which the update takes what is pending.
    """

    def __init__(self, batch_size: int, max_generation_batches: int) -> None:
        self.batch_size = batch_size
        self.max_generation_batches = max_generation_batches
        self.pending: dict[GroupKey, int] = {}
        """The groups pending, in the order rolled out, with their rollouts."""
        self.generation_batches = 0
        """Generation batches since the last update."""

    def add(self, step: int, rewards: Mapping[str, Sequence[float]], *, final: bool) -> Refill:
        """Step ``step``'s groups (``{task_id: K rewards}``, in batch order); ``final``: the
        last generation batch of the run, whatever is pending is trained now."""
        rollouts = {**self.pending, **{(step, t): len(group) for t, group in rewards.items()}}
        spread = {t for t, group in rewards.items() if min(group) != max(group)}
        pending = [*self.pending, *((step, t) for t in rewards if t in spread)]
        zero_variance = tuple(t for t in rewards if t not in spread)
        waited = self.generation_batches + 1
        if len(pending) < self.batch_size and waited < self.max_generation_batches and not final:
            self.pending = {key: rollouts[key] for key in pending}
            self.generation_batches = waited
            return Refill(GroupSelection((), tuple(pending)), zero_variance, (), rollouts)
        update, trimmed = pending[: self.batch_size], pending[self.batch_size :]
        self.pending, self.generation_batches = {}, 0
        return Refill(GroupSelection(tuple(update)), zero_variance, tuple(trimmed), rollouts)

    def state_dict(self) -> dict:
        return {
            "pending": [[s, t, n] for (s, t), n in self.pending.items()],
            "generation_batches": self.generation_batches,
        }

    def load_state_dict(self, state: dict) -> None:
        self.pending = {(int(s), str(t)): int(n) for s, t, n in state["pending"]}
        self.generation_batches = int(state["generation_batches"])


class DapoScheduler(BaseScheduler):
    """Over-samples with ``next_batch``; ``filter_groups`` applies :class:`DynamicSampling` and
    counts every rollout in ``dapo/*`` metrics (groups generated, zero-variance, trained,
    trimmed, pending; generation batches; rollouts spent and wasted; run totals).
    """

    name = "dapo"
    over_samples = True

    def __init__(
        self, graph, *, batch_size: int = 64, seed: int = 0, config: DapoConfig | None = None
    ) -> None:
        super().__init__(graph, batch_size=batch_size, seed=seed)
        self.config = config if config is not None else DapoConfig()
        self.sampling = DynamicSampling(self.batch_size, self.config.max_generation_batches)
        self.rollouts_spent = 0
        self.rollouts_trained = 0
        self.rollouts_wasted = 0
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

    def filter_groups(
        self, step: int, rewards: Mapping[str, Sequence[float]], *, final: bool = False
    ) -> GroupSelection:
        """Record every group rolled out at ``step`` and apply the refill rule (module
        docstring); ``final``: the last generation batch the budget allows."""
        for task_id, group in rewards.items():
            validate_rewards(group, task_id=task_id, step=step)
        self.observe(step, rewards)
        waited = self.sampling.generation_batches + 1
        refill = self.sampling.add(step, rewards, final=final)
        selection, size = refill.selection, refill.rollouts
        spent = sum(len(group) for group in rewards.values())
        trained = sum(size[key] for key in selection.update)
        wasted = sum(size[step, t] for t in refill.zero_variance)
        wasted += sum(size[key] for key in refill.trimmed)
        self.rollouts_spent += spent
        self.rollouts_trained += trained
        self.rollouts_wasted += wasted
        self._step_counts = {
            "dapo/groups_generated": float(len(rewards)),
            "dapo/groups_zero_variance": float(len(refill.zero_variance)),
            "dapo/groups_trained": float(len(selection.update)),
            "dapo/groups_trimmed": float(len(refill.trimmed)),
            "dapo/groups_pending": float(len(selection.pending)),
            "dapo/generation_batches": float(waited),
            "dapo/rollouts_spent": float(spent),
            "dapo/rollouts_wasted": float(wasted),
            "dapo/rollouts_spent_total": float(self.rollouts_spent),
            "dapo/rollouts_trained_total": float(self.rollouts_trained),
            "dapo/rollouts_wasted_total": float(self.rollouts_wasted),
            "dapo/rollouts_pending": float(sum(self.sampling.pending.values())),
        }
        return GroupSelection(selection.update, selection.pending, dict(self._step_counts))

    def metrics(self) -> dict[str, float]:
        return {**super().metrics(), **self._step_counts}

    def _extra_state(self) -> dict:
        return {
            "rollouts_spent": self.rollouts_spent,
            "rollouts_trained": self.rollouts_trained,
            "rollouts_wasted": self.rollouts_wasted,
            "sampling": self.sampling.state_dict(),
        }

    def _load_extra_state(self, state: dict) -> None:
        self.rollouts_spent = int(state.get("rollouts_spent", 0))
        self.rollouts_trained = int(state.get("rollouts_trained", 0))
        self.rollouts_wasted = int(state.get("rollouts_wasted", 0))
        # a state saved before refill existed has nothing pending
        self.sampling.load_state_dict(
            state.get("sampling", {"pending": [], "generation_batches": 0})
        )
        self._step_counts = {}
