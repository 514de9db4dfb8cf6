"""``envsched-gnn bench graph``: build, store and read back the task graph of a large pool.

Per size N: a replicated generator pool written to disk once, streamed environment by
environment into a fresh managed ArcadeDB store (a first build: the bulk import;
``--store-dir`` keeps and reuses stores), read back (snapshot, and with ``--store-read`` the
store), one environment added (``graph add-env``) and one EnvSched step on the graph read back.
Prints each phase's seconds, the cross path (exact or ANN) and the ANN's recall@k_cross on
``--recall-sample`` targets, peak RSS (this process, the store's server, all together; a
watchdog stops the run at ``--max-memory-gib``), disk and ingest rates. ``--store managed URI``
also builds each size into the server at URI (Bolt, batched ``UNWIND``, emptied afterwards;
its memory is the listening process's, its disk is not measured).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from envsched_gnn.config_cli import add_config_flags, config_from_args
from envsched_gnn.graph_build.builder import GraphConfig
from envsched_gnn.memory_watchdog import MemoryLimitExceeded, beside, memory_limit, memory_watchdog
from envsched_gnn.validation import RUN_ERROR, check_bounds, check_paths, fail


@dataclass
class GraphBenchArgs:
    """The pools ``bench graph`` builds and what it measures on them."""

    tasks: list[int] | None = None
    """Pool sizes N (default 10000)."""
    tasks_per_env: int = 100
    """Tasks per environment."""
    chunk: int = 5000
    """Edge rows per UNWIND write."""
    recall_sample: int = 1000
    """Targets whose cross neighbours are checked against the exact kNN."""
    seed: int = 0
    """Pool seed."""
    threads: int = 1
    """Torch threads."""
    progress: bool = False
    """Show progress bars."""
    pool_dir: str | None = None
    """Folder holding the pools on disk (pool-<N>, written once and reused; default: a
    temporary folder)."""
    store_read: bool = True
    """Also read the graph back from the store itself, not only from its snapshot."""
    add_env_tasks: int = 50
    """Tasks of the environment added to the built graph (0: no add-env)."""
    store_dir: str | None = None
    """Folder of the stores (store-<N>-<tasks per env>-<seed>), kept after the run; a store
    there that holds a graph is not built again, and its read back, add-env (of the next
    environment) and step are measured (default: a temporary folder)."""
    max_memory_gib: float | None = None
    """Stop the run, with a message, when this process and the processes it started (workers,
    the store's server) hold more resident memory than this (default: 90% of the machine's)."""
    stores: list[str] | None = None
    """Stores each size is built into, one after the other: 'managed' (a new managed ArcadeDB
    folder) and/or a bolt:// or neo4j:// URI of an empty database (credentials from
    NEO4J_USER/NEO4J_PASSWORD/NEO4J_DATABASE), emptied again after it is measured (default:
    managed)."""

    def __post_init__(self) -> None:
        check_bounds(
            self,
            integers=("tasks", "tasks_per_env", "chunk", "recall_sample", "seed", "threads"),
            at_least={"tasks": 64, "tasks_per_env": 1, "chunk": 1, "threads": 1},
            non_negative=("recall_sample", "seed", "add_env_tasks"),
            positive=("max_memory_gib",),
            optional=("tasks", "max_memory_gib"),
        )


MANAGED = "managed"


def peak_rss_mib(pid: int | str = "self") -> float:
    """Peak resident memory of a process (``VmHWM`` of /proc; NaN where unreadable)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    if pid == "self":
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return float("nan")


def reset_peak_rss(pid: int | str = "self") -> None:
    """Restart a process's ``VmHWM`` from its current RSS (Linux ``clear_refs``; else no-op)."""
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/clear_refs").write_text("5")


