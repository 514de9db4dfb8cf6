"""The bulk path of a first build into Neo4j: the CSV files of ``neo4j-admin database import``.

:func:`write_neo4j_import` builds the pool's graph and writes the records the batched path
would (environments, tasks, abstracts, the completed graph build, edges) as CSV with the
documented headers, plus ``import.sh``. For a database that does not exist yet or is
stopped; a running server is written through Bolt (:mod:`.stream`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from envsched_gnn.envs.pool import Environment, PoolSource, Task
from envsched_gnn.graph.task_graph import RELATIONS
from envsched_gnn.graph_build.builder import GraphBuild, GraphConfig
from envsched_gnn.graph_store import queries
from envsched_gnn.graph_store.nodes import environment_properties, task_properties, text_key

TASK_FIELDS = (
    "env",
    "env_class_name",
    "instruction",
    "init_config",
    "checks",
    "reference_solution",
    "abstract",
    "split",
    "abstract_text",
    "abstract_key",
)
HEADERS = {
    "environments.csv": (
        "id:ID(Environment)",
        "introduction",
        "summary",
        "constraints_rules",
        "tool_names:string[]",
        ":LABEL",
    ),
    "tasks.csv": ("id:ID(Task)", *TASK_FIELDS, ":LABEL"),
    "abstracts.csv": ("key:ID(Abstract)", "text", "embedding:double[]", ":LABEL"),
    "graph_build.csv": (
        "id:ID(GraphBuild)",
        "build",
        "status",
        "started",
        "completed",
        "tasks:long",
        "within:long",
        "cross:long",
        ":LABEL",
    ),
    "in_env.csv": (":START_ID(Task)", ":END_ID(Environment)", ":TYPE"),
    "within.csv": (":START_ID(Task)", ":END_ID(Task)", "sim:double", ":TYPE"),
    "cross.csv": (":START_ID(Task)", ":END_ID(Task)", "sim:double", ":TYPE"),
}
NODE_FILES = ("environments.csv", "tasks.csv", "abstracts.csv", "graph_build.csv")
EDGE_TYPES = {"within": "WITHIN", "cross": "CROSS"}


def field(value) -> str:
    """One CSV field: a string double-quoted (quotes doubled), a number as Python writes it, a
    list ``;``-joined, None empty (no property)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return field(";".join(str(v) for v in value))
    return '"' + str(value).replace('"', '""') + '"'


def import_command(folder: Path, database: str = "neo4j") -> str:
    """The ``neo4j-admin database import full`` command for the files in ``folder``."""
    nodes = " ".join(f"--nodes={folder / name}" for name in NODE_FILES)
    edges = " ".join(
        f"--relationships={folder / name}" for name in ("in_env.csv", "within.csv", "cross.csv")
    )
    # the importer's report of skipped entries goes beside the files, not into the caller's
    # working directory
    return (
        f"neo4j-admin database import full {nodes} {edges} --multiline-fields=true "
        f"--array-delimiter=';' --overwrite-destination=true "
        f"--report-file={folder / 'import.report'} {database}"
    )


class Neo4jImportFiles:
    """The CSV files of a first build, written as its records are produced."""

    def __init__(self, folder: Path, ids: Sequence[str]) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.ids = ids
        self.files = {name: (self.folder / name).open("w", encoding="utf-8") for name in HEADERS}
        for name, header in HEADERS.items():
            self.files[name].write(",".join(header) + "\n")

    def _row(self, name: str, values: Iterable) -> None:
        self.files[name].write(",".join(field(v) for v in values) + "\n")

    def environments(self, envs: Iterable[Environment]) -> None:
        for env in envs:
            props = environment_properties(env)
            row = [props["introduction"], props["summary"], props["constraints_rules"]]
            self._row("environments.csv", [env.env_id, *row, props["tool_names"], "Environment"])

    def tasks(self, tasks: Sequence[Task], nodes: np.ndarray, texts: Sequence[str]) -> None:
        for task, text in zip(tasks, texts, strict=True):
            props = {**task_properties(task), "abstract_text": text, "abstract_key": text_key(text)}
            self._row("tasks.csv", [task.task_id, *(props[f] for f in TASK_FIELDS), "Task"])
            self._row("in_env.csv", [task.task_id, task.env_id, "IN_ENV"])

    def abstracts(self, vectors: Mapping[str, np.ndarray]) -> None:
        for text, vector in vectors.items():
            embedding = np.asarray(vector, np.float64).tolist()
            self._row("abstracts.csv", [text_key(text), text, embedding, "Abstract"])

    def relation(self, relation: str, src: np.ndarray, dst: np.ndarray, sim: np.ndarray) -> None:
        ids, kind = self.ids, EDGE_TYPES[relation]
        for s, d, w in zip(src.tolist(), dst.tolist(), sim.tolist(), strict=True):
            self._row(f"{relation}.csv", [ids[s], ids[d], w, kind])

    def finish(self, counts: Mapping[str, int], started: str, database: str = "neo4j") -> Path:
        """Write the complete ``GraphBuild`` row and ``import.sh``; close the files."""
        build = uuid.uuid4().hex
        now = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        marker = [queries.GRAPH_BUILD, build, "complete", started, now]
        counted = [counts[n] for n in ("tasks", *RELATIONS)]
        self._row("graph_build.csv", [*marker, *counted, "GraphBuild"])
        for handle in self.files.values():
            handle.close()
        script = self.folder / "import.sh"
        script.write_text(
            "#!/bin/sh\n# stop the database first; run on the Neo4j server's machine\n"
            + import_command(self.folder.resolve(), database)
            + "\n",
            encoding="utf-8",
        )
        return script


def write_neo4j_import(
    pool: PoolSource,
    folder: str | Path,
    config: GraphConfig | None = None,
    *,
    embedder=None,
    database: str = "neo4j",
) -> Path:
    """Build the graph of ``pool`` into the import files in ``folder``; returns ``import.sh``."""
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    steps = GraphBuild(pool, config, embedder=embedder)
    files = Neo4jImportFiles(Path(folder), steps.ids)
    files.environments(pool.envs.values())
    counts = {"tasks": len(steps.ids), "within": 0, "cross": 0}
    texts = []
    for part in steps.parts():
        files.tasks(part.tasks, part.nodes, part.texts)
        files.relation("within", part.src, part.dst, part.sim)
        counts["within"] += part.src.shape[0]
        texts.append((part.nodes, part.texts))
    abstracts = steps.embed(texts)
    files.abstracts(dict(zip(abstracts.texts, abstracts.vectors, strict=True)))
    for dst, src, sim in steps.cross(abstracts):
        files.relation("cross", src, dst, sim)
        counts["cross"] += src.shape[0]
    return files.finish(counts, started, database)
