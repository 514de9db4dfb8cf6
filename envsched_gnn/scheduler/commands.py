"""``envsched-gnn select``: one batch from a graph snapshot and a rollout history.

Loads ``history.jsonl`` into a scheduler over ``graph.json`` (spec section 8; a task observed at
step s was selected at s), builds the batch of step T and writes ``{"batch": [task_id, ...],
"stage": {task_id: stage}, "relaxed": [quota, ...]}``; nothing is written when an input is invalid.

The scheduler is built as the adapters build theirs (:mod:`~envsched_gnn.scheduler.building`):
``envsched_ops`` reads the operation patterns of ``--pool``'s tasks; a scheduler behind dynamic
sampling (``NAME+ds``, ``dapo``) is refused, since a history holds the groups rolled out but
not those the composition keeps pending, nor what sized its last generation batch.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from envsched_gnn.config_cli import add_config_flags, config_from_args
from envsched_gnn.json_files import write_json_atomically
from envsched_gnn.observations import ObservationConfig, add_history_options
from envsched_gnn.scheduler.building import Caller
from envsched_gnn.scheduler.dynamic_sampling import (
    GENERATION_RULES,
    SURPLUS_RULES,
    DynamicSamplingConfig,
)
from envsched_gnn.validation import check_bounds, check_paths, fail

SAMPLING_PREFIX = "ds_"
"""Namespace prefix of the dynamic-sampling flags (``--ds-*``)."""


@dataclass
class SelectArgs:
    """The inputs and output of ``select``."""

    graph: str
    """Graph snapshot, graph.json."""
    step: int
    """Scheduling step T."""
    out: str
    """Where to write batch.json."""
    history: str | None = None
    """Rollout history, history.jsonl (omit: no history)."""
    batch: int = 64
    """Batch size B."""
    seed: int = 0
    """Seed of tie-breaking / sampling."""
    scheduler: str = "envsched"
    """Scheduler: envsched, within_only, cross_only, rho0, rho1, envsched_spread,
    envsched_ops (with --pool), random, mopps, ... (registered; not NAME+ds or dapo)."""
    pool: str | None = None
    """Pool folder the graph was built from, whose operation patterns envsched_ops reads."""

    def __post_init__(self) -> None:
        from envsched_gnn.scheduler.registry import check_scheduler_name

        check_bounds(self, integers=("seed",), non_negative=("seed",))
        check_scheduler_name(self.scheduler)


SELECT = Caller(
    "select",
    "--pool DIR (the pool the graph was built from)",
    over_sampling_refused=(
        "a history holds the groups rolled out, not those dynamic sampling keeps pending for "
        "its next update nor what sized its last generation batch, so one batch cannot be "
        "chosen from it"
    ),
)
"""What ``select`` can run (module docstring)."""


def _select(args: argparse.Namespace) -> int:
    from envsched_gnn.envs.pool_io import load_pool
    from envsched_gnn.graph.task_graph import GraphError, read_graph
    from envsched_gnn.observations import ObservationError, read_history
    from envsched_gnn.scheduler.base import SchedulerError
    from envsched_gnn.scheduler.building import build_scheduler, check_request
    from envsched_gnn.scheduler.selector import SelectionError

    config_from_args(SelectArgs, args)  # its bounds and names, before anything is read
    check_request(SELECT, args.scheduler, has_operations=args.pool is not None)
    check_paths(
        folders={"--pool": args.pool},
        files={"--graph": args.graph, "--history": args.history},
        out_files={"--out": args.out},
    )
    try:
        graph = read_graph(args.graph)
        observations = read_history(args.history) if args.history else []
        pool = load_pool(args.pool) if args.pool is not None else None
        scheduler = build_scheduler(
            SELECT, args.scheduler, graph, batch_size=args.batch, seed=args.seed, pool=pool
        )
        scheduler.log.config = config_from_args(ObservationConfig, args)
        try:
            scheduler.load_history(observations)
        except ObservationError as error:
            raise ObservationError(f"{args.history}: {error}") from error
        scheduler.next_batch(args.step)
    except (
        GraphError,
        ObservationError,
        SchedulerError,
        SelectionError,
        ValueError,
        OSError,
    ) as error:
        return fail(error)
    write_json_atomically(args.out, scheduler.last_batch.to_json())
    return 0


def add_sampling_flags(parser: argparse.ArgumentParser) -> None:
    """``--ds-generation``, ``--ds-oversample``, ``--ds-max-oversample``, ``--ds-headroom``,
    ``--ds-surplus`` and ``--ds-max-generation-batches``: the dynamic sampling of every
    ``NAME+ds`` scheduler, the same flags on every command that trains."""
    group = parser.add_argument_group("dynamic sampling (schedulers named NAME+ds)")
    names = (
        "generation",
        "oversample",
        "max_oversample",
        "headroom",
        "surplus",
        "max_generation_batches",
    )
    add_config_flags(
        group,
        DynamicSamplingConfig,
        fields=names,
        flags={name: "--ds-" + name.replace("_", "-") for name in names},
        choices={"generation": GENERATION_RULES, "surplus": SURPLUS_RULES},
        dest_prefix=SAMPLING_PREFIX,
    )


def sampling_from_args(args: argparse.Namespace) -> DynamicSamplingConfig:
    """The :class:`DynamicSamplingConfig` of :func:`add_sampling_flags`' flags."""
    return config_from_args(DynamicSamplingConfig, args, dest_prefix=SAMPLING_PREFIX)


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text}")
    return value


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def register(groups: dict) -> None:
    p = groups[""].add_parser(
        "select",
        help="select the batch of one step from graph.json and history.jsonl",
        description=__doc__.split("\n\n")[1],
    )
    add_config_flags(p, SelectArgs, fields=["graph", "history"])
    add_history_options(p)
    add_config_flags(
        p,
        SelectArgs,
        fields=["step", "batch", "seed", "out", "scheduler", "pool"],
        types={"step": _non_negative, "batch": _positive},
    )
    p.set_defaults(func=_select)
