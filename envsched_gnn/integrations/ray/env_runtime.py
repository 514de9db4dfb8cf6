"""The environment runtime on Ray: the episode API of ``EnvRuntime``, workers as Ray actors.

Each :class:`EnvWorker` actor hosts an ordinary :class:`~envsched_gnn.envs.runtime.EnvRuntime`
(sandbox included); :class:`RayEnvRuntime`, in the trainer, places episodes on the least
loaded actor and sends each method call as one request per actor, in parallel, answered in
input order. Actors are created with ``max_restarts`` and no task retries: when one dies
during a request, its episodes are rebuilt on the restarted actor by ``EnvRuntime.rebuild``
(reset, then the logged calls replayed, less those the runtime stopped: the local runtime's
rule, :meth:`~envsched_gnn.envs.episode.RuntimeEpisode.record`) and the request is sent again;
after ``max_rebuilds`` deaths in one request its episodes are lost (errors, reward 0) and the
trainer goes on. States no check could run on are warned about as ``EnvRuntime.score`` does.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.exceptions import ActorUnavailableError, RayActorError

from envsched_gnn.envs.episode import (
    EpisodeScore,
    RuntimeEpisode,
    failed_score,
    fault,
    warn_unscored,
)
from envsched_gnn.envs.pool import Pool, ToolCall
from envsched_gnn.envs.replay import RuntimeBase
from envsched_gnn.envs.runtime import EnvRuntime
from envsched_gnn.envs.runtime_config import RuntimeConfig
from envsched_gnn.validation import check_bounds


class EnvWorker(EnvRuntime):
    """An ``EnvRuntime`` in a Ray actor (see :data:`EnvWorkerActor`), started with it."""

    def __init__(self, pool: Pool, config: RuntimeConfig) -> None:
        super().__init__(pool, config)
        self.start()

    def process_ids(self) -> tuple[int, list[int]]:
        """The actor's process id and its runtime's worker process ids."""
        return os.getpid(), self.pids


EnvWorkerActor = ray.remote(EnvWorker)
"""``EnvWorker`` as a Ray actor class (resources set by :class:`RayEnvRuntime`)."""


@dataclass
class RayRuntimeConfig:
    """How many environment actors, and what each runs."""

    actors: int = 2
    """Environment actors; each hosts an ``EnvRuntime`` of ``runtime.workers`` processes."""
    runtime: RuntimeConfig = field(default_factory=lambda: RuntimeConfig(workers=1))
    """The local runtime each actor runs (timeouts, memory limit, worker processes)."""
    num_cpus: float = 1.0
    """CPUs Ray reserves per actor (its worker processes run there)."""
    max_restarts: int = -1
    """Ray restarts of a dead actor (-1: always)."""
    max_rebuilds: int = 3
    """Rebuilds of one actor within one request before its episodes are given up."""

    def __post_init__(self) -> None:
        check_bounds(self, at_least={"actors": 1})


class RayEnvRuntime(RuntimeBase):
    """Runs a pool's episodes on Ray actors with ``EnvRuntime``'s API (a context manager, not
    thread-safe); ``ray.init`` must have been called. An episode's ``worker`` is its actor."""

    def __init__(self, pool: Pool, config: RayRuntimeConfig | None = None) -> None:
        self.pool = pool
        self.config = config or RayRuntimeConfig()
        self.restarts = 0
        self._actors: list[Any] = []
        self._pool_ref: Any = None  # held: a restarted actor gets its pool from this object
        self._episodes: dict[str, RuntimeEpisode] = {}
        self._reported: set[str] = set()

    def start(self) -> None:
        """Creates the actors (idempotent) and waits until they are up."""
        if self._actors:
            return
        self._pool_ref = ray.put(self.pool)
        options = {
            "num_cpus": self.config.num_cpus,
            "max_restarts": self.config.max_restarts,
            "max_task_retries": 0,
        }
        self._actors = [
            EnvWorkerActor.options(**options).remote(self._pool_ref, self.config.runtime)
            for _ in range(self.config.actors)
        ]
        ray.get([actor.process_ids.remote() for actor in self._actors])

    def close(self) -> None:
        """Stops the actors (and so their worker processes) and forgets every episode."""
        for actor in self._actors:
            ray.kill(actor, no_restart=True)
        self._actors.clear()
        self._episodes.clear()

    def actor_pids(self) -> list[tuple[int, list[int]]]:
        """Per actor: its process id and its worker processes' ids."""
        return ray.get([actor.process_ids.remote() for actor in self._actors])

    def reset(self, episodes: Sequence[tuple[str, str]]) -> list[dict]:
        """Starts (or restarts) each ``(episode_id, task_id)``; see ``EnvRuntime.reset``."""
        self.start()
        if len({episode_id for episode_id, _ in episodes}) != len(episodes):
            raise ValueError("an episode id appears twice in one reset")
        tasks = [self.pool.task(task_id) for _, task_id in episodes]  # unknown ids fail here
        load = [0] * len(self._actors)
        for episode in self._episodes.values():
            load[episode.worker] += 1
        work: dict[int, list[tuple[int, tuple[str, str]]]] = {}
        for sink, ((episode_id, task_id), task) in enumerate(zip(episodes, tasks, strict=True)):
            old = self._episodes.get(episode_id)
            actor = old.worker if old is not None else min(range(len(load)), key=load.__getitem__)
            if old is None:
                load[actor] += 1
            self._episodes[episode_id] = RuntimeEpisode(task, actor)
            work.setdefault(actor, []).append((sink, (episode_id, task_id)))
        results: list = [None] * len(episodes)

        def absorb(item: tuple[str, str], result: dict) -> dict:
            episode = self._episodes[item[0]]
            episode.status = "live" if result.get("success") is True else "failed"
            episode.error = str(result.get("error", ""))
            return result

        self._dispatch("reset", work, results, absorb, _fault)
        return results

    def call(self, calls: Sequence[tuple[str, ToolCall]]) -> list[Any]:
        """Calls tools; each result is the tool's JSON value (``EnvRuntime.call``) or
        ``{"success": False, "error"}``."""
        results: list = [None] * len(calls)
        work: dict[int, list[tuple[int, tuple[str, ToolCall]]]] = {}
        for sink, (episode_id, tool_call) in enumerate(calls):
            episode = self._episode(episode_id)
            if episode.status != "live":
                results[sink] = fault(f"episode {episode_id!r} is not usable: {episode.error}")
                continue
            work.setdefault(episode.worker, []).append((sink, (episode_id, tool_call)))

        def absorb(item: tuple[str, ToolCall], result: Any) -> Any:
            episode = self._episodes.get(item[0])
            if episode is not None and episode.status == "live":
                episode.record(item[1], result)
            return result

        self._dispatch("call", work, results, absorb, _fault)
        return results

    def score(self, episode_ids: Sequence[str]) -> list[EpisodeScore]:
        """Runs every check of each episode's task on its current state."""
        results: list = [None] * len(episode_ids)
        work: dict[int, list[tuple[int, str]]] = {}
        for sink, episode_id in enumerate(episode_ids):
            episode = self._episode(episode_id)
            if episode.status != "live":  # its reset's answer already said why
                results[sink] = failed_score(episode.task, episode.error)
                continue
            work.setdefault(episode.worker, []).append((sink, episode_id))

        def failure(episode_id: str, reason: str) -> EpisodeScore:
            return failed_score(self._episodes[episode_id].task, reason)

        self._dispatch("score", work, results, lambda item, result: result, failure)
        scored = [results[sink] for items in work.values() for sink, _ in items]
        warn_unscored(scored, self._reported)
        return results

    def release(self, episode_ids: Sequence[str]) -> None:
        """Forgets episodes (unknown ids are ignored)."""
        work: dict[int, list[tuple[int, str]]] = {}
        for episode_id in episode_ids:
            episode = self._episodes.pop(episode_id, None)
            if episode is not None:
                work.setdefault(episode.worker, []).append((0, episode_id))
        self._dispatch("release", work, None, lambda item, result: result, _fault)

    # -- dispatch and recovery ----------------------------------------------------------------
    def _dispatch(
        self,
        method: str,
        work: dict[int, list[tuple[int, Any]]],
        results: list | None,
        absorb: Callable[[Any, Any], Any],
        failure: Callable[[Any, str], Any],
    ) -> None:
        """One request per actor, in parallel; a dead actor is rebuilt and asked again."""
        pending = {
            actor: getattr(self._actors[actor], method).remote([arg for _, arg in items])
            for actor, items in work.items()
        }
        for actor, items in work.items():
            answers, reason = self._answers(actor, method, items, pending[actor])
            for index, (sink, arg) in enumerate(items):
                answer = failure(arg, reason) if answers is None else absorb(arg, answers[index])
                if results is not None:
                    results[sink] = answer

    def _answers(self, actor: int, method: str, items: list, ref: Any) -> tuple[list | None, str]:
        args = [arg for _, arg in items]
        for attempt in range(self.config.max_rebuilds + 1):
            try:
                answers = ray.get(ref)
                return (answers if answers is not None else [None] * len(items)), ""
            except RayActorError as error:
                reason = f"environment actor {actor} died ({type(error).__name__})"
                if attempt == self.config.max_rebuilds or not self._rebuild(actor):
                    break
                ref = getattr(self._actors[actor], method).remote(args)
        for episode in self._episodes.values():
            if episode.worker == actor and episode.status == "live":
                episode.status, episode.error = "lost", f"{reason}; episode lost"
        return None, f"{reason}; gave up after {self.config.max_rebuilds} rebuilds"

    def _rebuild(self, actor: int) -> bool:
        """Waits for Ray to restart ``actor``, then rebuilds its live episodes there."""
        self.restarts += 1
        episodes = [
            (episode_id, episode.task.task_id, list(episode.log))
            for episode_id, episode in self._episodes.items()
            if episode.worker == actor and episode.status == "live"
        ]
        deadline = time.monotonic() + 60.0
        while True:
            try:
                results = ray.get(self._actors[actor].rebuild.remote(episodes))
                break
            except (ActorUnavailableError, RayActorError):
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.2)
        for (episode_id, _, _), result in zip(episodes, results, strict=True):
            if result.get("success") is not True:
                episode = self._episodes[episode_id]
                episode.status, episode.error = "lost", str(result.get("error"))
        return True


def _fault(_: Any, message: str) -> dict:
    return fault(message)
