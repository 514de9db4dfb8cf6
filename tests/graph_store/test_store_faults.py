"""Store faults are loud and lose nothing: kill -9 of the server during a build, a growth and
observation writes, a dead server, a second process on a folder, missing or wrong passwords.

Each test runs its own server, since it kills, locks or breaks it: a managed ArcadeDB (a real
Java server) in its own folder, or, for the faults that hold on both servers, also a Neo4j of this
module's own (``tools/neo4j-server``, emptied for each test), killed and started again on its
folder and port as its operator would (those run in the Neo4j pass of ``.ci/run``).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from envsched_gnn.envs.pool_io import save_pool
from envsched_gnn.graph_build.builder import build
from envsched_gnn.graph_store import graph_commands
from envsched_gnn.graph_store.arcadedb import USERS_FILE, ManagedArcadeDB
from envsched_gnn.graph_store.connect import open_store
from envsched_gnn.graph_store.errors import StoreError
from envsched_gnn.graph_store.growth import add_environment, build_into_store
from envsched_gnn.observations import Observation
from envsched_gnn.training.observation_sink import ObservationSink, StoreWriter
from tests.envs.handmade_pool import handmade_pool
from tests.graph_store.fault_servers import ManagedFaults, Neo4jFaults
from tests.graph_store.neo4j_server import RestartableNeo4j
from tests.graph_store.small_pool import small_pool, sub_pool

pytestmark = pytest.mark.store

SECRET = "hunter2-do-not-leak"
MANAGED = (pytest.mark.managed, pytest.mark.slow)  # a managed server of its own
NEO4J = (pytest.mark.neo4j, pytest.mark.slow)  # a Neo4j of this module's own, killed
SERVERS = [pytest.param("managed", marks=MANAGED), pytest.param("neo4j", marks=NEO4J)]
GROWN_POOL = small_pool(4, 6, seed=1)
NEW_ENV = "env3-flight"
OUTAGE_S = 2.0
"""How long a killed Neo4j stays down before its operator starts it again (and then its start)."""


@pytest.fixture(scope="module")
def neo4j(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestartableNeo4j]:
    """The module's own Neo4j, started by the first test that asks for it."""
    server = RestartableNeo4j(tmp_path_factory.mktemp("neo4j") / "home")
    yield server
    server.stop()


@pytest.fixture
def faulty(server: str, request, tmp_path, monkeypatch) -> Iterator[ManagedFaults | Neo4jFaults]:
    """The server a test kills: a managed ArcadeDB in ``tmp_path``, or the module's Neo4j,
    running and empty, named by ``NEO4J_*`` for the test's commands."""
    if server == "managed":
        yield ManagedFaults(tmp_path / "store")
        return
    neo4j = request.getfixturevalue("neo4j")
    if not neo4j.running:
        neo4j.start()
    with neo4j.connect() as store:
        store.clear()
    for name, value in neo4j.environment.items():
        monkeypatch.setenv(name, value)
    yield Neo4jFaults(neo4j)


@pytest.mark.slow  # a managed server of its own
@pytest.mark.managed
def test_a_dead_server_is_reported_within_seconds_naming_its_log(tmp_path) -> None:
    with open_store(tmp_path / "store") as store:
        store.write_pool(handmade_pool())
        killed_at = []

        def kill_soon() -> None:
            time.sleep(0.5)
            killed_at.append(time.monotonic())
            os.kill(store.server._process.pid, signal.SIGKILL)  # as the OOM killer would

        killer = threading.Thread(target=kill_soon)
        killer.start()
        step = 0
        with pytest.raises(
            StoreError, match=r"server of .* is dead \(exit code -9\); see .*server\.log"
        ):
            while True:  # writes in flight when the server dies
                store.write_observations([Observation("clinic-move", step, (0.0, 1.0))])
                step += 1
        killer.join()
        assert time.monotonic() - killed_at[0] < 10.0


def _graph_command(argv: list[str], capsys) -> tuple[int, str]:
    """One ``graph`` command in this process: its exit status and stderr."""
    parser = argparse.ArgumentParser()
    groups = {"graph": parser.add_subparsers()}
    graph_commands.register(groups)
    args = parser.parse_args(argv)
    code = args.func(args)
    return code, capsys.readouterr().err


