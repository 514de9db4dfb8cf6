"""prime-rl: EnvSched as a ``TaskSampler`` of a prime-rl curriculum (prime-rl is not on PyPI:
not imported, tested against ``verifiers.v1``; usage: docs/trainers.md).

Each step's tasks (B; a generation batch of G for a scheduler that over-samples) are handed out
one ``__next__`` at a time, in batch order. prime-rl's curriculum calls ``observe`` with every
finished group, before its admission gates decide whether the group trains. A group's rewards
are those of its trainable, error-free traces (as prime-rl's ``DifficultyPoolSampler`` reads
them), observed for the step the task was handed out in; a group left with fewer than
``ObservationConfig.min_rewards`` is not observed. prime-rl runs ahead asynchronously, so step
s + 1 may be chosen before every group of step s is back: the choice uses what was observed so
far, late groups still count for their own step.

**What filters: prime-rl.** Its gates (``AdvantageRangeGate``: a group whose advantages are all
0 is not admitted) decide which groups train, and prime-rl keeps drawing tasks until its batch
is full. A scheduler behind dynamic sampling (``NAME+ds``, ``dapo``) only picks: its generation
batches are the steps here, sized by its rule, and once every group of one is back the
composition takes that batch's zero-variance share for the next size
(:func:`~envsched_gnn.integrations.schedulers.observe_generation`); its own refill (pending
groups, surplus, ``max_generation_batches``) does not run.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from envsched_gnn.integrations.schedulers import check_adapter_scheduler, observe_generation
from envsched_gnn.observations import ObservationConfig


def trainable_rewards(group: Sequence[Any]) -> list[float]:
    """Rewards of a group's trainable, error-free traces (``vf.Episode.traces``)."""
    return [
        float(trace.reward)
        for episode in group
        for trace in episode.traces
        if not trace.has_error and trace.agent.trainable
    ]


class EnvSchedTaskSampler(Iterator[Any]):
    """prime-rl ``TaskSampler`` over an envsched scheduler (see the module docstring).

    Args:
        scheduler: chooses each step's tasks (``adapter_scheduler("prime_rl", ...)``).
        tasks: the taskset's ``vf.Task`` objects; each must map to a task id of the graph.
        task_id_of: a task's id in the graph (default: its ``key``).
    """

    def __init__(
        self,
        scheduler: Any,
        tasks: Sequence[Any],
        task_id_of: Callable[[Any], str] = lambda task: task.key,
    ) -> None:
        self.scheduler = check_adapter_scheduler("prime_rl", scheduler)
        self.task_of: dict[str, Any] = {}
        self.task_id_of_key: dict[str, str] = {}
        for task in tasks:
            task_id = task_id_of(task)
            if task_id in self.task_of:
                raise ValueError(f"two tasks of the taskset have the task id {task_id!r}")
            self.task_of[task_id] = task
            self.task_id_of_key[task.key] = task_id
        missing = sorted(set(scheduler.task_ids) - set(self.task_of))
        if missing:
            raise ValueError(
                f"{len(missing)} task(s) of the scheduler's graph are not in the taskset, "
                f"e.g. {missing[:3]}"
            )
        self.step = -1
        self.queue: deque[str] = deque()
        self.issued: dict[str, deque[int]] = {}
        self.returned: dict[int, dict[str, list[float]]] = {}
        """The groups back of each generation batch not all back (an over-sampling scheduler)."""

    def __next__(self) -> Any:
        if not self.queue:
            self.step += 1
            self.queue.extend(self.scheduler.next_batch(self.step))
        task_id = self.queue.popleft()
        self.issued.setdefault(task_id, deque()).append(self.step)
        return self.task_of[task_id]

    def observe(self, group: list[Any]) -> None:
        """Record a finalised group of one task at the step it was handed out in."""
        if not group:
            return
        key = group[0].task.key
        task_id = self.task_id_of_key.get(key)
        if task_id is None:
            raise ValueError(f"a group of task key {key!r}, which this sampler never handed out")
        steps = self.issued.get(task_id)
        if not steps:
            raise ValueError(f"a group of task {task_id!r}, but none of it is outstanding")
        step = steps.popleft()
        rewards = trainable_rewards(group)
        if len(rewards) >= ObservationConfig.min_rewards:
            self.scheduler.observe(step, {task_id: rewards})
            if self.scheduler.over_samples:
                self.returned.setdefault(step, {})[task_id] = rewards
        if self.scheduler.over_samples and self._all_back(step):
            groups = self.returned.pop(step, {})
            if groups:
                observe_generation(self.scheduler, step, groups)

    def _all_back(self, step: int) -> bool:
        """Whether every task of step ``step`` was handed out and its group observed."""
        handed_out = step < self.step or not self.queue
        return handed_out and not any(step in steps for steps in self.issued.values())

    def state_dict(self) -> dict[str, Any]:
        return {
            "scheduler": self.scheduler.state_dict(),
            "step": self.step,
            "queue": list(self.queue),
            "issued": {task_id: list(steps) for task_id, steps in self.issued.items() if steps},
            "returned": {str(step): groups for step, groups in self.returned.items()},
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.scheduler.load_state_dict(state_dict["scheduler"])
        self.step = int(state_dict["step"])
        self.queue = deque(state_dict["queue"])
        self.issued = {t: deque(int(s) for s in steps) for t, steps in state_dict["issued"].items()}
        self.returned = {int(s): groups for s, groups in state_dict.get("returned", {}).items()}

    def metrics(self) -> dict[str, float]:
        """The scheduler's metrics of its last batch; none after a restore until the next
        batch is chosen (choosing the restored step again would replace its recorded
        selection with one made on later observations)."""
        return dict(self.scheduler.metrics())
