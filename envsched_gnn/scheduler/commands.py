"""``envsched-gnn select``: one batch from a graph snapshot and a rollout history.

Reads ``graph.json`` and ``history.jsonl`` (spec section 8), replays the history (a task
observed at step s counts as selected at step s: that gives c_i, C_e, the 3-step window
and the consecutive cap; the predictor uses the observations with s < T), builds the batch
of step T and writes ``{"batch": [task_id, ...], "stage": {task_id: stage}, "relaxed":
[quota, ...]}``. Nothing is written when an input is invalid.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from envsched_gnn.observations import add_small_groups_option


def _select(args: argparse.Namespace) -> int:
    from envsched_gnn.graph.task_graph import GraphError, read_graph
    from envsched_gnn.observations import ObservationConfig, ObservationError, read_history
    from envsched_gnn.scheduler.base import SchedulerError
    from envsched_gnn.scheduler.registry import make_scheduler
    from envsched_gnn.scheduler.selector import SelectionError

    try:
        graph = read_graph(args.graph)
        observations = read_history(args.history) if args.history else []
        scheduler = make_scheduler(args.scheduler, graph, batch_size=args.batch, seed=args.seed)
        scheduler.log.config = ObservationConfig(small_groups=args.small_groups)
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
        print(f"envsched-gnn select: {error}", file=sys.stderr)
        return 2
    _write_json(Path(args.out), scheduler.last_batch.to_json())
    return 0


def _write_json(path: Path, data: dict) -> None:
    """Write atomically: a temporary file in the same folder, then rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1)
            handle.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
    p.add_argument("--graph", required=True, help="graph snapshot, graph.json")
    p.add_argument("--history", help="rollout history, history.jsonl (omit: no history)")
    add_small_groups_option(p)
    p.add_argument("--step", type=_non_negative, required=True, help="scheduling step T")
    p.add_argument("--batch", type=_positive, default=64, help="batch size B (default 64)")
    p.add_argument("--seed", type=int, default=0, help="seed of tie-breaking / sampling")
    p.add_argument("--out", required=True, help="where to write batch.json")
    p.add_argument(
        "--scheduler",
        default="envsched",
        help="envsched (default), within_only, cross_only, rho0, rho1, random, dapo, mopps, "
        "greso, dps, or another registered name",
    )
    p.set_defaults(func=_select)