def _interrupt_writes(store, when, fail) -> None:
    """Calls ``fail()`` before the first batched write (or ArcadeDB import) that ``when`` picks."""
    write_rows = store.write_rows

    def interrupted(cypher, rows, **kwargs):
        if when(cypher):
            fail()
        return write_rows(cypher, rows, **kwargs)

    store.write_rows = interrupted
    if store.server is not None:
        sql = store.server.sql

        def interrupted_import(command, **kwargs):
            if command.startswith("IMPORT DATABASE"):
                fail()
            return sql(command, **kwargs)

        store.server.sql = interrupted_import


def _failure(faulty, store, fault: str):
    """``fault`` at the moment it is called: the server killed, or the writing process gone."""

    def fail() -> None:
        if fault.startswith("kill"):
            faulty.kill(store)
        else:
            raise KeyboardInterrupt  # as if the process were killed here

    return fail


def _assert_names_the_store(failure, faulty, fault: str) -> None:
    """A killed server's error says which: the managed one names its log, Neo4j its URI."""
    if fault.startswith("kill"):
        assert ("server.log" if faulty.name == "managed" else faulty.spec) in str(failure.value)


@pytest.mark.parametrize(
    "server, bulk",
    [
        pytest.param("managed", False, marks=MANAGED, id="managed-batched"),
        pytest.param("managed", True, marks=MANAGED, id="managed-bulk"),
        pytest.param("neo4j", False, marks=NEO4J, id="neo4j-batched"),
    ],
)
@pytest.mark.parametrize("fault", ["kill -9 of the server", "the builder dies"])
def test_an_interrupted_build_is_never_read_as_a_graph(
    faulty, tmp_path, embedder, config, capsys, fault, bulk
):
    pool = handmade_pool()
    config = replace(config, bulk=bulk)
    with faulty.open() as store:
        edges = lambda cypher: "WITHIN" in cypher and ("MERGE" in cypher or "CREATE" in cypher)  # noqa: E731
        _interrupt_writes(store, edges, _failure(faulty, store, fault))
        with pytest.raises((StoreError, KeyboardInterrupt)) as failure:
            build_into_store(store, pool, config, embedder=embedder)
        _assert_names_the_store(failure, faulty, fault)
    if not fault.startswith("kill"):  # the command line says it too
        out = tmp_path / "graph.json"
        code, stderr = _graph_command(["export", "--out", str(out), "--store", faulty.spec], capsys)
        assert code == 1 and "incomplete" in stderr and "rerun" in stderr
        assert not out.exists()
        return
    faulty.restart()
    with faulty.open() as store:
        # batched, the nodes are there and the graph is not; bulk, nothing was imported
        assert store.count_tasks() == (0 if bulk else len(pool.tasks))
        with pytest.raises(StoreError, match="incomplete.*never finished.*rerun"):
            store.read_graph()
        built = build_into_store(store, pool, config, embedder=embedder)
        assert sorted(store.read_graph().edge_rows()) == sorted(built.graph.edge_rows())


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize("fault", ["kill -9 of the server", "the builder dies"])
def test_an_interrupted_growth_is_never_read_as_a_graph_and_add_env_again_finishes_it(
    faulty, tmp_path, embedder, config, capsys, fault
):
    """Interrupted after the displaced cross edges were deleted and before the new ones were
    written; ``graph add-env`` run again finishes that growth, equal to a rebuild."""
    save_pool(GROWN_POOL, tmp_path / "pool")
    old_pool = sub_pool(GROWN_POOL, set(GROWN_POOL.envs) - {NEW_ENV})
    with faulty.open() as store:
        before = build_into_store(store, old_pool, config, embedder=embedder).graph
        new_cross = lambda cypher: "MERGE (a)-[e:CROSS]" in cypher  # noqa: E731
        _interrupt_writes(store, new_cross, _failure(faulty, store, fault))
        with pytest.raises((StoreError, KeyboardInterrupt)) as failure:
            add_environment(store, GROWN_POOL, NEW_ENV, config, embedder=embedder)
        _assert_names_the_store(failure, faulty, fault)
    faulty.restart()
    with faulty.open() as store:
        assert store.count_nodes("Task") == len(GROWN_POOL.tasks)  # the new tasks are there
        with pytest.raises(
            StoreError, match=f"incomplete: adding environment '{NEW_ENV}'.*add-env"
        ):
            store.read_graph()
        started_from = store.read_graph_before_growth()
        assert started_from.task_ids == before.task_ids
        assert len(started_from.edges["cross"]) < len(before.edges["cross"])  # some deleted
    argv = ["add-env", "--pool", str(tmp_path / "pool"), "--store", faulty.spec]
    code, stderr = _graph_command(argv, capsys)
    assert code == 0, stderr
    rebuilt = build(GROWN_POOL, config, embedder=embedder).graph
    with faulty.open() as store:
        assert store.interrupted_growth() is None
        assert sorted(store.read_graph().edge_rows()) == sorted(rebuilt.edge_rows())


