"""The build's pieces of work run anywhere and give the same graph: ``graph build --ray local``
on ``ray.init(num_cpus=2)``, worker processes, this process."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from envsched_gnn.cli import main
from envsched_gnn.envs.pool_io import save_pool
from envsched_gnn.graph.task_graph import read_graph
from envsched_gnn.graph_build.builder import build
from envsched_gnn.graph_build.embeddings import Embedder, encode_distinct
from envsched_gnn.graph_build.parallel import ordered_map
from tests.graph_store.small_pool import small_pool

ROOT = str(Path(__file__).resolve().parents[2])
POOL = small_pool(5, 7, seed=4)


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        _node_ip_address="127.0.0.1",
        runtime_env={"env_vars": {"PYTHONPATH": ROOT, "OMP_NUM_THREADS": "1"}},
    )
    yield ray
    ray.shutdown()


def test_ordered_map_keeps_the_order_of_its_inputs() -> None:
    items = [(n,) for n in range(23)]
    assert [r for _, r in ordered_map(abs, items, workers=1)] == list(range(23))
    assert [a for a, _ in ordered_map(abs, items, workers=2, window=3)] == items


@pytest.mark.slow  # spawned workers each load the encoder
def test_embeddings_from_worker_processes_equal_in_process(embedder) -> None:
    texts = [f"step 1: lookup of record {n}; step 2: update" for n in range(37)]
    alone = Embedder.encode(embedder, texts)  # the real encoder, not the test memo
    assert np.array_equal(encode_distinct(texts, embedder, workers=2), alone)


@pytest.mark.slow  # a Ray instance and its workers: about 30 s
def test_graph_build_on_ray_equals_the_local_build(ray_cluster, embedder, config, tmp_path):
    local = build(POOL, config, embedder=embedder)
    on_ray = build(POOL, replace(config, ray="local"), embedder=embedder)
    assert list(on_ray.graph.edge_rows()) == list(local.graph.edge_rows())
    assert on_ray.abstracts == local.abstracts
    save_pool(POOL, tmp_path / "pool")
    store, out = str(tmp_path / "store"), tmp_path / "graph.json"
    argv = ["graph", "build", "--pool", str(tmp_path / "pool"), "--store", store]
    assert main([*argv, "--ray", "local", "--no-show-progress"]) == 0
    assert main(["graph", "export", "--store", store, "--out", str(out)]) == 0
    assert sorted(read_graph(out).edge_rows()) == sorted(local.graph.edge_rows())
