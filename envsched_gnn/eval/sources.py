"""Where an eval command's graph and observations come from: a store (``--store``), a graph
with a history (``--graph`` and ``--history``), or a source of the command's own (rollouts
of a policy, replays of references) on a pool whose graph is given or built."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def source_error(args: argparse.Namespace) -> str | None:
    """Why ``--store``, ``--graph`` and ``--history`` do not name one source; None when they
    do (or name none: the command's own source)."""
    if args.history is not None and args.graph is None:
        return "--history needs --graph"
    if args.store is not None and args.graph is not None:
        return "--store reads the graph from the store; leave out --graph"
    return None


def read_source(
    args: argparse.Namespace, own: Callable[[argparse.Namespace], tuple[Any, list]]
) -> tuple[Any, list]:
    """(graph, observations) of the store, of the graph and history files, or ``own(args)``;
    a store's or history's observations must be of the command's ``--reward``."""
    from envsched_gnn.envs.commands import RUNTIME_PREFIX
    from envsched_gnn.observations import check_reward, history_reward

    if args.store is not None:
        from envsched_gnn.graph_store.connect import open_store

        with open_store(args.store) as store:
            graph, observations = store.read_graph(), store.read_observations()
        where = args.store
    elif args.history is not None:
        from envsched_gnn.graph.task_graph import read_graph
        from envsched_gnn.observations import read_history

        graph, observations = read_graph(args.graph), read_history(args.history)
        where = args.history
    else:
        return own(args)
    found = history_reward(observations, where)
    if found is not None:
        check_reward(found, getattr(args, RUNTIME_PREFIX + "reward"), where)
    return graph, observations


def pool_graph(
    pool: Any, graph_file: str | None, out: Path | None, tasks: Sequence[str] | None = None
) -> Any:
    """The graph of ``graph_file``, or the pool's graph built here (restricted to ``tasks``,
    as a scheduler of that split sees it) and written to ``out/graph.json``."""
    from envsched_gnn.graph.task_graph import read_graph, write_graph

    if graph_file is not None:
        return read_graph(graph_file)
    from envsched_gnn.graph_build.builder import build_graph

    graph = build_graph(pool)
    if tasks is not None:
        graph = graph.subgraph(tasks)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        write_graph(out / "graph.json", graph)
    return graph


def measure_source(
    args: argparse.Namespace,
    own: Callable[[argparse.Namespace], tuple[Any, list]],
    make_config: Callable[[], Any],
    measure: Callable[[Any, list, Any], Any],
    render: Callable[[Any], str],
    write: Callable[[Any, str], dict],
) -> int:
    """A measuring command: check the source and ``--out``, build the config, read the source,
    measure, print the report and, with ``--out``, write it; ``error: ...`` for a bad input."""
    from envsched_gnn.graph_store.connect import check_store_spec
    from envsched_gnn.graph_store.errors import StoreError
    from envsched_gnn.validation import check_paths, fail

    if message := source_error(args):
        return fail(message)
    check_paths(
        files={"--history": args.history, "--graph": args.graph},
        folders={"--pool": args.pool},
        out_folders={"--out": args.out},
    )
    check_store_spec(args.store)
    try:
        config = make_config()
        result = measure(*read_source(args, own), config)
    except (OSError, ValueError, StoreError) as error:
        return fail(str(error))
    print(render(result))
    if args.out:
        paths = write(result, args.out)
        print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0
