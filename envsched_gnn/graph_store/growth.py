"""Incremental growth: add an environment to a built graph, equal to a full rebuild.

Adding environment E with tasks T_E to a graph over tasks T changes exactly:

* the new nodes T_E and their within edges (TF-IDF is fitted per environment, so no
  other environment's within edges move);
* the cross edges into each new task: its top ``k_cross`` over all of T (and no task of E);
* the cross edges into each old task i: its new top ``k_cross`` is the top of
  (its current cross in-neighbours) U T_E, because any task that was not among i's
  top before still ranks below all of them (the ranking, by similarity and then by the
  pair key of :func:`~envsched_gnn.graph_store.neighbours.pair_keys`, depends on the pair
  only). Displaced edges are deleted.

What holds above ``GraphConfig.ann_threshold`` (where a build uses the approximate kNN of
:mod:`~envsched_gnn.graph_store.ann`): growth does not query an ANN index; the new tasks'
cross edges are the exact top over all tasks, and each old task's new top is the exact top
of its current (possibly approximate) in-neighbours U T_E. So grown == rebuilt exactly below
the threshold; above it, both equal the exact graph wherever the ANN found each target's
exact neighbours (recall 1), and otherwise a grown target keeps every neighbour its
approximate list had unless a newcomer beats it.

Old embeddings come from the cache (the store's Abstract nodes), so only T_E's abstracts
that the store does not know yet are embedded.
Observations and predictions are never touched. In a store, a build or a growth marks the
graph complete only once all of it is written (``GraphStore.begin_graph_build``), so an
interrupted one cannot be read as a valid graph.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from envsched_gnn.envs.pool import Pool, Task
from envsched_gnn.graph.task_graph import TaskGraph
from envsched_gnn.graph_store.builder import BuiltGraph, GraphConfig, embed_tasks, within_edges
from envsched_gnn.graph_store.cross import EdgeRow, cross_edges
from envsched_gnn.graph_store.embeddings import Embedder, exact_cosines, fixed_point
from envsched_gnn.graph_store.neighbours import pair_keys, task_hashes
from envsched_gnn.graph_store.store import GraphStore
from envsched_gnn.graph_store.stream import stream_build


@dataclass
class Growth:
    """What adding one environment changes."""

    tasks: list[Task]
    abstracts: dict[str, str]
    embeddings: dict[str, np.ndarray]
    added: list[EdgeRow]
    removed_cross: list[tuple[str, str]]
    graph: TaskGraph


def plan_growth(
    graph: TaskGraph,
    old_embeddings: Mapping[str, np.ndarray],
    pool: Pool,
    env_id: str,
    config: GraphConfig,
    embedder: Embedder,
    cache: Mapping[str, np.ndarray] | None = None,
) -> Growth:
    """The changes that add ``pool``'s environment ``env_id`` to ``graph`` (nothing is written)."""
    if env_id not in pool.envs:
        raise ValueError(f"environment {env_id!r} is not defined in the pool")
    if env_id in set(graph.env_ids):
        raise ValueError(f"environment {env_id!r} is already in the graph; rebuild to change it")
    new_tasks = sorted(pool.tasks_of(env_id), key=lambda t: t.task_id)
    if not new_tasks:
        raise ValueError(f"environment {env_id!r} has no tasks in the pool")
    clash = [t.task_id for t in new_tasks if t.task_id in graph.index]
    if clash:
        raise ValueError(f"task id(s) {clash[:10]} of {env_id!r} are already in the graph")
    missing = [t for t in graph.task_ids if t not in old_embeddings]
    if missing:
        raise ValueError(f"no cached embedding for task(s) {missing[:10]}; rebuild the graph")

    texts, vectors = embed_tasks(pool, new_tasks, embedder, cache, config.llm_extractor)
    added: list[EdgeRow] = list(within_edges(new_tasks, config.k_within))

    new_ids = [t.task_id for t in new_tasks]
    embeddings = {**old_embeddings, **dict(zip(new_ids, vectors, strict=True))}
    ids = sorted([*graph.task_ids, *new_ids])
    env_of = {
        **dict(zip(graph.task_ids, graph.env_ids, strict=True)),
        **dict.fromkeys(new_ids, env_id),
    }
    envs = [env_of[t] for t in ids]
    q = fixed_point(np.stack([embeddings[t] for t in ids]))
    position = {t: i for i, t in enumerate(ids)}
    added += cross_edges(
        ids, envs, q, [position[t] for t in new_ids], config.k_cross, block=config.block
    )

    removed, displaced = _displaced_cross(graph, embeddings, new_ids, config)
    added += displaced

    kept = [
        row for row in graph.edge_rows() if row[2] != "cross" or (row[0], row[1]) not in removed
    ]
    grown = TaskGraph.from_edge_rows(list(zip(ids, envs, strict=True)), [*kept, *added])
    return Growth(
        new_tasks,
        dict(zip(new_ids, texts, strict=True)),
        dict(zip(new_ids, vectors, strict=True)),
        added,
        sorted(removed),
        grown,
    )


