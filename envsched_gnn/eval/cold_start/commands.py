"""CLI: ``eval cold-start``, first-visit predictions of environments that join the pool."""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from envsched_gnn.config_cli import add_config_flags, config_from_args
from envsched_gnn.envs.commands import RUNTIME_PREFIX, runtime_config
from envsched_gnn.envs.runtime_config import RuntimeConfig
from envsched_gnn.eval.cold_start.measure import ColdStartConfig
from envsched_gnn.eval.sources import measure_source, pool_graph
from envsched_gnn.validation import ConfigError, check_bounds


@dataclass
class ColdStartArgs:
    """Where ``eval cold-start`` takes graph and observations from, and where it writes."""

    history: str | None = None
    """history.jsonl of a run or of rollout rounds (needs --graph)."""
    store: str | None = None
    """Read graph and observations from this store."""
    pool: str | None = None
    """Roll out the noisy reference expert on this pool's split (two rounds, at steps 0 and
    1): every sample replays the task's reference solution, each call left out with
    probability --drop-calls, in the sandboxed runtime (no policy)."""
    graph: str | None = None
    """graph.json (with --history; with --pool, default: built from the pool)."""
    split: str = "train"
    """Split of --pool whose tasks are rolled out."""
    k: int = 8
    """Samples per task and round (with --pool)."""
    drop_calls: float = 0.3
    """Probability that the noisy expert leaves out each reference call (with --pool)."""
    out: str | None = None
    """Folder for cold_start.json / .md (and, with --pool, graph.json and history.jsonl)."""

    def __post_init__(self) -> None:
        check_bounds(self, integers=("k",), at_least={"k": 2}, unit=("drop_calls",))


def register(groups: dict[str, argparse._SubParsersAction]) -> None:
    p = groups["eval"].add_parser(
        "cold-start",
        help="environments that join the pool: their first-visit predictions against their "
        "realised variance, with the relabelled control and CIs",
        description="Environments growing into the pool, simulated: each fold of environments "
        "joins in turn and its tasks are predicted at their first visit from the other "
        "environments' observations only (the cross relation alone). Scores EnvSched's q and the "
        "cross estimate (Spearman, AUC for v > 0) against the environment-free prior and the "
        "relabelled control graph, with 95 % bootstrap intervals over environments.",
    )
    source = p.add_mutually_exclusive_group(required=True)
    add_config_flags(source, ColdStartArgs, fields=["history", "store", "pool"])
    add_config_flags(p, ColdStartArgs, fields=["graph", "split", "k", "drop_calls"])
    add_config_flags(p, RuntimeConfig, fields=["workers", "reward"], dest_prefix=RUNTIME_PREFIX)
    add_config_flags(
        p, ColdStartConfig, fields=["folds", "join_step", "control_draws", "bootstrap", "seed"]
    )
    add_config_flags(p, ColdStartArgs, fields=["out"])
    p.set_defaults(func=_cold_start)


def _cold_start(args: argparse.Namespace) -> int:
    from envsched_gnn.eval.cold_start.measure import cold_start
    from envsched_gnn.eval.cold_start.report import render, write

    # every cheap input first (measure_source checks the source's paths): a wrong one is
    # refused before a store opens or references run
    config_from_args(ColdStartArgs, args)
    config_from_args(ColdStartConfig, args)
    runtime_config(args)
    command = "envsched-gnn " + shlex.join(sys.argv[1:]) if sys.argv[1:] else ""
    return measure_source(
        args,
        _reference_source,
        lambda: config_from_args(ColdStartConfig, args),
        cold_start,
        lambda result: render(result, command),
        lambda result, out: write(result, out, command),
    )


def _reference_source(args: argparse.Namespace):
    """The graph of the pool's split (given, or built from the pool; the scheduler's graph) and
    two rounds of noisy reference replays; with ``--out``, ``graph.json`` and
    ``history.jsonl`` are written there."""
    from envsched_gnn.envs.pool_io import load_pool
    from envsched_gnn.envs.runtime import EnvRuntime
    from envsched_gnn.eval.reference_rounds import reference_rounds
    from envsched_gnn.observations import write_history

    pool = load_pool(args.pool)
    tasks = [task.task_id for task in pool.split(args.split)]
    if not tasks:
        raise ConfigError(f"the pool has no task in split {args.split!r}")
    out = Path(args.out) if args.out else None
    graph = pool_graph(pool, args.graph, out, tasks)
    config = runtime_config(args)
    with EnvRuntime(pool, config) as runtime:
        observations = reference_rounds(
            runtime,
            pool,
            tasks,
            k=args.k,
            drop=args.drop_calls,
            seed=args.seed,
            reward=config.reward,
        )
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        write_history(out / "history.jsonl", observations)
    return graph, observations
