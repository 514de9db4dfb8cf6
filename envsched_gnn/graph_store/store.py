"""The graph store: one class on the official ``neo4j`` driver, speaking Neo4j 5 Cypher over Bolt.

Schema (spec sections 3 and 8)::

    (:Environment {id, introduction, summary, constraints_rules, tool_names})
    (:Task {id, env, env_class_name, instruction, init_config, checks, reference_solution,
            abstract, split, abstract_text, abstract_key})-[:IN_ENV]->(:Environment)
    (:Abstract {key, text, embedding})   one per distinct abstract text, key = text_key(text)
    (:Task)-[:WITHIN {sim}]->(:Task)     neighbour j -> target i, same environment
    (:Task)-[:CROSS {sim}]->(:Task)      neighbour j -> target i, other environments
    (:Observation {key, task_id, step, rewards, m, v, d})-[:OF]->(:Task)
    (:Prediction {key, task_id, step, q, u, ...})-[:FOR]->(:Task)
    (:Prediction)-[:EVIDENCE {relation, sim, W, y_v, y_m, y_d, share}]->(:Task)
    (:GraphBuild {id: "graph", build, status, started, completed, tasks, within, cross})

A graph is never half there: a build (or a growth) first marks the ``GraphBuild`` node
``building`` with a new build id, and marks it ``complete``, with the task and edge counts,
only after every node and edge is written and counted back. :meth:`GraphStore.read_graph`
refuses a store whose graph is not complete or no longer matches its counts, and says to
rerun the build.

``init_config``, ``checks`` and ``reference_solution`` are JSON text. An Abstract node
caches the sentence embedding of one abstract text, stored once however many tasks share
it; a task names its abstract by ``abstract_key`` (so neither a rebuild nor growth re-embeds
a known abstract). Observation and prediction keys are ``"<step>:<task_id>"``: unique per
(task, step), so a replay MERGEs onto the same node and never duplicates it.

Every query is a named constant with ``$parameters`` only; bulk writes are
``UNWIND $rows ... MERGE`` in chunks; reads and writes go through ``execute_read`` /
``execute_write`` with transaction functions that are safe to retry; every session
names the database. The Cypher is the common subset of Neo4j 5 and ArcadeDB's
openCypher (see ``docs/store.md``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from hashlib import blake2b
from pathlib import Path
from typing import Any

import numpy as np

from envsched_gnn.envs.pool import Check, Environment, Pool, Task, ToolCall
from envsched_gnn.graph.task_graph import RELATIONS, TaskGraph
from envsched_gnn.graph_store.arcadedb import DEFAULT_FOLDER, ManagedArcadeDB
from envsched_gnn.graph_store.errors import StoreError
from envsched_gnn.observations import Observation, ObservationError, reward_stats, validate_rewards

CHUNK = 5000
URI_SCHEMES = ("bolt", "bolt+s", "bolt+ssc", "neo4j", "neo4j+s", "neo4j+ssc")

CONSTRAINTS = (
    "CREATE CONSTRAINT environment_id IF NOT EXISTS FOR (e:Environment) REQUIRE e.id IS UNIQUE",
    "CREATE CONSTRAINT task_id IF NOT EXISTS FOR (t:Task) REQUIRE t.id IS UNIQUE",
    "CREATE CONSTRAINT abstract_key IF NOT EXISTS FOR (a:Abstract) REQUIRE a.key IS UNIQUE",
    "CREATE CONSTRAINT observation_key IF NOT EXISTS FOR (o:Observation) REQUIRE o.key IS UNIQUE",
    "CREATE CONSTRAINT prediction_key IF NOT EXISTS FOR (p:Prediction) REQUIRE p.key IS UNIQUE",
    "CREATE CONSTRAINT graph_build_id IF NOT EXISTS FOR (b:GraphBuild) REQUIRE b.id IS UNIQUE",
)
SHOW_CONSTRAINTS = "SHOW CONSTRAINTS"
PING = "RETURN 1 AS ok"

MERGE_ENVIRONMENTS = """
UNWIND $rows AS r
MERGE (e:Environment {id: r.id})
SET e += r.props
"""
MERGE_TASKS = """
UNWIND $rows AS r
MERGE (e:Environment {id: r.env})
MERGE (t:Task {id: r.id})
SET t += r.props
MERGE (t)-[:IN_ENV]->(e)
"""
MERGE_ABSTRACTS = """
UNWIND $rows AS r
MERGE (a:Abstract {key: r.key})
SET a.text = r.text, a.embedding = r.embedding
"""
SET_TASK_ABSTRACTS = """
UNWIND $rows AS r
MATCH (t:Task {id: r.id})
SET t.abstract_text = r.text, t.abstract_key = r.key
"""
READ_ABSTRACTS = "MATCH (a:Abstract) RETURN a.key AS key, a.text AS text, a.embedding AS embedding"
READ_TASK_ABSTRACT_KEYS = """
MATCH (t:Task) WHERE t.abstract_key IS NOT NULL
RETURN t.id AS id, t.abstract_key AS key
"""
READ_TASK_NODES = "MATCH (t:Task) RETURN t.id AS id, t.env AS env ORDER BY id"
GRAPH_BUILD = "graph"
START_BUILD_ROWS = """
UNWIND $rows AS r
MERGE (b:GraphBuild {id: r.id})
SET b.build = r.build, b.status = 'building', b.started = r.at
"""
COMPLETE_BUILD = """
MATCH (b:GraphBuild {id: $id, build: $build})
SET b.status = 'complete', b.completed = $completed, b.tasks = $tasks, b.within = $within,
    b.cross = $cross
