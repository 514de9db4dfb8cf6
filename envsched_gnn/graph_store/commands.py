"""``envsched-gnn graph ...``: build, export and grow the task graph in the store.

Every command takes ``--store``: a ``bolt://`` / ``neo4j://`` URI (credentials from
``NEO4J_USER`` / ``NEO4J_PASSWORD`` / ``NEO4J_DATABASE``) or a folder for the managed
ArcadeDB default; without it, ``NEO4J_URI`` when set, else ``.envsched/store``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import replace

STORE_HELP = (
    "bolt:// or neo4j:// URI (credentials from NEO4J_USER/NEO4J_PASSWORD/NEO4J_DATABASE) or a "
    "folder for the managed ArcadeDB store (default: NEO4J_URI if set, else .envsched/store)"
)


def register(groups: dict[str, argparse._SubParsersAction]) -> None:
    graph = groups["graph"]

    build = graph.add_parser("build", help="build the dual-relation graph of a pool into the store")
    build.add_argument("--pool", required=True, help="pool folder (envs.json + tasks.json)")
    _neighbour_options(build)
    build.add_argument(
        "--ann-threshold",
        type=int,
        default=None,
        help="pools of at least this many tasks use the approximate cross kNN "
        "(HNSW candidates, exact re-rank; default 50000)",
    )
    build.add_argument(
        "--within-workers",
        type=int,
        default=1,
        help="processes computing the within edges (same graph for any count; default 1)",
    )
    _store_option(build)
    build.set_defaults(func=build_command)

    export = graph.add_parser("export", help="write the store's graph as graph.json")
    export.add_argument("--out", required=True, help="path of the graph.json to write")
    _store_option(export)
    export.set_defaults(func=export_command)

    add = graph.add_parser(
        "add-env",
        help="add one environment (--env) or every new environment of a pool, without a rebuild",
    )
    add.add_argument("--pool", required=True, help="pool folder holding the new environment(s)")
    add.add_argument("--env", help="environment id to add (default: every one the store lacks)")
    _neighbour_options(add)
    _store_option(add)
    add.set_defaults(func=add_env_command)


def _store_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", default=None, help=STORE_HELP)


def _neighbour_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--k-within", type=int, default=6, help="within in-neighbours (default 6)")
    parser.add_argument("--k-cross", type=int, default=12, help="cross in-neighbours (default 12)")


def _config(args: argparse.Namespace):
    from envsched_gnn.graph_store.builder import GraphConfig

    config = GraphConfig(
        k_within=args.k_within,
        k_cross=args.k_cross,
        within_workers=getattr(args, "within_workers", 1),
    )
    threshold = getattr(args, "ann_threshold", None)
    return config if threshold is None else replace(config, ann_threshold=threshold)


def _print_stats(graph, seconds: float, what: str) -> None:
    from envsched_gnn.graph_store.builder import graph_stats

    stats = graph_stats(graph)

    def mean(name: str) -> str:
        value = stats[f"{name}_mean_sim"]
        return "n/a" if math.isnan(value) else f"{value:.4f}"

    print(
        f"{what} in {seconds:.1f} s: {stats['tasks']} tasks, {stats['environments']} environments, "
        f"{stats['within_edges']} within edges (mean sim {mean('within')}), "
        f"{stats['cross_edges']} cross edges (mean sim {mean('cross')})"
    )


def _fail(error: Exception) -> int:
    print(f"error: {error}", file=sys.stderr)
    return 1


def build_command(args: argparse.Namespace) -> int:
    from envsched_gnn.envs.pool_io import load_pool
    from envsched_gnn.graph_store.connect import open_store
    from envsched_gnn.graph_store.errors import StoreError
    from envsched_gnn.graph_store.growth import build_into_store

    try:
        config = _config(args)
        pool = load_pool(args.pool)
        started = time.perf_counter()
        with open_store(args.store) as store:
            built = build_into_store(store, pool, config)
        _print_stats(built.graph, time.perf_counter() - started, "graph built")
    except (StoreError, ValueError, OSError) as error:
        return _fail(error)
    return 0


def export_command(args: argparse.Namespace) -> int:
    from envsched_gnn.graph.task_graph import write_graph
    from envsched_gnn.graph_store.connect import open_store
    from envsched_gnn.graph_store.errors import StoreError

    try:
        started = time.perf_counter()
        with open_store(args.store) as store:
            graph = store.read_graph()
        write_graph(args.out, graph)
        _print_stats(graph, time.perf_counter() - started, f"exported {args.out}")
    except (StoreError, ValueError, OSError) as error:
        return _fail(error)
    return 0


def add_env_command(args: argparse.Namespace) -> int:
    from envsched_gnn.envs.pool_io import load_pool
    from envsched_gnn.graph_store.connect import open_store
    from envsched_gnn.graph_store.errors import StoreError
    from envsched_gnn.graph_store.growth import add_environment, add_pool

    try:
        config = _config(args)
        pool = load_pool(args.pool)
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
        return _fail(error)
    return 0
