"""A columnar snapshot of the stored graph beside the managed store (``graph-snapshot.npz``,
loads in a second), written atomically and used only while the store's complete
``GraphBuild`` names the same build id and counts.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import numpy as np

from envsched_gnn.graph.task_graph import RELATIONS, RelationEdges, TaskGraph

SNAPSHOT_FILE = "graph-snapshot.npz"


def edge_counts(graph: TaskGraph) -> dict[str, int]:
    """``{"tasks": N, "within": E_w, "cross": E_c}``: what a ``GraphBuild`` node records."""
    return {"tasks": graph.num_tasks, **{r: len(graph.edges[r]) for r in RELATIONS}}


def write_snapshot(
    path: Path,
    build: str,
    graph: TaskGraph,
    abstracts: tuple[list[str], np.ndarray, np.ndarray] | None = None,
) -> None:
    """Write the snapshot of ``graph`` under ``build``; ``abstracts``: (distinct texts, each
    node's code (N,), their float32 embeddings (T, D)), or None."""
    arrays: dict[str, np.ndarray] = {
        "build": np.array(build),
        "task_ids": np.array(graph.task_ids, dtype=str),
        "env_ids": np.array(graph.env_ids, dtype=str),
    }
    for relation in RELATIONS:
        edges = graph.edges[relation]
        arrays.update({f"{relation}_src": edges.src, f"{relation}_dst": edges.dst})
        arrays[f"{relation}_sim"] = edges.sim
    if abstracts is not None:
        texts, codes, vectors = abstracts
        arrays.update(texts=np.array(texts, dtype=str), codes=codes, vectors=vectors)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with temporary.open("wb") as handle:
            np.savez(handle, **arrays)
        os.replace(temporary, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()


def read_snapshot(path: Path, build: str, counts: dict[str, int]) -> TaskGraph | None:
    """The snapshot's graph if it is of ``build`` with ``counts``; None when missing or stale."""
    try:
        with np.load(path, allow_pickle=False) as data:
            if str(data["build"]) != build:
                return None
            edges = {
                r: RelationEdges(data[f"{r}_src"], data[f"{r}_dst"], data[f"{r}_sim"])
                for r in RELATIONS
            }
            graph = TaskGraph(data["task_ids"].tolist(), data["env_ids"].tolist(), edges)
    except (OSError, KeyError, ValueError):  # missing, unreadable or of another layout
        return None
    return graph if edge_counts(graph) == counts else None


def read_snapshot_abstracts(
    path: Path, build: str
) -> tuple[list[str], np.ndarray, np.ndarray] | None:
    """(distinct texts, each node's code, embeddings) of the snapshot of ``build``, or None."""
    try:
        with np.load(path, allow_pickle=False) as data:
            if str(data["build"]) != build or "codes" not in data:
                return None
            return data["texts"].tolist(), data["codes"], data["vectors"]
    except (OSError, KeyError, ValueError):
        return None
