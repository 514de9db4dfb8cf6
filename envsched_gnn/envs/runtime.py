"""The environment runtime: episodes of a pool's tasks in sandboxed workers, one environment each.

Environment and check code is untrusted and runs only in workers (:mod:`~envsched_gnn.envs.
worker`), each in a sandbox (:mod:`~envsched_gnn.envs.sandbox`). A worker holds one
environment's episodes at a time (it is restarted before it takes another); its tool process
runs instantiation and tool calls, a separate scorer process runs the checks. A worker the
alarm cannot stop is killed after the op's budget plus a grace period, and its episodes are
rebuilt by replaying their logged calls (:mod:`~envsched_gnn.envs.dispatch`): environment
code never crashes the trainer, every failure becomes a
:class:`~envsched_gnn.envs.episode.ToolFault` or a failed check.

Placement: an environment's episodes are spread over up to ``workers`` sandboxes, in
proportion to its share of the live episodes; idle sandboxes stay bound to their environment,
up to ``max_sandboxes`` in all. Ops are batched: one request line per worker per method call.

Reward: ``r = (checks returning True) / (number of checks)`` (docs/design.md §8), or under
``RuntimeConfig.reward = "success"`` 1 when every check returns True, else 0 (§9.6). A state
no check can run on scores 0 with ``EpisodeScore.unscored`` saying why, warned once per task
and cause.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from typing import Any

from envsched_gnn.envs.dispatch import SCORER, TOOLS, Dispatcher, Op
from envsched_gnn.envs.episode import (
    EpisodeScore,
    RuntimeEpisode,
    ScoreRun,
    failed_score,
    fault,
    warn_unscored,
)
from envsched_gnn.envs.pool import Pool, Task, ToolCall
from envsched_gnn.envs.replay import RuntimeBase
from envsched_gnn.envs.runtime_config import RuntimeConfig
from envsched_gnn.envs.slots import Slots


class EnvRuntime(RuntimeBase):
    """Runs episodes of a pool's tasks in sandboxed workers, one environment per worker.

    A context manager (:meth:`start` on entry or first use, :meth:`close` on exit); not
    thread-safe. Methods take batches and answer in input order.
    """

    def __init__(self, pool: Pool, config: RuntimeConfig | None = None) -> None:
        self.pool = pool
        self.config = config or RuntimeConfig()
        self._slots = Slots(self.config)
        self._episodes: dict[str, RuntimeEpisode] = {}
        self._dispatcher = Dispatcher(pool, self.config, self._slots, self._episodes)
        self._reported: set[str] = set()
        self._finalizer = weakref.finalize(self, self._slots.close)

    def start(self) -> None:
        """Starts fresh workers up to ``workers`` (idempotent); raises SandboxUnavailable."""
        fresh = [i for i, slot in self._slots.items() if slot.env_id is None]
        self._slots.start(
            [self._slots.launch(None) for _ in range(self.config.workers - len(fresh))]
        )

    def close(self) -> None:
        """Stops the workers and forgets every episode."""
        self._slots.close()
        self._episodes.clear()

    @property
    def restarts(self) -> int:
        """Sandboxes replaced so far (a worker that hung, died or misbehaved)."""
        return self._dispatcher.restarts

    @property
    def pids(self) -> list[int]:
        """Process ids of the current workers (each the first process of its sandbox)."""
        return self._slots.pids

    def reset(self, episodes: Sequence[tuple[str, str]]) -> list[dict]:
        """Starts (or restarts) each ``(episode_id, task_id)`` in its task's initial state,
        instantiated as EnvScaler does (docs/design.md §8). Returns ``{"success": True}`` or
        ``{"success": False, "error": str}`` per episode."""
        return self._reset(episodes)

    def rebuild(self, episodes: Sequence[tuple[str, str, Sequence[ToolCall]]]) -> list[dict]:
        """Restores each ``(episode_id, task_id, calls)`` that another runtime held (a Ray
        actor that died) as a replaced worker's episodes are restored
        (:meth:`~envsched_gnn.envs.dispatch.Dispatcher.rebuild_ops`). Returns
        ``{"success": True}`` or ``{"success": False, "error": str}`` per episode."""
        self._reset([(e, task_id) for e, task_id, _ in episodes], [c for _, _, c in episodes])
        restored = [self._episodes[episode_id] for episode_id, _, _ in episodes]
        return [
            {"success": True} if e.status == "live" else {"success": False, "error": e.error}
            for e in restored
        ]

    def _reset(
        self, episodes: Sequence[tuple[str, str]], logs: Sequence[Sequence[ToolCall]] | None = None
    ) -> list:
        """:meth:`reset`, or with ``logs`` (one per episode) a rebuild: reset, then the calls."""
        if not len(self._slots):
            self.start()
        tasks = [self.pool.task(task_id) for _, task_id in episodes]
        if len({episode_id for episode_id, _ in episodes}) != len(episodes):
            raise ValueError("an episode id appears twice in one reset")
        jobs: dict[tuple[int, str], list[Op]] = {}
        for episode_id, task in zip((e for e, _ in episodes), tasks, strict=True):
            old = self._episodes.get(episode_id)
            if old is not None and old.task.env_id != task.env_id:
                self.release([episode_id])
        placement = self._place(episodes, tasks)
        for sink, ((episode_id, _), task) in enumerate(zip(episodes, tasks, strict=True)):
            episode = self._episodes[episode_id] = RuntimeEpisode(task, placement[sink])
            if logs is None:
                ops = [self._dispatcher.reset_op(episode_id, task, sink)]
            else:
                episode.status, episode.log = "live", list(logs[sink])
                ops = self._dispatcher.rebuild_ops([episode_id])
            jobs.setdefault((episode.worker, TOOLS), []).extend(ops)
        results: list = [None] * len(episodes)
        self._dispatcher.run(jobs, results)
        self._retire_exhausted()
        return results

    def call(self, calls: Sequence[tuple[str, ToolCall]]) -> list[Any]:
        """Calls tools; each result is the tool's return value as JSON
        (:mod:`~envsched_gnn.envs.tool_results`) or a :class:`ToolFault`."""
        results: list = [None] * len(calls)
        jobs: dict[tuple[int, str], list[Op]] = {}
        for sink, (episode_id, call) in enumerate(calls):
            episode = self._episode(episode_id)
            if episode.status != "live":
                results[sink] = fault(f"episode {episode_id!r} is not usable: {episode.error}")
                continue
            try:
                op = self._dispatcher.call_op(episode_id, call, sink)
            except (TypeError, ValueError) as error:
                results[sink] = fault(f"arguments of {call.name!r} are not JSON: {error}")
                continue
            jobs.setdefault((episode.worker, TOOLS), []).append(op)
        self._dispatcher.run(jobs, results)
        self._retire_exhausted()
        return results

    def score(self, episode_ids: Sequence[str]) -> list[EpisodeScore]:
        """Runs every check of each episode's task on its current state, in the scorer."""
        results: list = [None] * len(episode_ids)
        states: list = [None] * len(episode_ids)
        jobs: dict[tuple[int, str], list[Op]] = {}
        unusable = set()  # their reset's answer already said why
        for sink, episode_id in enumerate(episode_ids):
            episode = self._episode(episode_id)
            if episode.status != "live":
                results[sink] = failed_score(episode.task, episode.error)
                unusable.add(sink)
                continue
            item = self._dispatcher.episode_op("state", episode_id, sink)
            jobs.setdefault((episode.worker, TOOLS), []).append(item)
        self._dispatcher.run(jobs, states)
        scoring: dict[tuple[int, str], list[Op]] = {}
        for sink, episode_id in enumerate(episode_ids):
            if results[sink] is not None:
                continue
            episode, state = self._episodes[episode_id], states[sink]
            if state.get("success") is not True:
                reason = f"state cannot be sent to the scorer (task {episode.task.task_id!r})"
                results[sink] = failed_score(episode.task, f"{reason}: {state.get('error')}")
                continue
            run = ScoreRun(episode.task, state["initial"], state["final"], self.config.reward)
            item = self._dispatcher.score_op(episode_id, sink, run)
            scoring.setdefault((episode.worker, SCORER), []).append(item)
        self._dispatcher.run(scoring, results)
        self._retire_exhausted()
        warn_unscored([s for sink, s in enumerate(results) if sink not in unusable], self._reported)
        return results

    def state(self, episode_ids: Sequence[str]) -> list[dict]:
        """Each episode's current state: ``{"success": True, "data": {attribute: value}}`` (values
        JSON cannot hold as their ``repr``), or ``{"success": False, "error": str}``."""
        results: list = [None] * len(episode_ids)
        jobs: dict[tuple[int, str], list[Op]] = {}
        for sink, episode_id in enumerate(episode_ids):
            episode = self._episode(episode_id)
            if episode.status != "live":
                results[sink] = {
                    "success": False,
                    "error": f"episode {episode_id!r} is not usable: {episode.error}",
                }
                continue
            item = self._dispatcher.episode_op("snapshot", episode_id, sink)
            jobs.setdefault((episode.worker, TOOLS), []).append(item)
        self._dispatcher.run(jobs, results)
        return results

    def release(self, episode_ids: Sequence[str]) -> None:
        """Forgets episodes (unknown ids are ignored)."""
        jobs: dict[tuple[int, str], list[Op]] = {}
        for episode_id in episode_ids:
            episode = self._episodes.pop(episode_id, None)
            if episode is not None:
                item = self._dispatcher.episode_op("release", episode_id, None, self.config.grace_s)
                jobs.setdefault((episode.worker, TOOLS), []).append(item)
        self._dispatcher.run(jobs, [])
        self._slots.trim(self._load())

    # -- placement: one environment per worker ---------------------------------------------

    def _load(self) -> dict[int, int]:
        load = dict.fromkeys(self._slots, 0)
        for episode in self._episodes.values():
            load[episode.worker] += 1
        return load

    def _place(self, episodes: Sequence[tuple[str, str]], tasks: Sequence[Task]) -> list[int]:
        """A worker of its task's environment for each episode, starting workers as needed.

        Environment e with n_e of the N live episodes gets
        ``min(workers, max(1, ceil(workers * n_e / N)))`` workers.
        """
        load = self._load()
        placement: list[int | None] = [None] * len(episodes)
        new: dict[str, list[int]] = {}  # environment -> sinks of its episodes to place
        for sink, ((episode_id, _), task) in enumerate(zip(episodes, tasks, strict=True)):
            old = self._episodes.get(episode_id)
            if old is not None:
                placement[sink] = old.worker  # same environment: it stays where it is
            else:
                new.setdefault(task.env_id, []).append(sink)
        live_of = {env_id: len(sinks) for env_id, sinks in new.items()}
        for episode in self._episodes.values():
            live_of[episode.task.env_id] = live_of.get(episode.task.env_id, 0) + 1
        total = sum(live_of.values())
        started: list[int] = []
        for env_id, sinks in new.items():
            share = math.ceil(self.config.workers * live_of[env_id] / total)
            wanted = min(self.config.workers, max(1, share))
            own = self._slots.bound_to(env_id)
            while len(own) < wanted:
                slot_id = self._slots.acquire(env_id, load, started)
                load.setdefault(slot_id, 0)
                own.append(slot_id)
            for sink in sinks:
                worker = min(own, key=load.__getitem__)
                placement[sink] = worker
                load[worker] += 1
        self._slots.start(started)
        self._slots.touch(set(placement))
        return placement

    def _retire_exhausted(self) -> None:
        """Replaces workers past half their CPU-time limit, rebuilding their episodes."""
        for slot_id, slot in self._slots.items():
            if slot.exhausted:
                self._slots.restart(slot_id)
                rebuild = self._dispatcher.rebuild_ops(self._dispatcher.live_on(slot_id))
                self._dispatcher.run({(slot_id, TOOLS): rebuild}, [])