RETURN count(b) AS n
"""
READ_BUILD = "MATCH (b:GraphBuild {id: $id}) RETURN properties(b) AS props"
READ_TASKS = "MATCH (t:Task) RETURN properties(t) AS props ORDER BY t.id"
READ_ENVIRONMENTS = "MATCH (e:Environment) RETURN properties(e) AS props ORDER BY e.id"
MISSING_TASKS = """
UNWIND $ids AS id
OPTIONAL MATCH (t:Task {id: id})
WITH id, t WHERE t IS NULL
RETURN id
"""

MERGE_EDGES = {
    "within": """
UNWIND $rows AS r
MATCH (a:Task {id: r.src}), (b:Task {id: r.dst})
MERGE (a)-[e:WITHIN]->(b)
SET e.sim = r.sim
""",
    "cross": """
UNWIND $rows AS r
MATCH (a:Task {id: r.src}), (b:Task {id: r.dst})
MERGE (a)-[e:CROSS]->(b)
SET e.sim = r.sim
""",
}
DELETE_EDGES = {
    "within": """
UNWIND $rows AS r
MATCH (a:Task {id: r.src})-[e:WITHIN]->(b:Task {id: r.dst})
DELETE e
""",
    "cross": """
UNWIND $rows AS r
MATCH (a:Task {id: r.src})-[e:CROSS]->(b:Task {id: r.dst})
DELETE e
""",
}
CREATE_EDGES = {  # rows grouped by target: one lookup of b per target, not per edge
    "within": """
UNWIND $rows AS r
MATCH (b:Task {id: r.dst})
UNWIND r.sources AS n
MATCH (a:Task {id: n.src})
CREATE (a)-[:WITHIN {sim: n.sim}]->(b)
""",
    "cross": """
UNWIND $rows AS r
MATCH (b:Task {id: r.dst})
UNWIND r.sources AS n
MATCH (a:Task {id: n.src})
CREATE (a)-[:CROSS {sim: n.sim}]->(b)
""",
}
DELETE_SOME_EDGES = {
    "within": "MATCH (:Task)-[e:WITHIN]->(:Task) WITH e LIMIT $limit DELETE e RETURN count(*) AS n",
    "cross": "MATCH (:Task)-[e:CROSS]->(:Task) WITH e LIMIT $limit DELETE e RETURN count(*) AS n",
}
READ_EDGES = {  # one record per target: 2.4x the edges/s of one record per edge (ArcadeDB)
    "within": """
MATCH (a:Task)-[e:WITHIN]->(b:Task)
RETURN b.id AS dst, collect(a.id) AS srcs, collect(e.sim) AS sims
""",
    "cross": """
