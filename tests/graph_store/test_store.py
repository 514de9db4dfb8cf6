"""Bolt/Cypher tests run against ArcadeDB (the managed default; ``NEO4J_URI`` when set).

They talk to a real server through the ``neo4j`` driver: constraints, idempotent
writes, observation replays, all-or-nothing validation, predictions with evidence, and the
graph round trip.
"""

from __future__ import annotations

import math

import pytest

from envsched_gnn.graph.task_graph import TaskGraph
from envsched_gnn.graph_store.arcadedb import ManagedArcadeDB, heap_mib, page_cache_mib
from envsched_gnn.graph_store.errors import StoreError
from envsched_gnn.graph_store.store import GraphStore
from envsched_gnn.observations import Observation, ObservationError
from tests.envs.handmade_pool import handmade_pool

pytestmark = pytest.mark.store

EDGES = [
    ("library-swap", "library-checkout", "within", 0.5),
    ("library-gated", "library-checkout", "within", 0.25),
    ("clinic-book", "library-checkout", "cross", 0.75),
    ("library-checkout", "clinic-book", "cross", 1.0),
    ("clinic-move", "clinic-book", "within", 0.125),
]


def handmade_graph() -> TaskGraph:
    pool = handmade_pool()
    return TaskGraph.from_edge_rows([(t.task_id, t.env_id) for t in pool.tasks], EDGES)


def test_constraints_created_if_not_exists(store: GraphStore) -> None:
    assert store.ensure_constraints() == []  # the store's opening created them all
    with store.driver.session(database=store.database) as session:
        session.run("DROP CONSTRAINT task_id IF EXISTS").consume()
    assert store.ensure_constraints() == ["task_id"]  # only a missing one is sent
    unique = {(tuple(c["labelsOrTypes"]), tuple(c["properties"])) for c in store.constraints()}
    for label, prop in (("Environment", "id"), ("Task", "id"), ("Observation", "key")):
        assert ((label,), (prop,)) in unique


def test_write_pool_is_idempotent_and_keeps_view_fields(store: GraphStore) -> None:
    pool = handmade_pool()
    store.write_pool(pool)
    store.write_pool(pool)
    assert store.count_nodes("Environment") == 2
    assert store.count_tasks() == len(pool.tasks)
    assert store.query("MATCH (:Task)-[r:IN_ENV]->(:Environment) RETURN count(r) AS n")[0]["n"] == 6
    assert {t.task_id: t for t in store.read_tasks()} == {t.task_id: t for t in pool.tasks}


def test_graph_round_trip_and_rewrite(store: GraphStore) -> None:
    store.write_pool(handmade_pool())
    graph = handmade_graph()
    store.write_graph(graph)
    store.write_graph(graph)
    assert store.count_edges("within") == 3 and store.count_edges("cross") == 2
    back = store.read_graph()
    assert back.task_ids == sorted(graph.task_ids)
    assert sorted(back.edge_rows()) == sorted(graph.edge_rows())
    tasks = list(zip(graph.task_ids, graph.env_ids, strict=True))
    smaller = TaskGraph.from_edge_rows(tasks, EDGES[:2])
    store.write_graph(smaller)
    assert sorted(store.read_graph().edge_rows()) == sorted(smaller.edge_rows())


def test_observation_replay_is_stored_once(store: GraphStore) -> None:
    store.write_pool(handmade_pool())
    batch = [
        Observation("library-checkout", 0, (0.0, 1.0, 1.0, 0.5)),
        Observation("clinic-book", 0, (1.0, 1.0)),
    ]
    assert store.write_observations(batch) == 2
    assert store.write_observations(batch) == 0
    assert store.write_observations(batch + [Observation("clinic-book", 1, (0.0,))]) == 1
    assert store.count_observations() == 3
    stored = store.query(
        "MATCH (o:Observation {key: $key})-[:OF]->(t:Task) RETURN o.m AS m, o.v AS v, t.id AS t",
        key="0:library-checkout",
    )
    assert stored == [{"m": 0.625, "v": pytest.approx(0.171875), "t": "library-checkout"}]
    assert store.read_observations()[0] == Observation("clinic-book", 0, (1.0, 1.0))


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"task_id": "no-such-task", "step": 0, "rewards": [0.5]}, "unknown task"),
        ({"task_id": "clinic-book", "step": 0, "rewards": [0.5, 1.5]}, "1.5"),
        ({"task_id": "clinic-book", "step": 0, "rewards": [math.nan]}, "nan"),
        ({"task_id": "clinic-book", "step": -1, "rewards": [0.5]}, "step -1"),
        ({"task_id": "library-swap", "step": 3, "rewards": [0.0]}, "already stored"),
    ],
)
def test_bad_observation_writes_nothing(store: GraphStore, bad: dict, message: str) -> None:
    store.write_pool(handmade_pool())
    store.write_observations([Observation("library-swap", 3, (1.0,))])
    good = {"task_id": "library-checkout", "step": 0, "rewards": [0.5]}
    with pytest.raises(ObservationError, match=message):
        store.write_observations([good, bad])
    assert store.count_observations() == 1


