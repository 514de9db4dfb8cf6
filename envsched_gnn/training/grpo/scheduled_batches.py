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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from torch.utils.data import IterableDataset

if TYPE_CHECKING:
    from envsched_gnn.scheduler.base import Scheduler


@dataclass(frozen=True)
class ScheduledBatch:
    """The tasks chosen for one step, and how long choosing took."""

    step: int
    task_ids: tuple[str, ...]
    schedule_s: float


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
                chosen = (tuple(self.scheduler.next_batch(step)), time.perf_counter() - start)
            task_ids, schedule_s = self.broadcast(chosen)
            yield ScheduledBatch(step, task_ids, schedule_s)
            step += 1