def folder_bytes(folder: Path) -> int:
    """Bytes of the files under ``folder`` (0 when it does not exist)."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                total += (Path(root) / name).stat().st_size
    return total


@contextlib.contextmanager
def peak_disk(folder: Path, interval: float = 2.0) -> Iterator[dict[str, int]]:
    """The largest :func:`folder_bytes` of ``folder`` while the block runs (``["peak"]``)."""
    seen = {"peak": 0}

    def sample(stop: threading.Event) -> None:
        while True:
            seen["peak"] = max(seen["peak"], folder_bytes(folder))
            if stop.wait(interval):
                return

    with beside(sample, "disk-sampler"):
        yield seen
    seen["peak"] = max(seen["peak"], folder_bytes(folder))


def cross_recall(graph, q: np.ndarray, group: np.ndarray, k: int, sample: int, seed: int) -> float:
    """Share of the exact top-``k`` cross in-neighbours of ``sample`` random targets that the
    graph has (recall@k; 1.0 for the exact path). ``q`` the distinct fixed-point embeddings,
    ``group`` each node's row."""
    from envsched_gnn.graph_build.cross import cross_neighbours
    from envsched_gnn.graph_build.neighbours import task_hashes

    rng = np.random.default_rng(seed)
    targets = np.sort(rng.choice(graph.num_tasks, min(sample, graph.num_tasks), replace=False))
    env_codes = graph.env_index()[1]
    hashes = task_hashes(graph.task_ids)
    dst, src, _ = cross_neighbours(q, env_codes, hashes, targets, k, group=group, block=64)
    cross = graph.edges["cross"]
    sampled = np.isin(cross.dst, targets)
    have = set(zip(cross.dst[sampled].tolist(), cross.src[sampled].tolist(), strict=True))
    wanted = list(zip(dst.tolist(), src.tolist(), strict=True))
    return sum(pair in have for pair in wanted) / max(len(wanted), 1)


def bench_size(
    args: argparse.Namespace, num_tasks: int, folder: Path, store_spec: str = MANAGED
) -> dict:
    """Every phase at one pool size, into the store ``store_spec`` (see the module docstring)."""
    from envsched_gnn.envs.pool_stream import PoolStream
    from envsched_gnn.graph_build.embeddings import EmbeddingConfig
    from envsched_gnn.graph_store.connect import open_store
    from envsched_gnn.graph_store.growth import stored_abstracts
    from envsched_gnn.graph_store.stream import stream_build

    out: dict = {"tasks": num_tasks, "store": "arcadedb" if store_spec == MANAGED else "uri"}
    started = time.perf_counter()
    pool = PoolStream(_pool_on_disk(args, num_tasks, folder))
    out["pool_s"] = time.perf_counter() - started
    config = config_from_args(
        GraphConfig,
        args,
        show_progress=args.progress,
        embedding=EmbeddingConfig(show_progress=args.progress),
    )
    phases: dict[str, float] = {}
    if store_spec != MANAGED:
        return _bench_uri_store(args, store_spec, pool, config, out)
    root = Path(args.store_dir) if args.store_dir else folder
    store_folder = root / f"store-{num_tasks}-{args.tasks_per_env}-{args.seed}"
    with open_store(store_folder) as store, peak_disk(store_folder) as disk:
        reset_peak_rss()
        reused = store.count_tasks() > 0  # a kept store of an earlier run: measured, not built
        if not reused:
            started = time.perf_counter()
            built = stream_build(store, pool, config, chunk=args.chunk, phases=phases)
            abstracts = built.node_abstracts
            out["build_store_s"] = time.perf_counter() - started
        out["store_disk_mib"] = folder_bytes(store_folder) / (1 << 20)
        started = time.perf_counter()
        graph = store.read_graph()  # the snapshot written by the build
        out["read_back_s"] = time.perf_counter() - started
        if reused:
            abstracts = stored_abstracts(store, graph)[0]
        if args.store_read:
            store.snapshot_path.unlink()
            started = time.perf_counter()
            from_store = store.read_graph()
            out["store_read_s"] = time.perf_counter() - started
            if sorted(from_store.edge_rows()) != sorted(graph.edge_rows()):
                raise AssertionError("the snapshot and the store hold different graphs")
            del from_store
        out["peak_rss_mib"] = peak_rss_mib()  # build, store and read back (pool excluded)
        server = store.server
        out["server_peak_rss_mib"] = peak_rss_mib(server.pid) if server else float("nan")
        if args.add_env_tasks:
            out["add_env_s"] = _add_one_environment(args, store, graph, config)
    out["peak_disk_mib"] = disk["peak"] / (1 << 20)  # the import file and the database
    return _graph_numbers(args, pool, config, graph, abstracts, phases, out)


