"""GRPO as a LightningModule with manual optimisation, a scheduler choosing every batch.

One step of the step loop (:class:`~envsched_gnn.scheduler.steps.StepLoop`): rank 0's
scheduler picks the step's tasks, their K episodes each are rolled out (groups dealt
round-robin to ranks), the loop settles them (the groups :mod:`.update` trains, those kept
pending, every group observed), and the update runs. The run ends when its budget of
``steps`` x B x K rollouts is spent. Checkpoints carry everything a resumed run needs to
continue exactly (scheduler, sink, RNG, step, rollouts, metrics, pending groups).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import nullcontext
from dataclasses import replace
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader

from envsched_gnn.envs.pool import Pool
from envsched_gnn.envs.runtime import EnvRuntime
from envsched_gnn.envs.runtime_config import RuntimeConfig
from envsched_gnn.observations import Observation, observations_from_rewards
from envsched_gnn.scheduler.base import Scheduler
from envsched_gnn.scheduler.metrics import batch_metrics
from envsched_gnn.scheduler.steps import ScheduledBatch, StepLoop
from envsched_gnn.training.agent_format import AgentConfig
from envsched_gnn.training.grpo.config import GRPOConfig
from envsched_gnn.training.grpo.episodes import (
    EpisodeRecord,
    HeldGroup,
    held_from_state,
    held_groups,
    held_state,
    merge_held_states,
    numbered,
)
from envsched_gnn.training.grpo.scheduled_batches import ScheduledBatches
from envsched_gnn.training.grpo.update import GRPOUpdate, UpdateHooks
from envsched_gnn.training.observation_sink import ObservationSink
from envsched_gnn.training.rng import capture_rng_state, restore_rng_state, step_seed
from envsched_gnn.training.rollout import Episode, EpisodeSpec, RolloutEngine

CHECKPOINT_KEY = "envsched"
Evaluator = Callable[[RolloutEngine, int], dict[str, float]]


class GRPOModule(L.LightningModule):
    """GRPO on a pool of executable environments with a scheduler in the loop.

    Args:
        policy: a Hugging Face causal LM (trained in place).
        tokenizer: its tokenizer (with a chat template).
        pool: the environments and tasks.
        scheduler: chooses the batches; its observation log holds this run's steps only.
        config: the run's :class:`GRPOConfig`.
        agent_config: turn and token limits and the sampling temperature of the rollouts.
        runtime_config: worker processes of the environment runtime (started at fit start) and
            its reward, which the scheduler's log and the sink's observations are told of.
        sink: buffered writer of observations to the graph store (rank 0), or None.
        evaluator: ``evaluator(engine, step) -> {"mean_reward": ..., ...}`` on held-out tasks,
            run before the first step, every ``config.eval_every`` steps, after the first step
            to reach each of ``config.eval_rollouts`` and after the last, or None.
    """

    def __init__(
        self,
        policy: torch.nn.Module,
        tokenizer: Any,
        pool: Pool,
        scheduler: Scheduler,
        config: GRPOConfig,
        *,
        agent_config: AgentConfig | None = None,
        runtime_config: RuntimeConfig | None = None,
        sink: ObservationSink | None = None,
        evaluator: Evaluator | None = None,
    ) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.policy = policy
        self.tokenizer = tokenizer
        self.agent_config = agent_config or AgentConfig()
        self.runtime_config = runtime_config or RuntimeConfig()
        scheduler.log.config = replace(scheduler.log.config, reward=self.runtime_config.reward)
        self.runtime: EnvRuntime | None = None
        self.engine: RolloutEngine | None = None
        self.pool = pool
        self.scheduler = scheduler
        self.config = config
        self.sink = sink
        self.evaluator = evaluator
        self.ref_policy = _frozen_copy(policy) if config.kl_coef > 0 else None
        self.grpo_update = GRPOUpdate(
            policy,
            config,
            temperature=self.agent_config.temperature,
            max_response_tokens=self.agent_config.max_turns * self.agent_config.max_new_tokens,
            ref_policy=self.ref_policy,
        )
        self.env_of = {task.task_id: task.env_id for task in pool.tasks}
        self.tools_of = {env_id: set(env.tool_names) for env_id, env in pool.envs.items()}
        self.next_step = 0
        self.updates_total = 0
        self.local_rollouts_total = 0
        self.step_metrics: list[dict[str, float]] = []
        self.eval_results: list[dict[str, float]] = []
        self.batches: list[list[str]] = []
        self.rewards: list[dict[str, list[float]]] = []
        self.picks: list[dict[str, Any]] = []
        self.loop: StepLoop[HeldGroup] = StepLoop(
            scheduler,
            config.group_size,
            config.rollout_budget,
            broadcast=lambda obj: self.trainer.strategy.broadcast(obj, src=0),
            is_chooser=lambda: self.global_rank == 0,
        )

    @property
    def rollouts_total(self) -> int:
        """Rollouts spent so far, every rank's."""
        return self.loop.spent

    # ----------------------------------------------------------------- Lightning wiring
    def configure_optimizers(self) -> dict[str, Any]:
        if self.config.freeze_embeddings:
            # the token embeddings (and the output head, when tied) keep their SFT values
            self.policy.get_input_embeddings().weight.requires_grad_(False)
            self.policy.get_output_embeddings().weight.requires_grad_(False)
        trainable = [p for p in self.policy.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(
            trainable, lr=self.config.lr, weight_decay=self.config.weight_decay
        )
        warmup = self.config.lr_warmup_steps
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda n: min(1.0, (n + 1) / warmup) if warmup else 1.0
        )
        return {"optimizer": optimizer, "lr_scheduler": schedule}

    def train_dataloader(self) -> DataLoader:
        stream = ScheduledBatches(self.loop, first_step=lambda: self.next_step)
        return DataLoader(stream, batch_size=None, num_workers=0)

    def on_fit_start(self) -> None:
        if self.engine is None:
            self.runtime = EnvRuntime(self.pool, self.runtime_config)
            self.runtime.start()
            self.engine = RolloutEngine(
                self.policy, self.tokenizer, self.runtime, self.agent_config, self.device, self.pool
            )
        if self.ref_policy is not None:
            self.ref_policy.to(self.device)

    def on_train_start(self) -> None:
        if self.loop.done:  # resumed from a run that spent its budget: nothing left to train
            self.trainer.should_stop = True  # (its stream is empty; the fit loop would spin)
        elif self.next_step == 0 and not self.eval_results:
            self._evaluate(0)

    def teardown(self, stage: str) -> None:
        if self.runtime is not None:
            self.runtime.close()
        self.runtime = self.engine = None

    # ------------------------------------------------------------------- the step
    def training_step(self, dataloader_iter) -> None:
        batch: ScheduledBatch = next(dataloader_iter)[0]
        step, config = batch.step, self.config
        self.batches.append(list(batch.task_ids))
        self.picks.append({"step": step, **batch.picks})

        start = time.perf_counter()
        episodes = self._rollout(batch)
        records = self._gather(episodes)
        rollout_s = time.perf_counter() - start

        rewards = {task_id: [] for task_id in batch.task_ids}
        for record in records:
            rewards[record.task_id].append(record.reward)
        spent_before = self.loop.spent
        groups = held_groups(batch.task_ids, episodes, records)
        trained, selection = self.loop.settle(step, rewards, groups)

        start = time.perf_counter()
        if trained:
            mine, update_records = numbered(trained, config.group_size)
            update = self.grpo_update(step, mine, update_records, self._update_hooks())
        else:
            update = self.grpo_update.idle(self._update_hooks())
        update_s = time.perf_counter() - start

        if self.global_rank == 0 and self.sink is not None:
            reward = self.runtime_config.reward
            self.sink.put(observations_from_rewards(step, rewards, reward))
        self.rewards.append(rewards)
        self.updates_total += int(bool(trained))
        self.local_rollouts_total += len(episodes)
        self.next_step = step + 1

        tools = set().union(*(record.tools for record in records))
        metrics = batch_metrics(rewards, self.env_of, len(tools))
        metrics.update(update)
        metrics.update(
            {
                "train/tokens_per_s": update["train/tokens"] / max(update_s, 1e-9),
                "rollout/calls_per_episode": sum(r.calls for r in records) / len(records),
                "rollout/malformed_per_episode": (sum(r.malformed for r in records) / len(records)),
                "rollout/answered_share": sum(r.answered for r in records) / len(records),
                "rollout/policy_tokens_per_s": (
                    sum(r.policy_tokens for r in records) / max(rollout_s, 1e-9)
                ),
                "batch/rollouts": float(len(records)),
                "batch/kept_groups": float(len(trained)),
                **selection.metrics,
                "train/rollouts_total": float(self.rollouts_total),
                "train/updates_total": float(self.updates_total),
                "time/rollout_s": rollout_s,
                "time/schedule_s": batch.schedule_s,
                "time/update_s": update_s,
            }
        )
        if self.sink is not None:
            metrics["store/pending_observations"] = float(self.sink.pending)
        self.step_metrics.append({"step": float(step), **metrics})
        shown = ("batch/mean_reward", "batch/mean_reward_variance")
        for prog_bar, names in ((True, shown), (False, [n for n in metrics if n not in shown])):
            self.log_dict(
                {name: metrics[name] for name in names},
                prog_bar=prog_bar,
                on_step=True,
                on_epoch=False,
                batch_size=len(records),
            )
        if self._evaluates_after(spent_before):
            self._evaluate(self.next_step)
        if self.loop.done:
            self.trainer.should_stop = True

    def _evaluates_after(self, spent_before: int) -> bool:
        """Whether the step that just spent rollouts ``spent_before .. loop.spent`` is followed
        by an evaluation: every ``eval_every`` steps, at the first step to reach a point of
        ``eval_rollouts``, and after the last step."""
        config = self.config
        if self.evaluator is None:
            return False
        every = config.eval_every and self.next_step % config.eval_every == 0
        crossed = any(spent_before < r <= self.loop.spent for r in config.eval_rollouts)
        return bool(every or crossed or self.loop.done)

    def _rollout(self, batch: ScheduledBatch) -> list[tuple[int, Episode]]:
        """This rank's share of the B x K episodes, as (global index, episode): whole groups dealt
        round-robin; seeds per (step seed, task, sample), so the split changes no episode.
        """
        k = self.config.group_size
        specs = [EpisodeSpec(task_id, sample) for task_id in batch.task_ids for sample in range(k)]
        rank, world = self.global_rank, self.trainer.world_size
        mine = [(i, spec) for i, spec in enumerate(specs) if (i // k) % world == rank]
        was_training = self.policy.training
        self.policy.eval()
        episodes = self.engine.rollout_episodes(
            [spec for _, spec in mine], seed=step_seed(self.config.seed, batch.step)
        )
        self.policy.train(was_training)
        return [(index, episode) for (index, _), episode in zip(mine, episodes, strict=True)]

    def _gather(self, episodes: Sequence[tuple[int, Episode]]) -> list[EpisodeRecord]:
        local = [
            EpisodeRecord(
                index=index,
                task_id=episode.task_id,
                reward=float(episode.reward),
                tools=self._tools_called(episode),
                policy_tokens=int(episode.policy_mask.sum()),
                calls=len(episode.tool_calls),
                malformed=episode.malformed_calls,
                answered=episode.finish_reason == "answer",
            )
            for index, episode in episodes
        ]
        gathered = [local]
        if self.trainer.world_size > 1:
            # the strategy gathers tensors only (``all_gather``); records are Python objects
            gathered = [None] * self.trainer.world_size
            torch.distributed.all_gather_object(gathered, local)
        return sorted((r for part in gathered for r in part), key=lambda r: r.index)

    def _tools_called(self, episode: Episode) -> frozenset[tuple[str, str]]:
        env_id = self.env_of[episode.task_id]
        known = self.tools_of[env_id]
        return frozenset((env_id, call.name) for call in episode.tool_calls if call.name in known)

    def _update_hooks(self) -> UpdateHooks:
        """What the update runs through: this module's optimiser, schedule and backward, and the
        trainer's strategy."""
        strategy = self.trainer.strategy
        return UpdateHooks(
            optimizer=self.optimizers(),
            lr_scheduler=self.lr_schedulers(),
            backward=self.manual_backward,
            # only parallel strategies have it (DDP's ``no_sync``)
            no_sync=getattr(strategy, "block_backward_sync", nullcontext),
            reduce_sum=lambda tensor: strategy.reduce(tensor, reduce_op="sum"),
            world_size=self.trainer.world_size,
            device=self.device,
        )

    # ------------------------------------------------------------------- evaluation
    def _evaluate(self, step: int) -> None:
        if self.evaluator is None:
            return
        result = None
        if self.global_rank == 0:
            was_training = self.policy.training
            self.policy.eval()
            result = {
                "step": step,
                "rollouts": self.rollouts_total,
                "updates": self.updates_total,
                **self.evaluator(self.engine, step),
            }
            self.policy.train(was_training)
        result = self.trainer.strategy.broadcast(result, src=0)
        self.eval_results.append(result)
        for logger in self.loggers:
            logger.log_metrics({"eval/mean_reward": result["mean_reward"]}, step=step)

    # ------------------------------------------------------------------ checkpoints
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint[CHECKPOINT_KEY] = {
            "next_step": self.next_step,
            "rollouts_total": self.rollouts_total,
            "updates_total": self.updates_total,
            "local_rollouts_total": self.local_rollouts_total,
            "scheduler": self.scheduler.state_dict(),
            "sink": self.sink.state_dict() if self.sink is not None else None,
            "step_metrics": self.step_metrics,
            "eval_results": self.eval_results,
            "picks": self.picks,
            "pending": self._pending_state(),
            "config": self.config.to_dict(),
            "rng": capture_rng_state(self.config.seed),
        }

    def _pending_state(self) -> list[dict[str, Any]]:
        """The pending groups with every rank's episodes of them: ``on_save_checkpoint`` runs
        on every rank, rank 0 writes the file."""
        local = held_state(self.loop.pending.groups, self.global_rank)
        parts = [local]
        if self.trainer.world_size > 1:
            parts = [None] * self.trainer.world_size
            torch.distributed.all_gather_object(parts, local)
        return merge_held_states(parts)

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        state = checkpoint[CHECKPOINT_KEY]
        if state["config"]["seed"] != self.config.seed:
            raise ValueError(
                f"checkpoint was trained with seed {state['config']['seed']}, "
                f"this run has seed {self.config.seed}: resuming would not continue that run"
            )
        self.next_step = int(state["next_step"])
        self.loop.spent = int(state["rollouts_total"])
        self.updates_total = int(state["updates_total"])
        self.local_rollouts_total = int(state["local_rollouts_total"])
        self.scheduler.load_state_dict(state["scheduler"])
        if self.sink is not None and state["sink"] is not None:
            self.sink.load_state_dict(state["sink"])
        self.step_metrics = list(state["step_metrics"])
        self.eval_results = list(state["eval_results"])
        self.picks = list(state.get("picks", []))  # absent from checkpoints of older versions
        self.loop.pending.groups = held_from_state(
            state.get("pending", []), self.global_rank, self.trainer.world_size
        )
        self.batches, self.rewards = _run_history(self.scheduler.log.observations(), self.next_step)
        restore_rng_state(state["rng"])


def _run_history(
    observations: Iterable[Observation], steps: int
) -> tuple[list[list[str]], list[dict[str, list[float]]]]:
    """The batches and rewards of steps ``0 .. steps - 1``, from the scheduler's observations."""
    rewards: list[dict[str, list[float]]] = [{} for _ in range(steps)]
    for o in observations:
        if o.step < steps:
            rewards[o.step][o.task_id] = [float(r) for r in o.rewards]
    return [list(step) for step in rewards], rewards


def _frozen_copy(policy: torch.nn.Module) -> torch.nn.Module:
    ref = copy.deepcopy(policy)
    ref.eval()
    for parameter in ref.parameters():
        parameter.requires_grad_(False)
    return ref
