"""``envsched-gnn eval compare-predictors``, ``eval graph-signal`` and ``eval ablate``."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from envsched_gnn.config_cli import add_config_flags, config_from_args, split_names
from envsched_gnn.envs.commands import RUNTIME_PREFIX, runtime_config
from envsched_gnn.envs.runtime_config import RuntimeConfig
from envsched_gnn.eval.ablation.config import AblationConfig, PolicyLearnerConfig
from envsched_gnn.eval.graph_signal.measure import GraphSignalConfig
from envsched_gnn.eval.rollout_rounds import RoundsConfig
from envsched_gnn.eval.simulator.config import WORLDS, SimulatorConfig
from envsched_gnn.eval.sources import measure_source, pool_graph
from envsched_gnn.json_files import write_json_atomically
from envsched_gnn.models.config import LearnedConfig
from envsched_gnn.scheduler.commands import add_sampling_flags, sampling_from_args
from envsched_gnn.training.grpo.config import GRPOConfig
from envsched_gnn.training.grpo.objective import ADVANTAGE_ESTIMATORS
from envsched_gnn.training.policy_engine import ACCELERATORS
from envsched_gnn.validation import check_bounds, check_paths, fail


@dataclass
class CompareArgs:
    """The logged run ``eval compare-predictors`` replays, and its replay of one round."""

    history: str
    """history.jsonl of the run."""
    graph: str
    """graph.json of the run's pool."""
    out: str | None = None
    """Folder for compare.json / .md / .png."""
    seed: int = 0
    """Seed of the learned layer (its weights and mini-batches) and of --replay-steps."""
    replay_steps: int | None = None
    """Replay one round of rollouts instead: the tasks of step --replay-round, each moved to
    one of N steps at random (seeded by --seed), so each step's tasks are unseen before and
    predicted from neighbours only; the replay is written to --out."""
    replay_round: int = 0
    """Step of the history to replay (0: round A)."""

    def __post_init__(self) -> None:
        check_bounds(
            self,
            integers=("seed", "replay_steps", "replay_round"),
            non_negative=("seed", "replay_round"),
            at_least={"replay_steps": 1},
            optional=("replay_steps",),
        )


@dataclass
class GraphSignalArgs:
    """Where ``eval graph-signal`` takes graph and observations from, and where it writes."""

    history: str | None = None
    """history.jsonl of a run (needs --graph)."""
    store: str | None = None
    """Read graph and observations from this store."""
    model: str | None = None
    """Roll out this policy (local HF folder; needs --pool)."""
    graph: str | None = None
    """graph.json (default with --model: build it from --pool)."""
    pool: str | None = None
    """Pool folder (with --model)."""
    seed: int = 0
    """Sampling seed of round A (B: seed + 1), and seed of the permutations and the bootstrap."""
    temperature: float | None = None
    """Sampling temperature (default: the policy's)."""
    device: str = "auto"
    """Torch device of the policy: auto, cpu, cuda, ..."""
    threads: int = 1
    """Torch threads on CPU."""
    out: str | None = None
    """Folder for graph_signal.json / .md / .png (and the rollouts)."""

    def __post_init__(self) -> None:
        from envsched_gnn.training.policy_engine import check_device

        check_bounds(
            self,
            integers=("seed", "threads"),
            non_negative=("seed", "threads"),
            positive=("temperature",),
            optional=("temperature",),
        )
        check_device(self.device, "--device")


@dataclass
class AblateArgs:
    """The pool and output of ``eval ablate``, and the names it reads space- or comma-separated."""

    pool: str
    """Pool folder (EnvScaler layout, with a test split)."""
    out: str
    """Output folder (graphs are cached under it)."""
    controls: list[str] | None = None
    """Also run EnvSched on control graphs (spec 7), each run seed on its own draw:
    relabelled (the primary control: the real graph with its nodes relabelled inside their
    environments), relabelled_predictor (the predictor alone on it; simulator), the
    secondary label-permuted graphs permuted, permuted_within, permuted_cross, permuted_all,
    permuted_predictor (simulator), shuffled (secondary), or all (space- or
    comma-separated); NAME+ds runs EnvSched behind dynamic sampling on that graph."""
    shuffle_graph: bool = False
    """Same as --controls shuffled: the secondary control, a graph rebuilt from shuffled
    environments and abstracts."""
    schedulers: list[str] | None = None
    """Subset of schedulers to run (space- or comma-separated; default all); NAME+ds runs
    NAME behind dynamic sampling (--ds-* flags)."""
    k_grid: bool | None = None
    """Run the neighbour-size grid (default: yes with the simulator, no with the policy)."""


SIMULATOR, POLICY, RECIPE = "simulator_", "policy_", "recipe_"
"""Namespace prefixes of the nested configs' flags (``SimulatorConfig.batch_size`` and
``PolicyLearnerConfig.workers`` share names with ``AblationConfig``'s)."""


