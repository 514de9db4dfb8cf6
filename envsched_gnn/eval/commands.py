"""``envsched-gnn eval compare-predictors`` and ``envsched-gnn eval ablate``."""

from __future__ import annotations

import argparse
from dataclasses import replace

from envsched_gnn.eval.policy_learner import PolicyLearnerConfig


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

    p = groups["eval"].add_parser(
        "ablate",
        help="EnvSched, its ablations and the baselines at one rollout budget "
        "(learner: simulator, or real GRPO of the policy)",
    )
    p.add_argument(
        "--pool", required=True, help="pool folder (EnvScaler layout, with a test split)"
    )
    p.add_argument("--seeds", type=int, default=5, help="run seeds 0..N-1 (default 5)")
    p.add_argument("--steps", type=int, default=200, help="budget in steps of B x K (default 200)")
    p.add_argument("--batch-size", type=int, default=64, help="B (default 64)")
    p.add_argument("--rollouts", type=int, default=8, help="K (default 8)")
    p.add_argument(
        "--learner",
        choices=("sim", "policy"),
        default="sim",
        help="sim: the learner simulator; policy: a real GRPO run per scheduler and seed",
    )
    p.add_argument(
        "--shuffle-graph",
        action="store_true",
        help="also run EnvSched on a graph of shuffled environments and abstracts (spec 7)",
    )
    p.add_argument(
        "--schedulers",
        nargs="+",
        default=None,
        help="subset of schedulers to run (space- or comma-separated; default all)",
    )
    p.add_argument(
        "--k-grid",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run the neighbour-size grid (default: yes with the simulator, no with the policy)",
    )
    p.add_argument("--workers", type=int, default=2, help="worker processes (simulator; default 2)")
    p.add_argument("--world-seed", type=int, default=0, help="seed of the simulator's world")
    p.add_argument(
        "--evaluations",
        type=int,
        default=5,
        help="policy: held-out evaluations per run after step 0, every ceil(S / this) steps (5)",
    )
    policy = PolicyLearnerConfig()
    p.add_argument("--model", default=None, help="policy: local HF causal LM folder (built-in)")
    p.add_argument(
        "--sft-steps",
        type=int,
        default=policy.sft_steps,
        help=f"policy: SFT warm-start optimiser steps; 0 starts from --model as is "
        f"({policy.sft_steps})",
    )
    p.add_argument("--lr", type=float, help=f"policy: GRPO learning rate ({policy.recipe.lr:g})")
    p.add_argument(
        "--policy-workers",
        type=int,
        default=policy.workers,
        help=f"policy: GRPO runs trained at once, one process each ({policy.workers})",
    )
    p.add_argument(
        "--eval-tasks",
        type=int,
        default=policy.eval_tasks,
        help=f"policy: held-out tasks scored, 0: all ({policy.eval_tasks})",
    )
    p.add_argument(
        "--eval-samples",
        type=int,
        default=policy.eval_samples,
        help=f"policy: samples per held-out task ({policy.eval_samples})",
    )
    p.add_argument("--accelerator", choices=("auto", "cpu", "gpu"), default="auto")
    p.add_argument("--out", required=True, help="output folder (graphs are cached under it)")
    p.set_defaults(func=_ablate)


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


def _ablate(args: argparse.Namespace) -> int:
    from envsched_gnn.envs.pool_io import load_pool
    from envsched_gnn.eval.ablate import AblationConfig, run_ablation
    from envsched_gnn.eval.ablation_report import render_margins, render_table
    from envsched_gnn.eval.simulate import SimulatorConfig

    options = {}
    if args.schedulers:
        names = [n.strip() for arg in args.schedulers for n in arg.split(",") if n.strip()]
        options["schedulers"] = tuple(names)
    if not (args.k_grid if args.k_grid is not None else args.learner == "sim"):
        options["k_grid"] = ()
    recipe = PolicyLearnerConfig().recipe
    config = AblationConfig(
        seeds=args.seeds,
        steps=args.steps,
        batch_size=args.batch_size,
        learner=args.learner,
        shuffle_graph=args.shuffle_graph,
        workers=args.workers,
        evaluations=args.evaluations,
        simulator=SimulatorConfig(rollouts=args.rollouts, world_seed=args.world_seed),
        policy=PolicyLearnerConfig(
            model=args.model,
            sft_steps=args.sft_steps,
            recipe=replace(recipe, lr=args.lr) if args.lr is not None else recipe,
            workers=args.policy_workers,
            eval_tasks=args.eval_tasks,
            eval_samples=args.eval_samples,
            accelerator=args.accelerator,
        ),
        **options,
    )
    results = run_ablation(load_pool(args.pool), config, args.out)
    print(render_table(results, config))
    print(render_margins(results, config))
    return 0
