"""The stream of GRPO batches: where the scheduler chooses the tasks of each step.

Lightning pulls one item per training step from :class:`ScheduledBatches`; its generator asks
the step loop (:class:`~envsched_gnn.scheduler.steps.StepLoop`) for step ``s``'s tasks only
when the step is about to run (the module's ``training_step`` takes the iterator, so Lightning
does not prefetch), that is after step ``s - 1`` settled and observed its rewards: the
scheduler always chooses with every earlier reward known. The stream ends when the loop's
rollout budget is spent. Under DDP the loop chooses once, on rank 0, and broadcasts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from torch.utils.data import IterableDataset

if TYPE_CHECKING:
    from envsched_gnn.scheduler.steps import ScheduledBatch, StepLoop


class ScheduledBatches(IterableDataset):
    """Yields a :class:`~envsched_gnn.scheduler.steps.ScheduledBatch` per step from
    ``first_step()`` on, until ``loop`` has spent its budget.

    Args:
        loop: the step loop whose scheduler chooses.
        first_step: the next step to run, read when iteration starts (a resumed run
            continues at its checkpoint's step).
    """

    def __init__(self, loop: StepLoop, first_step: Callable[[], int]) -> None:
        super().__init__()
        self.loop = loop
        self.first_step = first_step

    def __iter__(self) -> Iterator[ScheduledBatch]:
        step = self.first_step()
        while not self.loop.done:
            yield self.loop.choose(step)
            step += 1