def _bench_uri_store(
    args: argparse.Namespace, uri: str, pool, config: GraphConfig, out: dict
) -> dict:
    """:func:`bench_size` into the empty database at ``uri``, emptied again afterwards."""
    from envsched_gnn.graph_store.connect import open_store
    from envsched_gnn.graph_store.errors import StoreError
    from envsched_gnn.graph_store.listener import server_pid
    from envsched_gnn.graph_store.stream import stream_build

    phases: dict[str, float] = {}
    with open_store(uri) as store:
        held = {label: store.count_nodes(label) for label in ("Environment", "Task", "Abstract")}
        if any(held.values()):
            raise StoreError(
                f"bench graph --store {uri}: the database holds {held}; the bench needs an "
                "empty one (it writes a graph there and deletes it afterwards)"
            )
        out["store"] = "arcadedb" if "ArcadeDB" in store.server_agent() else "neo4j"
        pid = server_pid(uri)
        if pid is not None:
            reset_peak_rss(pid)
        reset_peak_rss()
        try:
            started = time.perf_counter()
            built = stream_build(store, pool, config, chunk=args.chunk, phases=phases)
            out["build_store_s"] = time.perf_counter() - started
            started = time.perf_counter()
            graph = store.read_graph()  # no snapshot beside a server: read from the store
            out["read_back_s"] = out["store_read_s"] = time.perf_counter() - started
            if sorted(graph.edge_rows()) != sorted(built.graph.edge_rows()):
                raise AssertionError("the store holds another graph than the one built")
            out["peak_rss_mib"] = peak_rss_mib()
            out["server_peak_rss_mib"] = peak_rss_mib(pid) if pid is not None else float("nan")
            if args.add_env_tasks:
                out["add_env_s"] = _add_one_environment(args, store, graph, config)
        finally:
            store.clear()
    return _graph_numbers(args, pool, config, graph, built.node_abstracts, phases, out)


def _graph_numbers(
    args: argparse.Namespace, pool, config: GraphConfig, graph, abstracts, phases: dict, out: dict
) -> dict:
    """The numbers of a built graph beside its store's: sizes, rates, recall, one step."""
    from envsched_gnn.bench.scheduler import time_steps
    from envsched_gnn.graph_build.cross import distinct_groups
    from envsched_gnn.graph_build.embeddings import fixed_point

    num_tasks = out["tasks"]
    out["pool_disk_mib"] = folder_bytes(pool.path.parent) / (1 << 20)
    out.update({f"{name}_s": seconds for name, seconds in phases.items()})
    edges = sum(len(e) for e in graph.edges.values())
    out["edges"] = edges
    out["distinct_abstracts"] = len(abstracts.texts)
    out["cross_path"] = "ann" if num_tasks >= config.ann_threshold else "exact"
    if phases:
        out["edges_per_s_written"] = edges / max(phases["store_write"], 1e-9)
    q, group = distinct_groups(fixed_point(abstracts.vectors), abstracts.codes)
    out["recall"] = cross_recall(graph, q, group, config.k_cross, args.recall_sample, args.seed)
    step = time_steps(graph, repeats=3, history_steps=2, seed=args.seed)
    out["step_s"] = step["step_seconds"]
    return out


def _pool_on_disk(args: argparse.Namespace, num_tasks: int, folder: Path) -> Path:
    """The replicated pool of ``num_tasks`` tasks on disk, written once (reused when there)."""
    from envsched_gnn.envs.generator.tasks import write_replicated_pool

    where = Path(args.pool_dir or folder) / f"pool-{num_tasks}-{args.tasks_per_env}-{args.seed}"
    if not (where / "tasks.jsonl").exists():
        n_envs, rest = divmod(num_tasks, args.tasks_per_env)
        if rest:
            raise ValueError(f"--tasks {num_tasks}: not a multiple of --tasks-per-env")
        write_replicated_pool(where, n_envs, args.tasks_per_env, seed=args.seed)
    return where


