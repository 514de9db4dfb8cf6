"""The fixed world the learner simulator runs on: the arrays every world builder fills.

Task i has padded slots l = 1..L_i with slot-level skills F(i,l), check weights w_need(i,l)
and w_rest(i,l) and difficulty delta(i,l), and the task-level skill of its environment e(i).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np


@dataclass
class SimulatorWorld:
    """The fixed structure the simulator runs on; arrays are indexed by task (N), slot (L)
    and slot-level skill (F per slot)."""

    task_ids: list[str]
    env_names: list[str]
    op_names: list[str]
    """Names of the slot-level skills (operation categories, or hidden factors)."""
    env: np.ndarray
    """(N,) int64 environment index (the task-level skill)."""
    slot_op: np.ndarray
    """(N, Lmax, F) int64 slot-level skills of each operation slot."""
    slot_op_mask: np.ndarray
    """(N, Lmax, F) bool, True where ``slot_op`` names a skill of the slot."""
    slot_mask: np.ndarray
    """(N, Lmax) bool, True where the slot is a real operation."""
    need_weight: np.ndarray
    """(N, Lmax) float64 w_need(i,l): share of the checks that pass when l is completed."""
    rest_weight: np.ndarray
    """(N, Lmax) float64 w_rest(i,l): share of the checks (of l) that pass unless l goes wrong."""
    delta: np.ndarray
    """(N, Lmax) float64 operation difficulty (0 on padding)."""
    test: np.ndarray
    """(N,) bool, True for held-out tasks."""
    s_env0: np.ndarray
    s_op0: np.ndarray
    kind: str = "independent"
    """Which world this is (``SimulatorConfig.world``)."""
    structure_score: np.ndarray | None = None
    """(N, Lmax) float64 S(i,l), the standardised structural score (structure world only)."""
    info: dict = field(default_factory=dict)
    """What the world builder reports (e.g. how many tasks had a hidden structure)."""
    index: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        self.index = {task_id: i for i, task_id in enumerate(self.task_ids)}

    @property
    def has_rest(self) -> bool:
        return bool(self.rest_weight.any())

    def with_tasks_shuffled(self, *seeds: int) -> SimulatorWorld:
        """The null world: task i is simulated as task pi(i) of this world (environment,
        operations, checks, difficulty), pi a permutation seeded by ``seeds``; ids and splits
        stay."""
        pi = np.random.default_rng([*seeds, 0x0DD]).permutation(len(self.task_ids))
        rows = {
            name: getattr(self, name)[pi]
            for name in (
                "env",
                "slot_op",
                "slot_op_mask",
                "slot_mask",
                "need_weight",
                "rest_weight",
                "delta",
            )
        }
        score = None if self.structure_score is None else self.structure_score[pi]
        info = {**self.info, "tasks_shuffled": True}
        return replace(self, **rows, structure_score=score, info=info)
