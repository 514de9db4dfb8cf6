"""``envsched-gnn predict`` and ``envsched-gnn explain``: the analytic predictor from the shell.

``predict --graph graph.json --history history.jsonl --step T --out pred.json`` writes
``{task_id: {"q", "u", "u_long", "u_short", "E_v", "E_m", "E_d"}}`` for every task, using
the observations with step < T only. ``explain TASK --step T`` prints the evidence behind
one task's prediction (``--json`` for machines), from snapshot files or from the store.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from envsched_gnn.observations import add_small_groups_option


def register(groups: dict) -> None:
    p = groups[""].add_parser(
        "predict",
        help="analytic EnvSched predictions for every task of a graph snapshot",
        description="Predict within-task reward variance (spec section 4) for every task, "
        "from observations with step < T.",
    )
    p.add_argument("--graph", required=True, type=Path, help="graph.json snapshot")
    p.add_argument("--history", required=True, type=Path, help="history.jsonl rollout history")
    add_small_groups_option(p)
    p.add_argument("--step", required=True, type=int, help="scheduling step T (uses s < T)")
    p.add_argument("--out", required=True, type=Path, help="where to write pred.json")
    p.set_defaults(func=_predict)

    e = groups[""].add_parser(
        "explain",
        help="the evidence behind one task's prediction at a step",
        description="Show which neighbours, references and own observations drove a task's "
        "predicted reward variance at step T.",
    )
    e.add_argument("task", metavar="TASK", help="task id")
    e.add_argument("--step", required=True, type=int, help="scheduling step T (uses s < T)")
    e.add_argument("--graph", type=Path, help="graph.json snapshot (with --history)")
    e.add_argument("--history", type=Path, help="history.jsonl (with --graph)")
    add_small_groups_option(e)
    e.add_argument("--store", help="read graph and history from this store (URI or folder)")
    e.add_argument("--json", action="store_true", help="print the evidence as JSON")
    e.add_argument(
        "--store-evidence",
        action="store_true",
        help="also write every task's prediction and evidence at step T into the store, "
        "where Cypher finds them: (:Prediction)-[:EVIDENCE]->(:Task) (needs --store)",
    )
    e.set_defaults(func=_explain)


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _load_files(graph_path: Path, history_path: Path, small_groups: str):
    from envsched_gnn.graph.task_graph import read_graph
    from envsched_gnn.observations import ObservationConfig, ObservationLog, read_history

    graph = read_graph(graph_path)
    log = ObservationLog(graph.task_ids, ObservationConfig(small_groups=small_groups))
    try:
        log.extend(read_history(history_path))
    except ValueError as error:
        raise ValueError(f"{history_path}: {error}") from error
    return graph, log


def _write_json_atomically(path: Path, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(payload, out)
            out.write("\n")
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _predict(args: argparse.Namespace) -> int:
    from envsched_gnn.graph.hetero import to_hetero_data
    from envsched_gnn.models.analytic import AnalyticPredictor

    if args.step < 0:
        return _fail(f"--step must be >= 0, got {args.step}")
    try:
        graph, log = _load_files(args.graph, args.history, args.small_groups)
    except (OSError, ValueError) as error:
        return _fail(str(error))
    prediction = AnalyticPredictor().predict(to_hetero_data(graph), log, args.step)
    _write_json_atomically(args.out, prediction.to_json(graph.task_ids))
    print(f"wrote predictions for {graph.num_tasks} tasks at step {args.step} to {args.out}")
    return 0


def _explain(args: argparse.Namespace) -> int:
    from envsched_gnn.graph_store.errors import StoreError
    from envsched_gnn.models.explain_table import render

    if args.step < 0:
        return _fail(f"--step must be >= 0, got {args.step}")
    from_files = args.graph is not None or args.history is not None
    if from_files == (args.store is not None):
        return _fail("give either --graph and --history, or --store")
    if from_files and (args.graph is None or args.history is None):
        return _fail("--graph and --history go together")
    if args.store_evidence and args.store is None:
        return _fail("--store-evidence needs --store")
    try:
        if from_files:
            graph, log = _load_files(args.graph, args.history, args.small_groups)
            evidence = _evidence(graph, log, args)
        else:
            evidence = _explain_from_store(args)
    except (OSError, ValueError, StoreError) as error:
        return _fail(str(error))
    print(json.dumps(evidence, indent=2) if args.json else render(evidence))
    return 0


def _evidence(graph, log, args: argparse.Namespace, store=None) -> dict:
    """Explain ``args.task``; with a store and ``--store-evidence``, store all tasks' evidence."""
    from envsched_gnn.graph.hetero import to_hetero_data
    from envsched_gnn.models.analytic import AnalyticPredictor

    if args.task not in graph.index:
        raise ValueError(f"unknown task {args.task!r}: it is not a node of the graph")
    predictor = AnalyticPredictor()
    data = to_hetero_data(graph)
    evidence = predictor.explain(data, log, args.step, args.task)
    if store is not None and args.store_evidence:
        store.write_predictions(args.step, predictor.evidence_rows(data, log, args.step))
    return evidence


def _explain_from_store(args: argparse.Namespace) -> dict:
    from envsched_gnn.graph_store.connect import open_store
    from envsched_gnn.observations import ObservationConfig, ObservationLog

    with open_store(args.store) as store:
        graph = store.read_graph()
        log = ObservationLog(graph.task_ids, ObservationConfig(small_groups=args.small_groups))
        log.extend(store.read_observations())
        return _evidence(graph, log, args, store)
