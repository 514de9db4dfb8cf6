"""Shared fixtures: the real graph store server for the Bolt/Cypher tests.

Bolt/Cypher tests run against ArcadeDB: one managed ArcadeDB server (the embedded
default, a real Java child process speaking Bolt) is started per test session in a
temporary folder. When ``NEO4J_URI`` is set (with ``NEO4J_USER`` / ``NEO4J_PASSWORD``
/ ``NEO4J_DATABASE``), the same tests run against that server instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass

import pytest

from envsched_gnn.graph_store.arcadedb import ManagedArcadeDB
from envsched_gnn.graph_store.connect import connect_store, credentials_from_environment
from envsched_gnn.graph_store.store import GraphStore


@dataclass
class StoreServer:
    """Where the session's store server answers, and whether this session manages it."""

    uri: str
    auth: tuple[str, str]
    database: str
    managed: ManagedArcadeDB | None

    def connect(self) -> AbstractContextManager[GraphStore]:
        """A new store on this server, as a ``with`` block; closing it leaves the server running."""
        return connect_store(self.uri, self.auth, self.database)


@pytest.fixture(scope="session")
def store_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StoreServer]:
    """The Bolt server of the session: a managed ArcadeDB, or ``NEO4J_URI`` when set."""
    uri = os.environ.get("NEO4J_URI")
    if uri:
        auth, database = credentials_from_environment(uri)
        yield StoreServer(uri, auth, database, None)
        return
    with ManagedArcadeDB(tmp_path_factory.mktemp("arcadedb")) as server:
        yield StoreServer(server.uri, server.auth, server.database, server)


@pytest.fixture
def store(store_server: StoreServer) -> Iterator[GraphStore]:
    """A cleared :class:`GraphStore` on the session's server (shared: tests run serially)."""
    with store_server.connect() as graph_store:
        graph_store.clear()
        yield graph_store
