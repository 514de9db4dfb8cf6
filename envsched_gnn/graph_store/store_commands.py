"""``envsched-gnn store ...``: Cypher against the store, and its observations as history.jsonl.

``store query CYPHER`` (read-only unless ``--write``), ``store export-history --out FILE`` and
``store import-history FILE`` (all or nothing; identical observations are a no-op).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import Any

from envsched_gnn.config_cli import add_config_flags
from envsched_gnn.graph_store.query_output import FORMATS
from envsched_gnn.validation import RUN_ERROR, check_paths, fail


@dataclass
class QueryArgs:
    """What ``store query`` runs, with which parameters, and how it prints the rows."""

    cypher: str
    """One Cypher statement; give values as $parameters."""
    params: list[str] | None = None
    """A parameter as NAME=VALUE (repeatable); VALUE is JSON when it parses, else text."""
    format: str = "table"
    """How the rows are printed: table, json or csv."""
    write: bool = False
    """Let the statement write (committed); without it a writing statement is an error."""
    store: str | None = None
    """bolt:// or neo4j:// URI (credentials from NEO4J_USER/NEO4J_PASSWORD/NEO4J_DATABASE) or a
    folder for the managed ArcadeDB store (default: NEO4J_URI if set, else .envsched/store)."""


@dataclass
class HistoryArgs:
    """The history.jsonl file ``store export-history`` writes or ``import-history`` reads."""

    out: str
    """history.jsonl to write (spec section 8)."""
    history: str
    """history.jsonl to read (spec section 8)."""
    store: str | None = None
    """bolt:// or neo4j:// URI (credentials from NEO4J_USER/NEO4J_PASSWORD/NEO4J_DATABASE) or a
    folder for the managed ArcadeDB store (default: NEO4J_URI if set, else .envsched/store)."""


def register(groups: dict[str, argparse._SubParsersAction]) -> None:
    store = groups["store"]
    query = store.add_parser(
        "query",
        help="run a Cypher statement against the store and print its rows",
        description="Runs one Cypher statement against the store and prints its rows as a "
        "table, JSON or CSV. Read-only unless --write. Example: envsched-gnn store query "
        "'MATCH (t:Task {env: $env}) RETURN t.id ORDER BY t.id' --param env=billing",
    )
    add_config_flags(
        query,
        QueryArgs,
        positional=["cypher"],
        flags={"params": "--param"},
        repeatable=["params"],
        choices={"format": FORMATS},
        metavars={"cypher": "CYPHER", "params": "NAME=VALUE"},
    )
    query.set_defaults(func=query_command)

    export = store.add_parser(
        "export-history", help="write the store's observations as history.jsonl"
    )
    add_config_flags(export, HistoryArgs, fields=["out", "store"], metavars={"out": "FILE"})
    export.set_defaults(func=export_history_command)

    load = store.add_parser(
        "import-history", help="write the observations of a history.jsonl into the store"
    )
    add_config_flags(
        load, HistoryArgs, fields=["history", "store"], positional=["history"],
        metavars={"history": "FILE"},
    )  # fmt: skip
    load.set_defaults(func=import_history_command)


def parse_parameters(items: list[str]) -> dict[str, Any]:
    """``["NAME=VALUE", ...]`` as a dict; VALUE as JSON when it parses, else as text."""
    parameters: dict[str, Any] = {}
    for item in items:
        name, equals, text = item.partition("=")
        if not equals or not name.isidentifier():
            raise ValueError(f"--param {item!r}: expected NAME=VALUE with NAME an identifier")
        if name in parameters:
            raise ValueError(f"--param {name!r} is given twice")
        try:
            parameters[name] = json.loads(text)
        except json.JSONDecodeError:
            parameters[name] = text
    return parameters


def query_command(args: argparse.Namespace) -> int:
    from neo4j.exceptions import Neo4jError

    from envsched_gnn.graph_store.connect import open_store
    from envsched_gnn.graph_store.errors import StoreError
    from envsched_gnn.graph_store.query_output import plain_rows, render

    if not args.cypher.strip():
        return fail(f"the Cypher statement {args.cypher!r} is empty")
    try:
        parameters = parse_parameters(args.params or [])
        with open_store(args.store) as store:
            result = store.run_statement(args.cypher, parameters, write=args.write)
    except Neo4jError as error:
        return fail(f"the store refused the statement: {error.code}: {error.message}", RUN_ERROR)
    except (StoreError, ValueError, OSError) as error:
        return fail(str(error), RUN_ERROR)
    print(render(result.keys, plain_rows(result.keys, result.records), args.format))
    if result.updates:
        changes = ", ".join(f"{name} {value}" for name, value in result.updates.items())
        print(f"written: {changes}", file=sys.stderr)
    return 0


def export_history_command(args: argparse.Namespace) -> int:
    from envsched_gnn.graph_store.connect import open_store
    from envsched_gnn.graph_store.errors import StoreError
    from envsched_gnn.observations import write_history

    check_paths(out_files={"--out": args.out})
    try:
        with open_store(args.store) as store:
            observations = store.read_observations()
        write_history(args.out, observations)
    except (StoreError, ValueError, OSError) as error:
        return fail(str(error), RUN_ERROR)
    steps = sorted({o.step for o in observations})
    span = f" at steps {steps[0]}..{steps[-1]}" if steps else ""
    tasks = len({o.task_id for o in observations})
    print(f"wrote {len(observations)} observations of {tasks} tasks{span} to {args.out}")
    return 0


def import_history_command(args: argparse.Namespace) -> int:
    from envsched_gnn.graph_store.connect import open_store
    from envsched_gnn.graph_store.errors import StoreError
    from envsched_gnn.observations import read_history

    try:
        observations = read_history(args.history)
    except (ValueError, OSError) as error:  # the message names the file (and the line)
        return fail(f"{error}; nothing written", RUN_ERROR)
    try:
        with open_store(args.store) as store:
            new = store.write_observations(observations)
    except (StoreError, ValueError, OSError) as error:
        # the store writes all or nothing, and its refusals say "nothing written" themselves
        return fail(f"{args.history}: {error}", RUN_ERROR)
    print(
        f"{new} new observations written from {args.history} "
        f"({len(observations) - new} already stored with the same rewards)"
    )
    return 0
