"""An episode as the environment runtime keeps it, and what the runtime answers for it.

Reward of an episode: ``r = (number of checks returning True) / (number of checks)``
(:meth:`ScoreRun.verdict`). An error result the runtime makes, not the tool, is a
:class:`ToolFault`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from envsched_gnn.envs.pool import Task, ToolCall


@dataclass(frozen=True)
class EpisodeScore:
    """The verifier's verdict on an episode's current state."""

    reward: float
    """Checks passed / number of checks, in [0, 1]."""
    checks: tuple[bool, ...]
    """One per check; False when it raised, timed out or returned a non-bool."""
    errors: tuple[str, ...] = field(default=(), compare=False)
    """One per check: why it could not pass (``""`` when it ran and returned a bool)."""


class ToolFault(dict):
    """An error result made by the runtime, not by the tool: the call was malformed, or the
    tool raised, hung, crashed its worker or returned something unusable. It is the plain
    ``{"success": False, "error": ...}`` dict the policy sees; only its type tells."""


@dataclass
class Episode:
    """An episode the runtime holds: its task, its worker, the calls a rebuild replays."""

    task: Task
    worker: int
    log: list[ToolCall] = field(default_factory=list)
    status: str = "pending"  # pending -> live | failed; live -> lost when a rebuild fails
    error: str = ""


@dataclass
class ScoreRun:
    """The checks of one episode on the states its tool process sent, check by check."""

    task: Task
    initial: str
    final: str
    passed: list[bool] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def checks(self) -> list[str]:
        return [check.check_func for check in self.task.checklist_with_func]

    def verdict(self, reason: str = "") -> EpisodeScore:
        """The score, the checks not run yet failed with ``reason``."""
        missing = len(self.checks) - len(self.passed)
        checks = (*self.passed, *(False,) * missing)
        errors = (*self.errors, *(reason,) * missing)
        reward = sum(checks) / len(checks) if checks else 0.0
        return EpisodeScore(reward=reward, checks=checks, errors=errors)


def fault(message: str) -> ToolFault:
    """The runtime's error result ``{"success": False, "error": message}``."""
    return ToolFault(success=False, error=message)


def failed_score(task: Task, reason: str) -> EpisodeScore:
    """Reward 0: every check of ``task`` failed with ``reason`` (the episode is not usable)."""
    count = len(task.checklist_with_func)
    return EpisodeScore(reward=0.0, checks=(False,) * count, errors=(reason,) * count)
