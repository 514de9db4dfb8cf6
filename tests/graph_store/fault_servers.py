"""The two store servers a fault test kills, behind one face: the managed ArcadeDB, which the
project restarts itself when a store is opened again, and Neo4j, which its operator restarts
(:class:`~tests.graph_store.neo4j_server.RestartableNeo4j`)."""

from __future__ import annotations

import os
import signal
from contextlib import AbstractContextManager
from pathlib import Path

from envsched_gnn.graph_store.connect import open_store
from envsched_gnn.graph_store.store import GraphStore
from tests.graph_store.neo4j_server import RestartableNeo4j


def kill_server(store: GraphStore) -> None:
    """SIGKILL of the managed server behind ``store``, as the OOM killer would."""
    os.kill(store.server._process.pid, signal.SIGKILL)
    store.server._process.wait()


class ManagedFaults:
    """The managed ArcadeDB of ``folder``: :meth:`open` starts it, again after a kill."""

    name = "managed"

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @property
    def spec(self) -> str:
        """What ``--store`` takes."""
        return str(self.folder)

    @property
    def environment(self) -> dict[str, str]:
        return {}

    def open(self) -> AbstractContextManager[GraphStore]:
        return open_store(self.folder)

    def kill(self, store: GraphStore) -> None:
        kill_server(store)

    def restart(self) -> None:
        """Nothing to do: the next :meth:`open` (or ``StoreWriter`` write) starts it."""


class Neo4jFaults:
    """A Neo4j of the test's own, emptied; :meth:`restart` is its operator starting it again."""

    name = "neo4j"

    def __init__(self, server: RestartableNeo4j) -> None:
        self.server = server

    @property
    def spec(self) -> str:
        return self.server.uri

    @property
    def environment(self) -> dict[str, str]:
        return self.server.environment

    def open(self) -> AbstractContextManager[GraphStore]:
        return self.server.connect()

    def kill(self, store: GraphStore) -> None:
        self.server.kill()

    def restart(self) -> None:
        """Its operator starts it again, if it is down."""
        if not self.server.running:
            self.server.start()
