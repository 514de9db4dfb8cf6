"""Configuration of the EnvSched selector (spec section 5); every default is the spec's."""

from __future__ import annotations

from dataclasses import dataclass

from envsched_gnn.validation import check_bounds, config_error

QUOTAS = ("consecutive", "window", "per_step")


@dataclass(frozen=True)
class SelectorConfig:
    """Greedy batch selection: stages, exposure, similarity penalty, environment quotas (spec 5)."""

    rho: float = 0.5
    """Coverage fraction: share of the B slots filled by the coverage stage."""
    lambda_sim: float = 0.5
    """Weight of the similarity penalty max_{j in batch} sim(i, j) in the greedy gain."""
    exposure_scale: float = 16.0
    """Exposure factor omega_i = (1 + c_i / exposure_scale)^(-1/2) of the exploitation score."""
    per_step_env_quota: int = 4
    """At most this many tasks of one environment in a batch."""
    window_env_quota: int = 11
    """At most this many tasks of one environment in any ``window_steps`` consecutive steps."""
    window_steps: int = 3
    """Length of the quota window, the current step included."""
    consecutive_cap: int = 2
    """A task selected in each of the previous ``consecutive_cap`` steps is not eligible."""
    relaxation_order: tuple[str, ...] = QUOTAS
    """Quotas dropped, in this order, while they leave fewer than B fillable slots."""
    penalty_relations: tuple[str, ...] = ("within", "cross")
    """Edge relations whose similarities enter the penalty (graph ablations keep one)."""
    operation_coverage: bool = False
    """**[beyond the paper]** Spread the coverage stage over operation patterns as well as
    environments: the coverage score times (1 + C_o / n_o + b_o)^(-1/2) of the task's pattern
    o (the scheduler then needs every task's pattern)."""
    lazy: bool = True
    """Lazy greedy (heap of upper bounds); False runs the naive loop, same batch, slower."""
    initial_candidates: int = 256
    """Lazy greedy: candidates first moved into the heap per stage (more are pulled on need)."""

    def __post_init__(self) -> None:
        names = (
            "per_step_env_quota", "window_env_quota", "window_steps", "consecutive_cap",
            "initial_candidates",
        )  # fmt: skip
        check_bounds(
            self,
            positive=("exposure_scale",),
            non_negative=("lambda_sim",),
            at_least=dict.fromkeys(names, 1),
            unit=("rho",),
        )
        if sorted(self.relaxation_order) != sorted(QUOTAS):
            raise config_error(
                self, "relaxation_order", self.relaxation_order, f"an ordering of {QUOTAS}"
            )
        unknown = set(self.penalty_relations) - {"within", "cross"}
        if unknown:
            raise config_error(
                self,
                "penalty_relations",
                self.penalty_relations,
                f"relations of ('within', 'cross'), not {sorted(unknown)}",
            )