MATCH (a:Task)-[e:CROSS]->(b:Task)
RETURN b.id AS dst, collect(a.id) AS srcs, collect(e.sim) AS sims
""",
}
COUNT_EDGES = {
    "within": "MATCH (:Task)-[e:WITHIN]->(:Task) RETURN count(e) AS n",
    "cross": "MATCH (:Task)-[e:CROSS]->(:Task) RETURN count(e) AS n",
}
COUNT_NODES = {
    "GraphBuild": "MATCH (n:GraphBuild) RETURN count(n) AS n",
    "Environment": "MATCH (n:Environment) RETURN count(n) AS n",
    "Task": "MATCH (n:Task) RETURN count(n) AS n",
    "Abstract": "MATCH (n:Abstract) RETURN count(n) AS n",
    "Observation": "MATCH (n:Observation) RETURN count(n) AS n",
    "Prediction": "MATCH (n:Prediction) RETURN count(n) AS n",
}

READ_OBSERVATIONS_BY_KEY = """
UNWIND $keys AS k
MATCH (o:Observation {key: k})
RETURN o.key AS key, o.rewards AS rewards
"""
MERGE_OBSERVATIONS = """
UNWIND $rows AS r
MATCH (t:Task {id: r.task_id})
MERGE (o:Observation {key: r.key})
SET o.task_id = r.task_id, o.step = r.step, o.rewards = r.rewards, o.m = r.m, o.v = r.v, o.d = r.d
MERGE (o)-[:OF]->(t)
"""
READ_OBSERVATIONS = """
MATCH (o:Observation)-[:OF]->(t:Task)
RETURN t.id AS task_id, o.step AS step, o.rewards AS rewards
ORDER BY step, task_id
"""

DELETE_EVIDENCE = """
UNWIND $keys AS k
MATCH (p:Prediction {key: k})-[ev:EVIDENCE]->(:Task)
DELETE ev
"""
MERGE_PREDICTIONS = """
UNWIND $rows AS r
MATCH (t:Task {id: r.task_id})
MERGE (p:Prediction {key: r.key})
SET p += r.props
MERGE (p)-[:FOR]->(t)
"""
MERGE_EVIDENCE = """
UNWIND $rows AS r
MATCH (p:Prediction {key: r.key}), (n:Task {id: r.task_id})
MERGE (p)-[ev:EVIDENCE]->(n)
SET ev += r.props
"""
READ_PREDICTION = "MATCH (p:Prediction {key: $key}) RETURN properties(p) AS props"
READ_EVIDENCE = """
MATCH (p:Prediction {key: $key})-[ev:EVIDENCE]->(n:Task)
RETURN n.id AS task_id, n.env AS env, ev.relation AS relation, ev.sim AS sim, ev.W AS W,
       ev.y_v AS y_v, ev.y_m AS y_m, ev.y_d AS y_d, ev.share AS share
ORDER BY share DESC, task_id
"""

DELETE_SOME_NODES = "MATCH (n) WITH n LIMIT $limit DETACH DELETE n RETURN count(*) AS n"

PREDICTION_FIELDS = (
    "q",
    "u",
    "u_long",
    "u_short",
    "E_v",
    "E_m",
    "E_d",
    "G_within",
    "G_cross",
    "prior",
    "own_W",
    "shrink_share",
    "rank",
)
EVIDENCE_FIELDS = ("relation", "sim", "W", "y_v", "y_m", "y_d", "share")


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def _edge_counts(graph: TaskGraph) -> dict[str, int]:
    counts = dict.fromkeys(RELATIONS, 0)
    for _, _, relation, _ in graph.edge_rows():
        counts[relation] += 1
    return counts


def record_key(task_id: str, step: int) -> str:
    """Unique key of an observation or prediction of ``task_id`` at ``step``."""
    return f"{step}:{task_id}"


def text_key(text: str) -> str:
    """The Abstract node key of an abstract text: blake2b-128 of its UTF-8 bytes, in hex."""
    return blake2b(text.encode(), digest_size=16).hexdigest()


def chunks(rows: Sequence, size: int = CHUNK) -> Iterator[Sequence]:
    for start in range(0, len(rows), size):
        yield rows[start : start + size]


def task_properties(task: Task) -> dict[str, Any]:
    """The Task node's properties: what the TF-IDF views and the abstract extractor read."""
    solution = task.reference_solution
    return {
        "env": task.env_id,
        "env_class_name": task.env_class_name,
        "instruction": task.task,
        "init_config": json.dumps(task.init_config, sort_keys=True),
        "checks": json.dumps(
            [
                {"check_item": c.check_item, "check_func": c.check_func}
                for c in task.checklist_with_func
            ]
        ),
        "reference_solution": None
        if solution is None
        else json.dumps([{"name": c.name, "arguments": c.arguments} for c in solution]),
        "abstract": task.abstract,
        "split": task.split,
    }


def task_from_properties(props: Mapping[str, Any]) -> Task:
    """Inverse of :func:`task_properties` (plus ``id``)."""
    solution = props.get("reference_solution")
    return Task(
        task_id=props["id"],
        env_id=props["env"],
        env_class_name=props.get("env_class_name") or "",
        init_config=json.loads(props.get("init_config") or "{}"),
        task=props.get("instruction") or "",
        checklist_with_func=[Check(**c) for c in json.loads(props.get("checks") or "[]")],
        reference_solution=None
        if solution is None
        else [ToolCall(**c) for c in json.loads(solution)],
        abstract=props.get("abstract"),
        split=props.get("split") or "train",
    )


