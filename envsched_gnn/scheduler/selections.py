"""Which tasks were selected at which step: the counts and windows the selector's rules use.

From the batches recorded per step (a step recorded twice keeps its last batch):

    c_i(t)            = #{s < t : i selected at s}                 (exposure, coverage)
    C_e(t)            = sum_{i in e} c_i(t)                        (coverage score)
    W_e(t)            = #{i in e selected at s}, t - window_steps < s < t  (3-step quota)
    blocked_i(t)      = i selected at every s in t - cap .. t - 1  (consecutive cap)
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


class SelectionHistory:
    """Batches per step as node-index arrays, with cached selection counts.

    Args:
        env: environment index of every task, int64 (N,).
        num_envs: number of environments E.
    """

    def __init__(self, env: np.ndarray, num_envs: int) -> None:
        self.env = np.asarray(env, dtype=np.int64)
        self.num_envs = int(num_envs)
        self.batches: dict[int, np.ndarray] = {}
        self._counted: set[int] = set()
        self._counts = np.zeros(self.env.shape[0], np.int64)

    def record(self, step: int, indices: Iterable[int]) -> None:
        """Record the batch selected at ``step`` (replacing one recorded earlier for it)."""
        indices = np.unique(np.asarray(list(indices), dtype=np.int64))
        if step in self._counted:
            self._counted.clear()
            self._counts[:] = 0
        self.batches[int(step)] = indices

    def counts_before(self, step: int) -> np.ndarray:
        """c_i(step): in how many steps s < ``step`` task i was selected, int64 (N,)."""
        if any(s >= step for s in self._counted):
            self._counted.clear()
            self._counts[:] = 0
        for s, batch in self.batches.items():
            if s < step and s not in self._counted:
                np.add.at(self._counts, batch, 1)
                self._counted.add(s)
        return self._counts.copy()

    def env_totals(self, counts: np.ndarray) -> np.ndarray:
        """C_e: total selections of the tasks of each environment, int64 (E,)."""
        return np.bincount(self.env, weights=counts, minlength=self.num_envs).astype(np.int64)

    def window_counts(self, step: int, window_steps: int) -> np.ndarray:
        """W_e: selections of each environment in the ``window_steps - 1`` steps before ``step``."""
        totals = np.zeros(self.num_envs, np.int64)
        for s in range(step - window_steps + 1, step):
            batch = self.batches.get(s)
            if batch is not None:
                totals += np.bincount(self.env[batch], minlength=self.num_envs)
        return totals

    def consecutive_blocked(self, step: int, cap: int) -> np.ndarray:
        """Mask of tasks selected in each of the ``cap`` steps before ``step``, bool (N,)."""
        blocked = np.zeros(self.env.shape[0], bool)
        previous = [self.batches.get(s) for s in range(step - cap, step)]
        if any(batch is None for batch in previous):
            return blocked
        common = previous[0]
        for batch in previous[1:]:
            common = np.intersect1d(common, batch, assume_unique=True)
        blocked[common] = True
        return blocked

    def state_dict(self, task_ids: list[str]) -> dict:
        """Batches as ``{"batches": {step: [task_id, ...]}}`` (JSON keys are strings)."""
        return {"batches": {str(s): [task_ids[i] for i in b] for s, b in self.batches.items()}}

    def load_state_dict(self, state: dict, index: dict[str, int]) -> None:
        self.batches = {}
        self._counted.clear()
        self._counts[:] = 0
        for step, batch in state["batches"].items():
            self.record(int(step), [index[t] for t in batch])
