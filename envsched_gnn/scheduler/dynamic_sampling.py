"""Dynamic sampling in front of any scheduler: over-sample, drop zero-variance groups, refill.

DAPO's dynamic sampling (Yu et al., 2025, section 3.2, as verl's DAPO recipe runs it) as a
composition: the wrapped scheduler picks every *generation batch*, the groups it rolls out are
filtered, and each update trains on B informative groups. With P the groups pending and I(s)
the groups of generation batch s whose K rewards are not all equal, P' = P + I(s). If
|P'| >= B the step updates on the first B of P' (with ``surplus = "keep"``, the default, at
most B - 1 of the rest stays pending for the next update, one update off-policy; with
``"drop"``, verl's, none); else if P' waited ``max_generation_batches`` generation batches or
the budget ends with this one (``final``), the step updates on all of P'; else P' stays
pending and the step makes no update. Every group rolled out is observed by the wrapped
scheduler, the zero-variance ones too (they are history).

The size G of a generation batch (``generation``), with m = B - |P| the groups missing:

    fixed    G = ceil(o B)                                     (o = 1, B with accumulation, the
                                                                default; verl's recipe: o = 2)
    greso    G = min(ceil(o_max B), ceil(alpha m / (1 - p)))   (GRESO, arXiv 2506.02177:
                                                                alpha = 1.25; o_max = 2)

p is the expected zero-variance share of the batch. A scheduler that predicts each task's
P(v > 0) (the spread target's E_z, spec 9.3) gives p = 1 - mean E_z over its own picks: G is
chosen with the last generation batch's share p_0, then once more with the share predicted
for those G_0 picks. Every other scheduler uses p_0, the zero-variance share of the last
generation batch rolled out, as GRESO's code does (none yet: G = ceil(o_max B)). G is also capped
at the selectable tasks and at what the caller's rollout budget has left (``limit``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from envsched_gnn.graph.task_graph import TaskGraph
from envsched_gnn.observations import Observation, ObservationLog, validate_rewards
from envsched_gnn.scheduler.base import BatchInfo, Scheduler, SchedulerError
from envsched_gnn.scheduler.groups import GroupKey, GroupSelection
from envsched_gnn.scheduler.selections import SelectionHistory
from envsched_gnn.validation import check_bounds, config_error

SUFFIX = "+ds"
"""``NAME+ds``: the registered scheduler ``NAME`` behind dynamic sampling."""
GENERATION_RULES = ("fixed", "greso")
SURPLUS_RULES = ("drop", "keep")


@dataclass(frozen=True)
class DynamicSamplingConfig:
    """How generation batches are sized and what becomes of the groups an update cannot take."""

    generation: str = "fixed"
    """Tasks per generation batch: ``fixed``, G = ceil(oversample B); ``greso``, G =
    ceil(headroom m / (1 - p)) capped at ceil(max_oversample B), with m the groups missing
    from B and p the expected zero-variance share (the spread target's prediction, else the
    last batch's). Default: B with accumulation, the first seed's choice on ``poolw``
    (docs/results/dynamic-sampling.md)."""
    oversample: float = 1.0
    """o: the ``fixed`` generation batch in units of B (1: B with accumulation; verl's DAPO
    recipe: 2); >= 1."""
    max_oversample: float = 2.0
    """The cap of ``greso``'s generation batch in units of B (GRESO caps it at its default
    generation size); >= 1."""
    headroom: float = 1.25
    """alpha: how many more groups than the expected informative ones ``greso`` rolls out
    (GRESO's 1.25); >= 1."""
    surplus: str = "keep"
    """Informative groups beyond B at an update: ``keep`` (up to B - 1 of them train at the
    next update, one update off-policy; fewer groups rolled out per group trained under every
    rule on ``poolw``) or ``drop`` (verl's recipe)."""
    max_generation_batches: int = 10
    """DAPO's ``max_num_gen_batches``: after this many generation batches without B groups
    with spread, the update takes the groups pending (verl raises an error there instead;
    a comparison at a fixed budget has to go on); 10 as in verl's recipe scripts; >= 1."""

    def __post_init__(self) -> None:
        names = ("oversample", "max_oversample", "headroom", "max_generation_batches")
        check_bounds(self, at_least=dict.fromkeys(names, 1))
        for name, allowed in (("generation", GENERATION_RULES), ("surplus", SURPLUS_RULES)):
            if getattr(self, name) not in allowed:
                raise config_error(self, name, getattr(self, name), f"one of {allowed}")


DAPO_RECIPE = DynamicSamplingConfig(oversample=2.0, surplus="drop")
"""verl's DAPO recipe: a fixed generation batch of 2B, the surplus dropped, 10 batches at most."""


@dataclass(frozen=True)
class Refill:
    """One generation batch through :class:`GroupRefill`: the selection, the zero-variance task
    ids of the batch, the surplus dropped and kept, and the rollouts of every group named."""

    selection: GroupSelection
    zero_variance: tuple[str, ...]
    dropped: tuple[GroupKey, ...]
    kept: tuple[GroupKey, ...]
    rollouts: Mapping[GroupKey, int]


class GroupRefill:
    """The accumulation rule of the module docstring, on group rewards alone.

    Args:
        batch_size: B, the groups of a full update.
        max_generation_batches: generation batches after which the update takes what is pending.
        keep_surplus: keep up to B - 1 surplus groups pending for the next update.
    """

    def __init__(self, batch_size: int, max_generation_batches: int, keep_surplus: bool) -> None:
        self.batch_size = batch_size
        self.max_generation_batches = max_generation_batches
        self.keep_surplus = keep_surplus
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
            return Refill(GroupSelection((), tuple(pending)), zero_variance, (), (), rollouts)
        update, surplus = pending[: self.batch_size], pending[self.batch_size :]
        kept = surplus[: self.batch_size - 1] if self.keep_surplus and not final else []
        dropped = surplus[len(kept) :]
        self.pending = {key: rollouts[key] for key in kept}
        self.generation_batches = 0
        selection = GroupSelection(tuple(update), tuple(kept))
        return Refill(selection, zero_variance, tuple(dropped), tuple(kept), rollouts)

    def state_dict(self) -> dict:
        return {
            "pending": [[s, t, n] for (s, t), n in self.pending.items()],
            "generation_batches": self.generation_batches,
        }

    def load_state_dict(self, state: dict) -> None:
        self.pending = {(int(s), str(t)): int(n) for s, t, n in state["pending"]}
        self.generation_batches = int(state["generation_batches"])


COUNTERS = ("rollouts_spent", "rollouts_trained", "rollouts_wasted", "groups_spent", "updates")
"""The run totals a :class:`DynamicSampling` keeps (and its checkpoint carries)."""


class DynamicSampling:
    """A scheduler behind dynamic sampling (module docstring); itself a
    :class:`~envsched_gnn.scheduler.base.Scheduler`.

    Args:
        scheduler: picks every generation batch (any registered scheduler).
        config: generation rule and surplus, default :class:`DynamicSamplingConfig` ().
        name: the name in metrics and state (default ``scheduler.name + "+ds"``).

    Metrics (``sampling/*``, per generation batch, and run totals): groups generated,
    zero-variance, trained, dropped and kept; generation batches waited; the expected
    zero-variance share the size was chosen with; rollouts spent, trained and wasted.
    """

    over_samples = True

    def __init__(
        self,
        scheduler: Scheduler,
        config: DynamicSamplingConfig | None = None,
        *,
        name: str | None = None,
    ) -> None:
        if scheduler.over_samples:
            raise SchedulerError(f"scheduler {scheduler.name!r} already over-samples")
        self.inner = scheduler
        self.config = config if config is not None else DynamicSamplingConfig()
        self.name = name if name is not None else scheduler.name + SUFFIX
        self.refill = GroupRefill(
            scheduler.batch_size, self.config.max_generation_batches, self.config.surplus == "keep"
        )
        self.totals = dict.fromkeys(COUNTERS, 0)
        self.last_zero_share: float | None = None
        """The zero-variance share of the last generation batch rolled out (None: none yet)."""
        self._expected_share: float | None = None
        self._step_counts: dict[str, float] = {}

    # -- what callers read of the wrapped scheduler ------------------------------------------
    @property
    def batch_size(self) -> int:
        """B: the groups of one update."""
        return self.inner.batch_size

    @property
    def last_batch(self) -> BatchInfo | None:
        return self.inner.last_batch

    @property
    def last_prediction(self):
        """The wrapped scheduler's last prediction (None for those without a predictor)."""
        return getattr(self.inner, "last_prediction", None)

    @property
    def task_ids(self) -> list[str]:
        return self.inner.task_ids

    @property
    def log(self) -> ObservationLog:
        """Every group the wrapped scheduler observed."""
        return self.inner.log

    # -- driving -----------------------------------------------------------------------------
    def generation_size(self, limit: int | None = None) -> int:
        """G for the next generation batch with the last batch's zero-variance share (module
        docstring), capped at ``limit`` groups."""
        return self._size(self.last_zero_share, limit)

    def _size(self, zero_share: float | None, limit: int | None) -> int:
        c = self.config
        size = math.ceil(c.oversample * self.batch_size)
        if c.generation == "greso":
            size = cap = math.ceil(c.max_oversample * self.batch_size)
            if zero_share is not None:
                missing = self.batch_size - len(self.refill.pending)
                informative = max(1.0 - zero_share, 1.0 / cap)  # all zero: the cap
                size = min(cap, math.ceil(c.headroom * missing / informative - 1e-9))
        selectable = int(self.inner.eligible.sum())
        size = min(size, selectable, limit if limit is not None else size)
        if size < 1:
            raise SchedulerError(
                f"no generation batch fits: limit {limit}, {selectable} selectable tasks"
            )
        return size

    def next_batch(self, step: int, size: int | None = None) -> list[str]:
        """The next generation batch: G tasks of the wrapped scheduler, at most ``size`` (the
        groups the caller's budget has left)."""
        chosen = self._size(self.last_zero_share, size)
        batch = self.inner.next_batch(step, chosen)
        self._expected_share = self.last_zero_share
        spread = self.inner.last_batch.spread if self.inner.last_batch is not None else {}
        if self.config.generation == "greso" and spread:
            predicted = 1.0 - sum(spread.values()) / len(spread)
            resized = self._size(predicted, size)
            if resized != chosen:
                batch = self.inner.next_batch(step, resized)
            self._expected_share = predicted
        return batch

    def observe(self, step: int, rewards: Mapping[str, Sequence[float]]) -> None:
        self.inner.observe(step, rewards)

    def filter_groups(
        self, step: int, rewards: Mapping[str, Sequence[float]], *, final: bool = False
    ) -> GroupSelection:
        """Observe every group rolled out at ``step`` and apply the refill rule (module
        docstring); ``final``: the last generation batch the budget allows."""
        for task_id, group in rewards.items():
            validate_rewards(group, task_id=task_id, step=step)
        self.inner.observe(step, rewards)
        waited = self.refill.generation_batches + 1
        refill = self.refill.add(step, rewards, final=final)
        size = refill.rollouts
        update = refill.selection.update
        spent = sum(len(group) for group in rewards.values())
        wasted = sum(size[step, t] for t in refill.zero_variance)
        wasted += sum(size[key] for key in refill.dropped)
        self.totals["rollouts_spent"] += spent
        self.totals["rollouts_trained"] += sum(size[key] for key in update)
        self.totals["rollouts_wasted"] += wasted
        self.totals["groups_spent"] += len(rewards)
        self.totals["updates"] += int(bool(update))
        self.last_zero_share = len(refill.zero_variance) / len(rewards) if rewards else None
        expected = self._expected_share
        self._step_counts = {
            "sampling/groups_generated": float(len(rewards)),
            "sampling/groups_zero_variance": float(len(refill.zero_variance)),
            "sampling/groups_trained": float(len(update)),
            "sampling/groups_dropped": float(len(refill.dropped)),
            "sampling/groups_kept": float(len(refill.kept)),
            "sampling/groups_pending": float(len(refill.selection.pending)),
            "sampling/generation_batches": float(waited),
            "sampling/expected_zero_share": math.nan if expected is None else expected,
            "sampling/rollouts_spent": float(spent),
            "sampling/rollouts_wasted": float(wasted),
            **{f"sampling/{name}_total": float(n) for name, n in self.totals.items()},
        }
        return GroupSelection(update, refill.selection.pending, dict(self._step_counts))

    def observe_generation(self, step: int, rewards: Mapping[str, Sequence[float]]) -> None:
        """Observe generation batch ``step``, every group back, where a trainer's own filter
        settles the groups instead of :meth:`filter_groups` (verl's ``filter_groups``, prime-rl's
        gates): the wrapped scheduler observes each group and the next generation size reads
        this batch's zero-variance share; no refill rule runs and nothing is counted."""
        for task_id, group in rewards.items():
            validate_rewards(group, task_id=task_id, step=step)
        self.inner.observe(step, rewards)
        zero = sum(min(group) == max(group) for group in rewards.values())
        self.last_zero_share = zero / len(rewards) if rewards else None

    def metrics(self) -> dict[str, float]:
        return {**self.inner.metrics(), **self._step_counts}

    # -- a live pool -------------------------------------------------------------------------
    def grow(self, graph: TaskGraph) -> None:
        self.inner.grow(graph)

    def retire(self, env_ids: Iterable[str]) -> None:
        self.inner.retire(env_ids)

    def reinstate(self, env_ids: Iterable[str]) -> None:
        self.inner.reinstate(env_ids)

    @property
    def retired(self) -> frozenset[str]:
        return self.inner.retired

    @property
    def selections(self) -> SelectionHistory:
        """The wrapped scheduler's selections: one batch per generation batch."""
        return self.inner.selections

    def load_history(self, observations: Iterable[Observation]) -> None:
        self.inner.load_history(observations)

    # -- state -------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "name": self.name,
            "scheduler": self.inner.state_dict(),
            "refill": self.refill.state_dict(),
            "totals": dict(self.totals),
            "last_zero_share": self.last_zero_share,
        }

    def load_state_dict(self, state: dict) -> None:
        if state.get("name") != self.name:
            raise SchedulerError(
                f"scheduler state has name = {state.get('name')!r}, this scheduler has "
                f"{self.name!r}"
            )
        self.inner.load_state_dict(state["scheduler"])
        self.refill.load_state_dict(state["refill"])
        self.totals = {name: int(state["totals"].get(name, 0)) for name in COUNTERS}
        self.last_zero_share = state["last_zero_share"]
        self._expected_share = None
        self._step_counts = {}
