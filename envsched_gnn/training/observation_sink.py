"""Buffered, idempotent writes of each step's observations to the graph store.

:meth:`ObservationSink.put` returns at once; a background thread writes batches, retrying
with backoff (``MERGE`` by (task, step): no duplicates); unwritten ones go into the
checkpoint, invalid ones into :attr:`rejected`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence

from envsched_gnn.observations import Observation, ObservationError

log = logging.getLogger(__name__)

Writer = Callable[[Sequence[Observation]], object]


class ObservationSink:
    """A write-behind buffer of observations in front of a store.

    Args:
        write: writes a batch of observations to the store, idempotently; raises on failure.
        max_rows: largest batch handed to ``write`` at once (default 5000).
        retry_initial_s: wait after the first failed write (default 0.5), doubled after each
            further failure up to ``retry_max_s`` (default 10).
    """

    def __init__(
        self,
        write: Writer,
        *,
        max_rows: int = 5000,
        retry_initial_s: float = 0.5,
        retry_max_s: float = 10.0,
    ) -> None:
        self._write = write
        self.max_rows = max_rows
        self.retry_initial_s = retry_initial_s
        self.retry_max_s = retry_max_s
        self._pending: dict[tuple[str, int], Observation] = {}
        self._closing = False
        self._condition = threading.Condition()
        self.written = 0
        self.failed_writes = 0
        self.last_error: str | None = None
        self.rejected: list[tuple[Observation, str]] = []
        self._thread = threading.Thread(target=self._run, name="observation-sink", daemon=True)
        self._thread.start()

    @property
    def pending(self) -> int:
        """Observations accepted but not yet confirmed written."""
        with self._condition:
            return len(self._pending)

    def put(self, observations: Iterable[Observation]) -> None:
        """Queue observations for writing; never blocks on the store."""
        with self._condition:
            if self._closing:
                raise RuntimeError("the observation sink is closed")
            for observation in observations:
                key = (observation.task_id, observation.step)
                previous = self._pending.get(key)
                if previous is not None and previous.rewards != observation.rewards:
                    raise ObservationError(
                        f"task {observation.task_id!r} step {observation.step}: queued twice, "
                        f"rewards {list(previous.rewards)} and {list(observation.rewards)}"
                    )
                self._pending[key] = observation
            self._condition.notify_all()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued observation is written; False if ``timeout`` passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._condition:
            while self._pending:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._condition.wait(remaining)
            return True

    def close(self, timeout: float | None = None) -> list[Observation]:
        """Flush for at most ``timeout`` seconds, stop the thread, return what is unwritten."""
        self.flush(timeout)
        with self._condition:
            self._closing = True
            self._condition.notify_all()
        self._thread.join()
        with self._condition:
            return list(self._pending.values())

    def state_dict(self) -> dict:
        """The observations not yet written, in the ``history.jsonl`` row format."""
        with self._condition:
            return {"pending": [observation.to_json() for observation in self._pending.values()]}

    def load_state_dict(self, state: dict) -> None:
        self.put(Observation.from_json(row) for row in state["pending"])

    def _run(self) -> None:
        delay = self.retry_initial_s
        while True:
            with self._condition:
                while not self._pending and not self._closing:
                    self._condition.wait()
                if self._closing:
                    return
                batch = list(self._pending.values())[: self.max_rows]
            try:
                self._write(batch)
            except ObservationError as error:
                log.error("the store refused %d observations: %s", len(batch), error)
                with self._condition:
                    self.rejected += [(observation, str(error)) for observation in batch]
                    self._remove(batch)
                continue
            except Exception as error:  # any store failure: keep the rows, retry later
                with self._condition:
                    self.failed_writes += 1
                    self.last_error = f"{type(error).__name__}: {error}"
                    log.warning("observation write failed (%s); retrying in %.1f s", error, delay)
                    self._condition.wait(delay)
                delay = min(delay * 2.0, self.retry_max_s)
                continue
            delay = self.retry_initial_s
            with self._condition:
                self._remove(batch)
                self.written += len(batch)

    def _remove(self, batch: Sequence[Observation]) -> None:
        """Drop written (or refused) rows from the buffer; the caller holds the lock."""
        for observation in batch:
            key = (observation.task_id, observation.step)
            if self._pending.get(key) is observation:
                del self._pending[key]
        self._condition.notify_all()


class StoreWriter:
    """``write(observations)`` into the store ``spec``, opened lazily, reopened after a failure."""

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self._stack = contextlib.ExitStack()
        self._store = None

    def __call__(self, observations: Sequence[Observation]) -> int:
        if self._store is None:
            from envsched_gnn.graph_store.connect import open_store

            self._store = self._stack.enter_context(open_store(self.spec))
        try:
            return self._store.write_observations(observations)
        except ObservationError:
            raise
        except Exception:
            self.close()  # the store may be dead (a managed one is restarted by the next write)
            raise

    def close(self) -> None:
        self._stack.close()
        self._store = None
