"""Streaming a pool's graph into the store: each part written as it is produced.

Environments, then per environment its tasks and within edges, then the abstracts (only
those not cached are embedded), then cross edges block by block; either batched ``UNWIND``
writes (old edges deleted first, new ones ``CREATE``d) or, for a first build into an empty
managed ArcadeDB, one bulk import file. The graph is marked complete only at the end and
equals :func:`~envsched_gnn.graph_build.builder.build` edge for edge.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from envsched_gnn.envs.pool import PoolSource
from envsched_gnn.graph.task_graph import RELATIONS, RelationEdges, TaskGraph
from envsched_gnn.graph_build.builder import Abstracts, BuiltGraph, GraphBuild, GraphConfig
from envsched_gnn.graph_build.embeddings import Embedder
from envsched_gnn.graph_store.arcadedb import HEAP_VARIABLE
from envsched_gnn.graph_store.arcadedb_import import ArcadeImportFile
from envsched_gnn.graph_store.errors import StoreError
from envsched_gnn.graph_store.store import GraphStore
from envsched_gnn.graph_store.transactions import CHUNK

IMPORT_FOLDER = "bulk-import"
"""Folder of the managed store's own folder where the bulk path writes its file."""


class _EdgeSink:
    """Keeps every relation's edges as index arrays and hands them to the writer: batches of
    ``chunk`` rows to the store, or straight into the bulk file."""

    def __init__(
        self, store: GraphStore, ids: list[str], chunk: int, bulk: ArcadeImportFile | None
    ) -> None:
        self.store, self.ids, self.chunk, self.bulk = store, ids, chunk, bulk
        self.pending: dict[str, list[tuple[str, str, float]]] = {r: [] for r in RELATIONS}
        self.kept: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {
            r: [] for r in RELATIONS
        }

    def add(self, relation: str, src: np.ndarray, dst: np.ndarray, sim: np.ndarray) -> None:
        self.kept[relation].append((src, dst, sim))
        if self.bulk is not None:
            self.bulk.relation(relation, src, dst, sim)
            return
        ids = self.ids
        self.pending[relation] += [
            (ids[s], ids[d], w)
            for s, d, w in zip(src.tolist(), dst.tolist(), sim.tolist(), strict=True)
        ]
        if len(self.pending[relation]) >= self.chunk:
            self.flush(relation)

    def flush(self, relation: str) -> None:
        if self.pending[relation]:
            self.store.create_edges(relation, self.pending[relation], chunk=self.chunk)
        self.pending[relation] = []

    def edges(self) -> dict[str, RelationEdges]:
        out = {}
        for relation, parts in self.kept.items():
            if parts:
                out[relation] = RelationEdges(
                    *(np.concatenate(c) for c in zip(*parts, strict=True))
                )
        return out


@contextmanager
def _timed(clock: dict, name: str):
    started = time.perf_counter()
    try:
        yield
    finally:
        clock[name] = clock.get(name, 0.0) + time.perf_counter() - started


def _timed_items(items: Iterator, clock: dict, phase: str) -> Iterator:
    """The items of ``items``, the time spent producing them counted as ``phase``."""
    while True:
        with _timed(clock, phase):
            item = next(items, None)
        if item is None:
            return
        yield item


def bulk_file(store: GraphStore, config: GraphConfig) -> ArcadeImportFile | None:
    """The bulk file of a first build, when ``config.bulk`` and the store is a managed ArcadeDB
    holding no environment, task or abstract; else None (the batched path)."""
    if not config.bulk or store.server is None:
        return None
    if any(store.count_nodes(label) for label in ("Task", "Environment", "Abstract")):
        return None
    return ArcadeImportFile(store.server.folder / IMPORT_FOLDER)


