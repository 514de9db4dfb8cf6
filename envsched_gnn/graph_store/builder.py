"""Building the dual-relation task graph from a pool (spec section 3).

For each target task i:

* within: the top ``k_within`` tasks j of i's own environment by
  ``sim_within(i, j) = (1/6) sum_v cos(x_v(i), x_v(j))`` (TF-IDF views fitted per
  environment, :mod:`views`);
* cross: the top ``k_cross`` tasks j of the other environments by
  ``sim_cross(i, j) = cos(e(a_i), e(a_j))``, the cosine of the sentence embeddings of
  their abstract operation descriptions (:mod:`embeddings`).

Each chosen neighbour gives a directed edge j -> i; similarities <= 0 are dropped and
the rest clipped into (0, 1]. Nodes are in task-id order. Within similarities are computed
per environment (never an N x N over all tasks); cross ones in row blocks of the exact
fixed-point cosines.

Ties in the ranking are broken by a hash of the pair (target i, candidate j):
see :mod:`~envsched_gnn.graph_store.neighbours`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from envsched_gnn.envs.abstract import LlmExtractor, abstract_of
from envsched_gnn.envs.pool import Pool, Task
from envsched_gnn.graph.task_graph import TaskGraph
from envsched_gnn.graph_store.ann import HnswConfig, approximate_cross
from envsched_gnn.graph_store.embeddings import (
    Embedder,
    EmbeddingConfig,
    embed_texts,
    exact_cosines,
    fixed_point,
)
from envsched_gnn.graph_store.neighbours import task_hashes, top_neighbours
from envsched_gnn.graph_store.views import within_similarity

EdgeRow = tuple[str, str, str, float]


@dataclass
class GraphConfig:
    """How the dual-relation graph is built."""

    k_within: int = 6
    """In-neighbours per task from its own environment (spec: k_in = 6)."""
    k_cross: int = 12
    """In-neighbours per task from other environments (spec: k_cross = 12)."""
    block: int = 1024
    """Rows of the cross-similarity matrix computed at a time."""
    within_workers: int = 1
    """Processes computing within edges, environments split among them (results in
    environment order, identical for any count; 1: in this process)."""
    show_progress: bool = True
    """Show progress bars on the long parts."""
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    """How abstracts are embedded."""
    ann_threshold: int = 50_000
    """Pools of at least this many tasks find cross neighbours with the approximate kNN of
    :mod:`~envsched_gnn.graph_store.ann` (HNSW candidates, exact re-rank); smaller ones
    with the exact row-block kNN."""
    hnsw: HnswConfig = field(default_factory=HnswConfig)
    """The HNSW index of the approximate kNN."""
    llm_extractor: LlmExtractor | None = None
    """Hook deriving a task's abstract (e.g. with an LLM) when the pool gives none; else the
    deterministic extractor of :mod:`envsched_gnn.envs.abstract` is used."""

    def __post_init__(self) -> None:
        for name in ("k_within", "k_cross", "block", "within_workers", "ann_threshold"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"GraphConfig.{name} must be a positive integer, got {value!r}")


@dataclass
class BuiltGraph:
    """A built graph with what it was built from: each task's abstract and its embedding."""

    graph: TaskGraph
    abstracts: dict[str, str]
    embeddings: dict[str, np.ndarray]
    seconds: float = 0.0


def _edge_rows(ids: Sequence[str], sims: np.ndarray, valid: np.ndarray, k: int, relation: str):
    """Edges neighbour -> target from
    :func:`~envsched_gnn.graph_store.neighbours.top_neighbours` of the rows of ``sims``."""
    hashes = task_hashes(ids)
    rows, cols = top_neighbours(sims, valid, k, hashes, hashes)
    return _rows(ids, rows, cols, np.minimum(sims[rows, cols], 1.0), relation)


def within_edges(tasks: Sequence[Task], k: int) -> list[EdgeRow]:
    """Within edges of ONE environment's tasks (TF-IDF fitted on them only)."""
    tasks = sorted(tasks, key=lambda t: t.task_id)
    ids = [t.task_id for t in tasks]
    sims = within_similarity(tasks)
    return _edge_rows(ids, sims, ~np.eye(len(ids), dtype=bool), k, "within")


