"""Building the dual-relation task graph from a pool (spec section 3): within edges
(:mod:`views`) and cross edges (:mod:`embeddings`, :mod:`.cross`), read one environment at a
time (:class:`GraphBuild`), each distinct abstract embedded once.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from envsched_gnn.envs.abstract import LlmExtractor, abstract_of
from envsched_gnn.envs.pool import Pool, PoolSource, Task
from envsched_gnn.graph.task_graph import TaskGraph
from envsched_gnn.graph_build.ann import HnswConfig
from envsched_gnn.graph_build.cross import EdgeRow, cross_blocks, distinct_groups, index_rows
from envsched_gnn.graph_build.embeddings import (
    Embedder,
    EmbeddingConfig,
    embed_texts,
    fixed_point,
)
from envsched_gnn.graph_build.neighbours import task_hashes, top_neighbours
from envsched_gnn.graph_build.parallel import check_ray_address, ordered_map
from envsched_gnn.graph_build.views import within_similarity
from envsched_gnn.validation import check_bounds


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
    """Processes computing within edges (identical for any count; 1: in this process)."""
    embed_workers: int = 1
    """Processes embedding the distinct abstracts (identical for any count; 1: in this process)."""
    ray: str | None = None
    """Run within TF-IDF and embedding as Ray tasks: 'local' or an address (ray://head:10001)."""
    bulk: bool = True
    """Write a first build into an empty managed ArcadeDB through its importer (IMPORT DATABASE)."""
    show_progress: bool = True
    """Show progress bars on the long parts."""
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    """How abstracts are embedded."""
    ann_threshold: int = 50_000
    """Pools of at least this many tasks use the approximate cross kNN (:mod:`.ann`)."""
    hnsw: HnswConfig = field(default_factory=HnswConfig)
    """The HNSW index of the approximate kNN."""
    llm_extractor: LlmExtractor | None = None
    """Hook deriving a task's abstract (an LLM, say) when the pool gives none."""

    def __post_init__(self) -> None:
        names = ("k_within", "k_cross", "block", "within_workers", "embed_workers", "ann_threshold")
        check_bounds(self, integers=names, at_least=dict.fromkeys(names, 1))
        check_ray_address(self.ray)


@dataclass
class Abstracts:
    """Every node's abstract, compactly: the distinct ``texts`` (T,), each node's text
    ``codes`` (N,) and the float32 embedding of each distinct text ``vectors`` (T, 384)."""

    texts: list[str]
    codes: np.ndarray
    vectors: np.ndarray


@dataclass
class BuiltGraph:
    """A built graph with what it was built from: each task's abstract and its embedding."""

    graph: TaskGraph
    node_abstracts: Abstracts
    seconds: float = 0.0

    @property
    def abstracts(self) -> dict[str, str]:
        """task id -> abstract text."""
        texts = self.node_abstracts.texts
        codes = self.node_abstracts.codes.tolist()
        return {t: texts[c] for t, c in zip(self.graph.task_ids, codes, strict=True)}

    @property
    def embeddings(self) -> dict[str, np.ndarray]:
        """task id -> float32 embedding."""
        vectors, codes = self.node_abstracts.vectors, self.node_abstracts.codes.tolist()
        return {t: vectors[c] for t, c in zip(self.graph.task_ids, codes, strict=True)}


def within_arrays(tasks: Sequence[Task], k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Within edges of ONE environment's tasks, given sorted by id (TF-IDF fitted on them
    only): ``(src, dst, sim)`` positions in ``tasks``, grouped by target, best first."""
    ids = [t.task_id for t in tasks]
    sims = within_similarity(tasks)
    hashes = task_hashes(ids)
    rows, cols = top_neighbours(sims, ~np.eye(len(ids), dtype=bool), k, hashes, hashes)
    return cols, rows, np.minimum(sims[rows, cols], 1.0)


def abstracts_of(
    pool: PoolSource, tasks: Sequence[Task], llm_extractor: LlmExtractor | None = None
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


@dataclass
class EnvironmentPart:
    """One environment's share of a build: its tasks (sorted by id), their node indices
    ``nodes``, its within edges ``(src, dst, sim)`` as node indices, and its tasks' abstracts."""

    env_id: str
    tasks: list[Task]
    nodes: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    sim: np.ndarray
    texts: list[str]


class GraphBuild:
    """The steps of building a pool's graph, run in order by :func:`build` (in memory) or
    :func:`~envsched_gnn.graph_store.stream.stream_build` (to a store): :meth:`parts` (per
    environment: tasks, within edges, abstracts), :meth:`embed`, :meth:`cross`. Nodes in task-id
    order; ``cache`` maps abstract text -> embedding.
    """

    def __init__(
        self,
        pool: PoolSource,
        config: GraphConfig | None = None,
        *,
        embedder: Embedder | None = None,
        cache: Mapping[str, np.ndarray] | None = None,
    ) -> None:
        self.pool = pool
        self.config = config or GraphConfig()
        self.embedder = embedder or Embedder(self.config.embedding)
        self.cache = cache
        refs = sorted(pool.task_refs())
        self.ids = [task_id for task_id, _ in refs]
        self.envs = [env_id for _, env_id in refs]
        self.index = {task_id: i for i, task_id in enumerate(self.ids)}
        if len(self.index) != len(self.ids):
            raise ValueError("the pool has duplicate task ids")
        self.env_ids = sorted(set(self.envs))
        missing = [e for e in self.env_ids if e not in pool.envs]
        if missing:
            raise ValueError(
                f"tasks refer to environment(s) {missing} that the pool does not define"
            )

    def parts(self) -> Iterator[EnvironmentPart]:
        """Each environment's part, environments in id order (within TF-IDF in
        ``within_workers`` processes or on Ray, as the config says)."""
        from tqdm.auto import tqdm

        config = self.config
        items = (
            (sorted(self.pool.tasks_of(env_id), key=lambda t: t.task_id), config.k_within)
            for env_id in self.env_ids
        )
        workers = min(config.within_workers, len(self.env_ids))
        done = ordered_map(within_arrays, items, workers=workers, ray=config.ray)
        bar = tqdm(
            done,
            total=len(self.env_ids),
            desc="within (TF-IDF)",
            unit="env",
            disable=not config.show_progress,
        )
        for (tasks, _), (src, dst, sim) in bar:
            nodes = np.fromiter((self.index[t.task_id] for t in tasks), np.int64, len(tasks))
            texts = abstracts_of(self.pool, tasks, config.llm_extractor)
            yield EnvironmentPart(tasks[0].env_id, tasks, nodes, nodes[src], nodes[dst], sim, texts)

    def within(self) -> Iterator[list[EdgeRow]]:
        """Within edges, one list per environment (environments in id order)."""
        for part in self.parts():
            yield index_rows(self.ids, part.dst, part.src, part.sim, "within")

    def embed(self, parts_texts: Iterable[tuple[np.ndarray, list[str]]]) -> Abstracts:
        """The abstracts ``(nodes, texts)`` of every part, each distinct text not cached
        embedded once (in ``embed_workers`` processes or on Ray)."""
        codes = np.full(len(self.ids), -1, np.int64)
        distinct: dict[str, int] = {}
        for nodes, texts in parts_texts:
            codes[nodes] = [distinct.setdefault(text, len(distinct)) for text in texts]
        texts = list(distinct)
        workers, ray = self.config.embed_workers, self.config.ray
        vectors = embed_texts(texts, self.embedder, self.cache, workers=workers, ray=ray)
        return Abstracts(texts, codes, vectors)

    def cross(self, abstracts: Abstracts) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Cross edges ``(dst, src, sim)`` as node indices, blocks in node order."""
        config = self.config
        q, group = distinct_groups(fixed_point(abstracts.vectors), abstracts.codes)
        env_codes = np.unique(np.asarray(self.envs), return_inverse=True)[1].reshape(-1)
        return cross_blocks(
            q,
            group,
            env_codes,
            task_hashes(self.ids),
            config.k_cross,
            block=config.block,
            ann_threshold=config.ann_threshold,
            hnsw=config.hnsw,
            progress=config.show_progress,
        )

    def graph(self, rows: Iterable[EdgeRow]) -> TaskGraph:
        return TaskGraph.from_edge_rows(list(zip(self.ids, self.envs, strict=True)), rows)


def build(
    pool: PoolSource,
    config: GraphConfig | None = None,
    *,
    embedder: Embedder | None = None,
    cache: Mapping[str, np.ndarray] | None = None,
) -> BuiltGraph:
    """Build the graph of every task of ``pool``; ``cache`` maps abstract text -> embedding."""
    started = time.perf_counter()
    steps = GraphBuild(pool, config, embedder=embedder, cache=cache)
    rows: list[EdgeRow] = []
    texts = []
    for part in steps.parts():
        rows += index_rows(steps.ids, part.dst, part.src, part.sim, "within")
        texts.append((part.nodes, part.texts))
    abstracts = steps.embed(texts)
    for dst, src, sim in steps.cross(abstracts):
        rows += index_rows(steps.ids, dst, src, sim, "cross")
    return BuiltGraph(steps.graph(rows), abstracts, time.perf_counter() - started)


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
