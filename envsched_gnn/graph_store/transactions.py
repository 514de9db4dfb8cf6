"""One transaction function at a time on an open ``neo4j`` driver, retried while the server lives.

Reads and writes go through ``execute_read`` / ``execute_write`` with transaction functions
that are safe to retry; every session names the database. A lost connection becomes a
:class:`~envsched_gnn.graph_store.errors.StoreError` that says why (a dead managed server names
its log) instead of a driver traceback.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from envsched_gnn.graph_store.arcadedb import ManagedArcadeDB
from envsched_gnn.graph_store.errors import StoreError

CHUNK = 5000
"""Rows of one ``UNWIND`` write transaction, unless a write says otherwise."""


def chunks(rows: Sequence, size: int = CHUNK) -> Iterator[Sequence]:
    for start in range(0, len(rows), size):
        yield rows[start : start + size]


class StoreConnection:
    """The driver side of a store: sessions on its database, retries, and loud failures.

    Args:
        driver: an open ``neo4j`` driver (one per process).
        database: the database every session names.
        server: the managed ArcadeDB server behind the driver, if any: a transaction that
            fails on a dead server says so and names its log (default None: a remote server).
        uri: where the driver points, for messages.
        retry_s: seconds this class retries a transaction whose connection failed (default 0:
            the driver's own retries only).
    """

    def __init__(
        self,
        driver,
        database: str,
        *,
        server: ManagedArcadeDB | None = None,
        uri: str = "",
        retry_s: float = 0.0,
    ) -> None:
        self.driver = driver
        self.database = database
        self.server = server
        self.uri = uri
        self.retry_s = retry_s

    @property
    def where(self) -> str:
        """The store as the user named it: the managed folder, or the URI."""
        return str(self.server.folder) if self.server is not None else self.uri

    def _raise_if_dead(self, patience_s: float = 0.0) -> None:
        """Raises the managed server's death (naming its log), waiting up to ``patience_s``
        for a server whose connection just broke to finish dying."""
        if self.server is None:
            return
        end = time.monotonic() + patience_s
        while True:
            death = self.server.death()
            if death is not None:
                raise StoreError(death)
            if time.monotonic() >= end:
                return
            time.sleep(0.05)

    @contextlib.contextmanager
    def _loud(self) -> Iterator[None]:
        """Turns a lost connection into a StoreError that says why (a dead managed server
        names its log) instead of a driver traceback."""
        from neo4j.exceptions import DriverError

        self._raise_if_dead()
        try:
            yield
        except (DriverError, OSError) as error:
            self._raise_if_dead(patience_s=0.5)
            raise StoreError(
                f"lost the connection to the store at {self.where}: {error}"
            ) from error

    def _transact(self, method: str, work: Callable, args: tuple) -> Any:
        """One transaction function, retried while the server lives.

        A remote server's transient failures are retried by the driver (its default 30 s).
        The managed server's driver does not retry (``retry_time=0``): this loop does, for
        :attr:`retry_s`, and stops at once when the server process is dead.
        """
        from neo4j.exceptions import AuthError, ServiceUnavailable, SessionExpired, TransientError

        give_up = time.monotonic() + self.retry_s
        delay = 0.1
        while True:
            try:
                with self._loud(), self.driver.session(database=self.database) as session:
                    return getattr(session, method)(work, *args)
            except StoreError as error:
                cause = error.__cause__
                if not isinstance(cause, ServiceUnavailable | SessionExpired):
                    raise
                if time.monotonic() + delay > give_up:
                    raise
            except TransientError:
                self._raise_if_dead()
                if time.monotonic() + delay > give_up:
                    raise
            except AuthError as error:
                # ArcadeDB reloads its security files about a second after it starts, and
                # connections opened before then are refused once ("no longer valid"); the
                # credentials were checked on connect, so a new connection will do
                if time.monotonic() + delay > give_up:
                    raise StoreError(
                        f"the store at {self.where} refused the credentials: {error.message}"
                    ) from error
            time.sleep(delay)
            delay = min(2 * delay, 1.0)

    def read(self, work: Callable, *args: Any) -> Any:
        return self._transact("execute_read", work, args)

    def write(self, work: Callable, *args: Any) -> Any:
        return self._transact("execute_write", work, args)

    def query(self, cypher: str, **params: Any) -> list[dict]:
        """Run one read query in a managed transaction; rows as dicts."""

        def work(tx):
            return [record.data() for record in tx.run(cypher, params)]

        return self.read(work)

    def write_rows(self, cypher: str, rows: Sequence[Mapping], *, chunk: int = CHUNK) -> None:
        """``UNWIND $rows`` write, one transaction per chunk (each MERGE-idempotent)."""

        def work(tx, part):
            tx.run(cypher, rows=part).consume()

        for part in chunks(list(rows), chunk):
            self.write(work, part)
