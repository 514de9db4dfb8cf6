"""The offline bulk path into Neo4j: ``graph build --neo4j-import`` writes the documented
``neo4j-admin database import full`` files; Neo4j's own importer (of the version
``tools/neo4j-server`` pins) loads them, and the store reads back the graph that was built."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envsched_gnn.cli import main
from envsched_gnn.envs.pool_io import save_pool, task_to_dict
from envsched_gnn.graph_build.builder import build
from envsched_gnn.graph_store.neo4j_import import HEADERS, field, write_neo4j_import
from envsched_gnn.graph_store.nodes import task_properties, text_key
from tests.graph_store.small_pool import small_pool

POOL = small_pool(3, 5, seed=6)


def read(path):
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def test_fields_follow_the_importer_quoting() -> None:
    assert field('say "hi"\nthen') == '"say ""hi""\nthen"'
    assert field(None) == "" and field("") == '""'
    assert field(0.25) == "0.25" and field(7) == "7"
    assert field(["a", "b"]) == '"a;b"'


def test_import_files_hold_the_graph_and_its_records(tmp_path, embedder, config) -> None:
    script = write_neo4j_import(POOL, tmp_path / "import", config, embedder=embedder)
    folder = tmp_path / "import"
    for name, header in HEADERS.items():
        assert tuple(read(folder / name)[0]) == header, name
    command = script.read_text()
    assert "neo4j-admin database import full" in command
    assert command.count("--nodes=") == 4 and command.count("--relationships=") == 3
    assert "--multiline-fields=true" in command
    built = build(POOL, config, embedder=embedder)
    rows = []
    for relation in ("within", "cross"):
        for src, dst, sim, kind in read(folder / f"{relation}.csv")[1:]:
            assert kind == relation.upper()
            rows.append((src, dst, relation, float(sim)))
    assert sorted(rows) == sorted(built.graph.edge_rows())  # repr of a float reads back exactly
    tasks = {row[0]: row for row in read(folder / "tasks.csv")[1:]}
    header = HEADERS["tasks.csv"]
    for task in POOL.tasks:
        row = dict(zip(header, tasks[task.task_id], strict=True))
        props = task_properties(task)
        assert row["instruction"] == props["instruction"] and row["checks"] == props["checks"]
        assert row["abstract_text"] == built.abstracts[task.task_id]
        assert row["abstract_key"] == text_key(row["abstract_text"]) and row[":LABEL"] == "Task"
    in_env = read(folder / "in_env.csv")[1:]
    assert sorted((t, e) for t, e, _ in in_env) == sorted((t.task_id, t.env_id) for t in POOL.tasks)
    abstracts = read(folder / "abstracts.csv")[1:]
    assert len(abstracts) == len(set(built.abstracts.values()))
    key, text, embedding, _ = abstracts[0]
    assert [float(x) for x in embedding.split(";")] == built.embeddings[
        next(t for t, a in built.abstracts.items() if a == text)
    ].astype(float).tolist()
    (marker,) = read(folder / "graph_build.csv")[1:]
    counts = dict(zip(("tasks", "within", "cross"), map(int, marker[5:8]), strict=True))
    assert marker[0] == "graph" and marker[2] == "complete" and marker[-1] == "GraphBuild"
    assert counts == {r: len(e) for r, e in built.graph.edges.items()} | {"tasks": 15}


@pytest.mark.slow  # a graph build through the CLI
def test_graph_build_writes_the_import_files(tmp_path, capsys) -> None:
    save_pool(POOL, tmp_path / "pool")
    argv = ["graph", "build", "--pool", str(tmp_path / "pool"), "--no-show-progress"]
    assert main([*argv, "--neo4j-import", str(tmp_path / "out")]) == 0
    assert "import.sh" in capsys.readouterr().out
    assert (tmp_path / "out" / "cross.csv").exists()


ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "tools" / "neo4j-server"


@pytest.mark.store
@pytest.mark.neo4j
@pytest.mark.slow  # Neo4j's importer, then a Neo4j server of its own on the imported folder
def test_neo4j_admin_imports_the_files_and_the_store_reads_the_graph_built(
    tmp_path, embedder, config
) -> None:
    if not (SERVER / "target" / "neo4j-server.jar").exists():
        pytest.skip("tools/neo4j-server is not built (scripts/with_neo4j.sh builds it)")
    script = write_neo4j_import(POOL, tmp_path / "import", config, embedder=embedder)
    home = tmp_path / "neo4j"
    environment = {**os.environ, "PATH": f"{SERVER}:{os.environ['PATH']}", "NEO4J_HOME": str(home)}
    imported = subprocess.run(
        ["sh", str(script)],
        env=environment,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert imported.returncode == 0, imported.stdout + imported.stderr
    assert "IMPORT DONE" in imported.stdout
    assert (tmp_path / "import" / "import.report").exists()  # beside the files

    # the user's next step: start the server on the imported folder and use the store
    read_back = (
        "import json, sys\n"
        "from envsched_gnn.envs.pool_io import task_to_dict\n"
        "from envsched_gnn.graph_store.connect import open_store\n"
        "with open_store() as store:\n"
        "    graph = store.read_graph()\n"
        "    embeddings = store.read_embeddings()\n"
        "    tasks = store.read_tasks()\n"
        "json.dump({'edges': sorted(graph.edge_rows()),\n"
        "           'tasks': [task_to_dict(t) for t in tasks],\n"
        "           'embeddings': {t: v.tolist() for t, (_, v) in embeddings.items()}},\n"
        "          sys.stdout)\n"
    )
    done = subprocess.run(
        [str(ROOT / "scripts" / "with_neo4j.sh"), "--home", str(home), "--"]
        + [sys.executable, "-c", read_back],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    stored = json.loads(done.stdout)
    built = build(POOL, config, embedder=embedder)
    assert [tuple(row) for row in stored["edges"]] == sorted(built.graph.edge_rows())
    tasks = sorted(POOL.tasks, key=lambda t: t.task_id)
    assert stored["tasks"] == json.loads(json.dumps([task_to_dict(t) for t in tasks]))
    for task_id, vector in stored["embeddings"].items():
        want = built.embeddings[task_id].astype("float32").tolist()
        assert vector == pytest.approx(want, abs=0), task_id
