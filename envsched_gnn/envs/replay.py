"""Replaying fixed calls: each run a fresh episode, its calls in order, its score, then released
(also when a call raises). Used by both runtimes' ``replay``, SFT data and ``pool check``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from envsched_gnn.envs.episode import EpisodeScore, RuntimeEpisode
from envsched_gnn.envs.pool import ToolCall

_EPISODE_NUMBERS = itertools.count()
"""Numbers of replay episodes, so that no two replays in this process share an episode id."""


class EpisodeRuntime(Protocol):
    """The episode API that ``EnvRuntime`` and ``RayEnvRuntime`` share."""

    def reset(self, episodes: Sequence[tuple[str, str]]) -> list[dict]: ...

    def call(self, calls: Sequence[tuple[str, ToolCall]]) -> list[Any]: ...

    def score(self, episode_ids: Sequence[str]) -> list[EpisodeScore]: ...

    def release(self, episode_ids: Sequence[str]) -> None: ...


@dataclass(frozen=True)
class Replayed:
    """One run as replayed."""

    reset: dict
    """The reset's answer: ``{"success": True}`` or ``{"success": False, "error": str}``."""
    results: list[Any]
    """Each call's result, in order; none when the reset failed (no call was made)."""
    score: EpisodeScore
    """The checks on the final state (reward 0 when the reset failed)."""
    states: list[dict]
    """With ``state`` and at least one call made: the state before each call and after the
    last (``state``'s answers); otherwise empty."""


def replay(
    runtime: EpisodeRuntime,
    runs: Sequence[tuple[str, Sequence[ToolCall]]],
    state: Callable[[Sequence[str]], list[dict]] | None = None,
) -> list[Replayed]:
    """For each ``(task_id, calls)``: a fresh episode, the calls in order, its score.

    All calls go in one batched ``runtime.call``; with ``state`` (``EnvRuntime.state``) position
    k of every run goes in one batch, with a snapshot before the first call and after each.
    Runs whose reset failed make no call.
    """
    episode_ids = [f"replay-{next(_EPISODE_NUMBERS)}" for _ in runs]
    try:
        resets = runtime.reset(
            [(e, task_id) for e, (task_id, _) in zip(episode_ids, runs, strict=True)]
        )
        live = [
            (e, list(calls))
            for e, (_, calls), reset in zip(episode_ids, runs, resets, strict=True)
            if reset.get("success") is True
        ]
        results: dict[str, list[Any]] = {e: [] for e, _ in live}
        states: dict[str, list[dict]] = {}
        if state is not None:
            live = [(e, calls) for e, calls in live if calls]
            ids = [e for e, _ in live]
            states = {e: [snapshot] for e, snapshot in zip(ids, state(ids), strict=True)}
            for k in range(max((len(calls) for _, calls in live), default=0)):
                active = [(e, calls[k]) for e, calls in live if len(calls) > k]
                for (e, _), result in zip(active, runtime.call(active), strict=True):
                    results[e].append(result)
                after = state([e for e, _ in active])
                for (e, _), snapshot in zip(active, after, strict=True):
                    states[e].append(snapshot)
        else:
            flat = [(e, call) for e, calls in live for call in calls]
            for (e, _), result in zip(flat, runtime.call(flat), strict=True):
                results[e].append(result)
        scores = runtime.score(episode_ids)
    finally:
        runtime.release(episode_ids)
    return [
        Replayed(reset, results.get(e, []), score, states.get(e, []))
        for e, reset, score in zip(episode_ids, resets, scores, strict=True)
    ]


R = TypeVar("R", bound="RuntimeBase")


class RuntimeBase:
    """What the local and the Ray runtime share: ``with`` over their ``start`` / ``close``,
    :meth:`replay`, and the lookup of an episode they hold (``_episodes``)."""

    _episodes: dict[str, RuntimeEpisode]

    def __enter__(self: R) -> R:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def replay(self, runs: Sequence[tuple[str, Sequence[ToolCall]]]) -> list[EpisodeScore]:
        """For each ``(task_id, calls)``: a fresh episode, the calls in order, its score
        (:func:`replay`)."""
        return [run.score for run in replay(self, runs)]

    def _episode(self, episode_id: str) -> RuntimeEpisode:
        try:
            return self._episodes[episode_id]
        except KeyError:
            raise ValueError(f"unknown episode {episode_id!r}: reset it first") from None