def test_a_store_holds_one_reward(store: GraphStore) -> None:
    """Success observations are stored as such, read back as such, and refused in a store of
    partial-credit ones (also one written before the option, without a reward property)."""
    store.write_pool(handmade_pool())
    assert store.observation_reward() is None
    success = [Observation("clinic-book", 0, (1.0, 0.0), "success")]
    assert store.write_observations(success) == 1
    assert store.observation_reward() == "success"
    assert store.read_observations() == success
    fraction = [Observation("clinic-book", 1, (0.5, 0.0))]
    with pytest.raises(ObservationError, match=r"holds 'success' rewards, not 'fraction' ones"):
        store.write_observations(fraction)
    store.clear()
    store.write_pool(handmade_pool())
    store.write_observations(fraction)
    store.write(lambda tx: tx.run("MATCH (o:Observation) REMOVE o.reward").consume())
    assert store.query("MATCH (o:Observation) RETURN o.reward AS r") == [{"r": None}]
    assert store.observation_reward() == "fraction"
    assert store.read_observations() == fraction
    with pytest.raises(ObservationError, match=r"holds 'fraction' rewards, not 'success' ones"):
        store.write_observations(success)
    assert store.read_observations() == fraction


def test_predictions_with_evidence_are_queryable(store: GraphStore) -> None:
    store.write_pool(handmade_pool())
    row = {
        "task_id": "library-checkout",
        **dict.fromkeys(("q", "u", "u_long", "u_short", "E_v", "E_m", "E_d"), 0.25),
        **{"G_within": 0.5, "G_cross": 0.25, "prior": 0.1, "own_W": 0.0, "shrink_share": 0.2},
        "rank": 1,
        "neighbours": [
            {"task_id": "library-swap", "relation": "within", "sim": 0.5, "W": 2.0, "y_v": 0.1,
             "y_m": 0.5, "y_d": 0.4, "share": 0.7},
            {"task_id": "clinic-book", "relation": "cross", "sim": 0.75, "W": 1.0, "y_v": 0.2,
             "y_m": 0.3, "y_d": 0.8, "share": 0.3},
        ],
    }  # fmt: skip
    store.write_predictions(4, [row])
    store.write_predictions(4, [row])
    assert store.count_nodes("Prediction") == 1
    assert store.read_prediction("library-checkout", 4)["rank"] == 1
    evidence = store.prediction_evidence("library-checkout", 4)
    assert [(e["task_id"], e["relation"], e["share"]) for e in evidence] == [
        ("library-swap", "within", 0.7),
        ("clinic-book", "cross", 0.3),
    ]
    with pytest.raises(StoreError, match="unknown task"):
        ghost = {"task_id": "ghost", "relation": "cross"}
        store.write_predictions(5, [{**row, "neighbours": [ghost]}])
    assert store.read_prediction("library-checkout", 5) is None


def test_java_failure_shows_the_log_tail(tmp_path) -> None:
    server = ManagedArcadeDB(tmp_path, heap="1k")  # too small a heap for the JVM to start
    with pytest.raises(StoreError, match="exited with code"):
        server.start()
    assert not server.running


def test_a_heap_size_that_is_not_one_is_named_before_java_runs(tmp_path) -> None:
    server = ManagedArcadeDB(tmp_path, heap="not-a-size")
    with pytest.raises(StoreError, match="'not-a-size': not a heap size"):
        server.start()
    assert not server.running
    assert heap_mib("6144m") == 6144 and heap_mib("8g") == 8192 and page_cache_mib("6g") == 2048
