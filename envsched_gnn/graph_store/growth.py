"""Incremental growth: add an environment to a built graph, equal to a full rebuild.

Adding environment E with tasks T_E adds T_E with their within edges and their top
``k_cross`` cross edges over all tasks, and re-ranks each old task's cross in-neighbours
U T_E (a task outside its top before still ranks below it: the ranking depends on the pair
only); displaced edges are deleted. Exact below ``ann_threshold`` (docs/design.md §3, §9.2).
The old targets are re-ranked in blocks on index arrays, so growing 1M tasks takes seconds.
A growth stopped half-way is finished by the next one (:func:`finish_interrupted_growth`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from envsched_gnn.envs.pool import Pool, Task
from envsched_gnn.graph.task_graph import RelationEdges, TaskGraph
from envsched_gnn.graph_build.builder import (
    Abstracts,
    BuiltGraph,
    GraphConfig,
    embed_tasks,
    within_arrays,
)
from envsched_gnn.graph_build.cross import cross_neighbours, distinct_groups
from envsched_gnn.graph_build.embeddings import Embedder, exact_cosines, fixed_point
from envsched_gnn.graph_build.neighbours import rank_candidates, task_hashes
from envsched_gnn.graph_store import queries
from envsched_gnn.graph_store.errors import StoreError
from envsched_gnn.graph_store.snapshot import read_snapshot_abstracts
from envsched_gnn.graph_store.store import GraphStore
from envsched_gnn.graph_store.stream import stream_build

RERANK_BLOCK = 65_536
"""Old targets re-ranked at a time (their candidate table is (block, k_cross + |T_E|))."""


@dataclass
class Growth:
    """What adding one environment changes, as task ids: new tasks, abstracts, embeddings, edges
    added and cross edges removed; the grown graph and every node's abstract.
    """

    tasks: list[Task]
    abstracts: dict[str, str]
    embeddings: dict[str, np.ndarray]
    added: dict[str, list[tuple[str, str, float]]]
    removed_cross: list[tuple[str, str]]
    graph: TaskGraph
    node_abstracts: Abstracts


def plan_growth(
    graph: TaskGraph,
    old: Abstracts,
    pool: Pool,
    env_id: str,
    config: GraphConfig,
    embedder: Embedder,
    cache=None,
) -> Growth:
    """The changes that add ``pool``'s environment ``env_id`` to ``graph``, nothing written
    (``old``: every node's abstract code; ``cache``: abstract text -> embedding).
    """
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
    if old.codes.shape != (graph.num_tasks,) or (old.codes < 0).any():
        raise ValueError("no cached embedding for some task(s) of the graph; rebuild the graph")

    texts, vectors = embed_tasks(pool, new_tasks, embedder, cache, config.llm_extractor)
    new_ids = [t.task_id for t in new_tasks]
    ids = sorted([*graph.task_ids, *new_ids])
    position = {t: i for i, t in enumerate(ids)}
    old_at = np.fromiter((position[t] for t in graph.task_ids), np.int64, graph.num_tasks)
    new_at = np.fromiter((position[t] for t in new_ids), np.int64, len(new_ids))
    envs = [""] * len(ids)
    for t, e in zip(graph.task_ids, graph.env_ids, strict=True):
        envs[position[t]] = e
    for t in new_ids:
        envs[position[t]] = env_id
    abstracts = _grown_abstracts(old, old_at, new_at, texts, vectors, len(ids))

    src, dst, sim = within_arrays(new_tasks, config.k_within)
    added = {"within": (new_at[src], new_at[dst], sim)}
    q, group = distinct_groups(fixed_point(abstracts.vectors), abstracts.codes)
    env_codes = np.unique(np.asarray(envs), return_inverse=True)[1].reshape(-1)
    hashes = task_hashes(ids)
    dst, src, sim = cross_neighbours(
        q, env_codes, hashes, new_at, config.k_cross, group=group, block=config.block
    )
    cross = graph.edges["cross"]
    old_cross = (old_at[cross.src], old_at[cross.dst], cross.sim)
    kept, displaced = _rerank_old_targets(
        old_cross, old_at, new_at, q, group, hashes, config.k_cross
    )
    added["cross"] = tuple(np.concatenate(p) for p in zip((src, dst, sim), displaced, strict=True))

    within = graph.edges["within"]
    edges = {
        "within": _edges((old_at[within.src], old_at[within.dst], within.sim), added["within"]),
        "cross": _edges(tuple(part[kept] for part in old_cross), added["cross"]),
    }
    removed = sorted(
        (ids[s], ids[d])
        for s, d in zip(old_cross[0][~kept].tolist(), old_cross[1][~kept].tolist(), strict=True)
    )
    return Growth(
        new_tasks,
        dict(zip(new_ids, texts, strict=True)),
        dict(zip(new_ids, vectors, strict=True)),
        {r: _id_rows(ids, *arrays) for r, arrays in added.items()},
        removed,
        TaskGraph(ids, envs, edges),
        abstracts,
    )


def _edges(*parts: tuple[np.ndarray, np.ndarray, np.ndarray]) -> RelationEdges:
    return RelationEdges(*(np.concatenate(c) for c in zip(*parts, strict=True)))


def _id_rows(ids, src: np.ndarray, dst: np.ndarray, sim: np.ndarray) -> list:
    return [
        (ids[s], ids[d], w)
        for s, d, w in zip(src.tolist(), dst.tolist(), sim.tolist(), strict=True)
    ]


def _grown_abstracts(
    old: Abstracts, old_at: np.ndarray, new_at: np.ndarray, texts, vectors, n: int
) -> Abstracts:
    """Every node's abstract in the grown node order: the old texts, then the new ones."""
    known = {text: code for code, text in enumerate(old.texts)}
    all_texts, all_vectors = list(old.texts), [old.vectors]
    codes = np.full(n, -1, np.int64)
    codes[old_at] = old.codes
    new_codes = []
    for text, vector in zip(texts, vectors, strict=True):
        if text not in known:
            known[text] = len(all_texts)
            all_texts.append(text)
            all_vectors.append(vector[None, :])
        new_codes.append(known[text])
    codes[new_at] = new_codes
    return Abstracts(all_texts, codes, np.concatenate(all_vectors).astype(np.float32))


def _rerank_old_targets(
    old_cross: tuple[np.ndarray, np.ndarray, np.ndarray],
    old_at: np.ndarray,
    new_at: np.ndarray,
    q: np.ndarray,
    group: np.ndarray,
    hashes: np.ndarray,
    k: int,
) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Each old target's new top ``k`` of (its cross in-neighbours) U newcomers, by
    :func:`~envsched_gnn.graph_build.neighbours.rank_candidates`: which old cross edges stay
    (bool, ``old_cross`` order) and the newcomer edges ``(src, dst, sim)`` that enter, in the
    grown graph's indices. Only targets a newcomer can reach (its best newcomer at least as
    similar as the weakest in-neighbour, or fewer than ``k``) are re-ranked.
    """
    src, dst, sim = old_cross
    n = group.shape[0]
    in_degree = np.bincount(dst, minlength=n)
    order = np.argsort(dst, kind="stable")
    starts = np.zeros(n + 1, np.int64)
    np.cumsum(in_degree, out=starts[1:])
    weakest = np.full(n, np.inf)
    fed = in_degree > 0
    if fed.any():
        weakest[fed] = np.minimum.reduceat(sim[order], starts[:-1][fed])
    newcomer_groups = np.unique(group[new_at])
    best = np.minimum(exact_cosines(q, q[newcomer_groups]).max(axis=1), 1.0)[group]
    reachable = (best > 0) & ((in_degree < k) | (best >= weakest))
    targets = old_at[reachable[old_at]]  # old nodes in their grown position
    counts = in_degree[targets]
    width = max(int(counts.max()) if counts.size else 0, 0) + new_at.shape[0]
    kept = ~reachable[dst]  # edges into a target no newcomer reaches all stay
    entered: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    q_new = q[group[new_at]]
    for first in range(0, targets.shape[0], RERANK_BLOCK):
        block = targets[first : first + RERANK_BLOCK]
        rows = block.shape[0]
        cand_sim = np.full((rows, width), -np.inf)
        cand_src = np.full((rows, width), -1, np.int64)
        cand_edge = np.full((rows, width), -1, np.int64)  # position in old_cross, -1: newcomer
        have = counts[first : first + RERANK_BLOCK]
        # the current in-neighbours of each target, left-aligned
        base = np.repeat(starts[block], have)
        within_row = np.arange(base.shape[0]) - np.repeat(np.cumsum(have) - have, have)
        edge = order[base + within_row]
        row_of = np.repeat(np.arange(rows), have)
        cand_sim[row_of, within_row] = sim[edge]
        cand_src[row_of, within_row] = src[edge]
        cand_edge[row_of, within_row] = edge
        new_sims = np.minimum(exact_cosines(q[group[block]], q_new), 1.0)
        columns = width - new_at.shape[0] + np.arange(new_at.shape[0])
        cand_sim[:, columns] = np.where(new_sims > 0, new_sims, -np.inf)
        cand_src[:, columns] = new_at[None, :]
        sources = hashes[np.maximum(cand_src, 0)]
        ranked = rank_candidates(cand_sim, hashes[block][:, None], sources, k)
        chosen_sim = np.take_along_axis(cand_sim, ranked, axis=1)
        chosen_edge = np.take_along_axis(cand_edge, ranked, axis=1)
        chosen_src = np.take_along_axis(cand_src, ranked, axis=1)
        valid = chosen_sim > -np.inf
        kept[chosen_edge[valid & (chosen_edge >= 0)]] = True
        enter = valid & (chosen_edge < 0)
        entered.append(
            (
                chosen_src[enter],
                np.broadcast_to(block[:, None], enter.shape)[enter],
                chosen_sim[enter],
            )
        )
    if not entered:
        return kept, (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))
    return kept, tuple(np.concatenate(c) for c in zip(*entered, strict=True))


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
    """Add environment ``env_id`` of ``pool`` to a store (old embeddings from its snapshot or
    cache; a growth of it that was interrupted finished first) or an in-memory graph (old tasks
    re-embedded from ``pool``); return the graph.
    """
    config = config or GraphConfig()
    embedder = embedder or Embedder(config.embedding)
    if isinstance(target, TaskGraph):
        known = {task.task_id for task in pool.tasks}
        unknown = [t for t in target.task_ids if t not in known]
        if unknown:
            raise ValueError(f"task(s) {unknown[:10]} of the graph are not in the pool")
        old = [pool.task(t) for t in target.task_ids]
        texts, vectors = embed_tasks(pool, old, embedder, llm_extractor=config.llm_extractor)
        old_abstracts = _abstracts_of_nodes(
            target.task_ids,
            dict(zip(target.task_ids, zip(texts, vectors, strict=True), strict=True)),
        )
        return plan_growth(target, old_abstracts, pool, env_id, config, embedder).graph

    if finish_interrupted_growth(target, pool, config, embedder) == env_id:
        return target.read_graph()
    return _grow(target, target.read_graph(empty_ok=True), pool, env_id, config, embedder)


def finish_interrupted_growth(
    store: GraphStore, pool: Pool, config: GraphConfig, embedder: Embedder
) -> str | None:
    """Finish the growth of ``store`` that began and never completed (its process or server
    killed half-way): the same growth again, from the graph it started from
    (:meth:`~.store.GraphStore.read_graph_before_growth`). Returns its environment, or None when
    no growth was interrupted.
    """
    env_id = store.interrupted_growth()
    if env_id is None:
        return None
    if env_id not in pool.envs:
        raise StoreError(
            f"adding environment {env_id!r} to the store {store.where} was interrupted, and the "
            f"pool does not define it; rerun with a pool that holds {env_id!r}"
        )
    _grow(store, store.read_graph_before_growth(), pool, env_id, config, embedder)
    return env_id


def _grow(
    store: GraphStore,
    graph: TaskGraph,
    pool: Pool,
    env_id: str,
    config: GraphConfig,
    embedder: Embedder,
) -> TaskGraph:
    """Add ``env_id`` to the stored ``graph``: every write idempotent, marked complete last."""
    old_abstracts, cache = stored_abstracts(store, graph)
    growth = plan_growth(graph, old_abstracts, pool, env_id, config, embedder, cache)
    graph_build = store.begin_graph_build(growing=env_id)
    store.write_environments([pool.envs[env_id]])
    store.write_tasks(growth.tasks)
    store.write_embeddings(
        {t: (growth.abstracts[t], growth.embeddings[t]) for t in growth.abstracts}
    )
    store.apply_edge_changes("within", growth.added["within"], [])
    store.apply_edge_changes("cross", growth.added["cross"], growth.removed_cross)
    abstracts = growth.node_abstracts
    store.complete_graph_build(
        graph_build, growth.graph, (abstracts.texts, abstracts.codes, abstracts.vectors)
    )
    return growth.graph


def stored_abstracts(store: GraphStore, graph: TaskGraph) -> tuple[Abstracts, dict]:
    """Every node's abstract and the embedding cache: from the snapshot of the stored build
    when it has them (a 1M-task graph's are a second away), else from the store."""
    marker = store.query(queries.READ_BUILD, id=queries.GRAPH_BUILD)
    build = marker[0]["props"].get("build") if marker else None
    snapshot = store.snapshot_path
    found = read_snapshot_abstracts(snapshot, build) if snapshot and build else None
    if found is not None and found[1].shape == (graph.num_tasks,):
        texts, codes, vectors = found
        return Abstracts(texts, codes, vectors), dict(zip(texts, vectors, strict=True))
    return _abstracts_of_nodes(graph.task_ids, store.read_embeddings()), store.read_abstracts()


def _abstracts_of_nodes(task_ids, embeddings) -> Abstracts:
    """``task_id -> (text, vector)`` as :class:`Abstracts` in ``task_ids`` order (code -1 for
    a task without one)."""
    texts: dict[str, int] = {}
    vectors = []
    codes = np.full(len(task_ids), -1, np.int64)
    for i, task_id in enumerate(task_ids):
        if task_id in embeddings:
            text, vector = embeddings[task_id]
            if text not in texts:
                texts[text] = len(texts)
                vectors.append(np.asarray(vector, np.float32))
            codes[i] = texts[text]
    stacked = np.stack(vectors) if vectors else np.zeros((0, 384), np.float32)
    return Abstracts(list(texts), codes, stacked)


def add_pool(
    store: GraphStore,
    pool: Pool,
    config: GraphConfig | None = None,
    *,
    embedder: Embedder | None = None,
) -> list[str]:
    """Add every environment of ``pool`` that the store lacks, one by one, after finishing an
    interrupted growth; returns their ids (the finished one first)."""
    config = config or GraphConfig()
    embedder = embedder or Embedder(config.embedding)
    finished = finish_interrupted_growth(store, pool, config, embedder)
    present = set(store.read_graph(empty_ok=True).env_ids)
    added = [
        env_id for env_id in sorted(pool.envs) if env_id not in present and pool.tasks_of(env_id)
    ]
    for env_id in added:
        add_environment(store, pool, env_id, config, embedder=embedder)
    return [finished, *added] if finished is not None else added
