"""``store query`` and ``store export-history`` / ``import-history`` against the session's real
store server (the managed ArcadeDB, or ``NEO4J_URI``): docs/store.md's evidence query as written,
read-only by default, the server's messages for bad statements, and observations that
round-trip through history.jsonl."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest

from envsched_gnn.cli import main
from envsched_gnn.graph.task_graph import TaskGraph
from envsched_gnn.graph_store.store_commands import parse_parameters
from envsched_gnn.observations import Observation, read_history
from tests.models.test_analytic import HAND_EDGES, HAND_HISTORY, HAND_TASKS

STORE_GUIDE = Path(__file__).resolve().parents[2] / "docs" / "store.md"


def test_parameters_are_json_when_they_parse_else_text():
    items = ["n=12", "x=0.5", "b=true", "z=null", "l=[1, 2]", "s=a0", 'q="7"', "e=a=b"]
    assert parse_parameters(items) == {
        "n": 12, "x": 0.5, "b": True, "z": None, "l": [1, 2], "s": "a0", "q": "7", "e": "a=b",
    }  # fmt: skip
    for bad in (["novalue"], ["1x=2"], ["a=1", "a=2"]):
        with pytest.raises(ValueError, match="--param"):
            parse_parameters(bad)


@pytest.fixture
def cli_store(store, store_server, monkeypatch):
    """The cleared store holding the hand-made graph and history; the CLI's --store URI."""
    monkeypatch.setenv("NEO4J_USER", store_server.auth[0])
    monkeypatch.setenv("NEO4J_PASSWORD", store_server.auth[1])
    monkeypatch.setenv("NEO4J_DATABASE", store_server.database)
    store.write_graph(TaskGraph.from_edge_rows(HAND_TASKS, HAND_EDGES))
    store.write_observations(Observation(t, s, r) for t, s, r in HAND_HISTORY)
    return store, store_server.uri


def guide_evidence_query() -> str:
    """The Cypher block of docs/store.md, "Querying it", verbatim."""
    text = STORE_GUIDE.read_text(encoding="utf-8")
    blocks = re.findall(r"```cypher\n(.*?)```", text, re.DOTALL)
    [query] = [b for b in blocks if "EVIDENCE" in b]
    return query.strip()


@pytest.mark.store
def test_the_guide_evidence_query_runs_as_written(cli_store, capsys):
    store, uri = cli_store
    query = guide_evidence_query()
    step = int(re.search(r"step: (\d+)", query).group(1))
    assert main(["explain", "a0", "--step", str(step), "--store", uri, "--store-evidence"]) == 0
    capsys.readouterr()

    assert (
        main(["store", "query", query, "--param", "task=a0", "--store", uri, "--format", "json"])
        == 0
    )
    rows = json.loads(capsys.readouterr().out)
    expected = store.prediction_evidence("a0", step)
    assert len(rows) == len(expected) >= 3
    assert [row["n.id"] for row in rows] == [row["task_id"] for row in expected]
    for row, want in zip(rows, expected, strict=True):
        assert (row["e.relation"], row["e.sim"], row["e.share"]) == (
            want["relation"],
            want["sim"],
            want["share"],
        )
    assert [row["e.share"] for row in rows] == sorted((r["e.share"] for r in rows), reverse=True)

    assert main(["store", "query", query, "--param", "task=a0", "--store", uri]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["n.id", "e.relation", "e.sim", "e.share"]
    assert table[-1] == f"({len(rows)} rows)" and len(table) == len(rows) + 3
    assert (
        main(["store", "query", query, "--param", "task=a0", "--store", uri, "--format", "csv"])
        == 0
    )
    parsed = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["n.id"] for r in parsed] == [r["n.id"] for r in rows]
    assert [float(r["e.share"]) for r in parsed] == [r["e.share"] for r in rows]


@pytest.mark.store
def test_a_statement_that_writes_is_refused_unless_write_and_nothing_is_written(cli_store, capsys):
    store, uri = cli_store
    write = "MATCH (t:Task) WHERE t.id STARTS WITH $prefix SET t.flag = $flag RETURN t.id AS id"
    args = ["store", "query", write, "--param", "prefix=a", "--param", "flag=1", "--store", uri]
    assert main(args) == 1
    error = capsys.readouterr().err
    # ArcadeDB runs the write and says what it changed, Neo4j refuses it: rolled back either way
    assert "the statement writes (" in error and "nothing was written" in error
    assert "Pass --write" in error
    assert store.query("MATCH (t:Task) WHERE t.flag IS NOT NULL RETURN t.id AS id") == []

    assert main([*args, "--write"]) == 0
    out, err = capsys.readouterr()
    flagged = store.query("MATCH (t:Task) WHERE t.flag = 1 RETURN t.id AS id ORDER BY id")
    a_tasks = sorted(t for t, _ in HAND_TASKS if t.startswith("a"))
    assert [r["id"] for r in flagged] == a_tasks
    assert f"written: properties_set {len(a_tasks)}" in err
    assert "a0" in out

    index = "CREATE INDEX flag_index IF NOT EXISTS FOR (t:Task) ON (t.flag)"
    assert main(["store", "query", index, "--store", uri]) == 1
    assert "schema or administration command" in capsys.readouterr().err
    assert "flag_index" not in json.dumps(store.query("SHOW INDEXES YIELD name RETURN name"))


