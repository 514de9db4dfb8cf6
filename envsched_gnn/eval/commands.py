"""``envsched-gnn eval compare-predictors`` and ``envsched-gnn eval ablate``."""

from __future__ import annotations

import argparse


def register(groups: dict[str, argparse._SubParsersAction]) -> None:
    p = groups["eval"].add_parser(
        "compare-predictors",
        help="replay a logged run: analytic vs learned propagation, scored from the past only",
    )
    p.add_argument("--history", required=True, help="history.jsonl of the run")
    p.add_argument("--graph", required=True, help="graph.json of the run's pool")
    p.add_argument("--out", default=None, help="folder for compare.json / .md / .png")
    p.add_argument("--seed", type=int, default=0, help="seed of the learned layer")
    p.set_defaults(func=_compare_predictors)


def _compare_predictors(args: argparse.Namespace) -> int:
    from envsched_gnn.eval.compare import compare_predictors, write_comparison
    from envsched_gnn.graph_store.snapshot import read_graph
    from envsched_gnn.models.analytic import AnalyticPredictor
    from envsched_gnn.models.learned import LearnedConfig, LearnedPropagation
    from envsched_gnn.observations import read_history

    graph = read_graph(args.graph)
    observations = read_history(args.history)
    predictors = {
        "analytic": AnalyticPredictor(),
        "learned": LearnedPropagation(LearnedConfig(seed=args.seed)),
    }
    comparison = compare_predictors(graph, observations, predictors)
    print(comparison.table())
    if args.out:
        paths = write_comparison(comparison, args.out)
        print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0
