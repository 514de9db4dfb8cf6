"""Streaming a pool's graph into the store: each part written, in batches, as it is produced.

Order: environments and tasks (``UNWIND`` chunks); the store's ``WITHIN`` / ``CROSS`` edges
deleted in batches (observations, predictions and task nodes stay); within edges environment
by environment; the abstracts' embeddings (an Abstract node per distinct text the store does
not cache yet, so a known abstract is never embedded again); cross edges block by block.
Edges are ``CREATE``d, not ``MERGE``d, since their relation was just emptied.

Memory: edge rows are held one batch at a time; the graph returned is kept as index arrays
(24 bytes an edge), and equals :func:`~envsched_gnn.graph_store.builder.build` of the same
pool and cache, edge for edge and in the same order.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import numpy as np

from envsched_gnn.envs.pool import Pool
from envsched_gnn.graph.task_graph import RELATIONS, RelationEdges, TaskGraph
from envsched_gnn.graph_store.builder import BuiltGraph, EdgeRow, GraphBuild, GraphConfig
from envsched_gnn.graph_store.connection import CHUNK
from envsched_gnn.graph_store.embeddings import Embedder
from envsched_gnn.graph_store.store import GraphStore


class _EdgeSink:
    """Buffers edge rows per relation, writes full batches, keeps the edges as index arrays."""

    def __init__(self, store: GraphStore, ids: list[str], chunk: int, clock: dict) -> None:
        self.store, self.chunk, self.clock = store, chunk, clock
        self.index = {task_id: i for i, task_id in enumerate(ids)}
        self.pending: dict[str, list[tuple[str, str, float]]] = {r: [] for r in RELATIONS}
        self.kept: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {
            r: [] for r in RELATIONS
        }

    def add(self, rows: Iterable[EdgeRow]) -> None:
        rows = list(rows)
        for relation in RELATIONS:
            part = [(s, d, w) for s, d, r, w in rows if r == relation]
            if not part:
                continue
            self.kept[relation].append(
                (
                    np.fromiter((self.index[s] for s, _, _ in part), np.int64, len(part)),
                    np.fromiter((self.index[d] for _, d, _ in part), np.int64, len(part)),
                    np.fromiter((w for _, _, w in part), np.float64, len(part)),
                )
            )
            self.pending[relation] += part
            if len(self.pending[relation]) >= self.chunk:
                self.flush(relation)

    def flush(self, relation: str) -> None:
        with _timed(self.clock, "store_write"):
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


def _drain(parts: Iterator[list[EdgeRow]], sink: _EdgeSink, clock: dict, phase: str) -> None:
    """Write every part of one relation, timing the production as ``phase``."""
    while True:
        with _timed(clock, phase):
            part = next(parts, None)
        if part is None:
            break
        sink.add(part)
    for relation in RELATIONS:
        if sink.pending[relation]:
            sink.flush(relation)


def stream_build(
    store: GraphStore,
    pool: Pool,
    config: GraphConfig | None = None,
    *,
    embedder: Embedder | None = None,
    chunk: int = CHUNK,
    phases: dict[str, float] | None = None,
) -> BuiltGraph:
    """Build the graph of ``pool`` into ``store`` part by part; returns what was built.

    ``phases``, when given, receives the seconds of each phase: ``store_write`` (every
    write), ``within``, ``embed`` and ``cross`` (computing only).
    """
    started = time.perf_counter()
    clock = phases if phases is not None else {}
    with _timed(clock, "store_write"):
        cache = store.read_abstracts()
    steps = GraphBuild(pool, config, embedder=embedder, cache=cache)
    with _timed(clock, "store_write"):
        build = store.begin_graph_build()  # an interrupted build is never read as a graph
        store.write_environments(pool.envs.values())
        store.write_tasks(steps.tasks)
        for relation in RELATIONS:
            store.delete_edges(relation)
    sink = _EdgeSink(store, steps.ids, chunk, clock)
    _drain(steps.within(), sink, clock, "within")
    with _timed(clock, "embed"):
        texts, vectors = steps.embed()
    new = {t: v for t, v in zip(texts, vectors, strict=True) if t not in cache}
    with _timed(clock, "store_write"):
        store.write_abstracts(new)
        store.write_task_abstracts(dict(zip(steps.ids, texts, strict=True)))
    _drain(steps.cross(vectors), sink, clock, "cross")
    graph = TaskGraph(steps.ids, steps.envs, sink.edges())
    with _timed(clock, "store_write"):
        store.complete_graph_build(build, graph)
    return BuiltGraph(
        graph,
        dict(zip(steps.ids, texts, strict=True)),
        dict(zip(steps.ids, vectors, strict=True)),
        time.perf_counter() - started,
    )
