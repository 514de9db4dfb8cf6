"""The sandboxed environment runtime: episodes of a pool's tasks in a pool of worker processes.

Environment and check code is untrusted. It runs only in worker processes
(:mod:`envsched_gnn.envs.worker`), started with ``subprocess`` from a fresh interpreter rather
than ``multiprocessing``: like the ``spawn`` context they inherit no threads or torch state of
the parent, and unlike it they re-import neither the parent's ``__main__`` nor the project, and
get a scrubbed environment (no inherited secrets, also not in ``/proc/self/environ``). Each
worker has an address-space limit and runs every instantiation, tool call and check under a
wall-clock alarm; if the alarm cannot stop the code (a loop in C, a swallowed exception) the
parent kills the worker after the op's budget plus a grace period, starts a new one, and
rebuilds the episodes it held by replaying their logged calls. The trainer never crashes
because of environment code: every failure becomes an error result or a failed check.

Episodes stay on the worker that reset them. Ops are batched: one request line per worker
per method call, answered op by op, so a batch of 512 episodes costs one round trip per
worker, not one per call.

Reward of an episode: ``r = (number of checks returning True) / (number of checks)``.
"""

from __future__ import annotations

import itertools
import json
import os
import selectors
import subprocess
import sys
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from envsched_gnn.envs.pool import Pool, Task, ToolCall

WORKER_SCRIPT = Path(__file__).with_name("worker.py")
MAX_RESTARTS_PER_BATCH = 3
_WORKER_ENVIRONMENT = {
    "PATH": os.defpath,
    "LC_ALL": "C.UTF-8",
    "PYTHONHASHSEED": "0",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONNOUSERSITE": "1",
}


@dataclass
class RuntimeConfig:
    """How the runtime runs untrusted environment code."""

    workers: int = 2
    """Worker processes (a pool, reused across episodes)."""
    call_timeout_s: float = 2.0
    """Wall-clock limit of one tool call, one instantiation, one check."""
    memory_limit_mb: int = 1024
    """Address-space limit of each worker (``resource.RLIMIT_AS``)."""
    max_result_bytes: int = 1_000_000
    """Largest JSON text of one tool result; larger results become error results."""
    grace_s: float = 2.0
    """Extra seconds past an op's budget before the parent kills a stuck worker."""

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError(f"RuntimeConfig.workers must be >= 1, got {self.workers}")
        if not self.call_timeout_s > 0:
            raise ValueError(f"RuntimeConfig.call_timeout_s must be > 0, got {self.call_timeout_s}")
        if self.memory_limit_mb < 64:
            raise ValueError(
                f"RuntimeConfig.memory_limit_mb must be >= 64, got {self.memory_limit_mb}"
            )


@dataclass(frozen=True)
class EpisodeScore:
    """The verifier's verdict on an episode's current state."""

    reward: float
    """Checks passed / number of checks, in [0, 1]."""
    checks: tuple[bool, ...]
    """One per check; False when it raised, timed out or returned a non-bool."""
    errors: tuple[str, ...] = field(default=(), compare=False)
    """One per check: why it could not pass (``""`` when it ran and returned a bool)."""


@dataclass
class _Episode:
    task: Task
    worker: int
    log: list[ToolCall] = field(default_factory=list)
    status: str = "pending"  # pending -> live | failed; live -> lost when a rebuild fails
    error: str = ""


@dataclass
class _Item:
    """One op for a worker. ``sink`` indexes the caller's results; None for rebuild ops."""

    kind: str
    text: str
    episode: str | None
    sink: int | None
    budget_s: float
    call: ToolCall | None = None


class _Process:
    """One worker process and what it holds."""

    def __init__(self, config: RuntimeConfig) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-s",
                "-B",
                str(WORKER_SCRIPT),
                repr(config.call_timeout_s),
                str(config.memory_limit_mb),
                str(config.max_result_bytes),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=dict(_WORKER_ENVIRONMENT),
            close_fds=True,
            start_new_session=True,
        )
        self.envs: set[str] = set()

    def stop(self, kill: bool) -> None:
        if self.proc.poll() is None:
            if kill:
                self.proc.kill()
            else:
                self.proc.stdin.close()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if not stream.closed:
                stream.close()


def _stop_all(processes: list[_Process]) -> None:
    for process in processes:
        process.stop(kill=True)


class _Job:
    """The items one worker is answering in the current dispatch."""

    def __init__(self, items: list[_Item]) -> None:
        self.items = items
        self.position = 0
        self.buffer = b""
        self.deadline = 0.0


