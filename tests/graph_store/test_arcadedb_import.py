"""The bulk path of a first build (ArcadeDB's importer) writes what the batched path writes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from envsched_gnn.graph_build.builder import GraphConfig
from envsched_gnn.graph_store.connect import connect_store
from envsched_gnn.graph_store.stream import IMPORT_FOLDER, bulk_file, stream_build
from tests.graph_store.small_pool import small_pool
from tests.graph_store.test_growth import with_repeating_abstracts

ENVIRONMENTS = "MATCH (e:Environment) RETURN properties(e) AS p ORDER BY e.id"
IN_ENV = "MATCH (t:Task)-[:IN_ENV]->(e:Environment) RETURN t.id AS t, e.id AS e ORDER BY t"
TASKS = "MATCH (t:Task) RETURN properties(t) AS p ORDER BY t.id"


def stored(store) -> dict:
    """Everything a build writes, in a comparable form."""
    return {
        "graph": sorted(store.read_graph().edge_rows()),
        "tasks": [row["p"] for row in store.query(TASKS)],
        "environments": [row["p"] for row in store.query(ENVIRONMENTS)],
        "in_env": store.query(IN_ENV),
        "embeddings": {t: (a, v.tolist()) for t, (a, v) in store.read_embeddings().items()},
        "abstracts": store.count_nodes("Abstract"),
    }


@pytest.mark.slow  # a graph written into the store twice
@pytest.mark.store
@pytest.mark.managed
def test_bulk_first_build_equals_batched_build(store_server, embedder) -> None:
    pool = with_repeating_abstracts(small_pool(4, 6, seed=7))
    pool.tasks[0] = type(pool.tasks[0])(**{**vars(pool.tasks[0]), "abstract": 'quote " ü \n'})
    pool = type(pool)(pool.envs, pool.tasks)
    config = GraphConfig(k_within=3, k_cross=5, show_progress=False)
    server = store_server.managed
    with connect_store(server.uri, server.auth, server.database, server=server) as store:
        store.clear()
        assert bulk_file(store, config) is not None  # empty: the bulk path
        bulk = stream_build(store, pool, config, embedder=embedder)
        assert not (server.folder / IMPORT_FOLDER).exists()  # the import file is removed
        assert bulk_file(store, config) is None  # a store holding a graph: batched
        from_bulk = stored(store)
        store.clear()
        batched = stream_build(store, pool, GraphConfig(**{**vars(config), "bulk": False}))
        from_batched = stored(store)
        store.clear()
    assert sorted(bulk.graph.edge_rows()) == sorted(batched.graph.edge_rows())
    assert from_bulk == from_batched
    assert len(from_bulk["graph"]) == 24 * (3 + 5) and from_bulk["abstracts"] == 4


def test_edge_lines_are_the_json_of_the_records(tmp_path) -> None:
    """The directly formatted edge lines equal json.dumps of the same records."""
    from envsched_gnn.graph_store.arcadedb_import import ArcadeImportFile

    sims = np.array([1.0, 0.1, 1e-05, 0.30000000000000004, 2.5e-300, 0.999999999])
    src, dst = np.arange(6) * 7, np.arange(6)[::-1].copy()
    direct, by_record = ArcadeImportFile(tmp_path / "a"), ArcadeImportFile(tmp_path / "b")
    direct.relation("cross", src, dst, sims)
    for s, d, w in zip(src.tolist(), dst.tolist(), sims.tolist(), strict=True):
        by_record._edge("CROSS", f"#2:{s}", f"#2:{d}", {"sim": w})
    for written in (direct, by_record):
        written.records.close()
    lines = (tmp_path / "a" / "import.jsonl").read_text().splitlines()
    assert lines == (tmp_path / "b" / "import.jsonl").read_text().splitlines()
    assert [json.loads(line)["c"]["p"]["sim"] for line in lines] == sims.tolist()
