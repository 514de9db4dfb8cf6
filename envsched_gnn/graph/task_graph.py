"""The dual-relation task graph in memory and its ``graph.json`` snapshot (spec sections 3, 8)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from envsched_gnn.json_files import write_json_atomically
from envsched_gnn.validation import UserError

RELATIONS = ("within", "cross")


class GraphError(UserError, ValueError):
    """A snapshot that does not describe a valid task graph."""


@dataclass
class RelationEdges:
    """Edges of one relation as index arrays: ``src[e] -> dst[e]`` with similarity ``sim[e]``."""

    src: np.ndarray
    dst: np.ndarray
    sim: np.ndarray

    @classmethod
    def empty(cls) -> RelationEdges:
        return cls(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64))

    def __len__(self) -> int:
        return int(self.src.shape[0])


@dataclass
class TaskGraph:
    """Task nodes in a fixed order (``task_ids[i]`` is node i) with their environments and edges."""

    task_ids: list[str]
    env_ids: list[str]
    edges: dict[str, RelationEdges] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.task_ids) != len(self.env_ids):
            raise GraphError("task_ids and env_ids must have the same length")
        self.index = {task_id: i for i, task_id in enumerate(self.task_ids)}
        if len(self.index) != len(self.task_ids):
            seen: set[str] = set()
            duplicate = next(t for t in self.task_ids if t in seen or seen.add(t))
            raise GraphError(f"duplicate task id {duplicate!r} in graph")
        for relation in RELATIONS:
            self.edges.setdefault(relation, RelationEdges.empty())
        unknown = set(self.edges) - set(RELATIONS)
        if unknown:
            raise GraphError(f"unknown relation(s) {sorted(unknown)}, expected one of {RELATIONS}")

    @property
    def num_tasks(self) -> int:
        return len(self.task_ids)

    def env_index(self) -> tuple[list[str], np.ndarray]:
        """Distinct environments (first-seen order) and each task's environment index (N,)."""
        envs: dict[str, int] = {}
        codes = np.fromiter(
            (envs.setdefault(e, len(envs)) for e in self.env_ids), np.int64, self.num_tasks
        )
        return list(envs), codes

    @classmethod
    def from_edge_rows(
        cls, tasks: Sequence[tuple[str, str]], edge_rows: Iterable[tuple[str, str, str, float]]
    ) -> TaskGraph:
        """Build from ``(task_id, env_id)`` pairs and ``(src, dst, relation, sim)`` rows."""
        task_ids = [str(t) for t, _ in tasks]
        env_ids = [str(e) for _, e in tasks]
        index = {t: i for i, t in enumerate(task_ids)}
        columns: dict[str, tuple[list[int], list[int], list[float]]] = {
            r: ([], [], []) for r in RELATIONS
        }
        for n, (src, dst, relation, sim) in enumerate(edge_rows):
            where = f"edge {n} ({src!r} -> {dst!r})"
            if relation not in columns:
                raise GraphError(f"{where}: relation {relation!r}, expected one of {RELATIONS}")
            for end in (src, dst):
                if end not in index:
                    raise GraphError(f"{where}: unknown task {end!r}")
            if isinstance(sim, bool) or not isinstance(sim, (int, float)) or not math.isfinite(sim):
                raise GraphError(f"{where}: sim {sim!r} is not a finite number")
            if not 0.0 < sim <= 1.0 + 1e-9:
                raise GraphError(f"{where}: sim {sim!r} outside (0, 1]")
            if src == dst:
                raise GraphError(f"{where}: self-loop")
            s, d, w = columns[relation]
            s.append(index[src])
            d.append(index[dst])
            w.append(min(float(sim), 1.0))
        edges = {
            r: RelationEdges(
                np.asarray(s, np.int64), np.asarray(d, np.int64), np.asarray(w, np.float64)
            )
            for r, (s, d, w) in columns.items()
        }
        return cls(task_ids, env_ids, edges)

    def edge_rows(self) -> Iterable[tuple[str, str, str, float]]:
        """All edges as ``(src, dst, relation, sim)`` rows, relation by relation."""
        for relation in RELATIONS:
            e = self.edges[relation]
            for s, d, w in zip(e.src.tolist(), e.dst.tolist(), e.sim.tolist(), strict=True):
                yield self.task_ids[s], self.task_ids[d], relation, w

    def subgraph(self, task_ids: Iterable[str]) -> TaskGraph:
        """The graph induced by ``task_ids``, in node order (unknown ids: :class:`GraphError`)."""
        keep = set(task_ids)
        missing = keep - set(self.task_ids)
        if missing:
            raise GraphError(
                f"task(s) {sorted(missing)[:5]} of the pool are not nodes of the graph"
            )
        tasks = [(t, e) for t, e in zip(self.task_ids, self.env_ids, strict=True) if t in keep]
        rows = [row for row in self.edge_rows() if row[0] in keep and row[1] in keep]
        return TaskGraph.from_edge_rows(tasks, rows)

    def to_json(self) -> dict:
        return {
            "tasks": [
                {"id": t, "env": e} for t, e in zip(self.task_ids, self.env_ids, strict=True)
            ],
            "edges": [
                {"src": s, "dst": d, "relation": r, "sim": w} for s, d, r, w in self.edge_rows()
            ],
        }

    @classmethod
    def from_json(cls, data: dict, *, source: str = "graph.json") -> TaskGraph:
        try:
            tasks = [(str(t["id"]), str(t["env"])) for t in data["tasks"]]
            rows = [(str(e["src"]), str(e["dst"]), e["relation"], e["sim"]) for e in data["edges"]]
        except (KeyError, TypeError) as error:
            raise GraphError(
                f"{source}: expected {{'tasks': [{{'id', 'env'}}], 'edges': [{{'src', 'dst', "
                f"'relation', 'sim'}}]}}, missing or malformed field {error}"
            ) from error
        try:
            return cls.from_edge_rows(tasks, rows)
        except GraphError as error:
            raise GraphError(f"{source}: {error}") from error


def read_graph(path: str | Path) -> TaskGraph:
    """Read a ``graph.json`` snapshot."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise GraphError(f"{path}: not valid JSON ({error.msg} at line {error.lineno})") from error
    return TaskGraph.from_json(data, source=str(path))


def write_graph(path: str | Path, graph: TaskGraph, sort_edges: bool = True) -> None:
    """Write a ``graph.json`` snapshot (tasks in node order; edges sorted for stable diffs, or
    with ``sort_edges`` off in the graph's own order, so that reading it back gives the same
    arrays: the order of a sum over edges, hence its last bit, is kept)."""
    data = graph.to_json()
    if sort_edges:
        data["edges"].sort(key=lambda e: (e["relation"], e["dst"], e["src"]))
    write_json_atomically(path, data, indent=None)
