"""Configuration of the SFT warm start (kept apart from the trainer so the CLI loads fast)."""

from __future__ import annotations

from dataclasses import dataclass, field

from envsched_gnn.training.agent_format import AgentConfig
from envsched_gnn.training.competence_profile import CompetenceProfile
from envsched_gnn.training.policy import PolicyConfig
from envsched_gnn.training.policy_engine import ACCELERATORS
from envsched_gnn.validation import check_bounds, config_error


@dataclass
class SFTConfig:
    """The SFT warm start."""

    max_steps: int = 4400
    """Optimiser steps: the budget the cosine schedule decays over (reproducible, unlike time)."""
    minutes: float = 0.0
    """Wall-clock cap in minutes (0: none); the schedule decays over whichever budget ends first."""
    batch_size: int = 16
    """Trajectories per optimizer step."""
    learning_rate: float = 3e-3
    """Peak AdamW learning rate (probe: 3e-3 for the 0.6 M model)."""
    min_lr_ratio: float = 0.05
    """The cosine schedule decays to this share of the peak."""
    warmup_steps: int = 20
    """Linear warm-up steps."""
    weight_decay: float = 0.01
    """AdamW weight decay."""
    gradient_clip: float = 1.0
    """Gradient-norm clip."""
    extra_tasks_per_env: int = 200
    """Fresh generated tasks per environment added to the train split (0: none)."""
    extra_operations: tuple[str, ...] | None = None
    """Generator operations the fresh tasks are made of (None: every operation of each domain)."""
    include_train_split: bool = True
    """Imitate the train split's references too (off: GRPO's tasks are new, like held-out ones)."""
    max_length: int = 2048
    """Longer trajectories are left out."""
    seed: int = 0
    """Seed of shuffling, extra tasks and (for the built-in policy) the initialisation."""
    accelerator: str = "auto"
    """Lightning accelerator: auto, cpu or gpu."""
    checkpoint_every_steps: int = 500
    """Lightning checkpoint interval (the last one is always kept)."""
    log_every_steps: int = 10
    """CSV log interval."""
    runtime_workers: int = 2
    """Worker processes that execute the reference solutions."""
    threads: int = 0
    """torch intra-op threads while training on CPU (0: leave torch's setting)."""
    agent: AgentConfig = field(default_factory=AgentConfig)
    """The agent format (final message, tool-response truncation) the examples follow."""
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    """Architecture of the built-in policy (used when no model is given)."""
    competence: CompetenceProfile | None = None
    """Mix imperfect demonstrations in at this profile's rates (:mod:`.competence`); None: off."""

    def __post_init__(self) -> None:
        at_least_one = (
            "max_steps", "batch_size", "max_length", "checkpoint_every_steps", "log_every_steps",
            "runtime_workers",
        )  # fmt: skip
        check_bounds(
            self,
            integers=(*at_least_one, "warmup_steps", "extra_tasks_per_env", "seed", "threads"),
            positive=("learning_rate", "gradient_clip"),
            non_negative=(
                "minutes",
                "warmup_steps",
                "weight_decay",
                "extra_tasks_per_env",
                "seed",
                "threads",
            ),  # fmt: skip
            at_least=dict.fromkeys(at_least_one, 1),
            unit=("min_lr_ratio",),
        )
        if self.accelerator not in ACCELERATORS:
            raise config_error(self, "accelerator", self.accelerator, f"one of {ACCELERATORS}")
        if self.extra_operations is not None:
            from envsched_gnn.envs.generator.tasks import check_operations_allowed

            check_operations_allowed(self.extra_operations)