@pytest.mark.store
def test_write_runs_schema_commands_and_batched_updates_on_every_server(cli_store, capsys):
    """With --write a statement runs as cypher-shell runs it (auto-commit): Neo4j refuses a
    schema command or ``CALL {...} IN TRANSACTIONS`` in an explicit transaction."""
    store, uri = cli_store
    batched = (
        "MATCH (t:Task) CALL { WITH t SET t.flag = 2 } IN TRANSACTIONS OF 2 ROWS "
        "RETURN count(t) AS n"
    )
    assert main(["store", "query", batched, "--store", uri, "--write", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"n": len(HAND_TASKS)}]
    flagged = store.query("MATCH (t:Task) WHERE t.flag = 2 RETURN count(t) AS n")
    assert flagged == [{"n": len(HAND_TASKS)}]

    index = "CREATE INDEX flag_index IF NOT EXISTS FOR (t:Task) ON (t.flag)"
    try:
        assert main(["store", "query", index, "--store", uri, "--write"]) == 0
        capsys.readouterr()
        assert "flag_index" in json.dumps(store.query("SHOW INDEXES YIELD name RETURN name"))
    finally:
        main(["store", "query", "DROP INDEX flag_index IF EXISTS", "--store", uri, "--write"])
    assert "flag_index" not in json.dumps(store.query("SHOW INDEXES YIELD name RETURN name"))


@pytest.mark.store
def test_bad_cypher_and_a_missing_parameter_give_the_servers_message(cli_store, capsys):
    _, uri = cli_store
    assert main(["store", "query", "MATCH (t:Task RETURN t", "--store", uri]) == 1
    assert "the store refused the statement" in capsys.readouterr().err
    missing = "MATCH (t:Task {id: $task}) RETURN t.id"
    assert main(["store", "query", missing, "--param", "tsk=a0", "--store", uri]) == 1
    error = capsys.readouterr().err
    assert "ParameterMissing" in error and "task" in error


@pytest.mark.store
def test_observations_round_trip_through_history_jsonl(cli_store, tmp_path, capsys):
    store, uri = cli_store
    path = tmp_path / "history.jsonl"
    assert main(["store", "export-history", "--out", str(path), "--store", uri]) == 0
    assert f"wrote {len(HAND_HISTORY)} observations" in capsys.readouterr().out
    exported = read_history(path)
    assert exported == store.read_observations()
    assert sorted((o.task_id, o.step, o.rewards) for o in exported) == sorted(HAND_HISTORY)

    # into an empty store holding the same graph: the same observations
    store.clear()
    store.write_graph(TaskGraph.from_edge_rows(HAND_TASKS, HAND_EDGES))
    assert main(["store", "import-history", str(path), "--store", uri]) == 0
    assert f"{len(HAND_HISTORY)} new observations" in capsys.readouterr().out
    assert store.read_observations() == exported
    assert main(["store", "import-history", str(path), "--store", uri]) == 0  # a replay: no-op
    assert "0 new observations" in capsys.readouterr().out

    # a file that contradicts the store, or names an unknown task, writes nothing
    first = exported[0]
    changed = [o.to_json() for o in exported[1:]]
    other = [1.0 - r for r in first.rewards]
    changed.append({"task_id": first.task_id, "step": first.step, "rewards": other})
    changed.append({"task_id": "a0", "step": 99, "rewards": [0.0, 1.0]})
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(row) + "\n" for row in changed))
    store.clear()
    store.write_graph(TaskGraph.from_edge_rows(HAND_TASKS, HAND_EDGES))
    store.write_observations([first])
    assert main(["store", "import-history", str(bad), "--store", uri]) == 1
    err = capsys.readouterr().err
    assert "refusing different rewards" in err and err.count("nothing written") == 1
    assert err.count(str(bad)) == 1
    assert store.read_observations() == [first]


def test_a_truncated_line_names_the_file_and_line_once(tmp_path, capsys):
    """Read before the store opens: no store is needed to refuse the file."""
    path = tmp_path / "history.jsonl"
    path.write_text('{"task_id": "a0", "step": 0, "rewards": [1.0]}\n{"task_id": "a1", "st')

    assert main(["store", "import-history", str(path), "--store", str(tmp_path / "no-store")]) == 1

    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}:2: not valid JSON")
    assert err.count(str(path)) == 1 and err.count("nothing written") == 1
    assert not (tmp_path / "no-store").exists()
