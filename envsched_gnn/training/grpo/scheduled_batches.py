"""The stream of GRPO batches: where the scheduler chooses the tasks of each step.

Lightning pulls one item per training step from :class:`ScheduledBatches`; its generator
asks the scheduler for step ``s``'s tasks only when the step is about to run (the module's
``training_step`` takes the iterator, so Lightning does not prefetch), that is after
``observe(s - 1, ...)``: the scheduler always chooses with every earlier reward known.
Under DDP the choice is made once, on rank 0, and broadcast to all ranks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from torch.utils.data import IterableDataset

if TYPE_CHECKING:
    from envsched_gnn.scheduler.base import Scheduler


@dataclass(frozen=True)
class ScheduledBatch:
    """The tasks chosen for one step, how long choosing took, and how each was picked
    (:func:`pick_record`)."""

    step: int
    task_ids: tuple[str, ...]
    schedule_s: float
    picks: dict[str, Any] = field(default_factory=dict)


def pick_record(scheduler: Scheduler, task_ids: tuple[str, ...]) -> dict[str, Any]:
    """``stage`` and ``score`` of each of ``task_ids`` at its pick, from ``last_batch`` or {}."""
    info = getattr(scheduler, "last_batch", None)
    if info is None or list(info.batch) != list(task_ids):
        return {}
    score = [info.score[t] for t in task_ids] if info.score else None
    return {"stage": [info.stage.get(t) for t in task_ids], "score": score}


class ScheduledBatches(IterableDataset):
    """Yields :class:`ScheduledBatch` for steps ``first_step() .. steps - 1``.

    Args:
        scheduler: chooses the tasks (only used where ``is_chooser()`` is true).
        steps: the run's number of steps.
        first_step: the next step to run, read when iteration starts (a resumed run
            continues at its checkpoint's step).
        broadcast: shares rank 0's choice with every rank (identity in one process).
        is_chooser: true on the process that chooses (global rank 0).
    """

    def __init__(
        self,
        scheduler: Scheduler,
        steps: int,
        first_step: Callable[[], int],
        broadcast: Callable[[Any], Any] = lambda obj: obj,
        is_chooser: Callable[[], bool] = lambda: True,
    ) -> None:
        super().__init__()
        self.scheduler = scheduler
        self.steps = steps
        self.first_step = first_step
        self.broadcast = broadcast
        self.is_chooser = is_chooser

    def __iter__(self) -> Iterator[ScheduledBatch]:
        step = self.first_step()
        while step < self.steps:
            start = time.perf_counter()
            chosen = None
            if self.is_chooser():
                task_ids = tuple(self.scheduler.next_batch(step))
                seconds = time.perf_counter() - start
                chosen = (task_ids, seconds, pick_record(self.scheduler, task_ids))
            task_ids, schedule_s, picks = self.broadcast(chosen)
            yield ScheduledBatch(step, task_ids, schedule_s, picks)
            step += 1
