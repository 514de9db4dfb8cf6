"""The main job's presets: the sizes of its pool, SFT warm start and GRPO runs.

``demo`` is sized to finish in under 20 minutes on 2 CPU cores (budget: pool + graph under
1 min, SFT 12 min, the step-0 evaluation ~10 s, each GRPO run ~2 min); ``paper`` is the paper's
setting (51 x 50 tasks, B = 64, K = 8, 200 steps) for a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from envsched_gnn.training.agent_format import AgentConfig
from envsched_gnn.training.competence_profile import CompetenceProfile
from envsched_gnn.training.grpo.config import GRPOConfig, small_policy_recipe
from envsched_gnn.training.policy import PolicyConfig


@dataclass(frozen=True)
class StartRecipe:
    """The start GRPO trains from, made *sometimes right* on purpose
    (:mod:`~envsched_gnn.training.competence`): the base SFT policy fine-tuned on a mixture
    of correct and imperfect demonstrations of fresh tasks of the job's pool. A stand-in for a
    pretrained model's uneven competence, which no pretrained weights here can give."""

    steps: int = 600
    """Optimiser steps of the fine-tuning."""
    learning_rate: float = 1e-3
    """Its peak learning rate (cosine schedule, 20 warm-up steps)."""
    extra_tasks_per_env: int = 120
    """Fresh generated tasks per environment in the mixture (the pool's own are not)."""
    competence: CompetenceProfile = field(default_factory=CompetenceProfile)
    """How often, per environment and mistake kind, a demonstration is imperfect."""


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
    operations: tuple[str, ...] | None = None
    """Generator operations the pool's tasks are made of (None: every operation of each
    domain)."""
    base_max_calls: int | None = None
    """The base SFT's own pool, when set: tasks of at most this many calls, of every
    operation (a base policy trained on a broader family of tasks than the job's pool);
    None: the job's pool."""
    start: StartRecipe | None = None
    """Fine-tune the base SFT policy of the built-in model into a start that is sometimes
    right (None: GRPO starts from the base SFT policy)."""
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


DEMO_OPERATIONS = (
    "update",
    "update_amount",
    "forward",
    "delete",
    "create",
    "state_gate",
    "validation_gate",
    "eligibility_gate",
)
"""The demo pool's operations: those whose ids and values the instruction or a gate's result
shows (no name look-up, no second id to carry)."""

PRESETS: dict[str, Preset] = {
    # 2 CPU cores, < 20 min. The base SFT policy (envsched_gnn/data/demo_sft, tasks of up to 3
    # calls) and the sometimes-right start (envsched_gnn/data/demo_start: tasks of at most 2
    # calls of the operations the 0.8 M policy completes when it chooses right) are packaged;
    # the start's headroom is in docs/results/sometimes-right-start.md.
    "demo": Preset(
        envs=51,
        tasks_per_env=20,
        test_per_env=5,
        sft_steps=4400,
        sft_extra_tasks_per_env=200,
        sft_include_train_split=False,
        grpo=replace(
            small_policy_recipe(),
            lr=3e-4,
            batch_size=8,
            group_size=8,
            steps=50,
            eval_every=25,
            eval_tasks=0,
            eval_samples=4,
            pool_eval_samples=8,
            pool_eval_tasks=64,
        ),
        max_calls=2,
        operations=DEMO_OPERATIONS,
        base_max_calls=3,
        start=StartRecipe(competence=CompetenceProfile(concentration=1.0)),
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
