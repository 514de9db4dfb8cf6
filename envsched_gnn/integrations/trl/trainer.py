"""``EnvSchedGRPOTrainer``: TRL's ``GRPOTrainer`` (1.16) with a scheduler choosing every batch.

It overrides ``_get_train_sampler`` (:class:`ScheduledSlots`), ``_generate_and_score_completions``
(step s's B tasks chosen when its round is generated, after ``observe(s - 1)``; slot b's rows
become task ``batch[b]``'s, on every rank) and ``train`` (the scheduler restored from the
checkpoint's ``envsched_state.json``); :class:`EnvSchedCallback` observes and checkpoints. One
scheduler step is one round of ``generation_batch_size = B * K``. A scheduler that over-samples
(``NAME+ds``, ``dapo``) is refused (``integrations.schedulers.check_adapter_scheduler``): TRL
generates exactly B x K per round and trains on all of it; dynamic sampling runs in
``train grpo``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from transformers.trainer_utils import get_last_checkpoint
from trl import GRPOTrainer

from envsched_gnn.integrations.rewards import RoundRewards
from envsched_gnn.integrations.schedulers import check_adapter_scheduler
from envsched_gnn.integrations.trl.callback import EnvSchedCallback
from envsched_gnn.integrations.trl.sampler import ScheduledSlots
from envsched_gnn.observations import Observation
from envsched_gnn.scheduler.base import Scheduler


class EnvSchedGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` whose prompts are chosen by ``scheduler`` before each rollout round.

    Args:
        *args, **kwargs: ``GRPOTrainer``'s (``model``, ``reward_funcs``, ``args``,
            ``train_dataset`` (rows with a ``task_id`` column, e.g. ``pool_dataset``),
            ``environment_factory``, ...).
        scheduler: chooses B tasks per step (``adapter_scheduler("trl", ...)``); its task ids
            must be rows of ``train_dataset``.
        rewards: the :class:`RoundRewards` the reward functions / environments fill.
        write_observations: where each step's observations go (a store), optional.
        print_steps: print each step's scheduler metrics (default False).
    """

    def __init__(
        self,
        *args: Any,
        scheduler: Scheduler,
        rewards: RoundRewards,
        write_observations: Callable[[Sequence[Observation]], object] | None = None,
        print_steps: bool = False,
        **kwargs: Any,
    ) -> None:
        check_adapter_scheduler("trl", scheduler)
        self.envsched = EnvSchedCallback(scheduler, rewards, write_observations, print_steps)
        kwargs["callbacks"] = [*(kwargs.get("callbacks") or []), self.envsched]
        super().__init__(*args, **kwargs)
        batch = self.args.generation_batch_size // self.num_generations
        if batch != scheduler.batch_size:
            raise ValueError(
                f"generation_batch_size {self.args.generation_batch_size} / num_generations "
                f"{self.num_generations} = {batch} prompts per round, but the scheduler's batch "
                f"size B is {scheduler.batch_size}; make them equal"
            )
        columns = self.train_dataset.column_names
        if "task_id" not in columns:
            raise ValueError(f"train_dataset needs a 'task_id' column, it has {columns}")
        self._task_rows = {row["task_id"]: dict(row) for row in self.train_dataset}
        missing = sorted(set(scheduler.task_ids) - set(self._task_rows))
        if missing:
            raise ValueError(
                f"{len(missing)} task(s) of the scheduler's graph are not rows of train_dataset, "
                f"e.g. {missing[:3]}"
            )
        first = list(self.train_dataset["task_id"][:batch])
        if len(set(first)) != batch:
            raise ValueError("the first B rows of train_dataset must have distinct task ids")
        self._slot_of = {task_id: slot for slot, task_id in enumerate(first)}

    def _get_train_sampler(self, dataset=None) -> ScheduledSlots:
        dataset = self.train_dataset if dataset is None else dataset
        batch = self.args.generation_batch_size // self.num_generations
        return ScheduledSlots(
            batch_size=batch,
            group_size=self.num_generations,
            repeat_count=self.num_iterations * self.args.steps_per_generation,
            rounds=max(1, len(dataset) // batch),
        )

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        if self.model.training:
            batch = self.envsched.choose(self.num_generations)
            inputs = [dict(self._task_rows[batch[self._slot_of[row["task_id"]]]]) for row in inputs]
        return super()._generate_and_score_completions(inputs)

    def train(self, resume_from_checkpoint: str | bool | None = None, **kwargs: Any):
        if resume_from_checkpoint is True:
            resume_from_checkpoint = get_last_checkpoint(self.args.output_dir)
            if resume_from_checkpoint is None:
                raise FileNotFoundError(f"no checkpoint-N folder in {self.args.output_dir}")
        if resume_from_checkpoint:
            self.envsched.load(resume_from_checkpoint)
        return super().train(resume_from_checkpoint=resume_from_checkpoint, **kwargs)

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if self.model.training and self.envsched.step_metrics and "loss" in logs:
            logs = {**logs, **self.envsched.step_metrics[-1]}
            logs.pop("step", None)
        super().log(logs, start_time)
