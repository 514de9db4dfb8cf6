"""``envsched-gnn eval compare-predictors`` and ``envsched-gnn eval ablate``."""

from __future__ import annotations

import argparse

from envsched_gnn.eval.policy_learner import PolicyLearnerConfig
from envsched_gnn.eval.simulate import WORLDS, SimulatorConfig


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
        "--controls",
        nargs="+",
        default=None,
        metavar="CONTROL",
        help="also run EnvSched on control graphs (spec 7): permuted (the primary, "
        "label-permuted control), permuted_within, permuted_cross, permuted_all, "
        "permuted_predictor (the predictor alone on the permuted graph; simulator), shuffled "
        "(secondary), or all (space- or comma-separated)",
    )
    p.add_argument(
        "--shuffle-graph",
        action="store_true",
        help="same as --controls shuffled: the secondary control, a graph rebuilt from "
        "shuffled environments and abstracts",
    )
    p.add_argument(
        "--control-seed", type=int, default=0, help="seed of the control graphs (default 0)"
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
    p.add_argument(
        "--oracle-graph",
        action="store_true",
        help="also run EnvSched on the oracle graph of the tasks' hidden structure (upper bound)",
    )
    p.add_argument("--workers", type=int, default=2, help="worker processes (simulator; default 2)")
    simulator = SimulatorConfig()
    p.add_argument(
        "--world",
        choices=WORLDS,
        default=simulator.world,
        help="simulator world: structure (difficulty follows the tasks' hidden structure with "
        f"weight --kappa) or independent (the first world) (default {simulator.world})",
    )
    p.add_argument(
        "--kappa",
        type=float,
        default=simulator.kappa,
        help="structure world: share of the difficulty's variance explained by the hidden "
        f"structure, in [0, 1] (default {simulator.kappa:g})",
    )
    p.add_argument("--world-seed", type=int, default=0, help="seed of the simulator's world")
    p.add_argument(
        "--null-world",
        action="store_true",
        help="simulate each task as a seeded random other task: nothing the graph or the "
        "quotas see tells how a task behaves (a check of the harness)",
    )
    policy = PolicyLearnerConfig()
    p.add_argument("--model", default=None, help="policy: local HF causal LM folder (built-in)")
    p.add_argument(
        "--sft-minutes",
        type=float,
        default=policy.sft_minutes,
        help=f"policy: SFT warm start budget; 0 starts from --model as is ({policy.sft_minutes:g})",
    )
    p.add_argument("--lr", type=float, default=policy.lr, help=f"policy: GRPO lr ({policy.lr:g})")
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
    from envsched_gnn.eval.controls import CONTROLS

    options = {}
    if args.schedulers:
        options["schedulers"] = tuple(_names(args.schedulers))
    if not (args.k_grid if args.k_grid is not None else args.learner == "sim"):
        options["k_grid"] = ()
    controls = _names(args.controls or [])
    if "all" in controls:
        controls = [c for c in CONTROLS if args.learner == "sim" or c != "permuted_predictor"]
    options["controls"] = tuple(controls + (["shuffled"] if args.shuffle_graph else []))
    config = AblationConfig(
        seeds=args.seeds,
        steps=args.steps,
        batch_size=args.batch_size,
        learner=args.learner,
        control_seed=args.control_seed,
        oracle_graph=args.oracle_graph,
        workers=args.workers,
        simulator=SimulatorConfig(
            rollouts=args.rollouts,
            world=args.world,
            kappa=args.kappa,
            world_seed=args.world_seed,
            shuffle_tasks=args.null_world,
        ),
        policy=PolicyLearnerConfig(
            model=args.model,
            sft_minutes=args.sft_minutes,
            lr=args.lr,
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


def _names(values: list[str]) -> list[str]:
    """Names given space- or comma-separated."""
    return [n.strip() for value in values for n in value.split(",") if n.strip()]