def stream_build(
    store: GraphStore,
    pool: PoolSource,
    config: GraphConfig | None = None,
    *,
    embedder: Embedder | None = None,
    chunk: int = CHUNK,
    phases: dict[str, float] | None = None,
) -> BuiltGraph:
    """Build the graph of ``pool`` into ``store`` part by part; returns what was built.
    ``phases``, when given, receives the seconds of ``store_write``, ``within``, ``embed`` and
    ``cross``.
    """
    started = time.perf_counter()
    clock = phases if phases is not None else {}
    with _timed(clock, "store_write"):
        cache = store.read_abstracts()
    steps = GraphBuild(pool, config, embedder=embedder, cache=cache)
    with _timed(clock, "store_write"):
        bulk = bulk_file(store, steps.config)
        build = store.begin_graph_build()  # an interrupted build is never read as a graph
    try:
        graph, abstracts = _write_parts(store, steps, bulk, cache, chunk, clock)
        if bulk is not None and not _imported(store, bulk, clock):
            # a bulk build starts from a store with no task (so no observation): nothing is lost
            with _timed(clock, "store_write"):
                store.clear()
                build = store.begin_graph_build()
                _write_built(store, steps, graph, abstracts, chunk)
        with _timed(clock, "store_write"):
            store.complete_graph_build(
                build, graph, (abstracts.texts, abstracts.codes, abstracts.vectors)
            )
    except BaseException:
        if bulk is not None:
            bulk.discard()
        raise
    return BuiltGraph(graph, abstracts, time.perf_counter() - started)


def _imported(store: GraphStore, bulk: ArcadeImportFile, clock: dict) -> bool:
    """Import the bulk file; False (with a warning) when the server ran out of heap, which
    leaves a partial import behind for the caller to clear and write batched."""
    with _timed(clock, "store_write"):
        try:
            bulk.load(store.server)
        except StoreError as error:
            if not any(sign in str(error) for sign in ("OutOfMemoryError", "Java heap space")):
                raise
            warnings.warn(
                f"the bulk import ran out of the store server's Java heap "
                f"(-Xmx{store.server.heap}); writing the graph in batches instead (slower). "
                f"Set {HEAP_VARIABLE} (e.g. 8g) for the fast path.",
                RuntimeWarning,
                stacklevel=3,
            )
            return False
    return True


def _write_abstracts(store: GraphStore, ids: list[str], abstracts: Abstracts, new: dict) -> None:
    """The Abstract nodes of the ``new`` texts (text -> embedding) and every task's abstract."""
    store.write_abstracts(new)
    node_texts = [abstracts.texts[c] for c in abstracts.codes.tolist()]
    store.write_task_abstracts(dict(zip(ids, node_texts, strict=True)))


def _write_built(
    store: GraphStore, steps: GraphBuild, graph: TaskGraph, abstracts: Abstracts, chunk: int
) -> None:
    """A graph already built, written in batched transactions into an empty store: what the
    bulk import would have written, without computing any of it again."""
    pool, ids = steps.pool, steps.ids
    store.write_environments(pool.envs.values())
    for env_id in steps.env_ids:
        store.write_tasks(pool.tasks_of(env_id))
    _write_abstracts(
        store, ids, abstracts, dict(zip(abstracts.texts, abstracts.vectors, strict=True))
    )
    sink = _EdgeSink(store, ids, chunk, None)
    for relation, edges in graph.edges.items():
        for start in range(0, len(edges), chunk):
            part = slice(start, start + chunk)
            sink.add(relation, edges.src[part], edges.dst[part], edges.sim[part])
        sink.flush(relation)


def _write_parts(store, steps: GraphBuild, bulk, cache, chunk: int, clock: dict):
    """Every record of the build, written (or added to the bulk file) as produced."""
    pool = steps.pool
    with _timed(clock, "store_write"):
        if bulk is not None:
            bulk.environments(pool.envs.values())
        else:
            store.write_environments(pool.envs.values())
            for relation in RELATIONS:
                store.delete_edges(relation)
    sink = _EdgeSink(store, steps.ids, chunk, bulk)
    texts = []
    for part in _timed_items(steps.parts(), clock, "within"):
        with _timed(clock, "store_write"):
            if bulk is not None:
                bulk.tasks(part.tasks, part.nodes, part.texts)
            else:
                store.write_tasks(part.tasks)
            sink.add("within", part.src, part.dst, part.sim)
        texts.append((part.nodes, part.texts))
    with _timed(clock, "store_write"):
        sink.flush("within")
    with _timed(clock, "embed"):
        abstracts = steps.embed(texts)
    new = {t: v for t, v in zip(abstracts.texts, abstracts.vectors, strict=True) if t not in cache}
    with _timed(clock, "store_write"):
        if bulk is not None:
            bulk.abstracts(new)
        else:
            _write_abstracts(store, steps.ids, abstracts, new)
    for dst, src, sim in _timed_items(steps.cross(abstracts), clock, "cross"):
        with _timed(clock, "store_write"):
            sink.add("cross", src, dst, sim)
    with _timed(clock, "store_write"):
        sink.flush("cross")
    return TaskGraph(steps.ids, steps.envs, sink.edges()), abstracts
