"""One transaction function at a time on an open ``neo4j`` driver, retried while the server lives.

Reads and writes go through ``execute_read`` / ``execute_write`` with transaction functions
that are safe to retry; every session names the database. A lost connection becomes a
:class:`~envsched_gnn.graph_store.errors.StoreError` that says why (a dead managed server names
its log) instead of a driver traceback.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from envsched_gnn.graph_store.arcadedb import ManagedArcadeDB
from envsched_gnn.graph_store.errors import StoreError

CHUNK = 5000
"""Rows of one ``UNWIND`` write transaction, unless a write says otherwise."""
SCHEMA_COMMAND = re.compile(
    r"^(?:\s|//[^\n]*\n|/\*.*?\*/)*(?:(?:CREATE|DROP)(?:\s+OR\s+REPLACE)?\s+"
    r"(?:(?:RANGE|TEXT|POINT|LOOKUP|FULLTEXT|VECTOR|BTREE|COMPOSITE)\s+)?"
    r"(?:INDEX|CONSTRAINT|DATABASE|ALIAS|USER|ROLE)\b|ALTER\b|GRANT\b|REVOKE\b|DENY\b|"
    r"START\b|STOP\b|RENAME\b)",
    re.IGNORECASE | re.DOTALL,
)
"""A schema or administration command: it changes the store outside any transaction (a
rollback does not undo it on ArcadeDB: ``CREATE INDEX`` survives one there, not on Neo4j)."""
READ_ONLY_REFUSAL = "Neo.ClientError.Statement.AccessMode"
"""Neo4j's answer to a write in a read transaction (ArcadeDB runs the write)."""


@dataclass
class StatementResult:
    """What one statement returned: its columns, its records and what it changed."""

    keys: list[str]
    records: list[Any]
    """The driver's records (``neo4j.Record``), in the order the server sent them."""
    updates: dict[str, int]
    """The summary's non-zero update counters (``nodes_created``...); empty for a read."""
    changed: bool = False
    """The summary says the statement changed the store (or the system database)."""


def chunks(rows: Sequence, size: int = CHUNK) -> Iterator[Sequence]:
    for start in range(0, len(rows), size):
        yield rows[start : start + size]


class StoreConnection:
    """The driver side of a store: sessions on its database, retries, and loud failures.

    Args:
        driver: an open ``neo4j`` driver (one per process).
        database: the database every session names.
        server: the managed ArcadeDB behind the driver, named when it dies (default None).
        uri: where the driver points, for messages.
        retry_s: seconds to retry a transaction whose connection failed (default 0).
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

    def server_agent(self) -> str:
        """What the server calls itself on Bolt: ``Neo4j/5.26.30``, or ArcadeDB's
        ``Neo4j/5.26.0 compatible (ArcadeDB 26.10.2)``."""
        with self._loud():
            return str(self.driver.get_server_info().agent)

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
        """One transaction function, retried while the server lives: by the driver for a remote
        server, by this loop (:attr:`retry_s`) for the managed one, stopping when it is dead.
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

    def run_statement(
        self, cypher: str, parameters: Mapping[str, Any], *, write: bool = False
    ) -> StatementResult:
        """Run one statement a person wrote (``store query``).

        Read-only unless ``write``: schema and administration commands are refused unsent, others
        run in a read transaction that is always rolled back, so a write raises :class:`StoreError`
        and leaves nothing (Neo4j refuses it, ArcadeDB's is undone). With ``write`` it runs
        auto-commit, as cypher-shell does. Other server errors propagate as the driver raises them.
        """
        import neo4j
        from neo4j.exceptions import ClientError

        if not write and SCHEMA_COMMAND.match(cypher):
            raise StoreError(
                "the statement is a schema or administration command, which changes the store "
                "outside any transaction; nothing was sent. Pass --write to run it"
            )
        mode = neo4j.WRITE_ACCESS if write else neo4j.READ_ACCESS
        with (
            self._loud(),
            # a person's statement gets the server's warnings (a misspelt label or property)
            self.driver.session(
                database=self.database,
                default_access_mode=mode,
                notifications_min_severity="WARNING",
            ) as session,
        ):
            if write:
                return _statement_result(session.run(cypher, dict(parameters)))
            with session.begin_transaction() as tx:
                try:
                    result = _statement_result(tx.run(cypher, dict(parameters)))
                except ClientError as error:
                    if error.code != READ_ONLY_REFUSAL:
                        raise
                    raise StoreError(
                        "the statement writes (the server refused to write in a read "
                        "transaction); nothing was written. Pass --write to write"
                    ) from error
                tx.rollback()
        if result.updates or result.changed:
            raise StoreError(
                f"the statement writes ({_counts(result.updates)}); it was rolled back and "
                "nothing was written. Pass --write to write"
            )
        return result

    def write_rows(self, cypher: str, rows: Sequence[Mapping], *, chunk: int = CHUNK) -> None:
        """``UNWIND $rows`` write, one transaction per chunk (each MERGE-idempotent)."""

        def work(tx, part):
            tx.run(cypher, rows=part).consume()

        for part in chunks(list(rows), chunk):
            self.write(work, part)


def _statement_result(result) -> StatementResult:
    """Every record of a driver ``Result``, its columns and what it changed."""
    records = list(result)
    keys = list(result.keys())
    counters = result.consume().counters
    updates = {
        name: value
        for name, value in vars(counters).items()
        if isinstance(value, int) and not isinstance(value, bool) and value
    }
    changed = counters.contains_updates or counters.contains_system_updates
    return StatementResult(keys, records, updates, changed)


def _counts(updates: Mapping[str, int]) -> str:
    return ", ".join(f"{name} {value}" for name, value in updates.items()) or "changes"
