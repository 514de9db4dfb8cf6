"""The graph store: one class on an open ``neo4j`` driver, speaking Neo4j 5 Cypher over Bolt.

Queries in :mod:`.queries`, node properties in :mod:`.nodes`, opening in
:func:`~envsched_gnn.graph_store.connect.open_store`, transactions in
:class:`~envsched_gnn.graph_store.transactions.StoreConnection`. A build marks the
``GraphBuild`` node ``building``, then ``complete`` with its counts once all is written;
:meth:`GraphStore.read_graph` refuses anything else. A growth (``graph add-env``) names the
environment it adds on the node, and keeps the counts of the build it started from there, so that
:meth:`GraphStore.read_graph_before_growth` finds that graph again after an interruption.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from envsched_gnn.envs.pool import Environment, Pool, Task
from envsched_gnn.graph.task_graph import RELATIONS, TaskGraph
from envsched_gnn.graph_store import queries
from envsched_gnn.graph_store.errors import StoreError
from envsched_gnn.graph_store.nodes import (
    environment_properties,
    observation_rows,
    prediction_rows,
    record_key,
    task_from_properties,
    task_properties,
    text_key,
)
from envsched_gnn.graph_store.snapshot import (
    SNAPSHOT_FILE,
    edge_counts,
    read_snapshot,
    write_snapshot,
)
from envsched_gnn.graph_store.transactions import CHUNK, StoreConnection, chunks
from envsched_gnn.observations import DEFAULT_REWARD, Observation, ObservationError, check_reward


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


class GraphStore(StoreConnection):
    """Environments, tasks, the graph, observations and predictions in a Cypher store.
    It opens and closes nothing (:func:`~envsched_gnn.graph_store.connect.open_store` does).
    """

    @property
    def snapshot_path(self) -> Path | None:
        """The graph snapshot beside a managed store (:mod:`.snapshot`); None for a remote one."""
        return self.server.folder / SNAPSHOT_FILE if self.server is not None else None

    def ensure_constraints(self) -> list[str]:
        """Create the missing constraints of ``queries.CONSTRAINTS``; returns their names (only
        missing ones are sent, so a user without that right works once they exist).
        """
        from neo4j.exceptions import Forbidden

        present = {row["name"] for row in self.constraints()}
        missing = [name for name in queries.CONSTRAINTS if name not in present]
        for name in missing:
            try:
                with self._loud(), self.driver.session(database=self.database) as session:
                    session.run(queries.CONSTRAINTS[name]).consume()
            except Forbidden as error:
                statements = "; ".join(queries.CONSTRAINTS[n] for n in missing)
                raise StoreError(
                    f"the store at {self.where} refused to create constraint {name!r} "
                    f"({error.message}); have an administrator run: {statements}"
                ) from error
        return missing

    def constraints(self) -> list[dict]:
        with self._loud(), self.driver.session(database=self.database) as session:
            return [record.data() for record in session.run(queries.SHOW_CONSTRAINTS)]

    # -- pool and graph -------------------------------------------------------------------

    def write_pool(self, pool: Pool) -> None:
        """MERGE every environment and task (with the fields the views need) and ``IN_ENV``."""
        self.write_environments(pool.envs.values())
        self.write_tasks(pool.tasks)

    def write_environments(self, envs: Iterable[Environment]) -> None:
        rows = [{"id": env.env_id, "props": environment_properties(env)} for env in envs]
        self.write_rows(queries.MERGE_ENVIRONMENTS, rows)

    def write_tasks(self, tasks: Iterable[Task]) -> None:
        rows = [{"id": t.task_id, "env": t.env_id, "props": task_properties(t)} for t in tasks]
        self.write_rows(queries.MERGE_TASKS, rows, chunk=1000)

    def read_tasks(self) -> list[Task]:
        """Tasks rebuilt from their nodes, in task-id order: what :meth:`write_pool` wrote, for
        a user whose pool lives in the store."""
        return [task_from_properties(row["props"]) for row in self.query(queries.READ_TASKS)]

    def write_embeddings(self, embeddings: Mapping[str, tuple[str, np.ndarray]]) -> None:
        """Cache ``task_id -> (abstract text, embedding)``: one Abstract node per distinct text,
        each task pointed at its abstract."""
        self.write_abstracts({text: vector for text, vector in embeddings.values()})
        self.write_task_abstracts({task_id: text for task_id, (text, _) in embeddings.items()})

    def write_abstracts(self, vectors: Mapping[str, np.ndarray]) -> None:
        """MERGE one Abstract node per ``text -> embedding``."""
        rows = [
            {"key": text_key(text), "text": text, "embedding": np.asarray(v, np.float64).tolist()}
            for text, v in vectors.items()
        ]
        self.write_rows(queries.MERGE_ABSTRACTS, rows, chunk=500)

    def write_task_abstracts(self, texts: Mapping[str, str]) -> None:
        """Point each task ``task_id -> abstract text`` at its Abstract node."""
        rows = [{"id": t, "text": text, "key": text_key(text)} for t, text in texts.items()]
        self.write_rows(queries.SET_TASK_ABSTRACTS, rows)

    def read_abstracts(self) -> dict[str, np.ndarray]:
        """The embedding cache: abstract text -> float32 embedding."""
        return {
            row["text"]: np.asarray(row["embedding"], np.float32)
            for row in self.query(queries.READ_ABSTRACTS)
        }

    def read_embeddings(self) -> dict[str, tuple[str, np.ndarray]]:
        """The cached ``task_id -> (abstract text, float32 embedding)``."""

        def work(tx):
            tasks = [(r["id"], r["key"]) for r in tx.run(queries.READ_TASK_ABSTRACT_KEYS)]
            abstracts = {
                r["key"]: (r["text"], np.asarray(r["embedding"], np.float32))
                for r in tx.run(queries.READ_ABSTRACTS)
            }
            return tasks, abstracts

        tasks, abstracts = self.read(work)
        return {task_id: abstracts[key] for task_id, key in tasks if key in abstracts}

    def write_graph(self, graph: TaskGraph, *, build: str | None = None) -> None:
        """Make the stored nodes' edges equal ``graph``'s: MERGE its edges, delete the others,
        create missing task nodes; then mark it complete under ``build`` (or a build of its own).
        """
        build = build or self.begin_graph_build()
        self.write_rows(
            queries.MERGE_TASKS,
            [
                {"id": t, "env": e, "props": {"env": e}}
                for t, e in zip(graph.task_ids, graph.env_ids, strict=True)
            ],
        )
        _, stored = self._read_graph_rows()
        for relation in RELATIONS:
            wanted = {(s, d): w for s, d, r, w in graph.edge_rows() if r == relation}
            present = {(s, d) for s, d, r, _ in stored if r == relation}
            stale = [{"src": s, "dst": d} for s, d in sorted(present - wanted.keys())]
            self.write_rows(queries.DELETE_EDGES[relation], stale)
            rows = [{"src": s, "dst": d, "sim": w} for (s, d), w in wanted.items()]
            self.write_rows(queries.MERGE_EDGES[relation], rows)
        self.complete_graph_build(build, graph)

    def begin_graph_build(self, *, growing: str | None = None) -> str:
        """Marks the stored graph as being written (by the growth that adds environment
        ``growing``, or a whole build); returns the new build's id. The counts of the last
        completed build stay on the marker until this one completes."""
        build = uuid.uuid4().hex
        self.write_rows(
            queries.START_BUILD_ROWS,
            [{"id": queries.GRAPH_BUILD, "build": build, "at": _now(), "growing": growing}],
        )
        return build

    def interrupted_growth(self) -> str | None:
        """The environment whose growth began and never completed; None when there is none."""
        marker = self.query(queries.READ_BUILD, id=queries.GRAPH_BUILD)
        props = marker[0]["props"] if marker else {}
        return props.get("growing") if props.get("status") == "building" else None

    def read_graph_before_growth(self) -> TaskGraph:
        """The graph an interrupted growth started from: the stored one without the growing
        environment's tasks and their edges.

        A growth adds the environment's tasks, their edges, and cross edges from them into old
        tasks, and deletes old cross edges that those displaced; none of which this graph holds
        but the deletions done. A deleted edge ranked below the newcomers that displaced it, so
        growing this graph again gives the same grown graph. Checked against the started-from
        build's counts (tasks and within edges equal, cross edges at most as many).
        """

        def work(tx):
            marker = tx.run(queries.READ_BUILD, id=queries.GRAPH_BUILD).single()
            return (marker["props"] if marker else {}), *self._graph_rows(tx)

        marker, tasks, rows = self.read(work)
        growing = marker.get("growing")
        if marker.get("status") != "building" or growing is None:
            raise StoreError(f"the store {self.where} holds no interrupted growth")
        kept = [(task, env) for task, env in tasks if env != growing]
        ids = {task for task, _ in kept}
        graph = TaskGraph.from_edge_rows(kept, [r for r in rows if r[0] in ids and r[1] in ids])
        counts = edge_counts(graph)
        recorded = {name: marker.get(name) or 0 for name in counts}
        if any(counts[n] != recorded[n] for n in ("tasks", "within")) or (
            counts["cross"] > recorded["cross"]
        ):
            raise StoreError(
                f"the store {self.where} no longer holds the graph that adding environment "
                f"{growing!r} started from ({counts} without it, {recorded} when it started); "
                f"rerun `envsched-gnn graph build --pool DIR --store {self.where}`"
            )
        return graph

    def complete_graph_build(self, build: str, graph: TaskGraph, abstracts=None) -> None:
        """Marks ``build`` complete once the store holds exactly ``graph``'s tasks and edges,
        and writes its snapshot (with ``abstracts``, see :func:`.snapshot.write_snapshot`)."""
        counts = {"tasks": self.count_tasks(), **{r: self.count_edges(r) for r in RELATIONS}}
        wanted = edge_counts(graph)
        if counts != wanted:
            raise StoreError(
                f"graph build {build} in {self.where}: the store holds {counts} after writing, "
                f"the graph has {wanted}; not marked complete. Rerun `envsched-gnn graph build`"
            )

        def work(tx) -> int:
            record = tx.run(
                queries.COMPLETE_BUILD,
                id=queries.GRAPH_BUILD,
                build=build,
                completed=_now(),
                **counts,
            ).single()
            return int(record["n"]) if record else 0

        if self.write(work) != 1:
            raise StoreError(
                f"graph build {build} in {self.where}: another build started while it ran; "
                "rerun `envsched-gnn graph build` once it is done"
            )
        if self.snapshot_path is not None:
            write_snapshot(self.snapshot_path, build, graph, abstracts)

    def apply_edge_changes(
        self,
        relation: str,
        added: Sequence[tuple[str, str, float]],
        removed: Sequence[tuple[str, str]],
    ) -> None:
        """Delete ``removed`` ``(src, dst)`` edges and MERGE ``added`` ``(src, dst, sim)`` ones."""
        self.write_rows(queries.DELETE_EDGES[relation], [{"src": s, "dst": d} for s, d in removed])
        self.write_rows(
            queries.MERGE_EDGES[relation], [{"src": s, "dst": d, "sim": w} for s, d, w in added]
        )

    def delete_edges(self, relation: str, *, batch: int = 50_000) -> None:
        """Delete every edge of ``relation`` between tasks, in batches (nodes stay)."""

        def work(tx) -> int:
            return int(tx.run(queries.DELETE_SOME_EDGES[relation], limit=batch).single()["n"])

        while self.write(work) > 0:
            pass

    def create_edges(
        self, relation: str, rows: Sequence[tuple[str, str, float]], *, chunk: int = CHUNK
    ) -> None:
        """CREATE ``(src, dst, sim)`` edges (no MERGE: for a relation just emptied), grouped by
        target, about ``chunk`` edges a transaction.
        """
        by_target: dict[str, list[dict]] = {}
        for s, d, w in rows:
            by_target.setdefault(d, []).append({"src": s, "sim": w})
        grouped = [{"dst": d, "sources": sources} for d, sources in by_target.items()]
        per_target = max(1, len(rows) // max(len(grouped), 1))
        self.write_rows(queries.CREATE_EDGES[relation], grouped, chunk=max(1, chunk // per_target))

    def read_graph(self, *, empty_ok: bool = False) -> TaskGraph:
        """The whole graph in one read transaction, nodes in task-id order, or the snapshot of the
        same complete build; :class:`StoreError` unless the graph is complete (with ``empty_ok``, a
        store without tasks gives an empty graph).
        """
        marker = self.query(queries.READ_BUILD, id=queries.GRAPH_BUILD)
        marker = marker[0]["props"] if marker else {}
        if self.snapshot_path is not None and marker.get("status") == "complete":
            counts = {name: marker.get(name) for name in ("tasks", *RELATIONS)}
            graph = read_snapshot(self.snapshot_path, marker.get("build"), counts)
            if graph is not None:
                return graph

        def work(tx):
            marker = tx.run(queries.READ_BUILD, id=queries.GRAPH_BUILD).single()
            tasks, rows = self._graph_rows(tx)
            return (marker["props"] if marker else None), tasks, rows

        marker, tasks, rows = self.read(work)
        graph = TaskGraph.from_edge_rows(tasks, rows)
        if marker is None and not tasks and empty_ok:
            return graph
        rebuild = f"rerun `envsched-gnn graph build --pool DIR --store {self.where}`"
        if marker is None:
            what = "holds no graph" if not tasks else "holds tasks but no completed graph build"
            raise StoreError(f"the store {self.where} {what}; {rebuild}")
        if marker.get("status") != "complete":
            growing = marker.get("growing")
            what = f"adding environment {growing!r}" if growing else "build"
            rerun = (
                f"rerun `envsched-gnn graph add-env --pool DIR --store {self.where}` with a pool "
                f"that holds {growing!r}, which finishes it"
                if growing
                else rebuild
            )
            raise StoreError(
                f"the graph in the store {self.where} is incomplete: {what} (build "
                f"{marker.get('build')}, started at {marker.get('started')}) never finished "
                f"(interrupted?); {rerun}"
            )
        counts = edge_counts(graph)
        recorded = {name: marker.get(name) for name in counts}
        if counts != recorded:
            raise StoreError(
                f"the graph in the store {self.where} holds {counts}, but its build "
                f"{marker.get('build')} completed with {recorded} (changed since?); {rebuild}"
            )
        if self.snapshot_path is not None:
            write_snapshot(self.snapshot_path, marker["build"], graph)
        return graph

    @staticmethod
    def _graph_rows(tx) -> tuple[list[tuple[str, str]], list[tuple[str, str, str, float]]]:
        tasks = [(r["id"], r["env"]) for r in tx.run(queries.READ_TASK_NODES)]
        rows = []
        for relation in RELATIONS:
            for dst, srcs, sims in (r.values() for r in tx.run(queries.READ_EDGES[relation])):
                if len(srcs) != len(sims):  # collect() skips nulls: a sim is missing
                    raise StoreError(f"{relation} edges into {dst!r}: a stored sim is null")
                rows += [(src, dst, relation, sim) for src, sim in zip(srcs, sims, strict=True)]
        return tasks, rows

    def _read_graph_rows(self) -> tuple[list[tuple[str, str]], list[tuple[str, str, str, float]]]:
        """Task nodes and edge rows as stored, complete or not."""
        return self.read(self._graph_rows)

    # -- observations -----------------------------------------------------------------

    def write_observations(self, observations: Iterable[Observation | Mapping]) -> int:
        """Store observations keyed by (task, step), all or nothing; returns how many are new.
        Everything is checked first, in the same transaction (rewards, steps, known tasks, the
        reward the store holds, a stored (task, step) only with identical rewards); a bad one
        raises ``ObservationError``.
        """
        rows = observation_rows(observations)

        def work(tx) -> int:
            stored_reward = self._observation_reward(tx)
            if stored_reward is not None:
                check_reward(stored_reward, rows[0]["reward"], f"the store {self.where}")
            ids = sorted({row["task_id"] for row in rows})
            missing = [r["id"] for r in tx.run(queries.MISSING_TASKS, ids=ids)]
            if missing:
                raise ObservationError(
                    f"unknown task(s) {missing[:10]}: not Task nodes of the store; nothing written"
                )
            stored = {
                r["key"]: list(r["rewards"])
                for r in tx.run(queries.READ_OBSERVATIONS_BY_KEY, keys=[row["key"] for row in rows])
            }
            for row in rows:
                if row["key"] in stored and stored[row["key"]] != row["rewards"]:
                    raise ObservationError(
                        f"task {row['task_id']!r} step {row['step']}: already stored with rewards "
                        f"{stored[row['key']]}, refusing different rewards {row['rewards']}; "
                        "nothing written"
                    )
            new = [row for row in rows if row["key"] not in stored]
            for part in chunks(new):
                tx.run(queries.MERGE_OBSERVATIONS, rows=part).consume()
            return len(new)

        return self.write(work) if rows else 0

    def read_observations(self) -> list[Observation]:
        """All observations, ordered by (step, task id)."""
        return [
            Observation(
                r["task_id"],
                int(r["step"]),
                tuple(float(x) for x in r["rewards"]),
                r["reward"] or DEFAULT_REWARD,
            )
            for r in self.query(queries.READ_OBSERVATIONS)
        ]

    def observation_reward(self) -> str | None:
        """The reward of the stored observations (one for all: every write checks it), None
        when there are none; an observation stored before the option is ``fraction``."""
        return self.read(self._observation_reward)

    @staticmethod
    def _observation_reward(tx) -> str | None:
        row = tx.run(queries.READ_OBSERVATION_REWARD).single()
        return None if row is None else row["reward"] or DEFAULT_REWARD

    # -- predictions and their evidence ---------------------------------------------------

    def write_predictions(self, step: int, rows: Sequence[Mapping]) -> None:
        """Store the predictions of ``step``, one per task, with one EVIDENCE edge per neighbour
        (rows as :func:`~envsched_gnn.graph_store.nodes.prediction_rows` takes them). Writing a
        step again replaces its predictions and evidence; all rows are checked before anything
        is written.
        """
        predictions, evidence, ids = prediction_rows(step, rows)

        def work(tx) -> None:
            missing = [r["id"] for r in tx.run(queries.MISSING_TASKS, ids=sorted(ids))]
            if missing:
                raise StoreError(
                    f"predictions name unknown task(s) {missing[:10]}; nothing written"
                )
            for part in chunks(predictions):
                tx.run(queries.DELETE_EVIDENCE, keys=[p["key"] for p in part]).consume()
                tx.run(queries.MERGE_PREDICTIONS, rows=part).consume()
            for part in chunks(evidence):
                tx.run(queries.MERGE_EVIDENCE, rows=part).consume()

        if predictions:
            self.write(work)

    def read_prediction(self, task_id: str, step: int) -> dict | None:
        """The prediction of ``task_id`` at ``step`` that ``explain --store-evidence`` wrote
        (``task_id``, ``step`` and :data:`~envsched_gnn.graph_store.nodes.PREDICTION_FIELDS`),
        or None when there is none."""
        rows = self.query(queries.READ_PREDICTION, key=record_key(task_id, step))
        return rows[0]["props"] if rows else None

    def prediction_evidence(self, task_id: str, step: int) -> list[dict]:
        """The neighbours behind the prediction of ``task_id`` at ``step``, largest share first."""
        return self.query(queries.READ_EVIDENCE, key=record_key(task_id, step))

    # -- counts and housekeeping ---------------------------------------------------------

    def count_nodes(self, label: str) -> int:
        """Nodes of ``label`` (``Task``, ``Environment``, ``Observation``, ``Prediction``, ...)."""
        if label not in queries.COUNT_NODES:
            raise StoreError(
                f"unknown node label {label!r}, expected one of {sorted(queries.COUNT_NODES)}"
            )
        return int(self.query(queries.COUNT_NODES[label])[0]["n"])

    def count_tasks(self) -> int:
        return self.count_nodes("Task")

    def count_observations(self) -> int:
        return self.count_nodes("Observation")

    def count_edges(self, relation: str) -> int:
        if relation not in RELATIONS:
            raise StoreError(f"unknown relation {relation!r}, expected one of {RELATIONS}")
        if self.server is not None:  # every Cypher count walks the edges
            try:
                return int(self.server.sql(queries.ARCADEDB_COUNT_EDGES[relation])[0]["n"])
            except StoreError as error:
                if "SchemaException" not in str(error):  # no edge of the type yet: no type
                    raise
                return 0
        return int(self.query(queries.COUNT_EDGES[relation])[0]["n"])

    def clear(self, *, batch: int = 10000) -> None:
        """Delete every node and relationship (constraints stay), in batches."""

        def work(tx) -> int:
            return int(tx.run(queries.DELETE_SOME_NODES, limit=batch).single()["n"])

        while self.write(work) > 0:
            pass