@pytest.mark.slow  # a managed server of its own
@pytest.mark.managed
def test_an_import_out_of_heap_falls_back_to_batched_writes(
    tmp_path, embedder, config, monkeypatch
):
    """The importer runs (committing part of the records every 20,000), then the server
    answers as when its heap runs out: the partial import is cleared and the graph already
    built written in batches (nothing computed again), with a warning naming the setting for
    the fast path."""
    import envsched_gnn.graph_build.builder as builder

    pool = handmade_pool()
    computed = []
    within_arrays = builder.within_arrays
    monkeypatch.setattr(
        builder, "within_arrays", lambda tasks, k: computed.append(1) or within_arrays(tasks, k)
    )
    with open_store(tmp_path / "store") as store:
        sql = store.server.sql

        def out_of_heap(command, **kwargs):
            result = sql(command, **kwargs)
            if command.startswith("IMPORT DATABASE"):
                raise StoreError('refused: {"exception":"java.lang.OutOfMemoryError"}')
            return result

        store.server.sql = out_of_heap
        with pytest.warns(RuntimeWarning, match="ran out of .*heap.*ENVSCHED_ARCADEDB_HEAP"):
            built = build_into_store(store, pool, replace(config, bulk=True), embedder=embedder)
        assert len(computed) == len(pool.envs)  # each environment's TF-IDF once
        assert store.count_tasks() == len(pool.tasks)
        assert store.count_nodes("Environment") == len(pool.envs)
        assert sorted(store.read_graph().edge_rows()) == sorted(built.graph.edge_rows())
    with open_store(tmp_path / "store") as store:  # and from the store itself, not a snapshot
        store.snapshot_path.unlink()
        assert sorted(store.read_graph().edge_rows()) == sorted(built.graph.edge_rows())
    in_memory = build(pool, config, embedder=embedder)
    assert sorted(built.graph.edge_rows()) == sorted(in_memory.graph.edge_rows())


def test_a_graph_changed_after_its_build_is_refused(store) -> None:
    from tests.graph_store.test_store import handmade_graph

    store.write_pool(handmade_pool())
    store.write_graph(handmade_graph())
    store.write_rows(
        "UNWIND $rows AS r MATCH (a:Task {id: r.src})-[e:CROSS]->(b:Task {id: r.dst}) DELETE e",
        [{"src": "clinic-book", "dst": "library-checkout"}],
    )
    with pytest.raises(StoreError, match="completed with"):
        store.read_graph()


@pytest.mark.parametrize("server", SERVERS)
def test_kill_9_during_observation_writes_loses_and_duplicates_nothing(faulty) -> None:
    """The server dies between two steps' writes and comes back: the managed one when the
    writer opens the store again, Neo4j when its operator starts it, a while later."""
    writer = StoreWriter(faulty.spec)
    writer([])  # opens the store
    writer._store.write_pool(handmade_pool())
    sink = ObservationSink(writer, max_rows=2, retry_initial_s=0.1, retry_max_s=1.0)
    tasks = [task.task_id for task in handmade_pool().tasks]
    sink.put(Observation(task, 0, (0.0, 1.0)) for task in tasks)
    assert sink.flush(timeout=120)
    faulty.kill(writer._store)
    operator = threading.Thread(target=lambda: (time.sleep(OUTAGE_S), faulty.restart()))
    operator.start()
    sink.put(Observation(task, 1, (1.0, 1.0)) for task in tasks)
    sink.put(Observation(task, 0, (0.0, 1.0)) for task in tasks[:3])  # a replay
    assert sink.flush(timeout=300)
    operator.join()
    assert sink.close() == [] and not sink.rejected
    if faulty.name == "managed":  # Neo4j's driver itself retries a write for 30 s, which the
        assert sink.failed_writes >= 1  # outage may not outlast; the managed store's does not
    store = writer._store  # the store the writer opened (again), on the restarted server
    assert store.count_observations() == 2 * len(tasks)
    keys = store.query("MATCH (o:Observation) RETURN count(DISTINCT o.key) AS n")
    assert keys == [{"n": 2 * len(tasks)}]
    assert set(store.read_observations()) == {
        Observation(task, step, (float(step), 1.0)) for step in (0, 1) for task in tasks
    }
    writer.close()