def cross_neighbours(
    q: np.ndarray,
    env_codes: np.ndarray,
    hashes: np.ndarray,
    targets: Sequence[int],
    k: int,
    *,
    block: int = 1024,
    progress: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact cross in-neighbours of the ``targets`` (node indices) among all nodes of other
    environments: ``(dst, src, sim)`` grouped by target in the order given, best first.

    ``q``: fixed-point embeddings ``(N, 384)``; ``env_codes``: environment index per node;
    ``hashes``: :func:`~envsched_gnn.graph_store.neighbours.task_hashes` of the node ids.
    """
    from tqdm.auto import tqdm

    targets = np.asarray(targets, np.int64)
    dst, src, sim = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)], [np.zeros(0)]
    starts = range(0, len(targets), block)
    for start in tqdm(starts, desc="cross kNN", unit="block", disable=not progress):
        part = targets[start : start + block]
        sims = exact_cosines(q[part], q)
        valid = env_codes[part][:, None] != env_codes[None, :]
        found_rows, cols = top_neighbours(sims, valid, k, hashes[part], hashes)
        dst.append(part[found_rows])
        src.append(cols)
        sim.append(np.minimum(sims[found_rows, cols], 1.0))
    return np.concatenate(dst), np.concatenate(src), np.concatenate(sim)


def cross_edges(
    ids: Sequence[str],
    envs: Sequence[str],
    q: np.ndarray,
    targets: Sequence[int],
    k: int,
    *,
    block: int = 1024,
    progress: bool = False,
) -> list[EdgeRow]:
    """Exact cross edges into the ``targets`` (node indices) from all nodes of other environments.

    ``ids`` in task-id order, ``q`` their fixed-point embeddings ``(N, 384)``.
    """
    env_codes = np.unique(np.asarray(envs), return_inverse=True)[1]
    found = cross_neighbours(
        q, env_codes, task_hashes(ids), targets, k, block=block, progress=progress
    )
    return _rows(ids, *found, "cross")


def cross_blocks(
    ids: Sequence[str], envs: Sequence[str], q: np.ndarray, config: GraphConfig
) -> Iterator[list[EdgeRow]]:
    """Cross edges into every node, in node order, one list per block of ``config.block``
    targets: exact below ``config.ann_threshold`` nodes, else the approximate kNN of
    :mod:`~envsched_gnn.graph_store.ann` (and the exact one for the nodes it leaves)."""
    env_codes = np.unique(np.asarray(envs), return_inverse=True)[1]
    hashes = task_hashes(ids)
    k, block = config.k_cross, config.block
    if len(ids) < config.ann_threshold:
        from tqdm.auto import tqdm

        starts = range(0, len(ids), block)
        for start in tqdm(starts, desc="cross kNN", unit="block", disable=not config.show_progress):
            targets = range(start, min(start + block, len(ids)))
            yield _rows(ids, *cross_neighbours(q, env_codes, hashes, targets, k), "cross")
        return
    *approximate, left = approximate_cross(q, env_codes, hashes, k, config.hnsw)
    exact = cross_neighbours(q, env_codes, hashes, left, k, block=block)
    dst, src, sim = (np.concatenate(pair) for pair in zip(approximate, exact, strict=True))
    by_target = np.argsort(dst, kind="stable")
    dst, src, sim = dst[by_target], src[by_target], sim[by_target]
    for start in range(0, len(dst), block * k):
        part = slice(start, start + block * k)
        yield _rows(ids, dst[part], src[part], sim[part], "cross")


def _rows(
    ids: Sequence[str], dst: np.ndarray, src: np.ndarray, sim: np.ndarray, relation: str
) -> list[EdgeRow]:
    """Index arrays as ``(src id, dst id, relation, sim)`` rows."""
    return [
        (ids[s], ids[d], relation, w)
        for d, s, w in zip(dst.tolist(), src.tolist(), sim.tolist(), strict=True)
    ]


def abstracts_of(
    pool: Pool, tasks: Sequence[Task], llm_extractor: LlmExtractor | None = None
) -> list[str]:
    """Each task's abstract operation description: given, else from ``llm_extractor`` when
    set, else extracted deterministically (with the pool's replayed tool effects, if any)."""
    missing = sorted({t.env_id for t in tasks} - set(pool.envs))
    if missing:
        raise ValueError(f"tasks refer to environment(s) {missing} that the pool does not define")
    return [
        abstract_of(task, pool.envs[task.env_id], llm_extractor, pool.tool_effects.get(task.env_id))
        for task in tasks
    ]


def embed_tasks(
    pool: Pool,
    tasks: Sequence[Task],
    embedder: Embedder,
    cache: Mapping[str, np.ndarray] | None = None,
    llm_extractor: LlmExtractor | None = None,
) -> tuple[list[str], np.ndarray]:
    """Abstracts of ``tasks`` and their embeddings, re-using ``cache`` (abstract text -> vector)."""
    texts = abstracts_of(pool, tasks, llm_extractor)
    return texts, embed_texts(texts, embedder, cache)


class GraphBuild:
    """The steps of building the graph of a pool, run in order by :func:`build` (in memory) or
    by :func:`~envsched_gnn.graph_store.stream.stream_build` (written to a store as produced).

    Nodes are the pool's tasks in task-id order; ``cache`` maps abstract text -> embedding.
    """

    def __init__(
        self,
        pool: Pool,
        config: GraphConfig | None = None,
        *,
        embedder: Embedder | None = None,
        cache: Mapping[str, np.ndarray] | None = None,
    ) -> None:
        self.pool = pool
        self.config = config or GraphConfig()
        self.embedder = embedder or Embedder(self.config.embedding)
        self.cache = cache
        self.tasks = sorted(pool.tasks, key=lambda t: t.task_id)
        self.ids = [t.task_id for t in self.tasks]
        self.envs = [t.env_id for t in self.tasks]
        if len(set(self.ids)) != len(self.ids):
            raise ValueError("the pool has duplicate task ids")
        self.by_env: dict[str, list[Task]] = {}
        for task in self.tasks:
            self.by_env.setdefault(task.env_id, []).append(task)

    def within(self) -> Iterator[list[EdgeRow]]:
        """Within edges, one list per environment (environments in id order)."""
        from tqdm.auto import tqdm

        hide = not self.config.show_progress
        envs = [self.by_env[env_id] for env_id in sorted(self.by_env)]
        k, workers = self.config.k_within, min(self.config.within_workers, len(envs))
        bar = tqdm(total=len(envs), desc="within (TF-IDF)", unit="env", disable=hide)
        if workers <= 1:
            for tasks in envs:
                yield within_edges(tasks, k)
                bar.update()
            return
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        context = multiprocessing.get_context("spawn")  # no fork after torch's threads
        with ProcessPoolExecutor(workers, mp_context=context) as pool:
            for rows in pool.map(within_edges, envs, [k] * len(envs), chunksize=16):
                yield rows
                bar.update()

    def embed(self) -> tuple[list[str], np.ndarray]:
        """Every task's abstract and its embedding (each distinct abstract not cached, once)."""
        return embed_tasks(
            self.pool, self.tasks, self.embedder, self.cache, self.config.llm_extractor
        )

    def cross(self, vectors: np.ndarray) -> Iterator[list[EdgeRow]]:
        """Cross edges of the embeddings ``vectors`` (node order), one list per block."""
        return cross_blocks(self.ids, self.envs, fixed_point(vectors), self.config)

    def graph(self, rows: Iterable[EdgeRow]) -> TaskGraph:
        return TaskGraph.from_edge_rows(list(zip(self.ids, self.envs, strict=True)), rows)


def build(
    pool: Pool,
    config: GraphConfig | None = None,
    *,
    embedder: Embedder | None = None,
    cache: Mapping[str, np.ndarray] | None = None,
) -> BuiltGraph:
    """Build the graph of every task of ``pool``; ``cache`` maps abstract text -> embedding."""
    started = time.perf_counter()
    steps = GraphBuild(pool, config, embedder=embedder, cache=cache)
    rows = [row for part in steps.within() for row in part]
    texts, vectors = steps.embed()
    rows += [row for part in steps.cross(vectors) for row in part]
    return BuiltGraph(
        steps.graph(rows),
        dict(zip(steps.ids, texts, strict=True)),
        dict(zip(steps.ids, vectors, strict=True)),
        time.perf_counter() - started,
    )


def build_graph(
    pool: Pool, config: GraphConfig | None = None, *, embedder: Embedder | None = None
) -> TaskGraph:
    """The dual-relation graph of ``pool`` (spec section 3)."""
    return build(pool, config, embedder=embedder).graph


def graph_stats(graph: TaskGraph) -> dict[str, float]:
    """Counts and mean similarity per relation, for reports."""
    stats: dict[str, float] = {
        "tasks": graph.num_tasks,
        "environments": len(set(graph.env_ids)),
    }
    for relation, edges in graph.edges.items():
        stats[f"{relation}_edges"] = len(edges)
        stats[f"{relation}_mean_sim"] = float(edges.sim.mean()) if len(edges) else float("nan")
    return stats
