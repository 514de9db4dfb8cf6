"""Shared fixtures: the real graph store server for the Bolt/Cypher tests.

Bolt/Cypher tests run against ArcadeDB: one managed ArcadeDB server (the
default store, a real Java child process speaking Bolt) is started per test session in a
temporary folder. When ``NEO4J_URI`` is set (with ``NEO4J_USER`` / ``NEO4J_PASSWORD``
/ ``NEO4J_DATABASE``), the same tests run against that server instead
(``scripts/with_neo4j.sh`` starts a real Neo4j and sets them).

Tests marked ``managed`` are about the managed ArcadeDB server itself and are skipped, with
the reason, when ``NEO4J_URI`` is set; tests marked ``neo4j`` need a real Neo4j and are
skipped, with the reason, when it is not. The run ends with the server the store tests ran
on (as it names itself on Bolt) and their count by outcome. With ``ENVSCHED_STORE_TESTS_FLOOR``
set (the Neo4j pass of ``.ci/run``), a run in which fewer store tests passed fails, so that a
pass whose store tests were all skipped or never collected cannot read as green.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass

import pytest

from envsched_gnn.graph_store.arcadedb import ManagedArcadeDB
from envsched_gnn.graph_store.connect import connect_store, credentials_from_environment
from envsched_gnn.graph_store.store import GraphStore

MANAGED_ONLY = (
    "about the managed ArcadeDB server itself (its process, folder, password file, importer "
    "or snapshot): runs in the ArcadeDB pass, not on NEO4J_URI"
)
NEEDS_NEO4J = (
    "needs a real Neo4j: set NEO4J_URI, e.g. scripts/with_neo4j.sh python -m pytest -m store "
    "(the Neo4j pass of .ci/run)"
)
SERVER_KEY = pytest.StashKey[str]()
"""The session's store server as the summary names it: its Bolt agent and URI."""
FLOOR_VARIABLE = "ENVSCHED_STORE_TESTS_FLOOR"
"""Environment variable: the fewest store tests that must pass, else the run fails."""
OUTCOMES = ("passed", "failed", "error", "skipped")


@dataclass
class StoreServer:
    """Where the session's store server answers, and whether this session manages it."""

    uri: str
    auth: tuple[str, str]
    database: str
    managed: ManagedArcadeDB | None
    agent: str = ""
    """What the server calls itself on Bolt (``Neo4j/5.26.30``, or ArcadeDB's own string)."""

    @property
    def backend(self) -> str:
        """``"arcadedb"`` or ``"neo4j"``: where the two answer differently, tests say which."""
        return "arcadedb" if "ArcadeDB" in self.agent else "neo4j"

    def connect(self) -> AbstractContextManager[GraphStore]:
        """A new store on this server, as a ``with`` block; closing it leaves the server running."""
        return connect_store(self.uri, self.auth, self.database)


@pytest.fixture(scope="session")
def store_server(
    tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> Iterator[StoreServer]:
    """The Bolt server of the session: a managed ArcadeDB, or ``NEO4J_URI`` when set."""
    uri = os.environ.get("NEO4J_URI")
    if uri:
        auth, database = credentials_from_environment(uri)
        yield _named(StoreServer(uri, auth, database, None), pytestconfig)
        return
    with ManagedArcadeDB(tmp_path_factory.mktemp("arcadedb")) as server:
        yield _named(StoreServer(server.uri, server.auth, server.database, server), pytestconfig)


def _named(server: StoreServer, config: pytest.Config) -> StoreServer:
    """``server`` with its Bolt agent, which the run's summary names."""
    with server.connect() as store:
        server.agent = store.server_agent()
    config.stash[SERVER_KEY] = f"{server.agent} at {server.uri}"
    return server


@pytest.fixture
def store(store_server: StoreServer) -> Iterator[GraphStore]:
    """A cleared :class:`GraphStore` on the session's server (shared: tests run serially)."""
    with store_server.connect() as graph_store:
        graph_store.clear()
        yield graph_store


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skips, with the reason, what the session's store server cannot run (module docstring)."""
    on_neo4j_uri = bool(os.environ.get("NEO4J_URI"))
    for item in items:
        if on_neo4j_uri and item.get_closest_marker("managed"):
            item.add_marker(pytest.mark.skip(reason=MANAGED_ONLY))
        if not on_neo4j_uri and item.get_closest_marker("neo4j"):
            item.add_marker(pytest.mark.skip(reason=NEEDS_NEO4J))


def store_outcomes(stats: dict[str, list]) -> Counter[str]:
    """How many store-marked tests passed, failed, errored and were skipped (a test once each)."""
    outcomes: Counter[str] = Counter()
    seen: set[tuple[str, str]] = set()
    for outcome in OUTCOMES:
        for report in stats.get(outcome, []):
            nodeid = getattr(report, "nodeid", "")
            if "store" in getattr(report, "keywords", {}) and (nodeid, outcome) not in seen:
                seen.add((nodeid, outcome))
                outcomes[outcome] += 1
    return outcomes


def _floor_missed(config: pytest.Config) -> str | None:
    """Why the run's store tests fall short of ``$ENVSCHED_STORE_TESTS_FLOOR``; None if not."""
    floor = os.environ.get(FLOOR_VARIABLE)
    if not floor:
        return None
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    passed = store_outcomes(reporter.stats if reporter is not None else {})["passed"]
    if passed >= int(floor):
        return None
    return f"{passed} store tests passed, fewer than {FLOOR_VARIABLE}={floor}"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fails a run whose store tests passed fewer than the floor (module docstring)."""
    if _floor_missed(session.config) and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """One line: the server the store tests ran on and how many passed, failed, were skipped;
    and one more when they fall short of the floor."""
    server = config.stash.get(SERVER_KEY, None)
    if server is not None:
        outcomes = store_outcomes(terminalreporter.stats)
        counts = ", ".join(f"{outcomes[o]} {o}" for o in OUTCOMES)
        terminalreporter.write_line(f"store tests on {server}: {counts}")
    missed = _floor_missed(config)
    if missed:
        terminalreporter.write_line(f"FAILED: {missed}", red=True)
