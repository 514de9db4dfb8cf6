"""The runtime's side of the worker protocol (:mod:`~envsched_gnn.envs.worker`): ops written
to a worker channel as one request line, answered op by op, in parallel over every worker.

Each op has a budget: ``call_timeout_s`` per alarm it runs under, plus ``grace_s``. A worker
past it, dead or misbehaving costs the running op (an error result or a failed check) and its
sandbox: a new one is started, its episodes are rebuilt by replaying their logged calls, and
the rest of the batch is sent again; past ``MAX_RESTARTS_PER_BATCH`` it loses its episodes.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from envsched_gnn.envs.episode import (
    CallStopped,
    RuntimeEpisode,
    ScoreRun,
    ToolFault,
    failed_score,
    fault,
    unloadable_state,
)
from envsched_gnn.envs.pool import Pool, Task, ToolCall
from envsched_gnn.envs.runtime_config import RuntimeConfig
from envsched_gnn.envs.slots import Slots

MAX_RESTARTS_PER_BATCH = 3
TOOLS, SCORER = "tools", "scorer"
OTHER = {TOOLS: SCORER, SCORER: TOOLS}


@dataclass
class Op:
    """One op for a worker. ``sink`` indexes the caller's results; None for rebuild ops."""

    kind: str
    text: str
    episode: str | None
    sink: int | None
    budget_s: float
    call: ToolCall | None = None
    channel: str = TOOLS
    run: ScoreRun | None = None


class _Job:
    """The ops one worker channel is answering in the current :meth:`Dispatcher.run`."""

    def __init__(self, items: list[Op], stream) -> None:
        self.items = items
        self.stream = stream
        self.position = 0
        self.buffer = b""
        self.deadline = 0.0


