"""The EnvSched selector: one greedy loop, two stages, quotas and a similarity penalty (spec 5).

    exploitation score   x_i = q(i,t) * omega_i,      omega_i = (1 + c_i / 16)^(-1/2)
    coverage score       s_i = (1 + c_i)^(-1/2) * (1 + C_e / n_e + b_e)^(-1/2)
                               [* (1 + C_o / n_o + b_o)^(-1/2) with operation_coverage, §9.4]
    greedy gain          g_i = stage score - lambda_sim * max_{j in batch} sim(i, j)

Quotas, relaxation, tie-breaks and the exact lazy greedy: docs/design.md §5.
``SelectorConfig(lazy=False)`` runs the naive loop, same batch.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

import numpy as np

from envsched_gnn.scheduler.config import SelectorConfig
from envsched_gnn.scheduler.similarity import SimilarityNeighbours
from envsched_gnn.validation import UserError

COVERAGE = "coverage"
EXPLOITATION = "exploitation"


class SelectionError(UserError, ValueError):
    """A batch cannot be built: pool smaller than B, or inputs of the wrong shape."""


@dataclass
class Selection:
    """One batch: node indices in selection order, the stage of each, the quotas relaxed."""

    indices: np.ndarray
    stages: list[str]
    relaxed: list[str] = field(default_factory=list)


def coverage_slots(rho: float, batch_size: int) -> int:
    """round(rho * B), halves rounded up."""
    return min(batch_size, max(0, math.floor(rho * batch_size + 0.5)))


def env_factor(env_norm: np.ndarray, in_batch: np.ndarray) -> np.ndarray:
    """(1 + C_e / n_e + b_e)^(-1/2), elementwise (``env_norm`` is C_e / n_e)."""
    return 1.0 / np.sqrt(1.0 + env_norm + in_batch)


class GreedySelector:
    """Builds batches for a fixed graph; per step it takes q and the selection history.

    Args:
        env: environment index of each task, int64 (N,).
        neighbours: the symmetric similarity structure of the graph.
        config: selector configuration (spec defaults).
        operation: operation-pattern index of each task, int64 (N,); required when
            ``config.operation_coverage``, ignored otherwise.
    """

    def __init__(
        self,
        env: np.ndarray,
        neighbours: SimilarityNeighbours,
        config: SelectorConfig,
        operation: np.ndarray | None = None,
    ) -> None:
        self.env = np.asarray(env, dtype=np.int64)
        self.num_envs = int(self.env.max()) + 1 if self.env.size else 0
        self.env_sizes = np.bincount(self.env, minlength=self.num_envs)
        self.neighbours = neighbours
        self.config = config
        self.operation = None
        if config.operation_coverage:
            if operation is None or np.shape(operation) != self.env.shape:
                raise SelectionError(
                    "operation_coverage needs the operation pattern of every task: got "
                    f"{None if operation is None else np.shape(operation)}, expected "
                    f"{self.env.shape}"
                )
            self.operation = np.asarray(operation, dtype=np.int64)
            self.operation_sizes = np.bincount(self.operation)

    def select(
        self,
        q: np.ndarray,
        counts: np.ndarray,
        window_counts: np.ndarray,
        blocked: np.ndarray,
        batch_size: int,
        tie_break: np.ndarray,
        excluded: np.ndarray | None = None,
    ) -> Selection:
        """Select ``batch_size`` distinct tasks.

        Shapes: ``q (N,)`` float64, ``counts`` c_i (N,), ``window_counts`` W_e (E,), ``blocked``
        consecutive-cap mask (N,) bool, ``tie_break`` (N,) float64 (smaller wins), ``excluded`` (N,)
        bool or None (never selected) -> ``Selection`` of ``batch_size`` indices.
        """
        n = self.env.shape[0]
        if excluded is not None and np.shape(excluded) != (n,):
            raise SelectionError(f"excluded has shape {np.shape(excluded)}, expected ({n},)")
        selectable = n if excluded is None else n - int(np.count_nonzero(excluded))
        if batch_size > selectable:
            what = "tasks" if excluded is None else "tasks outside the excluded ones"
            raise SelectionError(
                f"the pool has {selectable} {what}, fewer than the batch size B = {batch_size}"
            )
        if batch_size < 1:
            raise SelectionError(f"batch size B = {batch_size}, expected >= 1")
        for name, array, length in (
            ("q", q, n),
            ("counts", counts, n),
            ("blocked", blocked, n),
            ("tie_break", tie_break, n),
            ("window_counts", window_counts, self.num_envs),
        ):
            if np.shape(array) != (length,):
                raise SelectionError(f"{name} has shape {np.shape(array)}, expected ({length},)")
        q = np.asarray(q, dtype=np.float64)
        if not np.all(np.isfinite(q)):
            raise SelectionError("q has non-finite values")
        blocked, room, relaxed = self._quotas(window_counts, blocked, batch_size, excluded)
        if excluded is not None:
            blocked = blocked | excluded
        build = _BatchBuilder(self, q, np.asarray(counts, np.int64), blocked, room, tie_break)
        n_cov = coverage_slots(self.config.rho, batch_size)
        for stage, slots in ((COVERAGE, n_cov), (EXPLOITATION, batch_size - n_cov)):
            if slots:
                if self.config.lazy:
                    build.fill_lazy(stage, slots)
                else:
                    build.fill_naive(stage, slots)
        stages = [COVERAGE] * n_cov + [EXPLOITATION] * (batch_size - n_cov)
        return Selection(np.asarray(build.batch, np.int64), stages, relaxed)

    def _quotas(
        self,
        window_counts: np.ndarray,
        blocked: np.ndarray,
        batch_size: int,
        excluded: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """Consecutive mask and per-environment room, after the relaxations B slots need
        (counting only tasks not ``excluded``)."""
        cfg = self.config
        active = set(cfg.relaxation_order)
        relaxed: list[str] = []
        n = self.env.shape[0]
        for quota in (*cfg.relaxation_order, None):
            mask = np.asarray(blocked, bool) if "consecutive" in active else np.zeros(n, bool)
            room = np.full(self.num_envs, n, np.int64)
            if "per_step" in active:
                room = np.minimum(room, cfg.per_step_env_quota)
            if "window" in active:
                room = np.minimum(room, np.maximum(cfg.window_env_quota - window_counts, 0))
            out = mask if excluded is None else mask | excluded
            eligible = np.bincount(self.env[~out], minlength=self.num_envs)
            if quota is None or np.minimum(eligible, room).sum() >= batch_size:
                return mask, room, relaxed
            active.discard(quota)
            relaxed.append(quota)
        raise AssertionError("unreachable: every quota relaxed leaves the whole pool")


class _BatchBuilder:
    """The mutable state of one batch being built: b_e, room, penalty, members."""

    def __init__(
        self,
        selector: GreedySelector,
        q: np.ndarray,
        counts: np.ndarray,
        blocked: np.ndarray,
        room: np.ndarray,
        tie_break: np.ndarray,
    ) -> None:
        cfg = selector.config
        self.env = selector.env
        self.neighbours = selector.neighbours
        self.lam = float(cfg.lambda_sim)
        self.initial_candidates = cfg.initial_candidates
        self.q = q
        self.tie = np.asarray(tie_break, np.float64)
        # only the tasks selected before (c_i > 0) differ from c_i = 0, whose factors are 1.0
        # exactly (and add 0.0 to C_e): the same numbers without N-long arithmetic
        seen = np.flatnonzero(counts)
        c = counts[seen]
        env_totals = np.bincount(self.env[seen], weights=c, minlength=selector.num_envs)
        self.env_norm = env_totals / np.maximum(selector.env_sizes, 1)
        self.in_env = np.zeros(selector.num_envs, np.int64)
        self.env_cov = env_factor(self.env_norm, self.in_env)
        self.op = selector.operation
        if self.op is not None:
            sizes = selector.operation_sizes
            op_totals = np.bincount(self.op[seen], weights=c, minlength=sizes.shape[0])
            self.op_norm = op_totals / np.maximum(sizes, 1)
            self.in_op = np.zeros(sizes.shape[0], np.int64)
            self.op_cov = env_factor(self.op_norm, self.in_op)
        self.task_cov = np.ones(q.shape[0])
        self.task_cov[seen] = 1.0 / np.sqrt(1.0 + c)
        self.exploit = q.copy()
        self.exploit[seen] = q[seen] * (1.0 / np.sqrt(1.0 + c / cfg.exposure_scale))
        self.penalty = np.zeros(q.shape[0], np.float64)
        self.available = ~blocked
        self.room = room.copy()
        self.batch: list[int] = []

    def coverage(self, idx: np.ndarray, env_cov: np.ndarray | float) -> np.ndarray:
        """s_i of the tasks ``idx`` given their environments' factors ``env_cov``; every
        coverage score is computed here, so that each takes the same float64 operations."""
        score = self.task_cov[idx] * env_cov
        return score if self.op is None else score * self.op_cov[self.op[idx]]

    def gains(self, stage: str, idx: np.ndarray) -> np.ndarray:
        """g_i for the tasks ``idx`` under the current batch."""
        if stage == COVERAGE:
            score = self.coverage(idx, self.env_cov[self.env[idx]])
        else:
            score = self.exploit[idx]
        return score - self.lam * self.penalty[idx]

    def gain(self, stage: str, i: int) -> float:
        """g_i of one task; the same float64 operations as :meth:`gains`."""
        if stage == COVERAGE:
            score = float(self.coverage(np.array([i]), self.env_cov[self.env[i : i + 1]])[0])
        else:
            score = float(self.exploit[i])
        return score - self.lam * float(self.penalty[i])

    def eligible(self) -> np.ndarray:
        """Which tasks may join the batch now: bool (N,)."""
        return self.available & (self.room[self.env] > 0)

    def candidates(self) -> np.ndarray:
        return np.flatnonzero(self.eligible())

    def add(self, i: int) -> None:
        e = int(self.env[i])
        self.batch.append(i)
        self.available[i] = False
        self.room[e] -= 1
        self.in_env[e] += 1
        self.env_cov[e] = env_factor(self.env_norm[e : e + 1], self.in_env[e : e + 1])[0]
        if self.op is not None:
            o = int(self.op[i])
            self.in_op[o] += 1
            self.op_cov[o] = env_factor(self.op_norm[o : o + 1], self.in_op[o : o + 1])[0]
        self.neighbours.raise_penalty(self.penalty, i)

    def fill_naive(self, stage: str, slots: int) -> None:
        """Every slot: all eligible gains, lexicographic argmax of (g, q, -tie, -index)."""
        for _ in range(slots):
            idx = self.candidates()
            order = np.lexsort((idx, self.tie[idx], -self.q[idx], -self.gains(stage, idx)))
            self.add(int(idx[order[0]]))

    def fill_lazy(self, stage: str, slots: int) -> None:
        """The same argmax from a heap of keys (-g, -q, tie, index), stale keys as bounds.

        An exploitation entry is one task; a coverage entry stands for one environment's moved
        candidates (a pick lowers all their scores), and stays as the bound of the rest of its
        group.
        """
        reserve = _Reserve(self, stage)
        members: dict[int, np.ndarray] = {}
        heap = self._entries(stage, reserve.take(self.initial_candidates), members)
        heapq.heapify(heap)
        filled = 0
        while filled < slots:
            if not heap or (reserve.size and heap[0] > reserve.bound):
                more = self._entries(
                    stage, reserve.take(max(reserve.taken, self.initial_candidates)), members
                )
                if not more and not heap:
                    raise AssertionError("unreachable: quotas were checked to admit B slots")
                for key in more:
                    heapq.heappush(heap, key)
                continue
            key = heap[0]
            current = self._current_key(stage, key, members)
            if current is None:
                heapq.heappop(heap)
            elif current != key:
                heapq.heapreplace(heap, current)
            else:
                self.add(key[3])
                filled += 1

    def _entries(
        self, stage: str, moved: tuple[np.ndarray, ...], members: dict[int, np.ndarray]
    ) -> list[tuple]:
        """Heap entries for the candidates ``moved`` out of the reserve: one per task, or per
        environment its newcomers' best key (they join ``members``, in tie-break order).
        """
        if stage != COVERAGE:
            return _keys(*moved)
        neg_gain, neg_q, tie, idx = moved
        env = self.env[idx]
        order = np.lexsort((idx, tie, neg_q, env))
        starts = _group_starts(env[order])
        for e, group in zip(
            env[order[starts]].tolist(), np.split(idx[order], starts[1:]), strict=True
        ):
            if e in members:  # rare: an environment moved over in two takes
                group = np.concatenate((members[e], group))
                group = group[np.lexsort((group, self.tie[group], -self.q[group]))]
            members[e] = group
        order = np.lexsort((idx, tie, neg_q, neg_gain, env))
        first = order[_group_starts(env[order])]
        return _keys(neg_gain[first], neg_q[first], tie[first], idx[first])

    def _current_key(self, stage: str, key: tuple, members: dict[int, np.ndarray]) -> tuple | None:
        """The entry's key under the current batch; None when no task of it is eligible."""
        i = key[3]
        if stage != COVERAGE:
            if not self.available[i] or self.room[self.env[i]] <= 0:
                return None
            return (-self.gain(stage, i), key[1], key[2], i)
        e = int(self.env[i])
        idx = members[e]
        idx = idx[self.available[idx]] if self.room[e] > 0 else idx[:0]
        members[e] = idx
        if not idx.shape[0]:
            return None
        # the gains of ``gains`` (same float64 operations); the first largest wins the ties
        gain = self.coverage(idx, self.env_cov[e]) - self.lam * self.penalty[idx]
        b = int(np.argmax(gain))
        j = int(idx[b])
        return (-float(gain[b]), -float(self.q[j]), float(self.tie[j]), j)


