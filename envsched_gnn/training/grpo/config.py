"""The configuration of a GRPO run with a scheduler in the loop (one object flows through it),
and where its Lightning trainer runs (kept apart from the trainer so the CLI loads fast)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from envsched_gnn.config_cli import check_bounds, config_error
from envsched_gnn.scheduler.dynamic_sampling import DynamicSamplingConfig
from envsched_gnn.scheduler.registry import is_scheduler_name, scheduler_names_expected
from envsched_gnn.training.grpo.objective import ADVANTAGE_ESTIMATORS, LOSS_AGGREGATIONS


@dataclass
class GRPOConfig:
    """GRPO with EnvSched choosing every batch; defaults are the paper's (spec section 1)."""

    scheduler: str = "envsched"
    """Scheduler name in ``envsched_gnn.scheduler.registry`` (EnvSched, ablations, baselines;
    ``NAME+ds``: behind dynamic sampling)."""
    batch_size: int = 64
    """B: tasks per step, the groups of an update (the paper's 64)."""
    group_size: int = 8
    """K: rollouts per task (the paper's 8)."""
    steps: int = 200
    """The rollout budget in steps of B x K rollouts (the paper's 200): a plain scheduler
    makes this many steps; one behind dynamic sampling rolls out more groups a step and
    so makes fewer updates with the same rollouts."""
    sampling: DynamicSamplingConfig = field(default_factory=DynamicSamplingConfig)
    """Dynamic sampling of a ``NAME+ds`` scheduler: generation rule and surplus."""
    advantage_estimator: str = "grpo"
    """``grpo`` divides by the group std; ``dr_grpo`` (Dr. GRPO) does not."""
    negative_advantage_scale: float = 1.0
    """Negative advantages are multiplied by this (1: GRPO; below 1 damps the push-down)."""
    loss_aggregation: str = "token_mean"
    """``token_mean`` over all policy tokens of the batch, or ``token_sum_norm`` (Dr. GRPO)."""
    clip: float = 0.2
    """PPO clip range epsilon of the ratio."""
    kl_coef: float = 0.0
    """Weight of the k3 KL penalty to the initial policy; 0 turns it off (no reference copy)."""
    lr: float = 1e-6
    """AdamW learning rate (verl's usual value for billion-parameter policies)."""
    lr_warmup_steps: int = 0
    """Optimiser steps of linear learning-rate warm-up from lr / warmup (0: none)."""
    ppo_epochs: int = 1
    """Optimisation passes over each step's episodes (1, with 1 mini-batch: on-policy GRPO)."""
    mini_batches: int = 1
    """Optimiser steps per pass (verl's ppo_mini_batch_size = B / mini_batches)."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    freeze_embeddings: bool = False
    """Train the transformer blocks only, keeping token embeddings and output head fixed."""
    max_grad_norm: float = 1.0
    """Gradients are clipped to this global norm before each optimiser step."""
    micro_batch_size: int = 16
    """Most episodes per forward/backward pass; a step's gradients accumulate over them."""
    micro_batch_tokens: int = 16384
    """Most padded tokens (episodes x longest) per forward/backward pass: sizes it to memory."""
    eval_every: int = 10
    """Held-out evaluation every this many steps (and before the first step and after the
    last); 0: only at ``eval_rollouts``."""
    eval_rollouts: tuple[int, ...] = ()
    """Also evaluate after the first step whose rollouts reach each of these counts."""
    eval_tasks: int = 0
    """Held-out tasks evaluated (a fixed, seeded subset of the test split); 0 means all."""
    eval_samples: int = 8
    """Samples per held-out task."""
    pool_eval_samples: int = 0
    """At every held-out evaluation also roll out every train task this many times (0: off)."""
    pool_eval_tasks: int = 0
    """Train tasks of that pool evaluation: a fixed, seeded subset of this many; 0 means all."""
    seed: int = 0
    """Seed of the scheduler, the rollouts and the evaluation subset."""
    store_flush_timeout_s: float = 60.0
    """At the end of training, wait this long for the store to take unwritten observations."""

    def __post_init__(self) -> None:
        if not is_scheduler_name(self.scheduler):
            raise config_error(self, "scheduler", self.scheduler, scheduler_names_expected())
        if self.advantage_estimator not in ADVANTAGE_ESTIMATORS:
            raise config_error(
                self,
                "advantage_estimator",
                self.advantage_estimator,
                f"one of {sorted(ADVANTAGE_ESTIMATORS)}",
            )
        if self.loss_aggregation not in LOSS_AGGREGATIONS:
            raise config_error(
                self, "loss_aggregation", self.loss_aggregation, f"one of {list(LOSS_AGGREGATIONS)}"
            )
        at_least_one = (
            "batch_size", "steps", "ppo_epochs", "mini_batches", "micro_batch_size",
            "micro_batch_tokens", "eval_samples",
        )  # fmt: skip
        check_bounds(
            self,
            non_negative=(
                "kl_coef",
                "eval_every",
                "eval_tasks",
                "pool_eval_samples",
                "pool_eval_tasks",
                "lr_warmup_steps",
            ),  # fmt: skip
            at_least={**dict.fromkeys(at_least_one, 1), "group_size": 2},
            unit=("negative_advantage_scale",),
            open_unit=("clip",),
        )
        if any(r < 1 for r in self.eval_rollouts):
            raise config_error(self, "eval_rollouts", self.eval_rollouts, "counts >= 1")
        if self.mini_batches > self.batch_size:
            raise config_error(
                self,
                "mini_batches",
                self.mini_batches,
                f"<= batch_size (= {self.batch_size}): a mini-batch holds at least one group",
            )

    @property
    def rollout_budget(self) -> int:
        """R = steps x B x K, the rollouts the run spends."""
        return self.steps * self.batch_size * self.group_size

    @property
    def optimizer_steps_per_step(self) -> int:
        """Optimiser steps of one GRPO step: ``ppo_epochs x mini_batches``."""
        return self.ppo_epochs * self.mini_batches

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class LaunchConfig:
    """Where and how the Lightning trainer runs."""

    accelerator: str = "auto"
    """Lightning accelerator: ``auto`` (a GPU when there is one), ``cpu`` or ``gpu``."""
    devices: int = 1
    """Processes (one per device); more than 1 trains data-parallel."""
    strategy: str = "auto"
    """Lightning strategy, e.g. ``ddp`` (CPU: gloo backend)."""
    checkpoint_every: int = 0
    """Also keep a checkpoint every this many steps (0: only ``last.ckpt`` at the end)."""
    progress_bar: bool = True
    """Show Lightning's progress bar (with the step's reward and reward variance)."""
    print_steps: bool = False
    """Print one line per step (reward, variance, environments, times) instead."""


def small_policy_recipe() -> GRPOConfig:
    """GRPO's optimisation settings for the built-in 0.8 M-parameter policy on 2 CPU cores (demo
    preset, ``eval ablate``); B, K, steps and scheduler are the caller's. Of lr 1e-4, 3e-4 and
    1e-3 on the demo SFT policy, only 1e-4 neither collapsed nor raised malformed calls.
    """
    return GRPOConfig(lr=1e-4, micro_batch_size=32)
