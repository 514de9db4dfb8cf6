"""The learner simulator's parameters: its worlds, their seeds and spreads, and the update's rates.

Each field is a symbol of the equations in :mod:`~envsched_gnn.eval.simulator.simulate` or the
world modules; kept apart so the CLI and the ablation's config load without the simulator.
"""

from __future__ import annotations

from dataclasses import dataclass

from envsched_gnn.validation import check_bounds, config_error

WORLDS = ("structure", "independent")


@dataclass
class SimulatorConfig:
    """Parameters of the learner simulator (equations in the simulate and world modules)."""

    rollouts: int = 8
    """K, rollouts per selected task."""
    world: str = "structure"
    """``structure`` (difficulty from hidden structure, with ``kappa``) or ``independent``."""
    world_seed: int = 0
    """Seed of the world (effects, difficulties); the run seed only drives sampling."""
    kappa: float = 0.5
    """kappa (structure world), the share of the difficulty's variance that the hidden
    structure explains: 0 independent of structure, 1 a function of it."""
    difficulty_mean: float = -1.0
    """mu, the mean operation difficulty (logit units)."""
    sigma_difficulty: float = 3.5
    """sigma (structure world), the spread of the operation difficulty delta(i,l)."""
    wrong_action: float = 0.5
    """Probability that a failed operation does something wrong, breaking its checks that
    pass when nothing is done (the structure world's distractor checks)."""
    sigma_task: float = 3.0
    """sigma_task (independent world), spread of the per-task difficulty offset b_i."""
    sigma_op_noise: float = 1.5
    """sigma_op_noise (independent world), spread of the per-operation difficulty eps(i,l)."""
    sigma_env: float = 1.0
    """sigma_env (independent world), spread of the initial environment skills."""
    sigma_op: float = 1.0
    """sigma_op (independent world), spread of the initial operation-category skills."""
    sigma_roll: float = 1.0
    """sigma_roll, spread of the per-rollout luck xi_k shared by a rollout's operations."""
    alpha_env: float = 1.0
    """alpha_env, learning rate of environment skills."""
    alpha_op: float = 0.5
    """alpha_op, learning rate of slot-level skills (operation categories; hidden factors)."""
    alpha_task: float = 4.0
    """alpha_task, learning rate of the per-task (non-transferring) skill."""
    decay: float = 0.005
    """nu, per-step relaxation of unused skills towards their initial value."""
    batch_size: int = 64
    """B, the nominal batch size that normalises the update."""
    quadrature_nodes: int = 16
    """Gauss-Hermite nodes for the exact expected reward."""
    shuffle_tasks: bool = False
    """The null world: simulate each task as a random other task of the world, the
    permutation drawn from (world seed, run seed) (:meth:`SimulatorWorld.with_tasks_shuffled`),
    so nothing the graph or the quotas see about a task tells how it behaves: a check of the
    harness."""

    def __post_init__(self) -> None:
        if self.world not in WORLDS:
            raise config_error(self, "world", self.world, f"one of {WORLDS}")
        spreads = (
            "sigma_difficulty", "sigma_task", "sigma_op_noise", "sigma_env", "sigma_op",
            "sigma_roll", "alpha_env", "alpha_op", "alpha_task", "decay",
        )  # fmt: skip
        check_bounds(
            self,
            integers=("rollouts", "world_seed", "batch_size", "quadrature_nodes"),
            finite=("difficulty_mean", *spreads),
            non_negative=("world_seed", *spreads),
            at_least={"rollouts": 2, "batch_size": 1, "quadrature_nodes": 1},
            unit=("kappa", "wrong_action"),
        )
