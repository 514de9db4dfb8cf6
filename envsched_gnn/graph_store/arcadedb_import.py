"""The bulk path of a first build into the managed ArcadeDB: the records, in build order, as
one JSONL file of ArcadeDB's export format (file-local rids), then ``IMPORT DATABASE
file://... WITH commitEvery = N`` over the loopback HTTP API.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from envsched_gnn.envs.pool import Environment, Task
from envsched_gnn.graph_store.arcadedb import ManagedArcadeDB
from envsched_gnn.graph_store.nodes import environment_properties, task_properties, text_key
from envsched_gnn.graph_store.queries import ARCADEDB_EDGE_TYPES

EDGE_TYPES = {"within": "WITHIN", "cross": "CROSS"}
BUCKETS = {"Environment": 1, "Task": 2, "Abstract": 3, "IN_ENV": 4, "WITHIN": 5, "CROSS": 6}
"""Bucket numbers of the file's own rids (``#<bucket>:<position>``), one per type; a task's
position is its node index, so an edge names its ends without a lookup."""
COMMIT_EVERY = 20_000
"""Records per transaction of the import. The command must run outside a transaction
(``ManagedArcadeDB.sql(..., transaction=False)``): inside one, every record stays in it until
the end, and 1M tasks ran out of a 6 GB heap at 2.3M of their 20M records."""


def _json(record: dict) -> str:
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n"


class ArcadeImportFile:
    """The records of a first build, written as they are produced; :meth:`load` imports them.

    Args:
        folder: where the file is written (removed after the import); the server reads it, so
            a folder it can see (the store's own, by default).
    """

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path = self.folder / "import.jsonl"
        self.records = self.path.open("w", encoding="utf-8")
        self.env_rids: dict[str, str] = {}
        self.counts = dict.fromkeys(BUCKETS, 0)

    def _rid(self, kind: str) -> str:
        rid = f"#{BUCKETS[kind]}:{self.counts[kind]}"
        self.counts[kind] += 1
        return rid

    def _vertex(self, kind: str, properties: Mapping) -> str:
        rid = self._rid(kind)
        props = {key: value for key, value in properties.items() if value is not None}
        self.records.write(_json({"t": "v", "c": {"t": kind, "r": rid, "p": props}}))
        return rid

    def _edge(self, kind: str, source: str, target: str, properties: Mapping) -> None:
        record = {"t": kind, "r": self._rid(kind), "o": source, "i": target, "p": properties}
        self.records.write(_json({"t": "e", "c": record}))

    def environments(self, envs: Iterable[Environment]) -> None:
        """One Environment vertex each (what ``GraphStore.write_environments`` MERGEs)."""
        for env in envs:
            self.env_rids[env.env_id] = self._vertex(
                "Environment", {"id": env.env_id, **environment_properties(env)}
            )

    def tasks(self, tasks: Sequence[Task], nodes: np.ndarray, texts: Sequence[str]) -> None:
        """Task vertices with their abstract (``abstract_text``, ``abstract_key``) and their
        ``IN_ENV`` edges; task ``tasks[n]`` is node ``nodes[n]`` (its rid)."""
        for task, node, text in zip(tasks, nodes.tolist(), texts, strict=True):
            props = {
                "id": task.task_id,
                **task_properties(task),
                "abstract_text": text,
                "abstract_key": text_key(text),
            }
            props = {key: value for key, value in props.items() if value is not None}
            rid = f"#{BUCKETS['Task']}:{node}"
            self.records.write(_json({"t": "v", "c": {"t": "Task", "r": rid, "p": props}}))
            self._edge("IN_ENV", rid, self.env_rids[task.env_id], {})

    def abstracts(self, vectors: Mapping[str, np.ndarray]) -> None:
        """One Abstract vertex per ``text -> embedding`` (float64 list, as the batched path)."""
        for text, vector in vectors.items():
            embedding = np.asarray(vector, np.float64).tolist()
            self._vertex("Abstract", {"key": text_key(text), "text": text, "embedding": embedding})

    def relation(self, relation: str, src: np.ndarray, dst: np.ndarray, sim: np.ndarray) -> None:
        """Edges ``src[e] -> dst[e]`` of ``relation`` with ``sim[e]``, formatted directly (faster
        than ``json.dumps``; a finite float's JSON is its ``repr``).
        """
        kind, task = EDGE_TYPES[relation], BUCKETS["Task"]
        head = f'{{"t":"e","c":{{"t":"{kind}","r":"#{BUCKETS[kind]}:'
        first = self.counts[kind]
        self.counts[kind] += len(src)
        if not np.isfinite(sim).all():
            raise ValueError(f"{relation} similarities must be finite")
        rows = zip(src.tolist(), dst.tolist(), sim.tolist(), strict=True)
        self.records.write(
            "".join(
                f'{head}{first + e}","o":"#{task}:{s}","i":"#{task}:{d}","p":{{"sim":{w!r}}}}}}}\n'
                for e, (s, d, w) in enumerate(rows)
            )
        )

    def load(self, server: ManagedArcadeDB) -> dict:
        """Import the file into ``server``'s database and remove it; returns the importer's
        statistics."""
        self.records.close()
        try:
            for statement in ARCADEDB_EDGE_TYPES:
                server.sql(statement)
            # the one statement with a value in its text: the importer takes no parameters,
            # and the path is the file this build just wrote
            result = server.sql(
                f"IMPORT DATABASE file://{self.path.resolve()} WITH commitEvery = {COMMIT_EVERY}",
                transaction=False,
            )
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
        return result[0] if result else {}

    def discard(self) -> None:
        """Close and remove the file (a build that failed before :meth:`load`)."""
        self.records.close()
        shutil.rmtree(self.folder, ignore_errors=True)
