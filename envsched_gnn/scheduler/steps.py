"""The step loop every learner runs: choose, roll out, settle, observe, within a rollout budget.

One step s of a learner (the GRPO module, ``eval ablate``'s simulator)::

    batch = loop.choose(s)                     # the scheduler's tasks, within the budget
    rewards, groups = roll_out(batch)          # K rollouts a task
    trained = loop.settle(s, rewards, groups)  # filter, keep pending, observe
    if trained: update(trained)

The budget is R rollouts, spent in whole groups of K. ``choose`` asks for at most the groups it
has left (B for a plain scheduler, fewer at the end; a scheduler behind dynamic sampling sizes
its own generation batch under that cap), and the step whose groups spend the last of it is
*final*: an over-sampling scheduler trains whatever it holds there. ``settle`` asks the
scheduler which groups the update trains (``filter_groups``), hands the learner their
payloads (:class:`~envsched_gnn.scheduler.groups.PendingGroups`, which keeps those the
scheduler keeps pending) and records every group rolled out (``observe``), so the next
``choose`` sees every earlier reward. Under data parallelism only the chooser (rank 0) asks
the scheduler; ``broadcast`` hands its answers to every rank, each rank keeps its own payloads.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from envsched_gnn.scheduler.base import Scheduler, SchedulerError
from envsched_gnn.scheduler.groups import GroupSelection, PendingGroups

T = TypeVar("T")


@dataclass(frozen=True)
class ScheduledBatch:
    """The tasks chosen for one step, how long choosing took, and how each was picked
    (:meth:`~envsched_gnn.scheduler.base.BatchInfo.picks`)."""

    step: int
    task_ids: tuple[str, ...]
    schedule_s: float
    picks: dict[str, Any] = field(default_factory=dict)


class StepLoop(Generic[T]):
    """A scheduler's side of a learner's steps, within a budget of rollouts (module docstring).

    Args:
        scheduler: chooses the batches and filters the groups.
        group_size: K, rollouts per task.
        budget: R, the rollouts the run may spend (a whole number of groups is spent).
        broadcast: shares the chooser's object with every rank (identity in one process).
        is_chooser: true on the process that asks the scheduler (global rank 0).
    """

    def __init__(
        self,
        scheduler: Scheduler,
        group_size: int,
        budget: int,
        *,
        broadcast: Callable[[Any], Any] = lambda obj: obj,
        is_chooser: Callable[[], bool] = lambda: True,
    ) -> None:
        if group_size < 1 or budget < group_size:
            raise SchedulerError(
                f"a budget of {budget} rollouts holds no group of K = {group_size} rollouts"
            )
        self.scheduler = scheduler
        self.group_size = group_size
        self.budget = budget
        self.broadcast = broadcast
        self.is_chooser = is_chooser
        self.spent = 0
        """Rollouts spent so far (restored with a checkpoint's)."""
        self.pending: PendingGroups[T] = PendingGroups()

    @property
    def groups_left(self) -> int:
        """Whole groups the budget has left."""
        return (self.budget - self.spent) // self.group_size

    @property
    def done(self) -> bool:
        return self.groups_left < 1

    def choose(self, step: int) -> ScheduledBatch:
        """Step ``step``'s tasks: B, or the groups the budget has left when fewer; a scheduler
        that over-samples picks its own number under that cap."""
        chosen = None
        if self.is_chooser():
            start = time.perf_counter()
            left = self.groups_left
            cap = left if self.scheduler.over_samples else min(left, self.scheduler.batch_size)
            task_ids = tuple(self.scheduler.next_batch(step, cap))
            info = self.scheduler.last_batch
            picks = info.picks(task_ids) if info is not None else {}
            chosen = ScheduledBatch(step, task_ids, time.perf_counter() - start, picks)
        return self.broadcast(chosen)

    def settle(
        self, step: int, rewards: Mapping[str, Sequence[float]], groups: Mapping[str, T]
    ) -> tuple[list[T], GroupSelection]:
        """Spend step ``step``'s groups (``rewards``: every task's K rewards, on every rank;
        ``groups``: this rank's payload of each task it rolled out); returns the payloads the
        update trains, in the selection's order, and the selection."""
        self.spent += sum(len(group) for group in rewards.values())
        final = self.done
        selection = None
        if self.is_chooser():
            selection = self.scheduler.filter_groups(step, rewards, final=final)
            self.scheduler.observe(step, rewards)
        selection = self.broadcast(selection)
        return self.pending.settle(step, groups, selection), selection
