"""The environment runtime: episodes of a pool's tasks in sandboxed workers, one environment each.

Environment and check code is untrusted. It runs only in workers (:mod:`~envsched_gnn.envs.
worker`), each started in a sandbox by :class:`~envsched_gnn.envs.sandbox.WorkerProcess` (no
network, no view of other processes, a minimal read-only filesystem, an unprivileged user,
limits; what it guarantees and what not is in that module). A worker holds one environment's
episodes at a time and is never shared across environments: a worker that held another
environment is restarted before it takes a new one. Within a worker, the tool process runs
instantiation and tool calls; the states go to a separate scorer process that runs the checks,
out of reach of the tool code. Each op runs under a wall-clock alarm; if the alarm cannot stop
the code (a loop in C, a swallowed exception) the runtime kills the whole sandbox after the
op's budget plus a grace period, starts a new one, and rebuilds the episodes it held by
replaying their logged calls. The trainer never crashes because of environment code: every
failure becomes an error result (a :class:`ToolFault`) or a failed check.

Episodes stay on the worker that reset them. An environment's episodes are spread over up to
``workers`` sandboxes, in proportion to its share of the live episodes; idle sandboxes stay
bound to their environment for reuse, up to ``max_sandboxes`` in all. Ops are batched: one
request line per worker per method call, answered op by op, so a batch of 512 episodes costs
one round trip per worker (two for :meth:`EnvRuntime.score`), not one per call.

Reward of an episode: ``r = (number of checks returning True) / (number of checks)``.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import selectors
import signal
import subprocess
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field

from envsched_gnn.envs.pool import Pool, Task, ToolCall
from envsched_gnn.envs.sandbox import SandboxConfig, SandboxUnavailable, trust_pool_default
from envsched_gnn.envs.slots import Slots

__all__ = ["EnvRuntime", "EpisodeScore", "RuntimeConfig", "SandboxUnavailable", "ToolFault"]

MAX_RESTARTS_PER_BATCH = 3
TOOLS, SCORER = "tools", "scorer"
OTHER = {TOOLS: SCORER, SCORER: TOOLS}


@dataclass
class RuntimeConfig:
    """How the runtime runs untrusted environment code."""

    workers: int = 2
    """Sandboxed workers one environment's episodes are spread over, at most (the runtime's
    parallelism within an environment; different environments always get their own)."""
    call_timeout_s: float = 2.0
    """Wall-clock limit of one tool call, one instantiation, one check."""
    memory_limit_mb: int = 1024
    """Address-space limit of each worker process (``resource.RLIMIT_AS``)."""
    max_result_bytes: int = 1_000_000
    """Largest JSON text of one tool result; larger results become error results."""
    max_state_bytes: int = 16_000_000
    """Largest pickled initial plus final state of an episode sent to the scorer."""
    grace_s: float = 2.0
    """Extra seconds past an op's budget before the runtime kills a stuck worker."""
    max_sandboxes: int = 64
    """Sandboxes kept at most (idle ones beyond it are stopped, least recently used first;
    an environment with live episodes always has one)."""
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    """Limits and contents of each worker's sandbox."""
    trust_pool: bool = field(default_factory=trust_pool_default)
    """Run the pool's code without a sandbox where the kernel refuses one (``--trust-pool``,
    or ``ENVSCHED_TRUST_POOL=1``); otherwise such a runtime refuses to start
    (:class:`SandboxUnavailable`). Default False."""

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError(f"RuntimeConfig.workers must be >= 1, got {self.workers}")
        if not self.call_timeout_s > 0:
            raise ValueError(f"RuntimeConfig.call_timeout_s must be > 0, got {self.call_timeout_s}")
        if self.memory_limit_mb < 64:
            raise ValueError(
                f"RuntimeConfig.memory_limit_mb must be >= 64, got {self.memory_limit_mb}"
            )
        if self.max_sandboxes < 1:
            raise ValueError(f"RuntimeConfig.max_sandboxes must be >= 1, got {self.max_sandboxes}")


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
class _Episode:
    task: Task
    worker: int
    log: list[ToolCall] = field(default_factory=list)
    status: str = "pending"  # pending -> live | failed; live -> lost when a rebuild fails
    error: str = ""


