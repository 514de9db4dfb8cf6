"""``envsched-gnn predict`` and ``envsched-gnn explain``: the analytic predictor from the shell.

``predict`` writes ``{task_id: {"q", "u", "u_long", "u_short", "E_v", "E_m", "E_d"}}`` from
observations with step < T; ``explain TASK --step T`` prints one prediction's evidence
(``--json``, ``--png``, ``--html``), from snapshot files or from the store.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from envsched_gnn.config_cli import add_config_flags, config_from_args
from envsched_gnn.json_files import write_json_atomically
from envsched_gnn.observations import ObservationConfig, add_history_options
from envsched_gnn.validation import check_paths, fail


@dataclass
class PredictArgs:
    """The inputs and output of ``predict``."""

    graph: Path
    """graph.json snapshot."""
    history: Path
    """history.jsonl rollout history."""
    step: int
    """Scheduling step T (uses the observations with s < T)."""
    out: Path
    """Where to write pred.json."""


@dataclass
class ExplainArgs:
    """The inputs of ``explain``: snapshot files or a store."""

    task: str
    """Task id."""
    step: int
    """Scheduling step T (uses the observations with s < T)."""
    graph: Path | None = None
    """graph.json snapshot (with --history)."""
    history: Path | None = None
    """history.jsonl (with --graph)."""
    store: str | None = None
    """Read graph and history from this store (URI or folder)."""
    json: bool = False
    """Print the evidence as JSON."""
    store_evidence: bool = False
    """Also write every prediction and its evidence at step T into the store (needs --store)."""
    png: Path | None = None
    """Also draw the evidence as a picture into this PNG file."""
    html: Path | None = None
    """Also write the picture and its numbers as one self-contained HTML page (offline)."""


def register(groups: dict) -> None:
    p = groups[""].add_parser(
        "predict",
        help="analytic EnvSched predictions for every task of a graph snapshot",
        description="Predict within-task reward variance (spec section 4) for every task, "
        "from observations with step < T.",
    )
    add_config_flags(p, PredictArgs, fields=["graph", "history"])
    add_history_options(p)
    add_config_flags(p, PredictArgs, fields=["step", "out"])
    p.set_defaults(func=_predict)

    e = groups[""].add_parser(
        "explain",
        help="the evidence behind one task's prediction at a step",
        description="Show which neighbours, references and own observations drove a task's "
        "predicted reward variance at step T.",
    )
    add_config_flags(
        e,
        ExplainArgs,
        fields=["task", "step", "graph", "history"],
        positional=["task"],
        metavars={"task": "TASK"},
    )
    add_history_options(e)
    add_config_flags(
        e,
        ExplainArgs,
        fields=["store", "json", "store_evidence", "png", "html"],
        metavars={"png": "FILE", "html": "FILE"},
    )
    e.set_defaults(func=_explain)


def _load_files(graph_path: Path, history_path: Path, config):
    from envsched_gnn.graph.task_graph import read_graph
    from envsched_gnn.observations import ObservationLog, read_history

    graph = read_graph(graph_path)
    log = ObservationLog(graph.task_ids, config)
    try:
        log.extend(read_history(history_path))
    except ValueError as error:
        raise ValueError(f"{history_path}: {error}") from error
    return graph, log


def _predict(args: argparse.Namespace) -> int:
    from envsched_gnn.graph.hetero import to_hetero_data
    from envsched_gnn.models.analytic import AnalyticPredictor

    if args.step < 0:
        return fail(f"--step must be >= 0, got {args.step}")
    check_paths(
        files={"--graph": args.graph, "--history": args.history}, out_files={"--out": args.out}
    )
    try:
        graph, log = _load_files(
            args.graph, args.history, config_from_args(ObservationConfig, args)
        )
    except (OSError, ValueError) as error:
        return fail(str(error))
    prediction = AnalyticPredictor().predict(to_hetero_data(graph), log, args.step)
    write_json_atomically(args.out, prediction.to_json(graph.task_ids), indent=None)
    print(f"wrote predictions for {graph.num_tasks} tasks at step {args.step} to {args.out}")
    return 0


def _explain(args: argparse.Namespace) -> int:
    from envsched_gnn.graph_store.connect import check_store_spec
    from envsched_gnn.graph_store.errors import StoreError
    from envsched_gnn.models.explain_table import render

    if args.step < 0:
        return fail(f"--step must be >= 0, got {args.step}")
    from_files = args.graph is not None or args.history is not None
    if from_files == (args.store is not None):
        return fail("give either --graph and --history, or --store")
    if from_files and (args.graph is None or args.history is None):
        return fail("--graph and --history go together")
    if args.store_evidence and args.store is None:
        return fail("--store-evidence needs --store")
    check_paths(
        files={"--graph": args.graph, "--history": args.history},
        out_files={"--png": args.png, "--html": args.html},
    )
    check_store_spec(args.store)
    try:
        if from_files:
            graph, log = _load_files(
                args.graph, args.history, config_from_args(ObservationConfig, args)
            )
            evidence = _evidence(graph, log, args)
        else:
            evidence = _explain_from_store(args)
    except (OSError, ValueError, StoreError) as error:
        return fail(str(error))
    print(json.dumps(evidence, indent=2) if args.json else render(evidence))
    try:
        if args.png is not None:
            from envsched_gnn.models.evidence_picture import write_png

            print(f"wrote {write_png(evidence, args.png)}", file=sys.stderr)
        if args.html is not None:
            from envsched_gnn.models.evidence_html import write_html

            print(f"wrote {write_html(evidence, args.html)}", file=sys.stderr)
    except OSError as error:
        return fail(str(error))
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
    from envsched_gnn.observations import ObservationLog

    with open_store(args.store) as store:
        graph = store.read_graph()
        log = ObservationLog(graph.task_ids, config_from_args(ObservationConfig, args))
        log.extend(store.read_observations())
        return _evidence(graph, log, args, store)
