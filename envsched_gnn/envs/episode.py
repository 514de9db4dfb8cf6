"""An episode as the environment runtime keeps it, and what the runtime answers for it.

Reward (:func:`reward_of`, :meth:`ScoreRun.verdict`), as ``RuntimeConfig.reward`` names it:
``fraction``, ``r = (checks returning True) / (number of checks)``, or ``success``, ``r = 1``
when every check returns True and 0 otherwise (docs/design.md §9.6). A state no check could
run on scores 0 and says why in :attr:`EpisodeScore.unscored`.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from envsched_gnn.envs.pool import Task, ToolCall
from envsched_gnn.observations import DEFAULT_REWARD


@dataclass(frozen=True)
class EpisodeScore:
    """The verifier's verdict on an episode's current state."""

    reward: float
    """The checks as one number in [0, 1] (:func:`reward_of`): the share that pass, or 1 when
    all do and 0 otherwise."""
    checks: tuple[bool, ...]
    """One per check; False when it raised, timed out or returned a non-bool."""
    errors: tuple[str, ...] = field(default=(), compare=False)
    """One per check: why it could not pass (``""`` when it ran and returned a bool)."""
    unscored: str = field(default="", compare=False)
    """Why no check could run (``"state cannot be loaded (class X, task Y): ..."``), or
    ``""`` when the checks ran on the state."""


class ToolFault(dict):
    """An error result made by the runtime, not by the tool: the call was malformed, or the
    tool raised, hung, crashed its worker or returned something unusable. It is the plain
    ``{"success": False, "error": ...}`` dict the policy sees; only its type tells."""


class CallStopped(ToolFault):
    """A call the runtime stopped before it returned: its alarm rang (the worker's ``"t"``
    flag), or its worker hung, died or misbehaved and was replaced. What it did to the state is
    unknown, so a rebuild does not replay it (:meth:`RuntimeEpisode.record`)."""


@dataclass
class RuntimeEpisode:
    """An episode a runtime holds: its task, its worker (a worker process, or a Ray actor),
    the calls a rebuild replays."""

    task: Task
    worker: int
    log: list[ToolCall] = field(default_factory=list)
    status: str = "pending"  # pending -> live | failed; live -> lost when a rebuild fails
    error: str = ""

    def record(self, call: ToolCall, result: Any) -> None:
        """Logs ``call`` for a rebuild to replay, unless the runtime stopped it."""
        if not isinstance(result, CallStopped):
            self.log.append(call)


@dataclass
class ScoreRun:
    """The checks of one episode on the states its tool process sent, check by check."""

    task: Task
    initial: str
    final: str
    reward: str = DEFAULT_REWARD
    """How the checks become the reward (:func:`reward_of`)."""
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
        return EpisodeScore(reward=reward_of(checks, self.reward), checks=checks, errors=errors)


def reward_of(checks: Sequence[bool], reward: str) -> float:
    """The reward of an episode whose checks gave ``checks``: under ``fraction`` the share
    that passed, under ``success`` 1.0 when every one did, else 0.0 (0.0 without checks)."""
    if not checks:
        return 0.0
    if reward == "success":
        return float(all(checks))
    return sum(checks) / len(checks)


def fault(message: str) -> ToolFault:
    """The runtime's error result ``{"success": False, "error": message}``."""
    return ToolFault(success=False, error=message)


def succeeded(result: Any) -> bool:
    """Whether a tool call ran and did not say it failed: not a :class:`ToolFault`, and not
    ``{"success": False, ...}`` (tool results may be any JSON value: spec section 8)."""
    return not isinstance(result, ToolFault) and not (
        isinstance(result, dict) and result.get("success") is False
    )


def failed_score(task: Task, reason: str) -> EpisodeScore:
    """Reward 0, every check False: no check of ``task`` could run, for ``reason``."""
    count = len(task.checklist_with_func)
    return EpisodeScore(
        reward=0.0, checks=(False,) * count, errors=(reason,) * count, unscored=reason
    )


def warn_unscored(scores: Iterable[EpisodeScore], reported: set[str]) -> None:
    """Warns once per task and cause (``"state cannot be loaded (class X, task Y)"``) about
    states no check could run on (they score 0), so that a state the scorer cannot read is not
    mistaken for checks that fail; ``reported`` holds the causes already warned about."""
    for score in scores:
        cause = score.unscored.partition("): ")[0]
        if cause and cause not in reported:
            reported.add(cause)
            warnings.warn(f"{score.unscored}; it scores 0", RuntimeWarning, stacklevel=3)


def unloadable_state(task: Task, class_name: str, why: str) -> str:
    """How a state the scorer cannot load is reported, naming the class and the task."""
    named = f"class {class_name}, " if class_name else ""
    return f"state cannot be loaded ({named}task {task.task_id!r}): {why}"
