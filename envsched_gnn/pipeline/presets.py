"""The main job's presets: the sizes of its pool, SFT warm start and GRPO runs.

``demo`` is sized to finish in under 20 minutes on 2 CPU cores (budget: pool + graph under
1 min, SFT 12 min, the step-0 evaluation ~10 s, each GRPO run ~2 min); ``paper`` is the paper's
setting (51 x 50 tasks, B = 64, K = 8, 200 steps) for a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

from envsched_gnn.training.grpo_config import GRPOConfig


@dataclass(frozen=True)
class Preset:
    """Sizes of one main-job configuration."""

    envs: int
    """Environments of the generated pool."""
    tasks_per_env: int
    """Tasks per environment."""
    test_per_env: int
    """Held-out tasks per environment (split ``test``)."""
    sft_steps: int
    """Optimiser steps of the SFT warm start."""
    sft_extra_tasks_per_env: int
    """Fresh generated tasks per environment added to SFT's train split."""
    sft_include_train_split: bool
    """SFT imitates the pool's train split too (off: only fresh tasks, so GRPO's train tasks
    are as new to the policy as the held-out ones)."""
    batch_size: int
    """B."""
    group_size: int
    """K."""
    steps: int
    """GRPO steps per scheduler."""
    lr: float
    """GRPO learning rate."""
    eval_every: int
    """Held-out evaluation every this many steps (and at step 0)."""
    eval_tasks: int
    """Held-out tasks evaluated (a seeded subset of the test split; 0: all)."""
    eval_samples: int
    """Samples per held-out task."""
    micro_batch_size: int = 32
    """Episodes per forward/backward pass."""
    max_calls: int | None = None
    """Keep only tasks whose reference needs at most this many tool calls (None: 1-6)."""
    lr_warmup_steps: int = 0
    """GRPO's linear learning-rate warm-up, in optimiser steps."""
    ppo_epochs: int = 1
    """GRPO passes over each step's episodes."""
    mini_batches: int = 1
    """GRPO optimiser steps per pass."""
    advantage_estimator: str = "grpo"
    """``grpo`` or ``dr_grpo``."""
    kl_coef: float = 0.0
    """Weight of the KL penalty to the SFT policy."""

    def grpo_config(
        self, scheduler: str, steps: int, seed: int, lr: float | None = None
    ) -> GRPOConfig:
        """The GRPO run of one scheduler under this preset (every scheduler gets the same)."""
        return GRPOConfig(
            scheduler=scheduler,
            batch_size=self.batch_size,
            group_size=self.group_size,
            steps=steps,
            lr=self.lr if lr is None else lr,
            lr_warmup_steps=self.lr_warmup_steps,
            ppo_epochs=self.ppo_epochs,
            mini_batches=self.mini_batches,
            advantage_estimator=self.advantage_estimator,
            kl_coef=self.kl_coef,
            micro_batch_size=self.micro_batch_size,
            eval_every=self.eval_every,
            eval_tasks=self.eval_tasks,
            eval_samples=self.eval_samples,
            seed=seed,
        )


PRESETS: dict[str, Preset] = {
    # 2 CPU cores, < 20 min: tasks of at most 3 calls (what the tiny policy can reach; see
    # shared/notes/tiny-policy-probe.md); the SFT warm start is the packaged policy
    # (envsched_gnn/data/demo_sft, rebuilt when its inputs differ: ~30 min at one thread);
    # the two schedulers train side by side, 50 steps of 8 x 8 each (~10 s a step at one
    # thread); every held-out task x 4 at steps 0, 25 and 50 (~95 s each)
    "demo": Preset(
        envs=51,
        tasks_per_env=20,
        test_per_env=5,
        sft_steps=4400,
        sft_extra_tasks_per_env=200,
        sft_include_train_split=False,
        batch_size=8,
        group_size=8,
        steps=50,
        lr=1e-4,
        eval_every=25,
        eval_tasks=0,
        eval_samples=4,
        micro_batch_size=32,
        max_calls=3,
    ),
    # the paper's setting (spec section 1), for a GPU machine
    "paper": Preset(
        envs=51,
        tasks_per_env=50,
        test_per_env=10,
        sft_steps=8000,
        sft_extra_tasks_per_env=200,
        sft_include_train_split=True,
        batch_size=64,
        group_size=8,
        steps=200,
        lr=1e-6,
        eval_every=20,
        eval_tasks=0,
        eval_samples=8,
        micro_batch_size=16,
    ),
}