class EnvRuntime:
    """Runs episodes of a pool's tasks in sandboxed worker processes.

    A context manager: workers start on ``__enter__`` (or on first use) and stop on
    :meth:`close`. Not thread-safe: one caller drives it. Methods take batches; each
    answers in the order of its input.
    """

    def __init__(self, pool: Pool, config: RuntimeConfig | None = None) -> None:
        self.pool = pool
        self.config = config or RuntimeConfig()
        self.restarts = 0
        self._processes: list[_Process] = []
        self._episodes: dict[str, _Episode] = {}
        self._replay_ids = itertools.count()
        self._finalizer = weakref.finalize(self, _stop_all, self._processes)

    def __enter__(self) -> EnvRuntime:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def start(self) -> None:
        """Starts the worker processes (idempotent)."""
        while len(self._processes) < self.config.workers:
            self._processes.append(_Process(self.config))

    def close(self) -> None:
        """Stops the workers and forgets every episode."""
        for process in self._processes:
            process.stop(kill=False)
        self._processes.clear()
        self._episodes.clear()

    @property
    def pids(self) -> list[int]:
        """Process ids of the current workers."""
        return [process.proc.pid for process in self._processes]

    def reset(self, episodes: Sequence[tuple[str, str]]) -> list[dict]:
        """Starts (or restarts) each ``(episode_id, task_id)`` in its task's initial state.

        Instantiation as EnvScaler does it: ``cls(init_config)``, falling back to ``cls()`` on
        a ``TypeError``, then every key of ``init_config`` set as an attribute. Returns
        ``{"success": True}`` or ``{"success": False, "error": str}`` per episode.
        """
        self.start()
        tasks = [self.pool.task(task_id) for _, task_id in episodes]
        if len({episode_id for episode_id, _ in episodes}) != len(episodes):
            raise ValueError("an episode id appears twice in one reset")
        load = [0] * len(self._processes)
        for episode in self._episodes.values():
            load[episode.worker] += 1
        jobs: dict[int, list[_Item]] = {}
        for sink, ((episode_id, _), task) in enumerate(zip(episodes, tasks, strict=True)):
            old = self._episodes.get(episode_id)
            worker = old.worker if old is not None else min(range(len(load)), key=load.__getitem__)
            if old is None:
                load[worker] += 1
            self._episodes[episode_id] = _Episode(task=task, worker=worker)
            jobs.setdefault(worker, []).append(self._reset_item(episode_id, task, sink))
        results: list = [None] * len(episodes)
        self._dispatch(jobs, results)
        return results

    def call(self, calls: Sequence[tuple[str, ToolCall]]) -> list[dict]:
        """Calls tools; each result is the tool's own dict or ``{"success": False, "error"}``."""
        results: list = [None] * len(calls)
        jobs: dict[int, list[_Item]] = {}
        for sink, (episode_id, call) in enumerate(calls):
            episode = self._episode(episode_id)
            if episode.status != "live":
                results[sink] = _error(f"episode {episode_id!r} is not usable: {episode.error}")
                continue
            try:
                text = json.dumps(
                    {"op": "call", "ep": episode_id, "name": call.name, "args": call.arguments},
                    allow_nan=False,
                )
            except (TypeError, ValueError) as error:
                results[sink] = _error(f"arguments of {call.name!r} are not JSON: {error}")
                continue
            jobs.setdefault(episode.worker, []).append(
                _Item("call", text, episode_id, sink, self._budget(1), call)
            )
        self._dispatch(jobs, results)
        return results

    def score(self, episode_ids: Sequence[str]) -> list[EpisodeScore]:
        """Runs every check of each episode's task on its current state."""
        results: list = [None] * len(episode_ids)
        jobs: dict[int, list[_Item]] = {}
        for sink, episode_id in enumerate(episode_ids):
            episode = self._episode(episode_id)
            if episode.status != "live":
                results[sink] = _failed_score(episode.task, episode.error)
                continue
            text = json.dumps({"op": "score", "ep": episode_id})
            budget = self._budget(len(episode.task.checklist_with_func) + 1)
            jobs.setdefault(episode.worker, []).append(
                _Item("score", text, episode_id, sink, budget)
            )
        self._dispatch(jobs, results)
        return results

    def state(self, episode_ids: Sequence[str]) -> list[dict]:
        """Each episode's current state: ``{"success": True, "data": {attribute: value}}`` (values
        JSON cannot hold as their ``repr``), or ``{"success": False, "error": str}``."""
        results: list = [None] * len(episode_ids)
        jobs: dict[int, list[_Item]] = {}
        for sink, episode_id in enumerate(episode_ids):
            episode = self._episode(episode_id)
            if episode.status != "live":
                results[sink] = _error(f"episode {episode_id!r} is not usable: {episode.error}")
                continue
            text = json.dumps({"op": "state", "ep": episode_id})
            jobs.setdefault(episode.worker, []).append(
                _Item("state", text, episode_id, sink, self._budget(1))
            )
        self._dispatch(jobs, results)
        return results

    def release(self, episode_ids: Sequence[str]) -> None:
        """Forgets episodes (unknown ids are ignored)."""
        jobs: dict[int, list[_Item]] = {}
        for episode_id in episode_ids:
            episode = self._episodes.pop(episode_id, None)
            if episode is not None:
                text = json.dumps({"op": "release", "ep": episode_id})
                item = _Item("release", text, episode_id, None, self.config.grace_s)
                jobs.setdefault(episode.worker, []).append(item)
        self._dispatch(jobs, [])

    def replay(self, runs: Sequence[tuple[str, Sequence[ToolCall]]]) -> list[EpisodeScore]:
        """For each ``(task_id, calls)``: a fresh episode, the calls in order, its score."""
        episode_ids = [f"replay-{next(self._replay_ids)}" for _ in runs]
        try:
            self.reset(
                [
                    (episode_id, task_id)
                    for episode_id, (task_id, _) in zip(episode_ids, runs, strict=True)
                ]
            )
            self.call(
                [
                    (episode_id, call)
                    for episode_id, (_, calls) in zip(episode_ids, runs, strict=True)
                    for call in calls
                ]
            )
            return self.score(episode_ids)
        finally:
            self.release(episode_ids)

    def _episode(self, episode_id: str) -> _Episode:
        try:
            return self._episodes[episode_id]
        except KeyError:
            raise ValueError(f"unknown episode {episode_id!r}: reset it first") from None

    def _budget(self, limited_steps: int) -> float:
        return limited_steps * self.config.call_timeout_s + self.config.grace_s

    def _reset_item(self, episode_id: str, task: Task, sink: int | None) -> _Item:
        text = json.dumps(
            {
                "op": "reset",
                "ep": episode_id,
                "env": task.env_id,
                "cls": task.env_class_name,
                "init": task.init_config,
                "checks": [check.check_func for check in task.checklist_with_func],
            }
        )
        # budget: executing the class code, then instantiating, each under the alarm
        return _Item("reset", text, episode_id, sink, self._budget(2))

    def _define_item(self, env_id: str) -> _Item:
        env = self.pool.envs[env_id]
        text = json.dumps(
            {"op": "define", "env": env_id, "code": env.env_class_code, "tools": env.tool_names}
        )
        return _Item("define", text, None, None, self.config.grace_s)

    def _rebuild_items(self, worker: int) -> list[_Item]:
        items = []
        for episode_id, episode in self._episodes.items():
            if episode.worker != worker or episode.status != "live":
                continue
            items.append(self._reset_item(episode_id, episode.task, None))
            for call in episode.log:
                text = json.dumps(
                    {"op": "call", "ep": episode_id, "name": call.name, "args": call.arguments}
                )
                items.append(_Item("call", text, episode_id, None, self._budget(1), call))
        return items

    def _send(self, worker: int, items: list[_Item]) -> _Job | None:
        """Writes one request to a worker, defining the environments it has not seen yet."""
        process = self._processes[worker]
        request: list[_Item] = []
        for item in items:
            if item.kind == "reset":
                env_id = self._episodes[item.episode].task.env_id
                if env_id not in process.envs:
                    request.append(self._define_item(env_id))
                    process.envs.add(env_id)
            request.append(item)
        if not request:
            return None
        payload = '{"ops": [' + ", ".join(item.text for item in request) + "]}\n"
        job = _Job(request)
        try:
            process.proc.stdin.write(payload.encode())
            process.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the dead worker shows as EOF in the read loop
        job.deadline = time.monotonic() + request[0].budget_s
        return job

    def _dispatch(self, work: dict[int, list[_Item]], results: list) -> None:
        """Runs each worker's items, in parallel across workers, recovering from stuck ones."""
        selector = selectors.DefaultSelector()
        jobs: dict[int, _Job] = {}
        restarts = dict.fromkeys(work, 0)

        def launch(worker: int, items: list[_Item]) -> None:
            job = self._send(worker, items)
            if job is not None:
                jobs[worker] = job
                selector.register(self._processes[worker].proc.stdout, selectors.EVENT_READ, worker)

        def recover(worker: int, reason: str) -> None:
            job = jobs.pop(worker)
            selector.unregister(self._processes[worker].proc.stdout)
            self._absorb_failure(job.items[job.position], reason, results)
            self._processes[worker].stop(kill=True)
            self._processes[worker] = _Process(self.config)
            self.restarts += 1
            restarts[worker] += 1
            if restarts[worker] > MAX_RESTARTS_PER_BATCH:
                self._lose_episodes(worker, f"worker restarted {restarts[worker]} times")
                rebuild = []
            else:
                rebuild = self._rebuild_items(worker)
            launch(worker, rebuild + job.items[job.position + 1 :])

        for worker, items in work.items():
            launch(worker, items)
        try:
            while jobs:
                now = time.monotonic()
                timeout = max(0.0, min(job.deadline for job in jobs.values()) - now)
                for key, _ in selector.select(timeout):
                    worker = key.data
                    job = jobs[worker]
                    chunk = os.read(key.fd, 1 << 20)
                    if not chunk:
                        code = self._processes[worker].proc.wait()
                        recover(worker, f"the worker process died (exit code {code})")
                        continue
                    if not self._absorb_chunk(job, chunk, results):
                        recover(worker, "the worker sent a malformed reply")
                    elif job.position == len(job.items):
                        selector.unregister(key.fileobj)
                        del jobs[worker]
                now = time.monotonic()
                for worker, job in list(jobs.items()):
                    if now >= job.deadline:
                        budget = job.items[job.position].budget_s
                        recover(worker, f"timed out after {budget:g} s; worker replaced")
        finally:
            selector.close()

    def _absorb_chunk(self, job: _Job, chunk: bytes, results: list) -> bool:
        """Takes the complete reply lines of a chunk; False when a reply is malformed."""
        job.buffer += chunk
        *lines, job.buffer = job.buffer.split(b"\n")
        for line in lines:
            try:
                reply = json.loads(line)
                if reply["i"] != job.position:
                    return False
                result = reply["r"]
            except (ValueError, KeyError, TypeError):
                return False
            item = job.items[job.position]
            job.position += 1
            self._absorb(item, result, bool(reply.get("t")), results)
            if job.position < len(job.items):
                job.deadline = time.monotonic() + job.items[job.position].budget_s
        return True

    def _absorb(self, item: _Item, result: dict, timed_out: bool, results: list) -> None:
        """Records one answered op in the episode log and the caller's results."""
        episode = self._episodes.get(item.episode) if item.episode is not None else None
        if item.kind == "reset" and episode is not None:
            if result.get("success") is True:
                episode.status, episode.log = "live", []
            elif item.sink is None:
                episode.status, episode.error = "lost", f"rebuild failed: {result.get('error')}"
            else:
                episode.status, episode.error = "failed", str(result.get("error"))
        elif item.kind == "call" and episode is not None and not timed_out:
            # the log is what a rebuild replays; a call stopped by the alarm is left out
            episode.log.append(item.call)
        elif item.kind == "score" and episode is not None:
            result = self._to_score(episode.task, result)
        if item.sink is not None:
            results[item.sink] = result

    def _absorb_failure(self, item: _Item, reason: str, results: list) -> None:
        """Answers the op that was running when its worker had to be replaced."""
        episode = self._episodes.get(item.episode) if item.episode is not None else None
        if item.kind == "reset" and episode is not None:
            if item.sink is None:
                episode.status, episode.error = "lost", f"rebuild failed: {reason}"
            else:
                episode.status, episode.error = "failed", reason
        elif item.kind == "call" and item.sink is None and episode is not None:
            # a rebuild call that no longer completes: the episode cannot be restored
            episode.status, episode.error = "lost", f"rebuild failed: {reason}"
        if item.sink is None:
            return
        if item.kind == "score" and episode is not None:
            results[item.sink] = _failed_score(episode.task, reason)
        else:
            results[item.sink] = _error(reason)

    def _lose_episodes(self, worker: int, reason: str) -> None:
        for episode in self._episodes.values():
            if episode.worker == worker and episode.status == "live":
                episode.status, episode.error = "lost", reason

    @staticmethod
    def _to_score(task: Task, result: dict) -> EpisodeScore:
        if result.get("success") is not True:
            return _failed_score(task, str(result.get("error")))
        checks = tuple(value is True for value in result["checks"])
        errors = tuple(str(error) for error in result["errors"])
        reward = sum(checks) / len(checks) if checks else 0.0
        return EpisodeScore(reward=reward, checks=checks, errors=errors)


def _error(message: str) -> dict:
    return {"success": False, "error": message}


def _failed_score(task: Task, reason: str) -> EpisodeScore:
    count = len(task.checklist_with_func)
    return EpisodeScore(reward=0.0, checks=(False,) * count, errors=(reason,) * count)
