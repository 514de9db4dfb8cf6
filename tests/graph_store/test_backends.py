"""Where Neo4j and ArcadeDB answer the same Cypher differently, pinned per server against the
session's real one (``docs/store.md``, "Neo4j 5 and ArcadeDB: differences met").

Each test states what each server does and, where the project depends on it, what the
project does about it; ``store_server.backend`` says which server this is (from its Bolt
agent). Run on both: the suite's default (the managed ArcadeDB) and ``scripts/with_neo4j.sh``.
"""

from __future__ import annotations

import neo4j
import pytest
from neo4j.exceptions import ClientError, DatabaseError, Neo4jError

from envsched_gnn.graph_store import queries
from envsched_gnn.graph_store.errors import StoreError
from envsched_gnn.graph_store.query_output import plain_rows
from envsched_gnn.graph_store.transactions import READ_ONLY_REFUSAL

pytestmark = pytest.mark.store


def index_names(store) -> set[str]:
    return {row["name"] for row in store.query("SHOW INDEXES YIELD name RETURN name")}


def test_the_backend_is_named_by_the_servers_bolt_agent(store, store_server):
    agent = store.server_agent()
    assert agent.startswith("Neo4j/5.")
    assert ("ArcadeDB" in agent) == (store_server.backend == "arcadedb")


def test_a_schema_command_outlives_a_rollback_on_arcadedb_only(store, store_server):
    """Why ``store query`` refuses a schema command before sending it (unless --write): on
    ArcadeDB a rolled-back read transaction would still have created the index."""
    statement = "CREATE INDEX rollback_probe IF NOT EXISTS FOR (t:Task) ON (t.probe)"
    try:
        with (
            store.driver.session(database=store.database) as session,
            session.begin_transaction() as tx,
        ):
            tx.run(statement).consume()
            tx.rollback()
        assert ("rollback_probe" in index_names(store)) == (store_server.backend == "arcadedb")
        with pytest.raises(StoreError, match="schema or administration command"):
            store.run_statement(statement, {})
    finally:
        with store.driver.session(database=store.database) as session:
            session.run("DROP INDEX rollback_probe IF EXISTS").consume()


def test_a_write_in_a_read_transaction_is_refused_by_neo4j_and_run_by_arcadedb(store, store_server):
    """``store query`` without --write: the same error and nothing written on both."""
    statement = "CREATE (:Probe {x: 1})"
    with store.driver.session(
        database=store.database, default_access_mode=neo4j.READ_ACCESS
    ) as session:
        if store_server.backend == "neo4j":
            with pytest.raises(ClientError) as refused, session.begin_transaction() as tx:
                tx.run(statement).consume()
            assert refused.value.code == READ_ONLY_REFUSAL
        else:
            with session.begin_transaction() as tx:
                assert tx.run(statement).consume().counters.nodes_created == 1
                tx.rollback()
    with pytest.raises(StoreError, match=r"the statement writes \(.*nothing was written"):
        store.run_statement(statement, {})
    assert store.query("MATCH (n:Probe) RETURN count(n) AS n") == [{"n": 0}]


def test_in_transactions_needs_an_auto_commit_transaction_on_neo4j(store, store_server):
    """``store query --write`` runs auto-commit, where both take it (see test_store_commands)."""
    statement = "UNWIND range(1, 5) AS i CALL { WITH i CREATE (:Probe {i: i}) } IN TRANSACTIONS"
    with store.driver.session(database=store.database) as session:
        if store_server.backend == "neo4j":
            with (
                pytest.raises(DatabaseError, match="implicit transaction"),
                session.begin_transaction() as tx,
            ):
                tx.run(statement).consume()
        else:
            with session.begin_transaction() as tx:
                tx.run(statement).consume()
    expected = 0 if store_server.backend == "neo4j" else 5
    assert store.query("MATCH (n:Probe) RETURN count(n) AS n") == [{"n": expected}]
    assert store.run_statement(statement, {}, write=True).updates["nodes_created"] == 5


def test_element_ids_differ_in_form_and_find_their_node_on_both(store, store_server):
    """The project keys every node by its own id, never by ``id()`` or ``elementId()``; a
    person who copies ``_element_id`` from ``store query`` gets the node back on either."""
    with store.driver.session(database=store.database) as session:
        session.run("CREATE (:Probe {name: 'a'})-[:LINK]->(:Probe {name: 'b'})").consume()
    result = store.run_statement("MATCH (a:Probe)-[r:LINK]->(b) RETURN a, r, b", {})
    [row] = plain_rows(result.keys, result.records)
    element_id = row["a"]["_element_id"]
    assert row["r"]["_start"] == element_id and row["r"]["_end"] == row["b"]["_element_id"]
    if store_server.backend == "arcadedb":
        assert element_id.startswith("#")  # the record id, bucket:position
    else:
        assert element_id.count(":") == 2  # kind:database:position
    again = store.query("MATCH (n) WHERE elementId(n) = $id RETURN n.name AS name", id=element_id)
    assert again == [{"name": "a"}]


def test_neo4j_lists_its_token_lookup_indexes_and_each_constraints_own_index(store, store_server):
    """``SHOW INDEXES`` holds more rows on Neo4j (and ``lastRead`` DateTimes); the project
    reads only ``SHOW CONSTRAINTS``, which names the same six constraints on both."""
    rows = store.query("SHOW INDEXES YIELD name, type, owningConstraint RETURN *")
    names = {row["name"] for row in store.constraints()}
    assert set(queries.CONSTRAINTS) <= names
    owned = {row["owningConstraint"] for row in rows if row["owningConstraint"]}
    lookups = [row for row in rows if row["type"] == "LOOKUP"]
    if store_server.backend == "neo4j":
        assert len(lookups) == 2 and names <= owned
    else:
        assert lookups == []


def test_a_procedure_neo4j_5_removed_is_refused_by_both_with_different_codes(store, store_server):
    with pytest.raises(Neo4jError) as refused:
        store.run_statement("CALL db.indexes()", {})
    expected = {
        "neo4j": "Neo.ClientError.Procedure.ProcedureNotFound",
        "arcadedb": "Neo.DatabaseError.General.UnknownError",
    }
    assert refused.value.code == expected[store_server.backend]
