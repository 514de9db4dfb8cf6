"""The rewards of one generation round, collected where a framework computes them.

The trainer opens a :class:`RoundRewards` round with the step and its batch, the reward code
adds ``(task_id, reward)`` pairs, and the observer takes the round as ``{task_id: [r_1..r_K]}``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from envsched_gnn.observations import validate_rewards


class IncompleteRoundError(RuntimeError):
    """A round was taken with rewards missing or extra: some rollouts never reached observe."""


@dataclass
class Round:
    """One step's batch and the rewards collected for it so far."""

    step: int
    batch: tuple[str, ...]
    group_size: int
    rewards: list[tuple[str, float]] = field(default_factory=list)

    def groups(self) -> dict[str, list[float]]:
        """``{task_id: [r_1..r_K]}`` in batch order; every task exactly ``group_size`` rewards."""
        groups: dict[str, list[float]] = {task_id: [] for task_id in self.batch}
        for task_id, reward in self.rewards:
            if task_id not in groups:
                raise IncompleteRoundError(
                    f"step {self.step}: a reward for task {task_id!r}, which is not in the batch"
                )
            groups[task_id].append(reward)
        wrong = {t: len(r) for t, r in groups.items() if len(r) != self.group_size}
        if wrong:
            raise IncompleteRoundError(
                f"step {self.step}: expected {self.group_size} rewards per task, got {wrong}"
            )
        for task_id, group in groups.items():
            validate_rewards(group, task_id=task_id, step=self.step)
        return groups


class RoundRewards:
    """The open round of a run (thread-safe: async reward functions may add concurrently)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._round: Round | None = None

    def open(self, step: int, batch: Sequence[str], group_size: int) -> None:
        """Start collecting for ``step``; a round still open is an error (it was never taken)."""
        with self._lock:
            if self._round is not None:
                raise IncompleteRoundError(
                    f"step {step} opened while step {self._round.step} was never observed"
                )
            self._round = Round(int(step), tuple(batch), int(group_size))

    def add(self, pairs: Iterable[tuple[str, float]]) -> None:
        """Record ``(task_id, reward)`` pairs; ignored when no round is open (evaluation)."""
        with self._lock:
            if self._round is not None:
                self._round.rewards.extend((str(t), float(r)) for t, r in pairs)

    def take(self) -> Round | None:
        """The open round, closed; None if none is open."""
        with self._lock:
            current, self._round = self._round, None
            return current
