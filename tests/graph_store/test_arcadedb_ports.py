"""The managed server never loses its port: a port another process binds between its choice and
Java's bind (a parallel start) is never talked to, and the server starts again on new ports.

Before, the server that lost its Bolt port stayed up serving nothing, and the start met the
other process on that port: another store server refused this folder's root password, which
read as a wrong password with recovery steps that would not help. Each test runs real servers.
"""

from __future__ import annotations

import socket
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from envsched_gnn.graph_store import arcadedb
from envsched_gnn.graph_store.arcadedb import ManagedArcadeDB
from envsched_gnn.graph_store.connect import connect_store
from envsched_gnn.graph_store.listener import listening_pid
from envsched_gnn.observations import Observation
from tests.envs.handmade_pool import handmade_pool

pytestmark = [pytest.mark.store, pytest.mark.managed, pytest.mark.slow]

HEAP = "512m"
"""Enough for these servers' few nodes; several run at once on a small machine."""


def choosing_first(monkeypatch, ports: list[int]) -> None:
    """Each thread's first ``len(ports)`` port choices are ``ports`` (as if another process had
    chosen and then bound them in between); later ones are free ports."""
    chosen = threading.local()
    real = arcadedb.free_port

    def free_port() -> int:
        chosen.n = getattr(chosen, "n", 0) + 1
        return ports[chosen.n - 1] if chosen.n <= len(ports) else real()

    monkeypatch.setattr(arcadedb, "free_port", free_port)


def write_and_read_back(server: ManagedArcadeDB, step: int) -> list[Observation]:
    with connect_store(server.uri, server.auth, server.database) as store:
        store.write_pool(handmade_pool())
        store.write_observations([Observation("clinic-move", step, (0.0, 1.0))])
        return store.read_observations()


@pytest.mark.parametrize("taken_by", ["another store server", "a socket bound, not listening"])
def test_a_port_taken_between_its_choice_and_the_bind_is_left_for_new_ones(
    tmp_path, monkeypatch, taken_by
) -> None:
    with ManagedArcadeDB(tmp_path / "other", heap=HEAP) as other, socket.socket() as bound:
        if taken_by == "another store server":
            taken = other.bolt_port  # its Bolt answers, and refuses this folder's password
        else:  # Java's bind fails; ArcadeDB logs it and stays up serving nothing
            bound.bind(("127.0.0.1", 0))
            taken = bound.getsockname()[1]
        choosing_first(monkeypatch, [taken])
        with ManagedArcadeDB(tmp_path / "store", heap=HEAP, start_timeout=60) as server:
            assert server.bolt_port != taken
            assert listening_pid(server.bolt_port) == server.pid
            assert write_and_read_back(server, 3) == [Observation("clinic-move", 3, (0.0, 1.0))]
        with connect_store(other.uri, other.auth, other.database) as store:
            assert store.count_observations() == 0  # nothing went to the other server


def test_servers_started_at_once_on_the_same_ports_each_end_on_their_own(
    tmp_path, monkeypatch
) -> None:
    """A real race: three servers told the same two ports at once; one Java binds them, the
    others find them taken and start again on new ones."""
    shared = [arcadedb.free_port(), arcadedb.free_port()]
    choosing_first(monkeypatch, shared)
    servers = [
        ManagedArcadeDB(tmp_path / f"store{i}", heap=HEAP, start_timeout=120) for i in range(3)
    ]
    try:
        with ThreadPoolExecutor(len(servers)) as starts:
            list(starts.map(ManagedArcadeDB.start, servers))
        ports = [p for server in servers for p in (server.bolt_port, server.http_port)]
        assert len(set(ports)) == len(ports)
        assert sum(server.bolt_port in shared for server in servers) <= 1
        for step, server in enumerate(servers):
            assert listening_pid(server.bolt_port) == server.pid
            assert write_and_read_back(server, step) == [
                Observation("clinic-move", step, (0.0, 1.0))
            ]  # each server holds its own write alone
    finally:
        for server in servers:
            server.stop()