def register(groups: dict[str, argparse._SubParsersAction]) -> None:
    p = groups["eval"].add_parser(
        "compare-predictors",
        help="replay a logged run: analytic vs learned propagation, scored from the past only",
    )
    add_config_flags(p, CompareArgs, fields=["history", "graph", "out", "seed"])
    add_config_flags(
        p,
        LearnedConfig,
        fields=["gradient_steps"],
        flags={"gradient_steps": "--learned-steps"},
        dest_prefix="learned_",
    )
    add_config_flags(p, CompareArgs, fields=["replay_steps", "replay_round"])
    p.set_defaults(func=_compare_predictors)

    _register_graph_signal(groups)

    p = groups["eval"].add_parser(
        "ablate",
        help="EnvSched, its ablations and the baselines at one rollout budget "
        "(learner: simulator, or real GRPO of the policy)",
    )
    add_config_flags(p, AblateArgs, fields=["pool", "out"])
    add_config_flags(
        p,
        AblationConfig,
        fields=[
            "seeds",
            "steps",
            "batch_size",
            "learner",
            "evaluations",
            "eval_rollouts",
            "workers",
        ],
        choices={"learner": ("sim", "policy")},
    )
    add_config_flags(p, SimulatorConfig, fields=["rollouts"], dest_prefix=SIMULATOR)
    add_config_flags(
        p,
        AblateArgs,
        fields=["schedulers", "k_grid", "controls", "shuffle_graph"],
        metavars={"controls": "CONTROL"},
    )
    add_config_flags(p, AblationConfig, fields=["control_seed", "oracle_graph"])
    add_sampling_flags(p)
    add_config_flags(
        p.add_argument_group("the learner simulator (--learner sim)"),
        SimulatorConfig,
        fields=["world", "kappa", "world_seed", "shuffle_tasks"],
        choices={"world": WORLDS},
        flags={"shuffle_tasks": "--null-world"},
        dest_prefix=SIMULATOR,
    )
    policy = p.add_argument_group("the policy learner (--learner policy)")
    add_config_flags(policy, PolicyLearnerConfig, fields=["model", "sft_steps"], dest_prefix=POLICY)
    add_config_flags(
        policy,
        GRPOConfig,
        fields=["lr", "advantage_estimator"],
        defaults={
            "lr": PolicyLearnerConfig().recipe.lr,
            "advantage_estimator": PolicyLearnerConfig().recipe.advantage_estimator,
        },
        choices={"advantage_estimator": tuple(sorted(ADVANTAGE_ESTIMATORS))},
        dest_prefix=RECIPE,
    )
    add_config_flags(
        policy,
        PolicyLearnerConfig,
        fields=[
            "workers",
            "eval_tasks",
            "eval_samples",
            "pool_eval_samples",
            "pool_eval_tasks",
            "accelerator",
        ],
        flags={"workers": "--policy-workers"},
        choices={"accelerator": ACCELERATORS},
        dest_prefix=POLICY,
    )
    add_config_flags(policy, RuntimeConfig, fields=["reward"], dest_prefix=RUNTIME_PREFIX)
    p.set_defaults(func=_ablate)


def _compare_predictors(args: argparse.Namespace) -> int:
    from envsched_gnn.eval.compare import compare_predictors, write_comparison
    from envsched_gnn.graph.task_graph import read_graph
    from envsched_gnn.models.analytic import AnalyticPredictor
    from envsched_gnn.models.learned import LearnedPropagation
    from envsched_gnn.observations import read_history

    config_from_args(CompareArgs, args)  # its bounds, before anything is read
    check_paths(
        files={"--history": args.history, "--graph": args.graph}, out_folders={"--out": args.out}
    )
    learned = config_from_args(LearnedConfig, args, dest_prefix="learned_", seed=args.seed)
    graph = read_graph(args.graph)
    observations = read_history(args.history)
    if args.replay_steps is not None:
        from envsched_gnn.eval.rollout_rounds import assign_steps
        from envsched_gnn.observations import write_history

        chosen = [o for o in observations if o.step == args.replay_round]
        if not chosen:
            return fail(f"{args.history} has no observation at step {args.replay_round}")
        observations = assign_steps(chosen, args.replay_steps, seed=args.seed)
        if args.out:
            Path(args.out).mkdir(parents=True, exist_ok=True)
            write_history(Path(args.out) / "replay_history.jsonl", observations)
    predictors = {
        "analytic": AnalyticPredictor(),
        "learned": LearnedPropagation(learned),
    }
    comparison = compare_predictors(graph, observations, predictors)
    print(comparison.table())
    if args.out:
        paths = write_comparison(comparison, args.out)
        print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0


