"""History statistics at one half-life (spec 4.1-4.3), vectorised over all observations.

With w_h(t,s) = 2^(-(t-s)/h), s < t only, and y in {v, m, d} (and z when ``names`` asks):

    ybar(s)   = mean of y(i,s) over the tasks observed at step s
    g_y(t)    = sum_s w_h(t,s) ybar(s) / sum_s w_h(t,s)     (0.125, 0.5, 0.5) without history
    y~(i,s)   = clip(y(i,s) - ybar(s) + g_y(t))          to [0, 0.25] for v, [0, 1] for m, d, z
    W(i,t)    = sum_{s in H_t(i)} w_h(t,s)
    ybar(i,t) = sum_{s in H_t(i)} w_h(t,s) y~(i,s) / W(i,t)     (undefined when W = 0)

float64, O(n_obs log n_obs + N): steps are remapped to dense indices.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from envsched_gnn.models.config import SPREAD, Y_NAMES
from envsched_gnn.observations import ObservationLog

CLIP_UPPER = {"v": 0.25, "m": 1.0, "d": 1.0, SPREAD: 1.0}
"""Upper end of the clip range of the centred history y~ (the lower end is 0)."""


@dataclass(frozen=True)
class ObservedHistory:
    """The observations with step < t, columnar, with the per-step means ybar(s).

    ``task``, ``step`` (n,); ``y`` and ``deviation`` (y(i,s) - ybar(s)): per statistic, float64
    (n,); ``steps`` (S,) the distinct steps, ``means`` their ybar(s); ``step_index`` (n,).
    """

    step_now: int
    task: np.ndarray
    step: np.ndarray
    y: dict[str, np.ndarray]
    deviation: dict[str, np.ndarray]
    steps: np.ndarray
    means: dict[str, np.ndarray]
    step_index: np.ndarray

    def __len__(self) -> int:
        return int(self.task.shape[0])


@dataclass(frozen=True)
class HistoryStats:
    """The statistics of one half-life h at step t: ``g`` (3,), ``weight`` W(i,t) (N,) and
    ``weighted_sum`` W(i,t) ybar(i,t) (N, C) (0 where W = 0), float64.
    """

    half_life: float
    g: np.ndarray
    weight: np.ndarray
    weighted_sum: np.ndarray

    def own_estimate(self) -> np.ndarray:
        """ybar(i,t), float64 (N, 3); NaN where W(i,t) = 0 (the spec leaves it undefined)."""
        out = np.full_like(self.weighted_sum, np.nan)
        seen = self.weight > 0
        out[seen] = self.weighted_sum[seen] / self.weight[seen, None]
        return out


def history_columns(log: ObservationLog | Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``task``, ``step``, ``m``, ``v``, ``d`` of an :class:`ObservationLog` or its ``arrays()``."""
    columns = log.arrays() if isinstance(log, ObservationLog) else log
    missing = [name for name in ("task", "step", *Y_NAMES) if name not in columns]
    if missing:
        raise ValueError(f"history columns {missing} missing; expected task, step, m, v, d")
    return columns


def observed_before(
    log: ObservationLog | Mapping[str, np.ndarray],
    step: int,
    num_tasks: int,
    names: Sequence[str] = Y_NAMES,
) -> ObservedHistory:
    """Keep the observations with s < ``step`` and compute ybar(s) for every observed step, for
    the statistics ``names`` (z = 1[v > 0] computed from v when asked)."""
    columns = history_columns(log)
    task = np.asarray(columns["task"], dtype=np.int64)
    steps_of = np.asarray(columns["step"], dtype=np.int64)
    y = {name: np.asarray(columns[name], dtype=np.float64) for name in names if name != SPREAD}
    if SPREAD in names:
        y[SPREAD] = spread_indicator(y["v"])
    if task.size and (task.min() < 0 or task.max() >= num_tasks):
        raise ValueError(
            f"history refers to node index {int(task.max())}, the graph has {num_tasks}"
        )
    if steps_of.size and steps_of.min() < 0:
        raise ValueError(f"history has a negative step {int(steps_of.min())}")
    keep = steps_of < step
    if not keep.all():
        task, steps_of = task[keep], steps_of[keep]
        y = {name: column[keep] for name, column in y.items()}
    steps, step_index = np.unique(steps_of, return_inverse=True)
    step_index = step_index.reshape(-1).astype(np.int64)
    count = np.bincount(step_index, minlength=steps.size).astype(np.float64)
    means, deviation = {}, {}
    for name, column in y.items():
        per_step = np.bincount(step_index, weights=column, minlength=steps.size) / count
        means[name] = per_step
        deviation[name] = column - per_step[step_index]
    return ObservedHistory(
        step, task, steps_of, y, deviation, steps.astype(np.int64), means, step_index
    )


def spread_indicator(v: np.ndarray) -> np.ndarray:
    """z = 1[v > 0]: whether a group's K rewards differ (GRPO's advantages are then not all 0).
    Shapes: (n,) -> (n,) float64."""
    return (np.asarray(v, dtype=np.float64) > 0.0).astype(np.float64)


def half_life_stats(
    history: ObservedHistory,
    num_tasks: int,
    half_life: float,
    defaults: Sequence[float],
    out: np.ndarray | None = None,
) -> HistoryStats:
    """g_y(t), W(i,t) and W(i,t) ybar(i,t) for one half-life h (spec 4.1-4.3).

    ``defaults``: (g_v, g_m, g_d) (and g_z) without history. ``out``, float64 (N, C + 1),
    receives [W ybar_v, W ybar_m, W ybar_d, (W ybar_z,) W]; the results are views of it.
    """
    t = history.step_now
    names = tuple(history.y)
    if out is None:
        out = np.empty((num_tasks, len(names) + 1))
    weighted_sum, weight = out[:, : len(names)], out[:, len(names)]
    if len(history) == 0:
        out[...] = 0.0
        return HistoryStats(
            float(half_life), np.asarray(defaults, dtype=np.float64), weight, weighted_sum
        )
    # g is a ratio of weighted sums: weights relative to the latest observed step give the
    # same value and cannot underflow to 0/0 however old the history is.
    relative = np.exp2(-(history.steps[-1] - history.steps) / half_life)
    g = np.array([relative @ history.means[name] / relative.sum() for name in names])
    w = np.exp2(-(t - history.steps.astype(np.float64)) / half_life)[history.step_index]
    # sums over the observed tasks only (bincount adds each bin's terms in the same order
    # either way), then written out with zeros for the others: not one N-array per channel
    tasks, slot = np.unique(history.task, return_inverse=True)
    slot = slot.reshape(-1)
    out[...] = 0.0
    weight[tasks] = np.bincount(slot, weights=w, minlength=tasks.shape[0])
    centred = np.empty_like(w)  # one buffer for the three channels: no per-channel allocation
    for c, name in enumerate(names):
        np.add(history.deviation[name], g[c], out=centred)
        np.clip(centred, 0.0, CLIP_UPPER[name], out=centred)
        centred *= w
        weighted_sum[tasks, c] = np.bincount(slot, weights=centred, minlength=tasks.shape[0])
    return HistoryStats(float(half_life), g, weight, weighted_sum)