def _displaced_cross(
    graph: TaskGraph,
    embeddings: Mapping[str, np.ndarray],
    new_ids: Sequence[str],
    config: GraphConfig,
) -> tuple[set[tuple[str, str]], list[EdgeRow]]:
    """Old targets' cross edges displaced by newcomers, and the newcomer edges replacing them."""
    current: dict[str, list[tuple[str, float]]] = {t: [] for t in graph.task_ids}
    for src, dst, relation, sim in graph.edge_rows():
        if relation == "cross":
            current[dst].append((src, sim))
    newcomers = set(new_ids)
    q_new = fixed_point(np.stack([embeddings[t] for t in new_ids]))
    hash_of = dict(zip(graph.task_ids, task_hashes(graph.task_ids).tolist(), strict=True))
    hash_of.update(zip(new_ids, task_hashes(new_ids).tolist(), strict=True))
    removed: set[tuple[str, str]] = set()
    added: list[EdgeRow] = []
    for start in range(0, graph.num_tasks, config.block):
        targets = graph.task_ids[start : start + config.block]
        q_old = fixed_point(np.stack([embeddings[t] for t in targets]))
        sims = np.minimum(exact_cosines(q_old, q_new), 1.0)
        for target, row in zip(targets, sims.tolist(), strict=True):
            candidates = current[target] + [
                (n, s) for n, s in zip(new_ids, row, strict=True) if s > 0
            ]
            keys = pair_keys(
                np.uint64(hash_of[target]),
                np.array([hash_of[n] for n, _ in candidates], np.uint64),
            ).tolist()
            ranked = sorted(zip(candidates, keys, strict=True), key=lambda c: (-c[0][1], c[1]))
            best = [c for c, _ in ranked[: config.k_cross]]
            chosen = {n for n, _ in best}
            removed.update((n, target) for n, _ in current[target] if n not in chosen)
            added.extend((n, target, "cross", s) for n, s in best if n in newcomers)
    return removed, added


def build_into_store(
    store: GraphStore, pool: Pool, config: GraphConfig | None = None, *, embedder=None
) -> BuiltGraph:
    """Build the graph of ``pool`` into ``store``, streamed (:func:`~.stream.stream_build`):
    pool, abstracts' embeddings and edges; abstracts already cached in the store are reused."""
    return stream_build(store, pool, config, embedder=embedder)


def add_environment(
    target: GraphStore | TaskGraph,
    pool: Pool,
    env_id: str,
    config: GraphConfig | None = None,
    *,
    embedder: Embedder | None = None,
) -> TaskGraph:
    """Add environment ``env_id`` of ``pool`` to a store or an in-memory graph; return the graph.

    A store supplies the old tasks' embeddings from its cache and receives the changes; an
    in-memory graph's old tasks must be in ``pool`` (they are embedded again).
    """
    config = config or GraphConfig()
    embedder = embedder or Embedder(config.embedding)
    if isinstance(target, TaskGraph):
        known = {task.task_id for task in pool.tasks}
        unknown = [t for t in target.task_ids if t not in known]
        if unknown:
            raise ValueError(f"task(s) {unknown[:10]} of the graph are not in the pool")
        old = [pool.task(t) for t in target.task_ids]
        _, vectors = embed_tasks(pool, old, embedder, llm_extractor=config.llm_extractor)
        old_embeddings = dict(zip(target.task_ids, vectors, strict=True))
        return plan_growth(target, old_embeddings, pool, env_id, config, embedder).graph

    cached = target.read_embeddings()
    graph = target.read_graph(empty_ok=True)
    old_embeddings = {t: vector for t, (_, vector) in cached.items()}
    cache = target.read_abstracts()
    growth = plan_growth(graph, old_embeddings, pool, env_id, config, embedder, cache)
    graph_build = target.begin_graph_build()
    target.write_environments([pool.envs[env_id]])
    target.write_tasks(growth.tasks)
    target.write_embeddings(
        {t: (growth.abstracts[t], growth.embeddings[t]) for t in growth.abstracts}
    )
    within = [(s, d, w) for s, d, r, w in growth.added if r == "within"]
    cross = [(s, d, w) for s, d, r, w in growth.added if r == "cross"]
    target.apply_edge_changes("within", within, [])
    target.apply_edge_changes("cross", cross, growth.removed_cross)
    target.complete_graph_build(graph_build, growth.graph)
    return growth.graph


def add_pool(
    store: GraphStore,
    pool: Pool,
    config: GraphConfig | None = None,
    *,
    embedder: Embedder | None = None,
) -> list[str]:
    """Add every environment of ``pool`` that the store lacks, one by one; returns their ids."""
    config = config or GraphConfig()
    embedder = embedder or Embedder(config.embedding)
    present = set(store.read_graph(empty_ok=True).env_ids)
    added = [
        env_id for env_id in sorted(pool.envs) if env_id not in present and pool.tasks_of(env_id)
    ]
    for env_id in added:
        add_environment(store, pool, env_id, config, embedder=embedder)
    return added
