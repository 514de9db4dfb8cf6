"""The graph snapshot beside a managed store: equal to the store's graph, refused when stale."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from envsched_gnn.graph_build.builder import build
from envsched_gnn.graph_store.connect import connect_store
from envsched_gnn.graph_store.growth import add_environment
from envsched_gnn.graph_store.snapshot import read_snapshot, read_snapshot_abstracts
from envsched_gnn.graph_store.stream import stream_build
from tests.graph_store.small_pool import small_pool, sub_pool

POOL = small_pool(4, 6, seed=2)


def rows(graph) -> list:
    return sorted(graph.edge_rows())


@pytest.fixture
def managed_store(store_server):
    """A cleared store that knows its managed server (so it keeps a snapshot)."""
    server = store_server.managed
    with connect_store(server.uri, server.auth, server.database, server=server) as store:
        store.clear()
        store.snapshot_path.unlink(missing_ok=True)
        yield store
        store.clear()
        store.snapshot_path.unlink(missing_ok=True)


@pytest.mark.store
@pytest.mark.managed
def test_snapshot_equals_the_store_read(managed_store, embedder, config) -> None:
    built = stream_build(managed_store, POOL, config, embedder=embedder)
    path = managed_store.snapshot_path
    assert path.exists()  # written when the build was marked complete
    warm = managed_store.read_graph()
    path.unlink()
    cold = managed_store.read_graph()  # from the store, which writes the snapshot again
    assert path.exists()
    assert warm.task_ids == cold.task_ids == built.graph.task_ids
    assert warm.env_ids == cold.env_ids
    assert rows(warm) == rows(cold) == rows(built.graph)
    for relation, edges in warm.edges.items():
        assert edges.src.dtype == np.int64 and edges.sim.dtype == np.float64, relation


@pytest.mark.store
@pytest.mark.managed
def test_a_stale_snapshot_is_refused(managed_store, embedder, config, tmp_path) -> None:
    first = sub_pool(POOL, {"env0-book", "env1-patient", "env2-order"})
    stream_build(managed_store, first, config, embedder=embedder)
    path = managed_store.snapshot_path
    old = tmp_path / "old.npz"
    shutil.copy(path, old)
    old_build = managed_store.query("MATCH (b:GraphBuild) RETURN b.build AS b")[0]["b"]
    assert read_snapshot_abstracts(old, old_build) is not None
    grown = add_environment(managed_store, POOL, "env3-flight", config, embedder=embedder)
    shutil.copy(old, path)  # the snapshot of the graph before the growth, under its name
    marker = managed_store.query("MATCH (b:GraphBuild) RETURN properties(b) AS p")[0]["p"]
    assert marker["build"] != old_build
    counts = {name: marker[name] for name in ("tasks", "within", "cross")}
    assert read_snapshot(path, marker["build"], counts) is None  # another build's
    read = managed_store.read_graph()
    assert read.num_tasks == len(POOL.tasks)  # the store's graph, not the snapshot's
    assert rows(read) == rows(grown) == rows(build(POOL, config, embedder=embedder).graph)
    old_counts = {"tasks": 18, "within": 18 * 5, "cross": 0}
    assert read_snapshot(old, old_build, old_counts) is None  # counts that do not match