@pytest.mark.slow  # a managed server of its own
@pytest.mark.managed
def test_the_password_is_on_no_command_line_and_the_server_has_no_secrets(
    tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("NEO4J_PASSWORD", SECRET)
    with ManagedArcadeDB(tmp_path / "store") as server:
        pid = server._process.pid
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        environ = Path(f"/proc/{pid}/environ").read_bytes()
        password = server.password().encode()
    assert password not in cmdline and b"rootPasswordPath" in cmdline
    assert SECRET.encode() not in environ and password not in environ
    assert b"NEO4J" not in environ
    assert (tmp_path / "store" / "root_password").stat().st_mode & 0o777 == 0o600


@pytest.mark.slow  # a managed server of its own
@pytest.mark.managed
def test_missing_or_wrong_passwords_are_errors_with_recovery_steps_that_work(tmp_path) -> None:
    folder = tmp_path / "store"
    password_file = folder / "root_password"
    with open_store(folder) as store:
        store.write_pool(handmade_pool())
        store.write_observations([Observation("clinic-move", 2, (0.0, 1.0))])
    original = password_file.read_text()
    password_file.unlink()
    with pytest.raises(StoreError, match="holds data but its root password file .* is missing"):
        ManagedArcadeDB(folder).start()
    assert not password_file.exists()  # never regenerated
    password_file.write_text("short")
    with pytest.raises(StoreError, match="at least 8 characters"):
        ManagedArcadeDB(folder).start()
    password_file.write_text("a-wrong-password-123")
    with pytest.raises(StoreError, match="rejected the root password.*To recover") as wrong:
        ManagedArcadeDB(folder, start_timeout=60).start()
    assert str(folder / USERS_FILE) in str(wrong.value)
    # the recovery steps of the message: forget the users, choose a new password
    (folder / USERS_FILE).unlink()
    password_file.write_text("a-new-password-456")
    with open_store(folder) as store:
        assert store.read_observations() == [Observation("clinic-move", 2, (0.0, 1.0))]
    assert original.strip() != "a-new-password-456"


HOLDER = """
import sys
from envsched_gnn.graph_build.builder import build
from envsched_gnn.graph_store.connect import open_store
with open_store(sys.argv[1]):
    print("ready", flush=True)
    sys.stdin.read()
"""


@pytest.mark.slow  # a managed server of its own
@pytest.mark.managed
def test_a_second_process_waits_for_the_folder_or_names_its_holder(tmp_path) -> None:
    folder = tmp_path / "store"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(folder)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parents[2],
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        started = time.monotonic()
        with pytest.raises(StoreError, match=rf"in use by process {holder.pid} .*waited 1 s"):
            ManagedArcadeDB(folder, lock_timeout=1.0).start()
        assert time.monotonic() - started < 15.0  # it did not wait for the holder
        holder.stdin.close()  # the holder finishes while we wait
        with ManagedArcadeDB(folder, lock_timeout=120.0) as server:
            assert server.running
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.slow  # a managed server of its own
@pytest.mark.managed
def test_a_server_started_from_an_ended_thread_keeps_running(tmp_path):
    """The managed server outlives the thread that opened the store (a StoreWriter reopens a
    dead store from its sink thread): Java is forked by one long-lived launcher thread."""
    context = open_store(tmp_path / "store")
    opened = []
    opener = threading.Thread(target=lambda: opened.append(context.__enter__()))
    opener.start()
    opener.join()
    store = opened[0]
    try:
        time.sleep(1.0)  # a parent-death signal from the ended thread would have landed
        assert store.server._process.poll() is None
        assert store.count_tasks() == 0
    finally:
        context.__exit__(None, None, None)
