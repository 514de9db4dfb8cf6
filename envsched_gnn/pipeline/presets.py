"""The main job's presets: the sizes of its pool, SFT warm start and GRPO runs.

``demo`` is sized to finish in under 20 minutes on 2 CPU cores (budget: pool + graph under
1 min, SFT 12 min, the step-0 evaluation ~10 s, each GRPO run ~2 min); ``paper`` is the paper's
setting (51 x 50 tasks, B = 64, K = 8, 200 steps) for a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from envsched_gnn.training.agent_format import AgentConfig
from envsched_gnn.training.grpo.config import GRPOConfig, small_policy_recipe
from envsched_gnn.training.policy import PolicyConfig


@dataclass(frozen=True)
class Preset:
    """Sizes of one main-job configuration: its pool, its SFT warm start and its GRPO recipe."""

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
    grpo: GRPOConfig
    """Every scheduler's GRPO run (B, K, steps, optimisation, held-out evaluation); the
    scheduler and the seed are the job's."""
    max_calls: int | None = None
    """Keep only tasks whose reference needs at most this many tool calls (None: 1-6)."""
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    """Architecture and tokenizer of the built-in policy."""
    agent: AgentConfig = field(default_factory=AgentConfig)
    """The agent format and sampling of SFT, evaluation and GRPO (temperature, constrained
    decoding); saved with the SFT policy."""

    def grpo_config(
        self, scheduler: str, steps: int, seed: int, lr: float | None = None
    ) -> GRPOConfig:
        """The GRPO run of one scheduler under this preset (every scheduler gets the same)."""
        lr = self.grpo.lr if lr is None else lr
        return replace(self.grpo, scheduler=scheduler, steps=steps, seed=seed, lr=lr)


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
        grpo=replace(
            small_policy_recipe(),
            batch_size=8,
            group_size=8,
            steps=50,
            eval_every=25,
            eval_tasks=0,
            eval_samples=4,
        ),
        max_calls=3,
    ),
    # the paper's setting (spec section 1: B = 64, K = 8, 200 steps, lr 1e-6), for a GPU machine
    "paper": Preset(
        envs=51,
        tasks_per_env=50,
        test_per_env=10,
        sft_steps=8000,
        sft_extra_tasks_per_env=200,
        sft_include_train_split=True,
        grpo=GRPOConfig(eval_every=20, eval_tasks=0),
    ),
}
