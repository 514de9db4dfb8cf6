"""The sandboxed workers of one runtime, each bound to at most one environment.

A worker is *fresh* until an environment's code runs in it, then bound to that environment
for good (restarted to take another). Beyond ``max_sandboxes`` the least recently used idle
workers are stopped.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from envsched_gnn.envs.sandbox import SandboxUnavailable, WorkerProcess, start_all

if TYPE_CHECKING:
    from envsched_gnn.envs.runtime_config import RuntimeConfig

CLOSE_PATIENCE_S = 1.0


@dataclass
class Slot:
    """A sandboxed worker and the environment it is bound to (None: fresh)."""

    process: WorkerProcess
    env_id: str | None = None
    defined: set[str] = field(default_factory=set)
    """Channels (tools, scorer) that were sent the environment's code."""
    used: int = 0
    """When a placement last chose it (a counter), for least-recently-used choices."""
    exhausted: bool = False
    """Past half its CPU-time limit: to be replaced at the next convenient moment."""


class Slots:
    """The workers of a runtime by id; launches complete together (:meth:`start`), in parallel."""

    def __init__(self, config: RuntimeConfig) -> None:
        self.config = config
        self._slots: dict[int, Slot] = {}
        self._ids = itertools.count()
        self._clock = itertools.count(1)

    def __getitem__(self, slot_id: int) -> Slot:
        return self._slots[slot_id]

    def __len__(self) -> int:
        return len(self._slots)

    def __iter__(self) -> Iterator[int]:
        return iter(list(self._slots))

    def items(self) -> list[tuple[int, Slot]]:
        return list(self._slots.items())

    @property
    def pids(self) -> list[int]:
        return [slot.process.pid for slot in self._slots.values()]

    def bound_to(self, env_id: str) -> list[int]:
        return [i for i, slot in self._slots.items() if slot.env_id == env_id]

    def launch(self, env_id: str | None) -> int:
        """A new worker, launched but not started (see :meth:`start`)."""
        slot_id = next(self._ids)
        self._slots[slot_id] = Slot(WorkerProcess(self.config), env_id)
        return slot_id

    def start(self, slot_ids: Iterable[int]) -> None:
        """Completes the start of launched workers; if the sandbox fails, stops them all."""
        slots = [self._slots[slot_id] for slot_id in slot_ids]
        try:
            ready = start_all([slot.process for slot in slots])
        except SandboxUnavailable:
            self.close()
            raise
        for slot, process in zip(slots, ready, strict=True):
            slot.process = process

    def restart(self, slot_id: int, *, start: bool = True) -> None:
        """A new sandbox in place of the worker; it keeps its environment."""
        slot = self._slots[slot_id]
        slot.process.stop()
        slot.process = WorkerProcess(self.config)
        slot.defined, slot.exhausted = set(), False
        if start:
            self.start([slot_id])

    def acquire(self, env_id: str, load: Mapping[int, int], started: list[int]) -> int:
        """A worker for ``env_id``: a fresh one, a new one, or (at ``max_sandboxes``) an idle
        one of another environment restarted, least recently used first. Workers launched
        here are appended to ``started`` for :meth:`start`."""
        fresh = [i for i, slot in self._slots.items() if slot.env_id is None]
        if fresh:
            self._slots[fresh[0]].env_id = env_id
            return fresh[0]
        idle = [
            i for i, slot in self._slots.items() if load.get(i, 0) == 0 and slot.env_id != env_id
        ]
        if len(self._slots) >= self.config.max_sandboxes and idle:
            slot_id = min(idle, key=lambda i: self._slots[i].used)
            self.restart(slot_id, start=False)
            self._slots[slot_id].env_id = env_id
        else:
            slot_id = self.launch(env_id)
        started.append(slot_id)
        return slot_id

    def touch(self, slot_ids: Iterable[int]) -> None:
        now = next(self._clock)
        for slot_id in slot_ids:
            self._slots[slot_id].used = now

    def trim(self, load: Mapping[int, int]) -> None:
        """Stops idle workers beyond ``max_sandboxes``, least recently used first."""
        idle = sorted((i for i in self._slots if load[i] == 0), key=lambda i: self._slots[i].used)
        for slot_id in idle[: max(0, len(self._slots) - self.config.max_sandboxes)]:
            self._slots.pop(slot_id).process.stop()

    def close(self) -> None:
        """Stops every worker: all are asked to exit first, then waited for (1 s at most in
        all, so that their CPU time is accounted to this process), then killed."""
        for slot in self._slots.values():
            slot.process.finish()
        deadline = time.monotonic() + CLOSE_PATIENCE_S
        for slot in self._slots.values():
            slot.process.stop(patience_s=max(0.0, deadline - time.monotonic()))
        self._slots.clear()
