"""The competence profile: how often a start's demonstrations of a decision are imperfect,
r ~ Beta(mu kappa, (1 - mu) kappa) per environment and mistake kind or per task (used by
:mod:`~envsched_gnn.training.competence`; apart so that ``SFTConfig`` loads fast).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from envsched_gnn.envs.generator.mistakes import MISTAKE_KINDS
from envsched_gnn.envs.pool import Task
from envsched_gnn.validation import check_bounds, config_error

PROFILE_UNITS = ("environment", "task")


@dataclass(frozen=True)
class CompetenceProfile:
    """How often the SFT data's demonstration of a decision is imperfect (module docstring)."""

    by: str = "environment"
    """What a rate belongs to: ``environment`` (and mistake kind) or ``task`` (i.i.d.)."""
    mean: float = 0.5
    """mu: the mean rate of an imperfect demonstration, in (0, 1)."""
    concentration: float = 4.0
    """kappa: rates are Beta(mu kappa, (1 - mu) kappa); smaller spreads them wider."""
    kinds: tuple[str, ...] = MISTAKE_KINDS
    """Mistake kinds in the mix (of ``envs.generator.mistakes.MISTAKE_KINDS``)."""
    seed: int = 0
    """Seed of the rates and of every choice of the mixture."""

    def __post_init__(self) -> None:
        if self.by not in PROFILE_UNITS:
            raise config_error(self, "by", self.by, f"one of {PROFILE_UNITS}")
        check_bounds(
            self,
            positive=("concentration",),
            open_unit=("mean",),
            integers=("seed",),
            non_negative=("seed",),
        )
        unknown = sorted(set(self.kinds) - set(MISTAKE_KINDS))
        if unknown or not self.kinds:
            raise config_error(self, "kinds", self.kinds, f"some of {MISTAKE_KINDS}")


def draw_rates(profile: CompetenceProfile, tasks: Sequence[Task]) -> dict[str, float]:
    """The profile's rates: ``"env/kind"`` -> r(e, c) for environments in sorted order and
    kinds in the profile's order, or task id -> r(t) for tasks in sorted order."""
    rng = np.random.default_rng(profile.seed)
    a = profile.mean * profile.concentration
    b = (1.0 - profile.mean) * profile.concentration
    if profile.by == "environment":
        keys = [
            f"{env}/{kind}" for env in sorted({t.env_id for t in tasks}) for kind in profile.kinds
        ]
    else:
        keys = sorted(t.task_id for t in tasks)
    return {key: float(rate) for key, rate in zip(keys, rng.beta(a, b, len(keys)), strict=True)}
