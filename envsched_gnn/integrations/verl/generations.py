"""The generation batches of a verl run, framework-free: which scheduler step and task each
prompt's ``uid`` belongs to, and each batch's rewards until it is observed.

Every batch of prompts handed to verl's rollout is one scheduler step g = 0, 1, ...: the first
of each verl step is the scheduler's own (``next_batch(g)``: B tasks, or G for a scheduler that
over-samples), each refill verl's replay buffer asks for is exactly the n tasks it asks for
(:func:`~envsched_gnn.integrations.schedulers.exact_batch`). A sample's reward is added under
its uid when verl trains or clears its group; at the end of a verl step every group was one or
the other, so every batch chosen so far is observed then
(:func:`~envsched_gnn.integrations.schedulers.observe_generation`, which also gives the
composition its zero-variance share).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from envsched_gnn.integrations.schedulers import exact_batch, observe_generation
from envsched_gnn.scheduler.base import Scheduler


class GenerationBatches:
    """The generation batches of a verl run (module docstring).

    Args:
        scheduler: chooses every batch and observes every group.
    """

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self.next_step = 0
        """The scheduler step of the next generation batch (kept in checkpoints)."""
        self.of_uid: dict[str, tuple[int, str]] = {}
        self.rewards: dict[int, dict[str, list[float]]] = {}
        self.chosen: list[int] = []
        """The size of each batch chosen since the last :meth:`observe`."""

    def choose(self, size: int | None = None) -> tuple[list[str], list[str]]:
        """The task ids of the next generation batch and a fresh uid for each: the scheduler's
        own (``size`` None) or exactly ``size`` tasks (a refill)."""
        step = self.next_step
        if size is None:
            task_ids = self.scheduler.next_batch(step)
        else:
            task_ids = exact_batch(self.scheduler, step, size)
        uids = [str(uuid.uuid4()) for _ in task_ids]
        self.of_uid.update({uid: (step, t) for uid, t in zip(uids, task_ids, strict=True)})
        self.rewards[step] = {}
        self.chosen.append(len(task_ids))
        self.next_step += 1
        return task_ids, uids

    def add(
        self,
        uids: Sequence[str],
        rewards: Sequence[float],
        padding: Sequence[bool] | None = None,
    ) -> None:
        """Each sample's sequence reward under its prompt's uid; samples marked ``padding``
        (verl's copies that fill a batch) are left out."""
        padding = padding if padding is not None else [False] * len(uids)
        for uid, reward, pad in zip(uids, rewards, padding, strict=True):
            if pad:
                continue
            try:
                step, task_id = self.of_uid[str(uid)]
            except KeyError:
                raise ValueError(
                    f"a sample of uid {uid!r}, which no generation batch of this step has"
                ) from None
            self.rewards[step].setdefault(task_id, []).append(float(reward))

    def observe(self) -> dict[str, float]:
        """Observe every batch chosen so far (each group came back or never will; one left
        with fewer than ``min_rewards`` rewards, e.g. a failed session's, is no evidence) and
        forget them; returns the counts of this verl step (``verl/generation_batches``,
        ``verl/groups_generated``, ``verl/groups_observed``)."""
        least = self.scheduler.log.config.min_rewards
        observed = 0
        for step, groups in sorted(self.rewards.items()):
            groups = {t: rewards for t, rewards in groups.items() if len(rewards) >= least}
            if groups:
                observe_generation(self.scheduler, step, groups)
                observed += len(groups)
        counts = {
            "verl/generation_batches": float(len(self.chosen)),
            "verl/groups_generated": float(sum(self.chosen)),
            "verl/groups_observed": float(observed),
        }
        self.of_uid, self.rewards, self.chosen = {}, {}, []
        return counts

    def state_dict(self) -> dict:
        return {"next_step": self.next_step, "scheduler": self.scheduler.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.scheduler.load_state_dict(state["scheduler"])
        self.next_step = int(state["next_step"])
