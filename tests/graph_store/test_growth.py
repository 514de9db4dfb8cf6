"""Incremental growth equals a full rebuild; the graph commands.

The store tests here are Bolt/Cypher tests run against ArcadeDB (NEO4J_URI when set).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from envsched_gnn.cli import main
from envsched_gnn.envs.pool_io import save_pool
from envsched_gnn.graph.task_graph import read_graph, write_graph
from envsched_gnn.graph_build.builder import GraphConfig, abstracts_of, build
from envsched_gnn.graph_store.growth import add_environment, add_pool, build_into_store
from envsched_gnn.observations import Observation
from tests.graph_store.small_pool import small_pool, sub_pool

POOL = small_pool(4, 6, seed=1)
FIRST_ENVS = {"env0-book", "env1-patient", "env2-order"}


def snapshot_text(graph, path) -> str:
    write_graph(path, graph)
    return path.read_text()


def test_add_environment_to_a_graph_equals_rebuild(embedder, config, tmp_path) -> None:
    grown = add_environment(
        build(sub_pool(POOL, FIRST_ENVS), config, embedder=embedder).graph,
        POOL,
        "env3-flight",
        config,
        embedder=embedder,
    )
    rebuilt = build(POOL, config, embedder=embedder).graph
    assert snapshot_text(grown, tmp_path / "a.json") == snapshot_text(rebuilt, tmp_path / "b.json")
    with pytest.raises(ValueError, match="already in the graph"):
        add_environment(grown, POOL, "env3-flight", config, embedder=embedder)


def with_repeating_abstracts(pool):
    """Three abstracts for all tasks: most cross similarities tie at exactly 1.0."""
    abstracts = (
        "step 1: lookup",
        "step 1: lookup; step 2: update using step 1 (gate: state precondition)",
        "step 1: identifier resolution; step 2: create using step 1",
    )
    tasks = [replace(t, abstract=abstracts[n % 3]) for n, t in enumerate(pool.tasks)]
    return type(pool)(pool.envs, tasks)


def test_growth_with_tied_similarities_equals_rebuild(embedder, tmp_path) -> None:
    """Ties are broken by the pair key, which an addition cannot change: grown == rebuilt."""
    pool = with_repeating_abstracts(small_pool(5, 6, seed=2))
    config = GraphConfig(k_within=3, k_cross=4, show_progress=False)
    first = {e for e in pool.envs if not e.startswith(("env1", "env4"))}
    graph = build(sub_pool(pool, first), config, embedder=embedder).graph
    for env_id in ("env4-ticket", "env1-patient"):  # one after, one before the others by id
        graph = add_environment(graph, pool, env_id, config, embedder=embedder)
    rebuilt = build(pool, config, embedder=embedder).graph
    assert np.mean(rebuilt.edges["cross"].sim == 1.0) > 0.9
    assert snapshot_text(graph, tmp_path / "a.json") == snapshot_text(rebuilt, tmp_path / "b.json")


@pytest.mark.store
def test_add_environment_in_the_store_equals_rebuild_and_keeps_history(
    store, embedder, config, tmp_path
) -> None:
    build_into_store(store, sub_pool(POOL, FIRST_ENVS), config, embedder=embedder)
    before = store.read_graph()
    history = [
        Observation("env0-book-t00", 0, (0.0, 1.0)),
        Observation("env2-order-t03", 1, (1.0,)),
    ]
    store.write_observations(history)
    cached = {text for text, _ in store.read_embeddings().values()}
    newcomers = set(abstracts_of(POOL, POOL.tasks_of("env3-flight"))) - cached
    encoded = embedder.encoded
    add_environment(store, POOL, "env3-flight", config, embedder=embedder)
    assert embedder.encoded - encoded == len(newcomers) > 0  # old tasks come from the cache
    rebuilt = build(POOL, config, embedder=embedder).graph
    grown = store.read_graph()
    assert snapshot_text(grown, tmp_path / "a.json") == snapshot_text(rebuilt, tmp_path / "b.json")
    displaced = {(s, d) for s, d, r, _ in before.edge_rows() if r == "cross"} - {
        (s, d) for s, d, r, _ in grown.edge_rows() if r == "cross"
    }
    assert displaced  # newcomers did push some old cross neighbours out
    assert store.read_observations() == history
    assert store.count_nodes("Environment") == 4 and store.count_tasks() == len(POOL.tasks)


@pytest.mark.store
@pytest.mark.slow  # three CLI runs, each starting its own encoder (and managed server)
def test_graph_commands_build_export_and_add_a_second_pool(
    store, store_server, tmp_path, capsys, monkeypatch
) -> None:
    """On the managed default the commands open a folder of their own (the first build goes
    through ArcadeDB's importer); on Neo4j, the session's server (batched UNWIND writes)."""
    first, second = tmp_path / "first", tmp_path / "second"
    save_pool(sub_pool(POOL, {"env0-book", "env1-patient"}), first)
    save_pool(sub_pool(POOL, {"env2-order", "env3-flight"}), second)
    folder = str(tmp_path / "store")
    if store_server.managed is None:
        monkeypatch.setenv("NEO4J_USER", store_server.auth[0])
        monkeypatch.setenv("NEO4J_PASSWORD", store_server.auth[1])
        monkeypatch.setenv("NEO4J_DATABASE", store_server.database)
        folder = store_server.uri
    assert main(["graph", "build", "--pool", str(first), "--store", folder, "--k-cross", "4"]) == 0
    assert "60 within edges" in capsys.readouterr().out
    assert (
        main(["graph", "add-env", "--pool", str(second), "--store", folder, "--k-cross", "4"]) == 0
    )
    assert "env2-order, env3-flight" in capsys.readouterr().out
    out = tmp_path / "graph.json"
    assert main(["graph", "export", "--store", folder, "--out", str(out)]) == 0
    graph = read_graph(out)
    assert graph.num_tasks == 24 and len(graph.edges["cross"]) == 24 * 4
    assert main(["graph", "build", "--pool", str(tmp_path / "missing"), "--store", folder]) == 1
    assert "missing" in capsys.readouterr().err


@pytest.mark.store
def test_add_pool_skips_environments_already_present(store, embedder, config) -> None:
    build_into_store(store, sub_pool(POOL, FIRST_ENVS), config, embedder=embedder)
    assert add_pool(store, POOL, config, embedder=embedder) == ["env3-flight"]
    assert add_pool(store, POOL, config, embedder=embedder) == []
