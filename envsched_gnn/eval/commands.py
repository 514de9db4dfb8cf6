"""``envsched-gnn eval compare-predictors``, ``eval graph-signal`` and ``eval ablate``."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from envsched_gnn.eval.ablation_config import PolicyLearnerConfig
from envsched_gnn.eval.simulator_config import WORLDS, SimulatorConfig
from envsched_gnn.models.config import LearnedConfig


def register(groups: dict[str, argparse._SubParsersAction]) -> None:
    p = groups["eval"].add_parser(
        "compare-predictors",
        help="replay a logged run: analytic vs learned propagation, scored from the past only",
    )
    p.add_argument("--history", required=True, help="history.jsonl of the run")
    p.add_argument("--graph", required=True, help="graph.json of the run's pool")
    p.add_argument("--out", default=None, help="folder for compare.json / .md / .png")
    p.add_argument("--seed", type=int, default=0, help="seed of the learned layer")
    learned = LearnedConfig()
    p.add_argument(
        "--learned-steps",
        type=int,
        default=learned.gradient_steps,
        help=f"Adam steps of the learned layer per update ({learned.gradient_steps})",
    )
    p.add_argument(
        "--replay-steps",
        type=int,
        help="replay one round of rollouts instead: the tasks of step --replay-round, each "
        "moved to one of N steps at random (seeded by --seed), so each step's tasks are unseen "
        "before and predicted from neighbours only; the replay is written to --out",
    )
    p.add_argument(
        "--replay-round", type=int, default=0, help="step of the history to replay (0: round A)"
    )
    p.set_defaults(func=_compare_predictors)

    _register_graph_signal(groups)

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
    from envsched_gnn.graph.task_graph import read_graph
    from envsched_gnn.models.analytic import AnalyticPredictor
    from envsched_gnn.models.learned import LearnedPropagation
    from envsched_gnn.observations import read_history

    graph = read_graph(args.graph)
    observations = read_history(args.history)
    if args.replay_steps is not None:
        from envsched_gnn.eval.rollout_rounds import assign_steps
        from envsched_gnn.observations import write_history

        chosen = [o for o in observations if o.step == args.replay_round]
        if not chosen:
            print(f"error: {args.history} has no observation at step {args.replay_round}")
            return 2
        observations = assign_steps(chosen, args.replay_steps, seed=args.seed)
        if args.out:
            Path(args.out).mkdir(parents=True, exist_ok=True)
            write_history(Path(args.out) / "replay_history.jsonl", observations)
    predictors = {
        "analytic": AnalyticPredictor(),
        "learned": LearnedPropagation(
            LearnedConfig(seed=args.seed, gradient_steps=args.learned_steps)
        ),
    }
    comparison = compare_predictors(graph, observations, predictors)
    print(comparison.table())
    if args.out:
        paths = write_comparison(comparison, args.out)
        print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0


def _ablate(args: argparse.Namespace) -> int:
    from envsched_gnn.envs.pool_io import load_pool
    from envsched_gnn.eval.ablate import run_ablation
    from envsched_gnn.eval.ablation_config import AblationConfig
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
    recipe = PolicyLearnerConfig().recipe
    config = AblationConfig(
        seeds=args.seeds,
        steps=args.steps,
        batch_size=args.batch_size,
        learner=args.learner,
        control_seed=args.control_seed,
        oracle_graph=args.oracle_graph,
        workers=args.workers,
        evaluations=args.evaluations,
        simulator=SimulatorConfig(
            rollouts=args.rollouts,
            world=args.world,
            kappa=args.kappa,
            world_seed=args.world_seed,
            shuffle_tasks=args.null_world,
        ),
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


def _names(values: list[str]) -> list[str]:
    """Names given space- or comma-separated."""
    return [n.strip() for value in values for n in value.split(",") if n.strip()]


def _register_graph_signal(groups: dict[str, argparse._SubParsersAction]) -> None:
    from envsched_gnn.eval.graph_signal import GraphSignalConfig
    from envsched_gnn.eval.rollout_rounds import RoundsConfig

    signal, rounds = GraphSignalConfig(), RoundsConfig()
    p = groups["eval"].add_parser(
        "graph-signal",
        help="does the graph predict reward variance? neighbour-only estimates vs realised "
        "variance, with permutation nulls and bootstrap CIs",
        description="Scores the within, cross and 0.5/0.5 prior estimates of spec 4.4 (the "
        "task's own observations never used) against the realised reward variance of later "
        "observations, next to the environment mean and the test-retest ceiling. Sources: a "
        "history file (--history with --graph), the store (--store), or two rounds of rollouts "
        "of a policy on a split (--model with --pool): round A gives the neighbours' evidence, "
        "round B the targets.",
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--history", help="history.jsonl of a run (needs --graph)")
    source.add_argument("--store", help="read graph and observations from this store")
    source.add_argument("--model", help="roll out this policy (local HF folder; needs --pool)")
    p.add_argument("--graph", help="graph.json (default with --model: build it from --pool)")
    p.add_argument("--pool", help="pool folder (with --model)")
    p.add_argument("--split", default=rounds.split, help=f"split to roll out ({rounds.split})")
    p.add_argument(
        "--k", type=int, default=rounds.k, help=f"samples per task and round ({rounds.k})"
    )
    p.add_argument("--seed", type=int, default=0, help="sampling seed of round A (B: seed + 1)")
    p.add_argument("--limit", type=int, help="roll out only the first N tasks of the split")
    p.add_argument("--temperature", type=float, help="sampling temperature (default: the policy's)")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, ...")
    p.add_argument("--threads", type=int, default=1, help="torch threads on CPU (1)")
    p.add_argument("--workers", type=int, default=2, help="environment worker processes (2)")
    p.add_argument(
        "--permutations",
        type=int,
        default=signal.permutations,
        help=f"permutations per null, >= 200 ({signal.permutations})",
    )
    p.add_argument(
        "--bootstrap",
        type=int,
        default=signal.bootstrap,
        help=f"environment bootstrap resamples ({signal.bootstrap})",
    )
    p.add_argument("--out", help="folder for graph_signal.json / .md / .png (and the rollouts)")
    p.set_defaults(func=_graph_signal)


def _fail(message: str) -> int:
    import sys

    print(f"error: {message}", file=sys.stderr)
    return 2


def _graph_signal(args: argparse.Namespace) -> int:
    from envsched_gnn.eval.graph_signal import GraphSignalConfig, graph_signal
    from envsched_gnn.eval.graph_signal_report import render, write
    from envsched_gnn.graph_store.errors import StoreError
    from envsched_gnn.observations import read_history

    if args.history is not None and args.graph is None:
        return _fail("--history needs --graph")
    if args.model is not None and args.pool is None:
        return _fail("--model needs --pool")
    if args.store is not None and args.graph is not None:
        return _fail("--store reads the graph from the store; leave out --graph")
    try:
        config = GraphSignalConfig(
            permutations=args.permutations, bootstrap=args.bootstrap, seed=args.seed
        )
        if args.store is not None:
            from envsched_gnn.graph_store.store import open_store

            with open_store(args.store) as store:
                graph, observations = store.read_graph(), store.read_observations()
        elif args.history is not None:
            from envsched_gnn.graph.task_graph import read_graph

            graph, observations = read_graph(args.graph), read_history(args.history)
        else:
            graph, observations = _rollout_source(args)
        signal = graph_signal(graph, observations, config)
    except (OSError, ValueError, StoreError) as error:
        return _fail(str(error))
    print(render(signal))
    if args.out:
        paths = write(signal, args.out)
        print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0


def _rollout_source(args: argparse.Namespace):
    """Graph (given or built) and two rounds of rollouts of ``args.model`` on ``args.split``;
    with ``--out``, ``graph.json``, ``history.jsonl`` and ``rounds.json`` are written there."""
    import json

    import torch

    from envsched_gnn.envs.pool_io import load_pool
    from envsched_gnn.envs.runtime import EnvRuntime, RuntimeConfig
    from envsched_gnn.eval.rollout_rounds import RoundsConfig, rollout_rounds
    from envsched_gnn.graph.task_graph import read_graph, write_graph
    from envsched_gnn.observations import write_history
    from envsched_gnn.training.policy import load_agent_config, load_policy
    from envsched_gnn.training.rollout import RolloutEngine

    pool = load_pool(args.pool)
    out = Path(args.out) if args.out else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    if args.graph is not None:
        graph = read_graph(args.graph)
    else:
        from envsched_gnn.graph_store.builder import build_graph

        graph = build_graph(pool)
        if out is not None:
            write_graph(out / "graph.json", graph)
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.threads > 0 and device == "cpu":
        torch.set_num_threads(args.threads)
    model, tokenizer = load_policy(args.model, device=device)
    agent = load_agent_config(args.model, temperature=args.temperature)
    config = RoundsConfig(split=args.split, k=args.k, seed=args.seed, limit=args.limit)
    with EnvRuntime(pool, RuntimeConfig(workers=args.workers)) as runtime:
        engine = RolloutEngine(model, tokenizer, runtime, agent, device)
        observations, summaries = rollout_rounds(engine, pool, config)
    for summary in summaries:
        print(
            f"round {'AB'[summary['round']]} (seed {summary['seed']}): {summary['tasks']} tasks "
            f"x K={args.k}, mean reward {summary['mean_reward']:.3f}, groups with reward spread "
            f"{summary['nonzero_variance_share']:.3f}, {summary['rollout_s']:.0f} s"
        )
    if out is not None:
        write_history(out / "history.jsonl", observations)
        (out / "rounds.json").write_text(json.dumps(summaries, indent=1) + "\n")
    return graph, observations
