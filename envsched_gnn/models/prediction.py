"""What a prediction returns: :class:`Prediction` (q, u, u_long, u_short and the long
half-life's E_v, E_m, E_d), and :class:`Computation` with its :class:`HalfLifeResult`, the
intermediate values behind them (for the evidence and the learned layer's features).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from envsched_gnn.models.graph_view import GraphView
from envsched_gnn.models.history import HistoryStats, ObservedHistory


@dataclass
class Prediction:
    """Per-task outputs, float64 NumPy arrays of shape (N,) in the graph's node order."""

    q: np.ndarray
    u: np.ndarray
    u_long: np.ndarray
    u_short: np.ndarray
    E_v: np.ndarray
    E_m: np.ndarray
    E_d: np.ndarray
    E_z: np.ndarray | None = None
    """The long half-life's P(v > 0) estimate under the ``spread`` target; None otherwise."""

    FIELDS = ("q", "u", "u_long", "u_short", "E_v", "E_m", "E_d")

    def to_json(self, task_ids: list[str]) -> dict[str, dict[str, float]]:
        """``{task_id: {"q", "u", "u_long", "u_short", "E_v", "E_m", "E_d"}}``, with ``"E_z"``
        under the ``spread`` target."""
        names = self.FIELDS + (("E_z",) if self.E_z is not None else ())
        columns = {name: getattr(self, name).tolist() for name in names}
        return {
            task_id: {name: columns[name][i] for name in names}
            for i, task_id in enumerate(task_ids)
        }


@dataclass
class HalfLifeResult:
    """Everything computed at one half-life: shapes (N, 3) in (v, m, d) order, or (N,)."""

    stats: HistoryStats
    relation: dict[str, np.ndarray]
    prior: np.ndarray
    estimate: np.ndarray
    f: np.ndarray
    pr_E_v: np.ndarray
    pr_f: np.ndarray
    percentile: np.ndarray
    u: np.ndarray


@dataclass
class Computation:
    """One full prediction with its intermediate values (the raw material of the evidence)."""

    step: int
    view: GraphView
    history: ObservedHistory
    long: HalfLifeResult
    short: HalfLifeResult
    u: np.ndarray
    rank: np.ndarray
    q: np.ndarray

    def prediction(self) -> Prediction:
        e = self.long.estimate
        return Prediction(
            q=self.q,
            u=self.u,
            u_long=self.long.u,
            u_short=self.short.u,
            E_v=np.ascontiguousarray(e[:, 0]),
            E_m=np.ascontiguousarray(e[:, 1]),
            E_d=np.ascontiguousarray(e[:, 2]),
        )