def environment_properties(env: Environment) -> dict[str, Any]:
    return {
        "introduction": env.environment_introduction,
        "summary": env.environment_summary,
        "constraints_rules": env.constraints_rules,
        "tool_names": list(env.tool_names),
    }


def _number(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise StoreError(f"{where} is {value!r}, expected a number")
    if not math.isfinite(float(value)):
        raise StoreError(f"{where} is {value!r}, expected a finite number")
    return int(value) if isinstance(value, (int, np.integer)) else float(value)


class GraphStore:
    """Environments, tasks, the dual-relation graph, observations and predictions in a Cypher store.

    Args:
        driver: an open ``neo4j`` driver (one per process).
        database: the database every session names.
        server: the managed ArcadeDB server to stop on :meth:`close`, if this store owns one.
        uri: where the driver points, for messages.
        retry_s: seconds this class retries a transaction whose connection failed (default 0:
            the driver's own retries only).
    """

    def __init__(
        self,
        driver,
        database: str,
        *,
        server: ManagedArcadeDB | None = None,
        uri: str = "",
        retry_s: float = 0.0,
    ) -> None:
        self.driver = driver
        self.database = database
        self.server = server
        self.uri = uri
        self.retry_s = retry_s

    @classmethod
    def connect(
        cls,
        uri: str,
        auth: tuple[str, str],
        database: str,
        *,
        server: ManagedArcadeDB | None = None,
        retry_time: float = 30.0,
        retry_s: float = 0.0,
    ) -> GraphStore:
        """Open a driver, check that ``database`` answers with ``auth``, create the constraints.

        ``retry_time`` bounds the driver's retries of a transaction (seconds) and
        ``retry_s`` this class's own (see :meth:`_transact`).
        """
        import neo4j

        try:
            driver = neo4j.GraphDatabase.driver(
                uri, auth=auth, connection_timeout=10.0, max_transaction_retry_time=retry_time
            )
        except (ValueError, neo4j.exceptions.ConfigurationError) as error:
            raise StoreError(f"invalid store URI {uri!r}: {error}") from error
        store = cls(driver, database, server=server, uri=uri, retry_s=retry_s)
        try:
            store._check_connection(auth[0])
            store.ensure_constraints()
        except BaseException:
            driver.close()
            raise
        return store

    def _check_connection(self, user: str) -> None:
        from neo4j.exceptions import (
            AuthError,
            ClientError,
            DriverError,
            Neo4jError,
            ServiceUnavailable,
        )

        try:
            with self.driver.session(database=self.database) as session:
                session.run(PING).consume()
        except AuthError as error:
            raise StoreError(
                f"the store at {self.uri} rejected the credentials of user {user!r} "
                f"(set NEO4J_USER / NEO4J_PASSWORD): {error.message}"
            ) from error
        except ServiceUnavailable as error:
            raise StoreError(f"cannot reach the store at {self.uri}: {error}") from error
        except ClientError as error:
            raise StoreError(
                f"the store at {self.uri} refused database {self.database!r} "
                f"(set NEO4J_DATABASE): {error.message}"
            ) from error
        except (DriverError, Neo4jError, OSError) as error:
            raise StoreError(f"cannot use the store at {self.uri}: {error}") from error

    def close(self) -> None:
        """Close the driver, and stop the managed server if this store owns one."""
        self.driver.close()
        if self.server is not None:
            self.server.stop()

    def __enter__(self) -> GraphStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- transactions -------------------------------------------------------------------

    @property
    def where(self) -> str:
        """The store as the user named it: the managed folder, or the URI."""
        return str(self.server.folder) if self.server is not None else self.uri

    def _raise_if_dead(self, patience_s: float = 0.0) -> None:
        """Raises the managed server's death (naming its log), waiting up to ``patience_s``
        for a server whose connection just broke to finish dying."""
        if self.server is None:
            return
        end = time.monotonic() + patience_s
        while True:
            death = self.server.death()
            if death is not None:
                raise StoreError(death)
            if time.monotonic() >= end:
                return
            time.sleep(0.05)

    @contextlib.contextmanager
    def _loud(self) -> Iterator[None]:
        """Turns a lost connection into a StoreError that says why (a dead managed server
        names its log) instead of a driver traceback."""
        from neo4j.exceptions import DriverError

        self._raise_if_dead()
        try:
            yield
        except (DriverError, OSError) as error:
            self._raise_if_dead(patience_s=0.5)
            raise StoreError(
                f"lost the connection to the store at {self.where}: {error}"
            ) from error

    def _transact(self, method: str, work: Callable, args: tuple) -> Any:
        """One transaction function, retried while the server lives.

        A remote server's transient failures are retried by the driver (its default 30 s).
        The managed server's driver does not retry (``retry_time=0``): this loop does, for
        :attr:`retry_s`, and stops at once when the server process is dead.
        """
        from neo4j.exceptions import AuthError, ServiceUnavailable, SessionExpired, TransientError

        give_up = time.monotonic() + self.retry_s
        delay = 0.1
        while True:
            try:
                with self._loud(), self.driver.session(database=self.database) as session:
                    return getattr(session, method)(work, *args)
            except StoreError as error:
                cause = error.__cause__
                if not isinstance(cause, ServiceUnavailable | SessionExpired):
                    raise
                if time.monotonic() + delay > give_up:
                    raise
            except TransientError:
                self._raise_if_dead()
                if time.monotonic() + delay > give_up:
                    raise
            except AuthError as error:
                # ArcadeDB reloads its security files about a second after it starts, and
                # connections opened before then are refused once ("no longer valid"); the
                # credentials were checked on connect, so a new connection will do
                if time.monotonic() + delay > give_up:
                    raise StoreError(
                        f"the store at {self.where} refused the credentials: {error.message}"
                    ) from error
            time.sleep(delay)
            delay = min(2 * delay, 1.0)

    def read(self, work: Callable, *args: Any) -> Any:
        return self._transact("execute_read", work, args)

    def write(self, work: Callable, *args: Any) -> Any:
        return self._transact("execute_write", work, args)

    def query(self, cypher: str, **params: Any) -> list[dict]:
        """Run one read query in a managed transaction; rows as dicts."""

        def work(tx):
            return [record.data() for record in tx.run(cypher, params)]

        return self.read(work)

    def write_rows(self, cypher: str, rows: Sequence[Mapping], *, chunk: int = CHUNK) -> None:
        """``UNWIND $rows`` write, one transaction per chunk (each MERGE-idempotent)."""

        def work(tx, part):
            tx.run(cypher, rows=part).consume()

        for part in chunks(list(rows), chunk):
            self.write(work, part)

    def ensure_constraints(self) -> None:
        for statement in CONSTRAINTS:
            with self._loud(), self.driver.session(database=self.database) as session:
                session.run(statement).consume()

    def constraints(self) -> list[dict]:
        with self._loud(), self.driver.session(database=self.database) as session:
            return [record.data() for record in session.run(SHOW_CONSTRAINTS)]

    # -- pool and graph -------------------------------------------------------------------

    def write_pool(self, pool: Pool) -> None:
        """MERGE every environment and task (with the fields the views need) and ``IN_ENV``."""
        self.write_environments(pool.envs.values())
        self.write_tasks(pool.tasks)

    def write_environments(self, envs: Iterable[Environment]) -> None:
        rows = [{"id": env.env_id, "props": environment_properties(env)} for env in envs]
        self.write_rows(MERGE_ENVIRONMENTS, rows)

    def write_tasks(self, tasks: Iterable[Task]) -> None:
        rows = [{"id": t.task_id, "env": t.env_id, "props": task_properties(t)} for t in tasks]
        self.write_rows(MERGE_TASKS, rows, chunk=1000)

    def read_tasks(self) -> list[Task]:
        """Tasks rebuilt from their nodes, in task-id order."""
        return [task_from_properties(row["props"]) for row in self.query(READ_TASKS)]

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
        self.write_rows(MERGE_ABSTRACTS, rows, chunk=500)

    def write_task_abstracts(self, texts: Mapping[str, str]) -> None:
        """Point each task ``task_id -> abstract text`` at its Abstract node."""
        rows = [{"id": t, "text": text, "key": text_key(text)} for t, text in texts.items()]
        self.write_rows(SET_TASK_ABSTRACTS, rows)

    def read_abstracts(self) -> dict[str, np.ndarray]:
        """The embedding cache: abstract text -> float32 embedding."""
        return {
            row["text"]: np.asarray(row["embedding"], np.float32)
            for row in self.query(READ_ABSTRACTS)
        }

    def read_embeddings(self) -> dict[str, tuple[str, np.ndarray]]:
        """The cached ``task_id -> (abstract text, float32 embedding)``."""

        def work(tx):
            tasks = [(r["id"], r["key"]) for r in tx.run(READ_TASK_ABSTRACT_KEYS)]
            abstracts = {
                r["key"]: (r["text"], np.asarray(r["embedding"], np.float32))
                for r in tx.run(READ_ABSTRACTS)
            }
            return tasks, abstracts

        tasks, abstracts = self.read(work)
        return {task_id: abstracts[key] for task_id, key in tasks if key in abstracts}

    def write_graph(self, graph: TaskGraph, *, build: str | None = None) -> None:
        """Make the stored nodes' edges equal ``graph``'s: MERGE its edges, delete the others.

        Task nodes missing from the store are created with their environment. Observations
        and predictions are never touched. The graph is marked complete at the end, under
        ``build`` (from :meth:`begin_graph_build`) or a build of its own.
        """
        build = build or self.begin_graph_build()
        self.write_rows(
            MERGE_TASKS,
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
            self.write_rows(DELETE_EDGES[relation], stale)
            rows = [{"src": s, "dst": d, "sim": w} for (s, d), w in wanted.items()]
            self.write_rows(MERGE_EDGES[relation], rows)
        self.complete_graph_build(build, graph)

    def begin_graph_build(self) -> str:
        """Marks the stored graph as being written; returns the new build's id."""
        build = uuid.uuid4().hex
        self.write_rows(START_BUILD_ROWS, [{"id": GRAPH_BUILD, "build": build, "at": _now()}])
        return build

    def complete_graph_build(self, build: str, graph: TaskGraph) -> None:
        """Marks ``build`` complete once the store holds exactly ``graph``'s tasks and edges."""
        counts = {"tasks": self.count_tasks(), **{r: self.count_edges(r) for r in RELATIONS}}
        wanted = {"tasks": graph.num_tasks, **_edge_counts(graph)}
        if counts != wanted:
            raise StoreError(
                f"graph build {build} in {self.where}: the store holds {counts} after writing, "
                f"the graph has {wanted}; not marked complete. Rerun `envsched-gnn graph build`"
            )

        def work(tx) -> int:
            record = tx.run(
                COMPLETE_BUILD, id=GRAPH_BUILD, build=build, completed=_now(), **counts
            ).single()
            return int(record["n"]) if record else 0

        if self.write(work) != 1:
            raise StoreError(
                f"graph build {build} in {self.where}: another build started while it ran; "
                "rerun `envsched-gnn graph build` once it is done"
            )

    def apply_edge_changes(
        self,
        relation: str,
        added: Sequence[tuple[str, str, float]],
        removed: Sequence[tuple[str, str]],
    ) -> None:
        """Delete ``removed`` ``(src, dst)`` edges and MERGE ``added`` ``(src, dst, sim)`` ones."""
        self.write_rows(DELETE_EDGES[relation], [{"src": s, "dst": d} for s, d in removed])
        self.write_rows(
            MERGE_EDGES[relation], [{"src": s, "dst": d, "sim": w} for s, d, w in added]
        )

    def delete_edges(self, relation: str, *, batch: int = 50_000) -> None:
        """Delete every edge of ``relation`` between tasks, in batches (nodes stay)."""

        def work(tx) -> int:
            return int(tx.run(DELETE_SOME_EDGES[relation], limit=batch).single()["n"])

        while self.write(work) > 0:
            pass

    def create_edges(
        self, relation: str, rows: Sequence[tuple[str, str, float]], *, chunk: int = CHUNK
    ) -> None:
        """CREATE ``(src, dst, sim)`` edges (no MERGE check: for a relation just emptied), about
        ``chunk`` edges a transaction, grouped by target (1.3x the edges/s of one row an edge
        into ArcadeDB)."""
        by_target: dict[str, list[dict]] = {}
        for s, d, w in rows:
            by_target.setdefault(d, []).append({"src": s, "sim": w})
        grouped = [{"dst": d, "sources": sources} for d, sources in by_target.items()]
        per_target = max(1, len(rows) // max(len(grouped), 1))
        self.write_rows(CREATE_EDGES[relation], grouped, chunk=max(1, chunk // per_target))

    def read_graph(self, *, empty_ok: bool = False) -> TaskGraph:
        """The whole graph in one read transaction; nodes in task-id order.

        Raises :class:`StoreError` unless the store holds a completely written graph (see
        the module docstring); with ``empty_ok``, a store without tasks gives an empty graph.
        """

        def work(tx):
            marker = tx.run(READ_BUILD, id=GRAPH_BUILD).single()
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
            raise StoreError(
                f"the graph in the store {self.where} is incomplete: build {marker.get('build')} "
                f"started at {marker.get('started')} never finished (interrupted?); {rebuild}"
            )
        counts = {"tasks": graph.num_tasks, **_edge_counts(graph)}
        recorded = {name: marker.get(name) for name in counts}
        if counts != recorded:
            raise StoreError(
                f"the graph in the store {self.where} holds {counts}, but its build "
                f"{marker.get('build')} completed with {recorded} (changed since?); {rebuild}"
            )
        return graph

    @staticmethod
    def _graph_rows(tx) -> tuple[list[tuple[str, str]], list[tuple[str, str, str, float]]]:
        tasks = [(r["id"], r["env"]) for r in tx.run(READ_TASK_NODES)]
        rows = []
        for relation in RELATIONS:
            for dst, srcs, sims in (r.values() for r in tx.run(READ_EDGES[relation])):
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

        Everything is checked before anything is written, in the same transaction:
        rewards finite and in [0, 1], steps non-negative integers, every task a node of
        the store, and a (task, step) already stored only with identical rewards (a
        replay, which is then a no-op). A bad observation raises ``ObservationError``.
        """
        rows = [self._observation_row(o) for o in observations]
        by_key: dict[str, dict] = {}
        for row in rows:
            previous = by_key.setdefault(row["key"], row)
            if previous["rewards"] != row["rewards"]:
                raise ObservationError(
                    f"task {row['task_id']!r} step {row['step']}: given twice with different "
                    f"rewards {previous['rewards']} and {row['rewards']}"
                )
        rows = list(by_key.values())

        def work(tx) -> int:
            ids = sorted({row["task_id"] for row in rows})
            missing = [r["id"] for r in tx.run(MISSING_TASKS, ids=ids)]
            if missing:
                raise ObservationError(
                    f"unknown task(s) {missing[:10]}: not Task nodes of the store; nothing written"
                )
            stored = {
                r["key"]: list(r["rewards"])
                for r in tx.run(READ_OBSERVATIONS_BY_KEY, keys=[row["key"] for row in rows])
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
                tx.run(MERGE_OBSERVATIONS, rows=part).consume()
            return len(new)

        return self.write(work) if rows else 0

    @staticmethod
    def _observation_row(observation: Observation | Mapping) -> dict:
        if isinstance(observation, Mapping):
            task_id, step = observation.get("task_id"), observation.get("step")
            rewards = observation.get("rewards")
        else:
            task_id, step, rewards = observation.task_id, observation.step, observation.rewards
        if not isinstance(task_id, str):
            raise ObservationError(f"observation task_id {task_id!r} is not a string")
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ObservationError(f"task {task_id!r}: step {step!r} is not a non-negative integer")
        if not isinstance(rewards, (list, tuple)):
            raise ObservationError(
                f"task {task_id!r} step {step}: rewards {rewards!r} is not a list"
            )
        validate_rewards(rewards, task_id=task_id, step=step)
        m, v, d = reward_stats(rewards)
        return {
            "key": record_key(task_id, step),
            "task_id": task_id,
            "step": step,
            "rewards": [float(r) for r in rewards],
            "m": m,
            "v": v,
            "d": d,
        }

    def read_observations(self) -> list[Observation]:
        """All observations, ordered by (step, task id)."""
        return [
            Observation(r["task_id"], int(r["step"]), tuple(float(x) for x in r["rewards"]))
            for r in self.query(READ_OBSERVATIONS)
        ]

    # -- predictions and their evidence ---------------------------------------------------

    def write_predictions(self, step: int, rows: Sequence[Mapping]) -> None:
        """Store the predictions of ``step``, one per task, with one EVIDENCE edge per neighbour.

        Each row has ``task_id``, the scalar fields of :data:`PREDICTION_FIELDS` (numbers or
        None) and ``neighbours``: dicts with ``task_id`` and :data:`EVIDENCE_FIELDS`. A replay
        replaces the prediction and its evidence; all rows are checked before anything is written.
        """
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise StoreError(f"prediction step {step!r} is not a non-negative integer")
        predictions, evidence, ids = [], [], set()
        for n, row in enumerate(rows):
            task_id = row.get("task_id")
            if not isinstance(task_id, str):
                raise StoreError(f"prediction row {n}: task_id {task_id!r} is not a string")
            key = record_key(task_id, step)
            props = {"task_id": task_id, "step": step}
            for name in PREDICTION_FIELDS:
                props[name] = _number(
                    row.get(name), f"prediction of task {task_id!r}: field {name!r}"
                )
            predictions.append({"key": key, "task_id": task_id, "props": props})
            ids.add(task_id)
            for neighbour in row.get("neighbours") or []:
                where = f"prediction of task {task_id!r}: neighbour {neighbour.get('task_id')!r}"
                relation = neighbour.get("relation")
                if relation not in RELATIONS:
                    raise StoreError(f"{where}: relation {relation!r}, expected one of {RELATIONS}")
                ev = {"relation": relation}
                for name in EVIDENCE_FIELDS[1:]:
                    ev[name] = _number(neighbour.get(name), f"{where}: field {name!r}")
                evidence.append({"key": key, "task_id": neighbour["task_id"], "props": ev})
                ids.add(neighbour["task_id"])

        def work(tx) -> None:
            missing = [r["id"] for r in tx.run(MISSING_TASKS, ids=sorted(ids))]
            if missing:
                raise StoreError(
                    f"predictions name unknown task(s) {missing[:10]}; nothing written"
                )
            for part in chunks(predictions):
                tx.run(DELETE_EVIDENCE, keys=[p["key"] for p in part]).consume()
                tx.run(MERGE_PREDICTIONS, rows=part).consume()
            for part in chunks(evidence):
                tx.run(MERGE_EVIDENCE, rows=part).consume()

        if predictions:
            self.write(work)

    def read_prediction(self, task_id: str, step: int) -> dict | None:
        rows = self.query(READ_PREDICTION, key=record_key(task_id, step))
        return rows[0]["props"] if rows else None

    def prediction_evidence(self, task_id: str, step: int) -> list[dict]:
        """The neighbours behind the prediction of ``task_id`` at ``step``, largest share first."""
        return self.query(READ_EVIDENCE, key=record_key(task_id, step))

    # -- counts and housekeeping ---------------------------------------------------------

    def count_nodes(self, label: str) -> int:
        if label not in COUNT_NODES:
            raise StoreError(f"unknown node label {label!r}, expected one of {sorted(COUNT_NODES)}")
        return int(self.query(COUNT_NODES[label])[0]["n"])

    def count_tasks(self) -> int:
        return self.count_nodes("Task")

    def count_environments(self) -> int:
        return self.count_nodes("Environment")

    def count_observations(self) -> int:
        return self.count_nodes("Observation")

    def count_predictions(self) -> int:
        return self.count_nodes("Prediction")

    def count_edges(self, relation: str) -> int:
        if relation not in RELATIONS:
            raise StoreError(f"unknown relation {relation!r}, expected one of {RELATIONS}")
        return int(self.query(COUNT_EDGES[relation])[0]["n"])

    def clear(self, *, batch: int = 10000) -> None:
        """Delete every node and relationship (constraints stay), in batches."""

        def work(tx) -> int:
            return int(tx.run(DELETE_SOME_NODES, limit=batch).single()["n"])

        while self.write(work) > 0:
            pass


def credentials_from_environment(uri: str) -> tuple[tuple[str, str], str]:
    """``(user, password), database`` from NEO4J_USER / NEO4J_PASSWORD / NEO4J_DATABASE."""
    password = os.environ.get("NEO4J_PASSWORD")
    if password is None:
        raise StoreError(f"store {uri}: set NEO4J_PASSWORD (and NEO4J_USER, NEO4J_DATABASE)")
    user = os.environ.get("NEO4J_USER", "neo4j")
    return (user, password), os.environ.get("NEO4J_DATABASE", "neo4j")


def is_uri(spec: str) -> bool:
    return "://" in spec and spec.split("://", 1)[0].lower() in URI_SCHEMES


@contextlib.contextmanager
def open_store(spec: str | Path | None = None) -> Iterator[GraphStore]:
    """Open the store named by ``spec``, closing it (and any managed server) on exit.

    ``spec`` is a ``bolt://`` / ``neo4j://`` URI (credentials from ``NEO4J_USER`` /
    ``NEO4J_PASSWORD``, database from ``NEO4J_DATABASE``, default ``neo4j``) or a folder
    for the managed ArcadeDB default. ``None`` means ``NEO4J_URI`` when set, else
    ``.envsched/store``.
    """
    if spec is None:
        spec = os.environ.get("NEO4J_URI") or DEFAULT_FOLDER
    spec = str(spec)
    if is_uri(spec):
        auth, database = credentials_from_environment(spec)
        store = GraphStore.connect(spec, auth, database)
    elif "://" in spec:
        raise StoreError(f"store {spec!r}: unsupported URI scheme, expected one of {URI_SCHEMES}")
    else:
        server = ManagedArcadeDB(spec).start()
        try:
            # retried here, not by the driver, so that a dead server is reported at once
            store = GraphStore.connect(
                server.uri, server.auth, server.database, server=server, retry_time=0.0, retry_s=5.0
            )
        except BaseException:
            server.stop()
            raise
    try:
        yield store
    finally:
        store.close()
