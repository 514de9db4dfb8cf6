"""GRPO as a LightningModule with manual optimisation, a scheduler choosing every batch.

One training step ``s``:

1. the data stream yields the B tasks the scheduler chose for ``s`` (rank 0 chooses,
   every rank receives the same batch);
2. the B x K episodes are rolled out with the current policy, whole groups dealt to the
   ranks round-robin;
3. rewards (and tool calls) are gathered on every rank; an over-sampling scheduler
   (DAPO-style ``filter_groups``) keeps some groups, all rollouts still count;
4. group-relative advantages (``grpo`` or ``dr_grpo``) and ``ppo_epochs`` passes over the kept
   groups, each pass cut (in a seeded order) into ``mini_batches`` optimiser steps of the
   clipped token-level loss against the rollout policy's log-probabilities; a mini-batch's
   gradients accumulate over micro-batches of one task each, whose shared prompt runs once
   (:mod:`~envsched_gnn.training.grpo_batch`); gradient clipping, AdamW, linear warm-up;
5. ``scheduler.observe(s, rewards)`` on rank 0 and the observations to the store through the
   buffered sink; per-step metrics under the stable names of spec section 6.

Metrics each step: ``batch/*`` (spec section 6, over all groups rolled out; ``tools_used`` =
distinct (environment, tool) pairs called), ``batch/rollouts`` (every rollout, filtered
ones included), ``train/loss`` and ``train/kl`` (to the initial policy; means over the step's
optimiser steps), ``train/clip_fraction`` and ``train/approx_kl`` (k3 estimate of
KL(pi_old || pi) against the rollout policy, over the policy tokens of every pass; both 0 on
the first mini-batch), ``train/entropy`` (the rollout policy's mean entropy on its tokens),
``train/grad_norm`` (before clipping), ``train/lr``, ``train/advantage_abs_mean``,
``train/advantage_token_mass`` (mean |A| per policy token), ``train/nonzero_advantage_token_share``,
``train/tokens_per_s`` (sequence tokens through the update per second),
``rollout/policy_tokens_per_s`` (tokens sampled per second of the rollout),
``rollout/calls_per_episode``, ``rollout/malformed_per_episode``, ``rollout/answered_share``
(episodes that ended with a final answer, not a limit), ``time/rollout_s``,
``time/schedule_s``, ``time/update_s``; ``eval/mean_reward`` at each held-out evaluation.

Checkpoints carry the scheduler state, the unwritten observations, the RNG states
(:mod:`~envsched_gnn.training.rng`), the step and the per-step metrics, so a resumed run chooses
exactly the batches the uninterrupted run would have; the run's batches and rewards are not
stored a second time: a resumed run reads them back from the scheduler's observation log.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader

from envsched_gnn.envs.pool import Pool
from envsched_gnn.envs.runtime import EnvRuntime
from envsched_gnn.envs.runtime_config import RuntimeConfig
from envsched_gnn.observations import observations_from_rewards
from envsched_gnn.scheduler.base import Scheduler
from envsched_gnn.scheduler.metrics import batch_metrics
from envsched_gnn.training.agent_format import AgentConfig
from envsched_gnn.training.data import ScheduledBatch, ScheduledBatches
from envsched_gnn.training.grpo import (
    aggregate_tokens,
    clip_fraction,
    get_advantage_estimator,
    kl_penalty,
    policy_loss,
    scale_negative,
)
from envsched_gnn.training.grpo_batch import (
    UpdateItem,
    collate,
    pack_micro_batches,
    policy_log_probs,
    split_groups,
)
from envsched_gnn.training.grpo_config import GRPOConfig
from envsched_gnn.training.observation_sink import ObservationSink
from envsched_gnn.training.rng import capture_rng_state, restore_rng_state, step_seed
from envsched_gnn.training.rollout import Episode, EpisodeSpec, RolloutEngine

CHECKPOINT_KEY = "envsched"
Evaluator = Callable[[RolloutEngine, int], dict[str, float]]


@dataclass(frozen=True)
class EpisodeRecord:
    """What every rank learns about one episode of the step (gathered across ranks)."""

    index: int
    task_id: str
    reward: float
    tools: frozenset[tuple[str, str]]
    policy_tokens: int
    calls: int = 0
    malformed: int = 0
    answered: bool = False


class GRPOModule(L.LightningModule):
    """GRPO on a pool of executable environments with a scheduler in the loop.

    Args:
        policy: a Hugging Face causal LM (the module trains it in place).
        tokenizer: its tokenizer (with a chat template).
        pool: the environments and tasks.
        scheduler: chooses the batches (``envsched_gnn.scheduler.registry.make_scheduler``);
            its observation log holds this run's steps only (a resumed run reads its batches
            and rewards back from it).
        config: the run's :class:`GRPOConfig`.
        agent_config: turn and token limits and the sampling temperature of the rollouts.
        runtime_config: worker processes of the environment runtime (started when fitting
            starts, stopped at teardown).
        sink: buffered writer of observations to the graph store (used on rank 0), or None.
        evaluator: ``evaluator(engine, step) -> {"mean_reward": ..., ...}`` on held-out tasks,
            run before the first step and every ``config.eval_every`` steps, or None.
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
        self.runtime: EnvRuntime | None = None
        self.engine: RolloutEngine | None = None
        self.pool = pool
        self.scheduler = scheduler
        self.config = config
        self.sink = sink
        self.evaluator = evaluator
        self.max_response_tokens = self.agent_config.max_turns * self.agent_config.max_new_tokens
        self.advantage_fn = get_advantage_estimator(config.advantage_estimator)
        self.ref_policy = _frozen_copy(policy) if config.kl_coef > 0 else None
        self.env_of = {task.task_id: task.env_id for task in pool.tasks}
        self.tools_of = {env_id: set(env.tool_names) for env_id, env in pool.envs.items()}
        self.next_step = 0
        self.rollouts_total = 0
        self.local_rollouts_total = 0
        self.step_metrics: list[dict[str, float]] = []
        self.eval_results: list[dict[str, float]] = []
        self.batches: list[list[str]] = []
        self.rewards: list[dict[str, list[float]]] = []

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
        stream = ScheduledBatches(
            self.scheduler,
            self.config.steps,
            first_step=lambda: self.next_step,
            broadcast=lambda obj: self.trainer.strategy.broadcast(obj, src=0),
            is_chooser=lambda: self.global_rank == 0,
        )
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
        if self.next_step == 0 and not self.eval_results:
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

        start = time.perf_counter()
        episodes = self._rollout(batch)
        records = self._gather(episodes)
        rollout_s = time.perf_counter() - start

        rewards = {task_id: [] for task_id in batch.task_ids}
        for record in records:
            rewards[record.task_id].append(record.reward)
        kept = self._kept_tasks(step, rewards)

        start = time.perf_counter()
        update = self._update(step, episodes, records, kept)
        update_s = time.perf_counter() - start

        if self.global_rank == 0:
            self.scheduler.observe(step, rewards)
            if self.sink is not None:
                self.sink.put(observations_from_rewards(step, rewards))
        self.rewards.append(rewards)
        self.rollouts_total += len(records)
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
                "batch/kept_groups": float(len(kept)),
                "train/rollouts_total": float(self.rollouts_total),
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
        if config.eval_every and (
            self.next_step % config.eval_every == 0 or self.next_step == config.steps
        ):
            self._evaluate(self.next_step)

    def _rollout(self, batch: ScheduledBatch) -> list[tuple[int, Episode]]:
        """This rank's share of the B x K episodes, as (global index, episode): whole groups,
        dealt round-robin, so that a group's episodes share their prompt in the update.

        Episode (task, sample) draws its tokens from a generator seeded by (step seed, task,
        sample), so the episodes do not depend on how they are split across ranks.
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

    def _kept_tasks(self, step: int, rewards: Mapping[str, list[float]]) -> list[str]:
        """All tasks, or those an over-sampling scheduler keeps (decided on rank 0); every
        rollout counts towards the budget either way."""
        if not self.scheduler.over_samples:
            return list(rewards)
        kept = list(self.scheduler.filter_groups(step, rewards)) if self.global_rank == 0 else None
        return list(self.trainer.strategy.broadcast(kept, src=0))

    # ----------------------------------------------------------------- the update
    def _update(
        self,
        step: int,
        episodes: Sequence[tuple[int, Episode]],
        records: Sequence[EpisodeRecord],
        kept: Sequence[str],
    ) -> dict[str, float]:
        """``ppo_epochs`` passes over the kept groups, each split (in a seeded order) into
        ``mini_batches`` optimiser steps; every rank takes its episodes of each mini-batch."""
        config = self.config
        kept_set = set(kept)
        kept_records = [r for r in records if r.task_id in kept_set]
        rewards = torch.tensor([r.reward for r in kept_records], dtype=torch.float64)
        advantages = self.advantage_fn(rewards, config.group_size) if kept_records else rewards
        advantages = scale_negative(advantages, config.negative_advantage_scale)
        advantage_of = {r.index: float(a) for r, a in zip(kept_records, advantages, strict=True)}
        mine = [
            UpdateItem(advantage_of[index], episode)
            for index, episode in episodes
            if index in advantage_of
        ]
        groups = list(dict.fromkeys(r.task_id for r in kept_records))
        order = torch.Generator().manual_seed(step_seed(config.seed, step))
        sums = dict.fromkeys(_UPDATE_SUMS, 0.0)
        for epoch in range(config.ppo_epochs):
            shuffled = [groups[i] for i in torch.randperm(len(groups), generator=order).tolist()]
            for part in split_groups(shuffled, config.mini_batches):
                chosen = set(part)
                part_records = [r for r in kept_records if r.task_id in chosen]
                items = [item for item in mine if item.episode.task_id in chosen]
                done = self._optimizer_step(items, part_records, first_pass=epoch == 0)
                for name, value in done.items():
                    sums[name] += value
        totals = torch.tensor(list(sums.values()), dtype=torch.float64, device=self.device)
        totals = self.trainer.strategy.reduce(totals, reduce_op="sum")
        sums = dict(zip(sums, totals.tolist(), strict=True))
        n = float(config.optimizer_steps_per_step)
        world = self.trainer.world_size
        policy_tokens = max(sums["policy_tokens"], 1.0)
        first_pass_tokens = max(sums["first_pass_policy_tokens"], 1.0)
        token_advantages = [(r.policy_tokens, abs(advantage_of[r.index])) for r in kept_records]
        all_tokens = max(sum(t for t, _ in token_advantages), 1)
        return {
            "train/loss": sums["loss"] / world / n,
            "train/kl": sums["kl"] / world / n,
            "train/clip_fraction": sums["clipped"] / policy_tokens,
            "train/approx_kl": sums["approx_kl"] / policy_tokens,
            "train/entropy": sums["entropy"] / first_pass_tokens,
            "train/grad_norm": sums["grad_norm"] / world / n,
            "train/lr": sums["lr"] / world / n,
            "train/advantage_abs_mean": float(advantages.abs().mean()) if kept_records else 0.0,
            "train/advantage_token_mass": sum(t * a for t, a in token_advantages) / all_tokens,
            "train/nonzero_advantage_token_share": (
                sum(t for t, a in token_advantages if a > 0) / all_tokens
            ),
            "train/tokens": sums["tokens"],
            "train/optimizer_steps": n,
        }

    def _optimizer_step(
        self,
        items: Sequence[UpdateItem],
        part_records: Sequence[EpisodeRecord],
        first_pass: bool,
    ) -> dict[str, float]:
        """One optimiser step on a mini-batch (this rank's ``items`` of the groups of
        ``part_records``, which cover every rank): gradients accumulated over micro-batches,
        clipped, one AdamW step, one learning-rate schedule step. Returns this rank's sums."""
        config = self.config
        world = self.trainer.world_size
        if config.loss_aggregation == "token_mean":
            denominator = float(sum(r.policy_tokens for r in part_records))
        else:
            denominator = float(len(part_records) * self.max_response_tokens)
        # DDP averages gradients over ranks; scaling by the world size makes the sum of the
        # ranks' partial losses the loss of the whole mini-batch.
        denominator = max(denominator, 1.0) / world
        sums = dict.fromkeys(_UPDATE_SUMS, 0.0)
        optimizer = self.optimizers()
        optimizer.zero_grad(set_to_none=True)
        micro_batches = pack_micro_batches(
            items, config.micro_batch_size, config.micro_batch_tokens
        ) or [[]]  # an idle rank still takes part in the gradient synchronisation
        for i, micro in enumerate(micro_batches):
            last = i == len(micro_batches) - 1
            with nullcontext() if last else self._no_sync():
                parts = self._micro_loss(micro, denominator, first_pass)
                self.manual_backward(parts.pop("loss_tensor"))
            for name, value in parts.items():
                sums[name] += value
        trainable = [p for p in self.policy.parameters() if p.requires_grad]
        sums["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(trainable, config.max_grad_norm))
        sums["lr"] = float(optimizer.param_groups[0]["lr"])
        # with nothing in the mini-batch every gradient is None and AdamW leaves the weights
        # (and its moments) alone; the step still counts, so the schedule stays in line
        optimizer.step()
        self.lr_schedulers().step()
        return sums

    def _micro_loss(
        self, micro: Sequence[UpdateItem], denominator: float, first_pass: bool
    ) -> dict[str, Any]:
        """The micro-batch's share of the mini-batch loss (``/ denominator``) and its sums
        (entropy of the rollout policy: first pass only)."""
        config = self.config
        if not micro:
            zero = sum(p.sum() for p in self.policy.parameters()) * 0.0
            return {"loss_tensor": zero}
        batch = collate(micro, self.device)
        temperature = self.agent_config.temperature
        logp, entropy = policy_log_probs(self.policy, batch, temperature)
        ones = torch.ones_like(logp)
        loss = policy_loss(
            logp, batch.old_logp, batch.advantages, ones, config.clip, "token_sum_norm",
            denominator,
        )  # fmt: skip
        kl = torch.zeros((), device=self.device)
        if self.ref_policy is not None:
            with torch.no_grad():
                ref_logp, _ = policy_log_probs(self.ref_policy, batch, temperature)
            kl = aggregate_tokens(kl_penalty(logp, ref_logp), ones, denominator=denominator)
            loss = loss + config.kl_coef * kl
        detached = logp.detach()
        tokens = float(batch.policy_tokens)
        return {
            "loss_tensor": loss,
            "loss": float(loss.detach()),
            "kl": float(kl.detach()),
            "clipped": float(clip_fraction(detached, batch.old_logp, ones, config.clip)) * tokens,
            "approx_kl": float(kl_penalty(batch.old_logp, detached).sum()),
            "entropy": float(entropy.sum()) if first_pass else 0.0,
            "policy_tokens": tokens,
            "first_pass_policy_tokens": tokens if first_pass else 0.0,
            "tokens": float(batch.tokens),
        }

    def _no_sync(self):
        block = getattr(self.trainer.strategy, "block_backward_sync", None)
        return block() if block is not None else nullcontext()

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
            "local_rollouts_total": self.local_rollouts_total,
            "scheduler": self.scheduler.state_dict(),
            "sink": self.sink.state_dict() if self.sink is not None else None,
            "step_metrics": self.step_metrics,
            "eval_results": self.eval_results,
            "config": self.config.to_dict(),
            "rng": capture_rng_state(self.config.seed),
        }

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        state = checkpoint[CHECKPOINT_KEY]
        if state["config"]["seed"] != self.config.seed:
            raise ValueError(
                f"checkpoint was trained with seed {state['config']['seed']}, "
                f"this run has seed {self.config.seed}: resuming would not continue that run"
            )
        self.next_step = int(state["next_step"])
        self.rollouts_total = int(state["rollouts_total"])
        self.local_rollouts_total = int(state["local_rollouts_total"])
        self.scheduler.load_state_dict(state["scheduler"])
        if self.sink is not None and state["sink"] is not None:
            self.sink.load_state_dict(state["sink"])
        self.step_metrics = list(state["step_metrics"])
        self.eval_results = list(state["eval_results"])
        self.batches, self.rewards = _run_history(state["scheduler"], self.next_step)
        restore_rng_state(state["rng"])


def _run_history(
    scheduler_state: Mapping[str, Any], steps: int
) -> tuple[list[list[str]], list[dict[str, list[float]]]]:
    """The batches and rewards of steps ``0 .. steps - 1``, read from a scheduler state's
    observation log (``state["log"]["observations"]``: ``{"task_id", "step", "rewards"}`` in
    the order observed; each step observed every task of its batch, in batch order)."""
    rewards: list[dict[str, list[float]]] = [{} for _ in range(steps)]
    for row in scheduler_state["log"]["observations"]:
        if row["step"] < steps:
            rewards[row["step"]][row["task_id"]] = [float(r) for r in row["rewards"]]
    return [list(step) for step in rewards], rewards


def _frozen_copy(policy: torch.nn.Module) -> torch.nn.Module:
    ref = copy.deepcopy(policy)
    ref.eval()
    for parameter in ref.parameters():
        parameter.requires_grad_(False)
    return ref


_UPDATE_SUMS = (
    "loss",
    "kl",
    "clipped",
    "approx_kl",
    "entropy",
    "grad_norm",
    "lr",
    "policy_tokens",
    "first_pass_policy_tokens",
    "tokens",
)