@dataclass
class _ScoreRun:
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


@dataclass
class _Item:
    """One op for a worker. ``sink`` indexes the caller's results; None for rebuild ops."""

    kind: str
    text: str
    episode: str | None
    sink: int | None
    budget_s: float
    call: ToolCall | None = None
    channel: str = TOOLS
    run: _ScoreRun | None = None


class _Job:
    """The items one worker channel is answering in the current dispatch."""

    def __init__(self, items: list[_Item], stream) -> None:
        self.items = items
        self.stream = stream
        self.position = 0
        self.buffer = b""
        self.deadline = 0.0


class EnvRuntime:
    """Runs episodes of a pool's tasks in sandboxed workers, one environment per worker.

    A context manager: :meth:`start` (on ``__enter__`` or first use) checks that the sandbox
    works and starts ``workers`` fresh workers; :meth:`close` stops them all. Not
    thread-safe: one caller drives it. Methods take batches; each answers in input order.
    """

    def __init__(self, pool: Pool, config: RuntimeConfig | None = None) -> None:
        self.pool = pool
        self.config = config or RuntimeConfig()
        self.restarts = 0
        self._slots = Slots(self.config)
        self._episodes: dict[str, _Episode] = {}
        self._replay_ids = itertools.count()
        self._max_line = 2 * max(self.config.max_result_bytes, self.config.max_state_bytes) + 65536
        self._finalizer = weakref.finalize(self, self._slots.close)

    def __enter__(self) -> EnvRuntime:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

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
    def pids(self) -> list[int]:
        """Process ids of the current workers (each the first process of its sandbox)."""
        return self._slots.pids

    def reset(self, episodes: Sequence[tuple[str, str]]) -> list[dict]:
        """Starts (or restarts) each ``(episode_id, task_id)`` in its task's initial state.

        Instantiation as EnvScaler does it: ``cls(init_config)``, falling back to ``cls()`` on
        a ``TypeError``, then every key of ``init_config`` set as an attribute. Returns
        ``{"success": True}`` or ``{"success": False, "error": str}`` per episode.
        """
        if not len(self._slots):
            self.start()
        tasks = [self.pool.task(task_id) for _, task_id in episodes]
        if len({episode_id for episode_id, _ in episodes}) != len(episodes):
            raise ValueError("an episode id appears twice in one reset")
        jobs: dict[tuple[int, str], list[_Item]] = {}
        for episode_id, task in zip((e for e, _ in episodes), tasks, strict=True):
            old = self._episodes.get(episode_id)
            if old is not None and old.task.env_id != task.env_id:
                self.release([episode_id])
        placement = self._place(episodes, tasks)
        for sink, ((episode_id, _), task) in enumerate(zip(episodes, tasks, strict=True)):
            worker = placement[sink]
            self._episodes[episode_id] = _Episode(task=task, worker=worker)
            jobs.setdefault((worker, TOOLS), []).append(self._reset_item(episode_id, task, sink))
        results: list = [None] * len(episodes)
        self._dispatch(jobs, results)
        self._retire_exhausted()
        return results

    def call(self, calls: Sequence[tuple[str, ToolCall]]) -> list[dict]:
        """Calls tools; each result is the tool's own dict or a :class:`ToolFault`."""
        results: list = [None] * len(calls)
        jobs: dict[tuple[int, str], list[_Item]] = {}
        for sink, (episode_id, call) in enumerate(calls):
            episode = self._episode(episode_id)
            if episode.status != "live":
                results[sink] = _fault(f"episode {episode_id!r} is not usable: {episode.error}")
                continue
            try:
                text = json.dumps(
                    {"op": "call", "ep": episode_id, "name": call.name, "args": call.arguments},
                    allow_nan=False,
                )
            except (TypeError, ValueError) as error:
                results[sink] = _fault(f"arguments of {call.name!r} are not JSON: {error}")
                continue
            jobs.setdefault((episode.worker, TOOLS), []).append(
                _Item("call", text, episode_id, sink, self._budget(1), call)
            )
        self._dispatch(jobs, results)
        self._retire_exhausted()
        return results

    def score(self, episode_ids: Sequence[str]) -> list[EpisodeScore]:
        """Runs every check of each episode's task on its current state, in the scorer."""
        results: list = [None] * len(episode_ids)
        states: list = [None] * len(episode_ids)
        jobs: dict[tuple[int, str], list[_Item]] = {}
        for sink, episode_id in enumerate(episode_ids):
            episode = self._episode(episode_id)
            if episode.status != "live":
                results[sink] = _failed_score(episode.task, episode.error)
                continue
            text = json.dumps({"op": "state", "ep": episode_id})
            item = _Item("state", text, episode_id, sink, self._budget(1))
            jobs.setdefault((episode.worker, TOOLS), []).append(item)
        self._dispatch(jobs, states)
        scoring: dict[tuple[int, str], list[_Item]] = {}
        for sink, episode_id in enumerate(episode_ids):
            if results[sink] is not None:
                continue
            episode, state = self._episodes[episode_id], states[sink]
            if state.get("success") is not True:
                results[sink] = _failed_score(episode.task, str(state.get("error")))
                continue
            run = _ScoreRun(episode.task, state["initial"], state["final"])
            item = self._score_item(episode_id, sink, run)
            scoring.setdefault((episode.worker, SCORER), []).append(item)
        self._dispatch(scoring, results)
        self._retire_exhausted()
        return results

    def state(self, episode_ids: Sequence[str]) -> list[dict]:
        """Each episode's current state: ``{"success": True, "data": {attribute: value}}`` (values
        JSON cannot hold as their ``repr``), or ``{"success": False, "error": str}``."""
        results: list = [None] * len(episode_ids)
        jobs: dict[tuple[int, str], list[_Item]] = {}
        for sink, episode_id in enumerate(episode_ids):
            episode = self._episode(episode_id)
            if episode.status != "live":
                results[sink] = {
                    "success": False,
                    "error": f"episode {episode_id!r} is not usable: {episode.error}",
                }
                continue
            text = json.dumps({"op": "snapshot", "ep": episode_id})
            jobs.setdefault((episode.worker, TOOLS), []).append(
                _Item("snapshot", text, episode_id, sink, self._budget(1))
            )
        self._dispatch(jobs, results)
        return results

    def release(self, episode_ids: Sequence[str]) -> None:
        """Forgets episodes (unknown ids are ignored)."""
        jobs: dict[tuple[int, str], list[_Item]] = {}
        for episode_id in episode_ids:
            episode = self._episodes.pop(episode_id, None)
            if episode is not None:
                text = json.dumps({"op": "release", "ep": episode_id})
                item = _Item("release", text, episode_id, None, self.config.grace_s)
                jobs.setdefault((episode.worker, TOOLS), []).append(item)
        self._dispatch(jobs, [])
        self._slots.trim(self._load())

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
                self._dispatch({(slot_id, TOOLS): self._rebuild_items(slot_id)}, [])

    # -- ops --------------------------------------------------------------------------------

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
            }
        )
        # budget: executing the class code, then instantiating, each under the alarm
        return _Item("reset", text, episode_id, sink, self._budget(2))

    def _score_item(self, episode_id: str, sink: int, run: _ScoreRun) -> _Item:
        text = json.dumps(
            {
                "op": "score",
                "env": run.task.env_id,
                "checks": run.checks,
                "start": len(run.passed),
                "initial": run.initial,
                "final": run.final,
            }
        )
        # the deadline is renewed by each check's line: one check's budget at a time
        return _Item("score", text, episode_id, sink, self._budget(1), channel=SCORER, run=run)

    def _define_item(self, env_id: str, channel: str) -> _Item:
        env = self.pool.envs[env_id]
        body = {"op": "define", "env": env_id, "code": env.env_class_code}
        if channel == TOOLS:
            body["tools"] = env.tool_names
        return _Item("define", json.dumps(body), None, None, self.config.grace_s, channel=channel)

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

    # -- dispatch ---------------------------------------------------------------------------

    def _send(self, key: tuple[int, str], items: list[_Item]) -> _Job | None:
        """Writes one request to a worker channel, defining its environment first if needed."""
        slot_id, channel = key
        slot = self._slots[slot_id]
        request = list(items)
        needs_code = any(item.kind in ("reset", "score") for item in items)
        if needs_code and channel not in slot.defined:
            request.insert(0, self._define_item(slot.env_id, channel))
            slot.defined.add(channel)
        if not request:
            return None
        process = slot.process
        stream_in, stream_out = (
            (process.tools_in, process.tools_out)
            if channel == TOOLS
            else (process.scorer_in, process.scorer_out)
        )
        payload = '{"ops": [' + ", ".join(item.text for item in request) + "]}\n"
        job = _Job(request, stream_out)
        try:
            stream_in.write(payload.encode())
            stream_in.flush()
        except (BrokenPipeError, OSError):
            pass  # the dead worker shows as EOF in the read loop
        job.deadline = time.monotonic() + request[0].budget_s
        return job

    def _dispatch(self, work: dict[tuple[int, str], list[_Item]], results: list) -> None:
        """Runs each channel's items, in parallel across workers, recovering from stuck ones."""
        selector = selectors.DefaultSelector()
        jobs: dict[tuple[int, str], _Job] = {}
        restarts: dict[int, int] = {}

        def launch(key: tuple[int, str], items: list[_Item]) -> None:
            job = self._send(key, items)
            if job is not None:
                jobs[key] = job
                selector.register(job.stream, selectors.EVENT_READ, key)

        def drop(key: tuple[int, str]) -> _Job | None:
            job = jobs.pop(key, None)
            if job is not None:
                selector.unregister(job.stream)
            return job

        def recover(key: tuple[int, str], reason: str) -> None:
            """Answers the culprit op, restarts the sandbox, rebuilds, resends the rest."""
            slot_id, channel = key
            culprit, other = drop(key), drop((slot_id, OTHER[channel]))
            current = culprit.items[culprit.position]
            rest = {TOOLS: [], SCORER: []}
            rest[channel] = self._absorb_failure(current, reason, results)
            rest[channel] += culprit.items[culprit.position + 1 :]
            if other is not None:
                rest[OTHER[channel]] += other.items[other.position :]
            self._slots.restart(slot_id)
            self.restarts += 1
            restarts[slot_id] = restarts.get(slot_id, 0) + 1
            if restarts[slot_id] > MAX_RESTARTS_PER_BATCH:
                self._lose_episodes(slot_id, f"worker restarted {restarts[slot_id]} times")
                rebuild = []
            else:
                rebuild = self._rebuild_items(slot_id)
            # rebuild, define and release ops are made again as needed; the caller's stay, a
            # score op going on from the check it had reached
            kept = {
                name: [
                    self._score_item(i.episode, i.sink, i.run) if i.run is not None else i
                    for i in items
                    if i.sink is not None
                ]
                for name, items in rest.items()
            }
            launch((slot_id, TOOLS), rebuild + kept[TOOLS])
            launch((slot_id, SCORER), kept[SCORER])

        for key, items in work.items():
            launch(key, items)
        try:
            while jobs:
                timeout = max(0.0, min(job.deadline for job in jobs.values()) - time.monotonic())
                for selected, _ in selector.select(timeout):
                    key = selected.data
                    job = jobs.get(key)
                    if job is None or job.stream is not selected.fileobj:
                        continue  # a channel replaced by a recovery in this same round
                    chunk = os.read(selected.fd, 1 << 20)
                    if not chunk:
                        recover(key, self._death(key[0]))
                        continue
                    problem = self._absorb_chunk(key, job, chunk, results)
                    if problem:
                        recover(key, problem)
                    elif job.position == len(job.items):
                        drop(key)
                now = time.monotonic()
                for key, job in list(jobs.items()):
                    if now >= job.deadline:
                        budget = job.items[job.position].budget_s
                        recover(key, f"timed out after {budget:g} s; worker replaced")
        finally:
            selector.close()

    def _death(self, slot_id: int) -> str:
        """Why a worker's channel closed: its exit status, or that it closed the channel."""
        process = self._slots[slot_id].process
        try:
            code = process.proc.wait(timeout=self.config.grace_s)
        except subprocess.TimeoutExpired:
            return "the worker closed its channel"
        if code > 128 or code < 0:  # the sandbox reports a signal as 128 + its number
            number = code - 128 if code > 128 else -code
            try:
                name = signal.Signals(number).name
            except ValueError:
                name = "unknown"
            return f"the worker process died (exit code {code}: signal {number}, {name})"
        return f"the worker process died (exit code {code})"

    def _absorb_chunk(self, key: tuple[int, str], job: _Job, chunk: bytes, results: list) -> str:
        """Takes the complete reply lines of a chunk; why it cannot, or ``""``."""
        job.buffer += chunk
        *lines, job.buffer = job.buffer.split(b"\n")
        if len(job.buffer) > self._max_line:
            return f"the worker sent a reply over {self._max_line} bytes"
        for line in lines:
            item = job.items[job.position] if job.position < len(job.items) else None
            try:
                reply = json.loads(line)
                if item is None or reply["i"] != job.position:
                    return "the worker sent a malformed reply"
                if "r" not in reply:  # a check's line of a score op
                    if item.run is None or reply["c"] != len(item.run.passed):
                        return "the worker sent a malformed reply"
                    item.run.passed.append(reply["ok"] is True)
                    item.run.errors.append(str(reply["e"]))
                    job.deadline = time.monotonic() + item.budget_s
                    continue
                result = reply["r"]
                if not isinstance(result, dict):
                    return "the worker sent a malformed reply"
            except (ValueError, KeyError, TypeError):
                return "the worker sent a malformed reply"
            if reply.get("x"):
                self._slots[key[0]].exhausted = True
            job.position += 1
            self._absorb(item, result, reply, results)
            if job.position < len(job.items):
                job.deadline = time.monotonic() + job.items[job.position].budget_s
        return ""

    def _absorb(self, item: _Item, result: dict, reply: dict, results: list) -> None:
        """Records one answered op in the episode log and the caller's results."""
        episode = self._episodes.get(item.episode) if item.episode is not None else None
        if item.kind == "reset" and episode is not None:
            if result.get("success") is True:
                episode.status, episode.log = "live", []
            elif item.sink is None:
                episode.status, episode.error = "lost", f"rebuild failed: {result.get('error')}"
            else:
                episode.status, episode.error = "failed", str(result.get("error"))
        elif item.kind == "call":
            if episode is not None and not reply.get("t"):
                # the log is what a rebuild replays; a call stopped by the alarm is left out
                episode.log.append(item.call)
            if reply.get("f"):
                result = ToolFault(result)
        elif item.kind == "score":
            checks = len(item.run.checks)
            if result.get("success") is True and len(item.run.passed) == checks:
                result = item.run.verdict()
            else:
                result = item.run.verdict(str(result.get("error", "the scorer skipped checks")))
        if item.sink is not None:
            results[item.sink] = result

    def _absorb_failure(self, item: _Item, reason: str, results: list) -> list[_Item]:
        """Answers the op that was running when its worker had to be replaced; returns the
        op that goes on after it (a score op continues with the next check)."""
        episode = self._episodes.get(item.episode) if item.episode is not None else None
        if item.kind == "reset" and episode is not None:
            if item.sink is None:
                episode.status, episode.error = "lost", f"rebuild failed: {reason}"
            else:
                episode.status, episode.error = "failed", reason
        elif item.kind == "call" and item.sink is None and episode is not None:
            # a rebuild call that no longer completes: the episode cannot be restored
            episode.status, episode.error = "lost", f"rebuild failed: {reason}"
        if item.kind == "score":
            item.run.passed.append(False)  # the check that was running takes the blame
            item.run.errors.append(reason)
            if len(item.run.passed) < len(item.run.checks):
                return [self._score_item(item.episode, item.sink, item.run)]
            results[item.sink] = item.run.verdict()
        elif item.sink is not None:
            results[item.sink] = _fault(reason)
        return []

    def _lose_episodes(self, worker: int, reason: str) -> None:
        for episode in self._episodes.values():
            if episode.worker == worker and episode.status == "live":
                episode.status, episode.error = "lost", reason


def _fault(message: str) -> ToolFault:
    return ToolFault(success=False, error=message)


def _failed_score(task: Task, reason: str) -> EpisodeScore:
    count = len(task.checklist_with_func)
    return EpisodeScore(reward=0.0, checks=(False,) * count, errors=(reason,) * count)