def _ablate(args: argparse.Namespace) -> int:
    from envsched_gnn.envs.pool_io import load_pool
    from envsched_gnn.eval.ablation.ablate import run_ablation
    from envsched_gnn.eval.ablation.report import render_margins, render_table
    from envsched_gnn.eval.ablation.targets_report import render_targets
    from envsched_gnn.eval.controls import CONTROLS, PREDICTOR_CONTROLS

    controls = split_names(*(args.controls or []))
    if "all" in controls:
        controls = [c for c in CONTROLS if args.learner == "sim" or c not in PREDICTOR_CONTROLS]
    run_k_grid = args.k_grid if args.k_grid is not None else args.learner == "sim"
    recipe = config_from_args(
        GRPOConfig, args, base=PolicyLearnerConfig().recipe, dest_prefix=RECIPE
    )
    config = config_from_args(
        AblationConfig,
        args,
        schedulers=tuple(split_names(*args.schedulers))
        if args.schedulers
        else AblationConfig.schedulers,
        k_grid=AblationConfig.k_grid if run_k_grid else (),
        controls=tuple(controls + (["shuffled"] if args.shuffle_graph else [])),
        simulator=config_from_args(SimulatorConfig, args, dest_prefix=SIMULATOR),
        sampling=sampling_from_args(args),
        policy=config_from_args(
            PolicyLearnerConfig,
            args,
            dest_prefix=POLICY,
            recipe=recipe,
            runtime=runtime_config(args),
        ),
    )
    check_paths(folders={"--pool": args.pool}, out_folders={"--out": args.out})
    if config.policy.model is not None:
        from envsched_gnn.training.policy import check_policy_folder

        check_policy_folder(config.policy.model, "--model")
    results = run_ablation(load_pool(args.pool), config, args.out)
    print(render_table(results, config))
    print(render_margins(results, config))
    print(render_targets(results, config.budget_rollouts))
    return 0


def _register_graph_signal(groups: dict[str, argparse._SubParsersAction]) -> None:
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
    add_config_flags(source, GraphSignalArgs, fields=["history", "store", "model"])
    add_config_flags(p, GraphSignalArgs, fields=["graph", "pool"])
    add_config_flags(p, RoundsConfig, fields=["split", "k"], dest_prefix="rounds_")
    add_config_flags(p, GraphSignalArgs, fields=["seed"])
    add_config_flags(p, RoundsConfig, fields=["limit"], dest_prefix="rounds_")
    add_config_flags(p, GraphSignalArgs, fields=["temperature", "device", "threads"])
    add_config_flags(p, RuntimeConfig, fields=["workers", "reward"], dest_prefix=RUNTIME_PREFIX)
    add_config_flags(
        p, GraphSignalConfig, fields=["permutations", "bootstrap"], dest_prefix="signal_"
    )
    add_config_flags(p, GraphSignalArgs, fields=["out"])
    p.set_defaults(func=_graph_signal)


def _graph_signal(args: argparse.Namespace) -> int:
    from envsched_gnn.eval.graph_signal.measure import graph_signal
    from envsched_gnn.eval.graph_signal.report import render, write

    if args.model is not None and args.pool is None:
        return fail("--model needs --pool")
    from envsched_gnn.training.policy import check_policy_folder

    # every cheap input first (measure_source checks the source's paths): a wrong one is
    # refused before a policy or a store opens
    config_from_args(GraphSignalArgs, args)
    config_from_args(RoundsConfig, args, dest_prefix="rounds_", seed=args.seed)
    runtime_config(args)
    if args.model is not None:
        check_policy_folder(args.model, "--model")
    return measure_source(
        args,
        _rollout_source,
        lambda: config_from_args(GraphSignalConfig, args, dest_prefix="signal_", seed=args.seed),
        graph_signal,
        render,
        write,
    )


def _rollout_source(args: argparse.Namespace):
    """Graph (given or built) and two rounds of rollouts of ``args.model`` on the split;
    with ``--out``, ``graph.json``, ``history.jsonl`` and ``rounds.json`` are written there."""
    from envsched_gnn.envs.pool_io import load_pool
    from envsched_gnn.eval.rollout_rounds import rollout_rounds, round_tasks
    from envsched_gnn.observations import write_history
    from envsched_gnn.training.policy import load_agent_config
    from envsched_gnn.training.policy_engine import open_engine

    pool = load_pool(args.pool)
    config = config_from_args(RoundsConfig, args, dest_prefix="rounds_", seed=args.seed)
    round_tasks(pool, config)  # a split without tasks is refused before the graph is built
    agent = load_agent_config(args.model, temperature=args.temperature)
    out = Path(args.out) if args.out else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    graph = pool_graph(pool, args.graph, out)
    runtime = runtime_config(args)
    with open_engine(args.model, pool, agent, runtime, args.device, args.threads) as engine:
        observations, summaries = rollout_rounds(engine, pool, config, runtime.reward)
    for summary in summaries:
        print(
            f"round {'AB'[summary['round']]} (seed {summary['seed']}): {summary['tasks']} tasks "
            f"x K={config.k}, mean reward {summary['mean_reward']:.3f}, zero-variance groups "
            f"{summary['zero_variance_share']:.3f}, {summary['rollout_s']:.0f} s"
        )
    if out is not None:
        write_history(out / "history.jsonl", observations)
        write_json_atomically(out / "rounds.json", summaries)
    return graph, observations