class Dispatcher:
    """Runs ops on the workers of ``slots`` and records their answers in ``episodes`` (the
    runtime's own dict, shared) and in the caller's results; ``restarts`` counts the sandboxes
    it replaced."""

    def __init__(
        self, pool: Pool, config: RuntimeConfig, slots: Slots, episodes: dict[str, RuntimeEpisode]
    ) -> None:
        self.pool = pool
        self.config = config
        self.restarts = 0
        self._slots = slots
        self._episodes = episodes
        self._max_line = 2 * max(config.max_result_bytes, config.max_state_bytes) + 65536

    # -- ops --------------------------------------------------------------------------------

    def budget(self, limited_steps: int) -> float:
        """Seconds an op may take: ``limited_steps`` alarms of ``call_timeout_s``, + grace."""
        return limited_steps * self.config.call_timeout_s + self.config.grace_s

    def reset_op(self, episode_id: str, task: Task, sink: int | None) -> Op:
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
        return Op("reset", text, episode_id, sink, self.budget(2))

    def call_op(self, episode_id: str, call: ToolCall, sink: int | None) -> Op:
        """A tool call; raises ``TypeError``/``ValueError`` when its arguments are not JSON."""
        body = {"op": "call", "ep": episode_id, "name": call.name, "args": call.arguments}
        return Op("call", json.dumps(body, allow_nan=False), episode_id, sink, self.budget(1), call)

    def episode_op(
        self, kind: str, episode_id: str, sink: int | None, budget_s: float | None = None
    ) -> Op:
        """An op naming only its episode (``state``, ``snapshot``, ``release``); one alarm's
        budget unless ``budget_s``."""
        text = json.dumps({"op": kind, "ep": episode_id})
        return Op(kind, text, episode_id, sink, self.budget(1) if budget_s is None else budget_s)

    def score_op(self, episode_id: str, sink: int, run: ScoreRun) -> Op:
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
        return Op("score", text, episode_id, sink, self.budget(1), channel=SCORER, run=run)

    def _define_op(self, env_id: str, channel: str) -> Op:
        env = self.pool.envs[env_id]
        body = {"op": "define", "env": env_id, "code": env.env_class_code}
        if channel == TOOLS:
            body["tools"] = env.tool_names
        return Op("define", json.dumps(body), None, None, self.config.grace_s, channel=channel)

    def live_on(self, worker: int) -> list[str]:
        """The ids of the live episodes ``worker`` holds."""
        return [
            episode_id
            for episode_id, episode in self._episodes.items()
            if episode.worker == worker and episode.status == "live"
        ]

    def rebuild_ops(self, episode_ids: Iterable[str]) -> list[Op]:
        """The ops that restore episodes in a new sandbox: each one's reset, then its logged
        calls in order. A reset or a call that fails here loses its episode."""
        items = []
        for episode_id in episode_ids:
            episode = self._episodes[episode_id]
            items.append(self.reset_op(episode_id, episode.task, None))
            items += [self.call_op(episode_id, call, None) for call in episode.log]
        return items

    def _send(self, key: tuple[int, str], items: list[Op]) -> _Job | None:
        """Writes one request to a worker channel, defining its environment first if needed."""
        slot_id, channel = key
        slot = self._slots[slot_id]
        request = list(items)
        needs_code = any(item.kind in ("reset", "score") for item in items)
        if needs_code and channel not in slot.defined:
            request.insert(0, self._define_op(slot.env_id, channel))
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

    def run(self, work: dict[tuple[int, str], list[Op]], results: list) -> None:
        """Runs each channel's items, in parallel across workers, recovering from stuck ones."""
        selector = selectors.DefaultSelector()
        jobs: dict[tuple[int, str], _Job] = {}
        restarts: dict[int, int] = {}

        def launch(key: tuple[int, str], items: list[Op]) -> None:
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
                rebuild = self.rebuild_ops(self.live_on(slot_id))
            # rebuild, define and release ops are made again as needed; the caller's stay, a
            # score op going on from the check it had reached
            kept = {
                name: [
                    self.score_op(i.episode, i.sink, i.run) if i.run is not None else i
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
                # a call answers any JSON value (spec section 8); every other op an object
                if not isinstance(result, dict) and (item.kind != "call" or reply.get("f")):
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

    def _absorb(self, item: Op, result: Any, reply: dict, results: list) -> None:
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
            if reply.get("t"):
                result = CallStopped(result)
            elif reply.get("f"):
                result = ToolFault(result)
            if episode is not None:
                episode.record(item.call, result)
        elif item.kind == "score":
            checks = len(item.run.checks)
            if result.get("success") is True and len(item.run.passed) == checks:
                result = item.run.verdict()
            elif "unloadable" in result:
                why = str(result.get("error"))
                reason = unloadable_state(item.run.task, str(result["unloadable"]), why)
                result = failed_score(item.run.task, reason)
            else:
                result = item.run.verdict(str(result.get("error", "the scorer skipped checks")))
        if item.sink is not None:
            results[item.sink] = result

    def _absorb_failure(self, item: Op, reason: str, results: list) -> list[Op]:
        """Answers the op that was running when its worker had to be replaced, as one the alarm
        stopped; returns the op that goes on after it (a score op continues with the next
        check)."""
        if item.kind == "score":
            item.run.passed.append(False)  # the check that was running takes the blame
            item.run.errors.append(reason)
            if len(item.run.passed) < len(item.run.checks):
                return [self.score_op(item.episode, item.sink, item.run)]
            results[item.sink] = item.run.verdict()
            return []
        episode = self._episodes.get(item.episode) if item.episode is not None else None
        if item.kind == "call" and item.sink is None and episode is not None:
            # a rebuild call that no longer completes: the episode cannot be restored
            episode.status, episode.error = "lost", f"rebuild failed: {reason}"
        self._absorb(item, fault(reason), {"t": 1}, results)
        return []

    def _lose_episodes(self, worker: int, reason: str) -> None:
        for episode_id in self.live_on(worker):
            self._episodes[episode_id].status = "lost"
            self._episodes[episode_id].error = reason
