"""``envsched-gnn graph ...``: build, export and grow the task graph in the store.

Every command takes ``--store``: a ``bolt://`` / ``neo4j://`` URI (credentials from
``NEO4J_USER`` / ``NEO4J_PASSWORD`` / ``NEO4J_DATABASE``) or a folder for the managed
ArcadeDB default; without it, ``NEO4J_URI`` when set, else ``.envsched/store``.
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass

from envsched_gnn.config_cli import add_config_flags, config_from_args
from envsched_gnn.graph_build.builder import GraphConfig
from envsched_gnn.validation import RUN_ERROR, check_paths, fail


@dataclass
class GraphArgs:
    """The inputs and outputs of the ``graph`` commands."""

    pool: str
    """Pool folder (envs.json + tasks.json; for add-env, holding the new environment(s))."""
    out: str
    """Path of the graph.json to write."""
    env: str | None = None
    """Environment id to add (default: every one the store lacks)."""
    neo4j_import: str | None = None
    """Write the CSV files of `neo4j-admin database import full` into this folder, not a store."""
    store: str | None = None
    """bolt:// or neo4j:// URI (credentials from NEO4J_USER/NEO4J_PASSWORD/NEO4J_DATABASE) or a
    folder for the managed ArcadeDB store (default: NEO4J_URI if set, else .envsched/store)."""
    max_memory_gib: float | None = None
    """Stop when this process and its children hold more resident memory (default: 90%)."""


NEIGHBOURS = ["k_within", "k_cross"]
WORKERS = ["within_workers", "embed_workers", "ray", "bulk", "show_progress"]


def register(groups: dict[str, argparse._SubParsersAction]) -> None:
    graph = groups["graph"]

    build = graph.add_parser("build", help="build the dual-relation graph of a pool into the store")
    add_config_flags(build, GraphArgs, fields=["pool"])
    add_config_flags(build, GraphConfig, fields=[*NEIGHBOURS, "ann_threshold", *WORKERS])
    add_config_flags(build, GraphArgs, fields=["store", "neo4j_import", "max_memory_gib"])
    build.set_defaults(func=build_command)

    export = graph.add_parser("export", help="write the store's graph as graph.json")
    add_config_flags(export, GraphArgs, fields=["out", "store"])
    export.set_defaults(func=export_command)

    add = graph.add_parser(
        "add-env",
        help="add one environment (--env) or every new environment of a pool, without a rebuild",
    )
    add_config_flags(add, GraphArgs, fields=["pool", "env"])
    add_config_flags(add, GraphConfig, fields=NEIGHBOURS)
    add_config_flags(add, GraphArgs, fields=["store"])
    add.set_defaults(func=add_env_command)


def _print_stats(graph, seconds: float, what: str) -> None:
    from envsched_gnn.graph_build.builder import graph_stats

    stats = graph_stats(graph)

    def mean(name: str) -> str:
        value = stats[f"{name}_mean_sim"]
        return "n/a" if math.isnan(value) else f"{value:.4f}"

    print(
        f"{what} in {seconds:.1f} s: {stats['tasks']} tasks, {stats['environments']} environments, "
        f"{stats['within_edges']} within edges (mean sim {mean('within')}), "
        f"{stats['cross_edges']} cross edges (mean sim {mean('cross')})"
    )


def build_command(args: argparse.Namespace) -> int:
    from envsched_gnn.envs.pool_stream import PoolStream
    from envsched_gnn.graph_store.connect import open_store
    from envsched_gnn.graph_store.errors import StoreError
    from envsched_gnn.graph_store.growth import build_into_store
    from envsched_gnn.memory_watchdog import MemoryLimitExceeded, memory_limit, memory_watchdog

    check_paths(out_folders={"--neo4j-import": args.neo4j_import})
    try:
        config = config_from_args(GraphConfig, args)
        pool = PoolStream(args.pool)  # read environment by environment
        started = time.perf_counter()
        if args.neo4j_import:
            from envsched_gnn.graph_store.neo4j_import import write_neo4j_import

            script = write_neo4j_import(pool, args.neo4j_import, config)
            print(f"wrote the neo4j-admin import files; run {script} on the Neo4j server")
            return 0
        with memory_watchdog(memory_limit(args.max_memory_gib)), open_store(args.store) as store:
            built = build_into_store(store, pool, config)
        _print_stats(built.graph, time.perf_counter() - started, "graph built")
    except (StoreError, ValueError, OSError, MemoryLimitExceeded) as error:
        return fail(error, RUN_ERROR)
    return 0


def export_command(args: argparse.Namespace) -> int:
    from envsched_gnn.graph.task_graph import write_graph
    from envsched_gnn.graph_store.connect import open_store
    from envsched_gnn.graph_store.errors import StoreError

    check_paths(out_files={"--out": args.out})
    try:
        started = time.perf_counter()
        with open_store(args.store) as store:
            graph = store.read_graph()
        write_graph(args.out, graph)
        _print_stats(graph, time.perf_counter() - started, f"exported {args.out}")
    except (StoreError, ValueError, OSError) as error:
        return fail(error, RUN_ERROR)
    return 0


def add_env_command(args: argparse.Namespace) -> int:
    from envsched_gnn.envs.pool_io import load_pool
    from envsched_gnn.graph_store.connect import open_store
    from envsched_gnn.graph_store.errors import StoreError
    from envsched_gnn.graph_store.growth import add_environment, add_pool

    try:
        config = config_from_args(GraphConfig, args)
        pool = load_pool(args.pool)
        if args.env is not None and args.env not in pool.envs:
            return fail(f"--env {args.env!r}: not an environment of the pool {args.pool}")
        started = time.perf_counter()
        with open_store(args.store) as store:
            if args.env is not None:
                add_environment(store, pool, args.env, config)
                added = [args.env]
            else:
                added = add_pool(store, pool, config)
            graph = store.read_graph()
        print(f"added environment(s): {', '.join(added) or 'none (all present)'}")
        _print_stats(graph, time.perf_counter() - started, "graph grown")
    except (StoreError, ValueError, OSError) as error:
        return fail(error, RUN_ERROR)
    return 0
