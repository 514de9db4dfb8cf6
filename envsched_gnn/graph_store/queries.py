"""The store's Cypher as named constants: every value a ``$parameter``, bulk writes ``UNWIND``.

The schema is in ``docs/store.md``; Observation and Prediction keys are
``"<step>:<task_id>"``, so a retried write MERGEs onto the same node. The Cypher is the common
subset of Neo4j 5 and ArcadeDB.
"""

from __future__ import annotations

CONSTRAINTS = {  # name -> statement; the only schema the store needs (docs/store.md, "Schema")
    "environment_id": (
        "CREATE CONSTRAINT environment_id IF NOT EXISTS FOR (e:Environment) REQUIRE e.id IS UNIQUE"
    ),
    "task_id": "CREATE CONSTRAINT task_id IF NOT EXISTS FOR (t:Task) REQUIRE t.id IS UNIQUE",
    "abstract_key": (
        "CREATE CONSTRAINT abstract_key IF NOT EXISTS FOR (a:Abstract) REQUIRE a.key IS UNIQUE"
    ),
    "observation_key": (
        "CREATE CONSTRAINT observation_key IF NOT EXISTS "
        "FOR (o:Observation) REQUIRE o.key IS UNIQUE"
    ),
    "prediction_key": (
        "CREATE CONSTRAINT prediction_key IF NOT EXISTS FOR (p:Prediction) REQUIRE p.key IS UNIQUE"
    ),
    "graph_build_id": (
        "CREATE CONSTRAINT graph_build_id IF NOT EXISTS FOR (b:GraphBuild) REQUIRE b.id IS UNIQUE"
    ),
}
SHOW_CONSTRAINTS = "SHOW CONSTRAINTS"

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
SET b.build = r.build, b.status = 'building', b.started = r.at, b.growing = r.growing
"""
COMPLETE_BUILD = """
MATCH (b:GraphBuild {id: $id, build: $build})
SET b.status = 'complete', b.completed = $completed, b.tasks = $tasks, b.within = $within,
    b.cross = $cross
RETURN count(b) AS n
"""
READ_BUILD = "MATCH (b:GraphBuild {id: $id}) RETURN properties(b) AS props"
READ_TASKS = "MATCH (t:Task) RETURN properties(t) AS props ORDER BY t.id"
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
COUNT_EDGES = {  # no labels: only tasks are linked by these types, and Neo4j then answers
    # from its count store (ArcadeDB's Cypher 3x faster than with labels: 0.3 s at 1.2M edges)
    "within": "MATCH ()-[e:WITHIN]->() RETURN count(e) AS n",
    "cross": "MATCH ()-[e:CROSS]->() RETURN count(e) AS n",
}
ARCADEDB_COUNT_EDGES = {  # ArcadeDB SQL, the managed store: the type's own count, 0.05 s
    "within": "SELECT count(*) AS n FROM WITHIN",
    "cross": "SELECT count(*) AS n FROM CROSS",
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
SET o.task_id = r.task_id, o.step = r.step, o.rewards = r.rewards, o.m = r.m, o.v = r.v, o.d = r.d,
    o.reward = r.reward
MERGE (o)-[:OF]->(t)
"""
READ_OBSERVATIONS = """
MATCH (o:Observation)-[:OF]->(t:Task)
RETURN t.id AS task_id, o.step AS step, o.rewards AS rewards, o.reward AS reward
ORDER BY step, task_id
"""
READ_OBSERVATION_REWARD = """
MATCH (o:Observation)
RETURN o.reward AS reward
LIMIT 1
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

ARCADEDB_EDGE_TYPES = (  # ArcadeDB SQL: an import needs its edge types to exist
    "CREATE EDGE TYPE IN_ENV IF NOT EXISTS",
    "CREATE EDGE TYPE WITHIN IF NOT EXISTS",
    "CREATE EDGE TYPE CROSS IF NOT EXISTS",
)

DELETE_SOME_NODES = "MATCH (n) WITH n LIMIT $limit DETACH DELETE n RETURN count(*) AS n"