def _add_one_environment(args, store, graph, config) -> float:
    """Seconds of ``graph add-env`` of the next replicated environment into the stored graph."""
    from envsched_gnn.envs.generator.tasks import replicated_environment
    from envsched_gnn.envs.pool import Pool
    from envsched_gnn.graph_store.growth import add_environment

    n_envs = len(set(graph.env_ids))
    env, tasks = replicated_environment(n_envs, args.add_env_tasks, seed=args.seed)
    started = time.perf_counter()
    add_environment(store, Pool({env.env_id: env}, tasks), env.env_id, config)
    return time.perf_counter() - started


COLUMNS = (  # (result key, header, width, format)
    ("store", "store", 8, "s"),
    ("tasks", "tasks", 9, "d"),
    ("edges", "edges", 10, "d"),
    ("distinct_abstracts", "distinct", 9, "d"),
    ("cross_path", "path", 6, "s"),
    ("pool_s", "pool_s", 7, ".1f"),
    ("within_s", "within_s", 8, ".1f"),
    ("embed_s", "embed_s", 8, ".1f"),
    ("cross_s", "cross_s", 8, ".1f"),
    ("store_write_s", "write_s", 8, ".1f"),
    ("read_back_s", "read_s", 7, ".1f"),
    ("store_read_s", "db_read_s", 9, ".1f"),
    ("add_env_s", "add_env_s", 9, ".1f"),
    ("recall", "recall", 7, ".4f"),
    ("peak_rss_mib", "rss_MiB", 8, ".0f"),
    ("server_peak_rss_mib", "srv_MiB", 8, ".0f"),
    ("tree_peak_rss_mib", "all_MiB", 8, ".0f"),
    ("peak_disk_mib", "disk_MiB", 8, ".0f"),
    ("step_s", "step_s", 7, ".3f"),
)


def _cell(value, width: int, spec: str) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}{spec}}"


def _run(args: argparse.Namespace) -> int:
    import torch

    from envsched_gnn.graph_store.connect import check_store_spec
    from envsched_gnn.graph_store.errors import StoreError

    # every cheap input first: a wrong one is refused before a pool is generated
    config_from_args(GraphBenchArgs, args)
    config_from_args(GraphConfig, args)
    check_paths(out_folders={"--pool-dir": args.pool_dir, "--store-dir": args.store_dir})
    for store in args.stores or []:
        if store != MANAGED:
            check_store_spec(store)
    torch.set_num_threads(args.threads)
    sizes = args.tasks or [10_000]
    limit = memory_limit(args.max_memory_gib)
    print(" ".join(f"{header:>{width}}" for _, header, width, _ in COLUMNS))
    with tempfile.TemporaryDirectory(prefix="bench-graph-") as folder:
        for n in sizes:
            for store in args.stores or [MANAGED]:
                try:
                    with memory_watchdog(limit) as memory:
                        r = bench_size(args, n, Path(folder), store)
                except MemoryLimitExceeded as stopped:
                    print(f"--tasks {n} --store {store}: {stopped}")
                    return 1
                except StoreError as error:
                    return fail(error, RUN_ERROR)
                r["tree_peak_rss_mib"] = memory.peak / (1 << 20)
                print(" ".join(_cell(r.get(key), width, spec) for key, _, width, spec in COLUMNS))
                print(json.dumps(r), flush=True)
    return 0


def register(groups: dict) -> None:
    p = groups["bench"].add_parser(
        "graph",
        help="build, store and read back the graph of a large generated pool",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    add_config_flags(p, GraphBenchArgs, fields=["tasks", "tasks_per_env"])
    add_config_flags(
        p, GraphConfig, fields=["ann_threshold", "within_workers", "embed_workers", "ray", "bulk"]
    )
    add_config_flags(
        p,
        GraphBenchArgs,
        fields=[
            *("chunk", "recall_sample", "seed", "threads", "progress"),
            *("pool_dir", "store_dir", "store_read", "add_env_tasks", "max_memory_gib"),
            "stores",
        ],
        flags={"stores": "--store"},
        metavars={"stores": "STORE"},
    )
    p.set_defaults(func=_run)