class _Reserve:
    """Candidates not yet in the heap, all worse than ``bound``; held per node (-inf for the
    others), so that a take neither gathers nor compacts the whole pool.
    """

    def __init__(self, build: _BatchBuilder, stage: str) -> None:
        eligible = build.eligible()
        self.gain = build.gains(stage, slice(None))
        self.gain[~eligible] = -math.inf
        self.q = build.q
        self.tie = build.tie
        self.size = int(np.count_nonzero(eligible))
        self.bound: tuple = (-math.inf,)
        self.taken = 0

    def take(self, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Remove the ``k`` best candidates; returns their key columns (-g, -q, tie, index)."""
        if k >= self.size:
            pos = np.flatnonzero(self.gain > -math.inf)
        else:
            pos = _top_k(self.gain, self.q, self.tie, k)
        moved = (-self.gain[pos], -self.q[pos], self.tie[pos], pos)
        if pos.shape[0]:
            worst = np.lexsort(moved[::-1])[-1]
            self.bound = max(self.bound, _keys(*(column[worst : worst + 1] for column in moved))[0])
        self.taken += int(pos.shape[0])
        self.size -= int(pos.shape[0])
        self.gain[pos] = -math.inf
        return moved


def _group_starts(sorted_groups: np.ndarray) -> np.ndarray:
    """Start positions of the runs of equal values in ``sorted_groups``."""
    return np.flatnonzero(np.concatenate(([True], sorted_groups[1:] != sorted_groups[:-1])))


def _keys(
    neg_gain: np.ndarray, neg_q: np.ndarray, tie: np.ndarray, idx: np.ndarray
) -> list[tuple[float, float, float, int]]:
    """Heap keys (-g, -q, tie, index) from their columns."""
    return list(zip(neg_gain.tolist(), neg_q.tolist(), tie.tolist(), idx.tolist(), strict=True))


def _top_k(gain: np.ndarray, q: np.ndarray, tie: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k best by (gain desc, q desc, tie asc, position asc), in O(n)."""
    chosen: list[np.ndarray] = []
    pos = None  # the positions tied so far: all of them at first
    for column, sign in ((gain, -1.0), (q, -1.0), (tie, 1.0)):
        v = sign * (column if pos is None else column[pos])
        kth = _kth_smallest(v, k)
        better, level = v < kth, v == kth
        chosen.append(np.flatnonzero(better) if pos is None else pos[better])
        k -= chosen[-1].shape[0]
        pos = np.flatnonzero(level) if pos is None else pos[level]
        if pos.shape[0] <= k:
            return np.concatenate((*chosen, pos))
    return np.concatenate((*chosen, pos[:k]))  # pos is ascending


def _kth_smallest(v: np.ndarray, k: int) -> float:
    """The k-th smallest value of ``v`` (1 <= k <= its length), trying the middle entry first."""
    probe = v[v.shape[0] // 2]
    below = v < probe
    count = int(np.count_nonzero(below))
    if count >= k:
        return np.partition(v[below], k - 1)[k - 1]
    if count + int(np.count_nonzero(v == probe)) >= k:
        return probe
    return np.partition(v, k - 1)[k - 1]
