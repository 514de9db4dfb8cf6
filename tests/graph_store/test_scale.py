"""Building at scale: the approximate cross kNN, the embedding cache, the streamed build."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from envsched_gnn.graph_build.ann import HnswConfig, approximate_cross, embedding_groups
from envsched_gnn.graph_build.builder import GraphBuild, GraphConfig, build
from envsched_gnn.graph_build.cross import cross_neighbours
from envsched_gnn.graph_build.embeddings import embed_texts, fixed_point
from envsched_gnn.graph_build.neighbours import task_hashes
from envsched_gnn.graph_store.stream import stream_build
from tests.graph_store.small_pool import small_pool
from tests.graph_store.test_growth import with_repeating_abstracts


def rows_of(graph):
    return list(graph.edge_rows())


@pytest.mark.parametrize("repeating", [False, True])
def test_approximate_and_exact_cross_agree_on_small_pools(embedder, config, repeating) -> None:
    """Forced onto the HNSW path, a small pool gets exactly the exact path's graph (ties too)."""
    pool = small_pool(5, 8, seed=3)
    pool = with_repeating_abstracts(pool) if repeating else pool
    exact = build(pool, config, embedder=embedder)
    cache = {exact.abstracts[t]: exact.embeddings[t] for t in exact.abstracts}
    approximate = build(pool, replace(config, ann_threshold=1), embedder=embedder, cache=cache)
    assert rows_of(approximate.graph) == rows_of(exact.graph)
    assert len(exact.graph.edges["cross"]) == 40 * 12


def random_groups(rng, n_tasks: int, n_distinct: int, n_envs: int):
    """Unit vectors with repeats (n_distinct distinct among n_tasks) in random environments."""
    base = rng.normal(size=(n_distinct, 384))
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    drawn = rng.integers(0, n_distinct, n_tasks)
    return fixed_point(base[drawn]), rng.integers(0, n_envs, n_tasks), len(np.unique(drawn))


def test_approximate_cross_leaves_only_unsettled_groups_and_matches_exact() -> None:
    """Few candidates per group: what the HNSW path settles equals the exact rows, and the
    groups it cannot settle (too few candidates) are handed back for the exact path."""
    rng = np.random.default_rng(0)
    q, envs, distinct = random_groups(rng, 600, 150, 7)
    hashes = task_hashes([f"t{i:04d}" for i in range(600)])
    dst, src, sim, left = approximate_cross(q, envs, hashes, 5, HnswConfig(candidates=3))
    assert len(left) > 0 and not np.isin(dst, left).any()
    settled = np.setdiff1d(np.arange(600), left)
    want = cross_neighbours(q, envs, hashes, settled, 5)
    assert all(np.array_equal(a, b) for a, b in zip((dst, src, sim), want, strict=True))
    assert np.all(envs[dst] != envs[src]) and np.all(sim > 0)
    assert len(embedding_groups(q)[0]) == distinct


def test_cache_never_re_embeds_a_known_abstract(embedder) -> None:
    texts = ["step 1: lookup", "step 1: create", "step 1: lookup", "step 1: delete"]
    encoded = embedder.encoded
    first = embed_texts(texts, embedder)
    assert embedder.encoded - encoded == 3  # each distinct text once
    cache = dict(zip(texts, first, strict=True))
    encoded = embedder.encoded
    again = embed_texts([*texts, "step 1: update"], embedder, cache)
    assert embedder.encoded - encoded == 1  # only the new one
    assert np.array_equal(again[:4], first)


@pytest.mark.store
def test_streamed_build_equals_in_memory_build(store, embedder) -> None:
    pool = with_repeating_abstracts(small_pool(4, 6, seed=5))
    config = GraphConfig(k_within=3, k_cross=5, block=7, show_progress=False)
    phases: dict[str, float] = {}
    streamed = stream_build(store, pool, config, embedder=embedder, chunk=11, phases=phases)
    in_memory = build(pool, config, embedder=embedder)
    assert rows_of(streamed.graph) == rows_of(in_memory.graph)
    assert sorted(rows_of(store.read_graph())) == sorted(rows_of(in_memory.graph))
    assert set(phases) == {"store_write", "within", "embed", "cross"}
    assert store.count_nodes("Abstract") == 3  # one node per distinct abstract text
    encoded = embedder.encoded
    stream_build(store, pool, config, embedder=embedder)  # rebuilt over the stored graph
    assert embedder.encoded == encoded  # every abstract came from the store's cache
    assert sorted(rows_of(store.read_graph())) == sorted(rows_of(in_memory.graph))


@pytest.mark.slow  # spawned worker processes
def test_within_edges_from_worker_processes_equal_in_process(embedder, config) -> None:
    pool = small_pool(5, 7, seed=4)
    steps = GraphBuild(pool, config, embedder=embedder)
    alone = [row for part in steps.within() for row in part]
    steps.config = replace(config, within_workers=2)
    assert [row for part in steps.within() for row in part] == alone
    assert len(alone) == 35 * 6


def test_graph_of_a_streamed_pool_equals_the_graph_of_the_loaded_pool(embedder, config, tmp_path):
    from envsched_gnn.envs.pool_io import load_pool, save_pool
    from envsched_gnn.envs.pool_stream import PoolStream

    save_pool(small_pool(4, 6, seed=8), tmp_path / "pool")
    streamed = build(PoolStream(tmp_path / "pool"), config, embedder=embedder)
    loaded = build(load_pool(tmp_path / "pool"), config, embedder=embedder)
    assert rows_of(streamed.graph) == rows_of(loaded.graph)
    assert streamed.abstracts == loaded.abstracts
