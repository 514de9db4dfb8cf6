"""The main job (``envsched-gnn run``): does EnvSched pay, on this machine, at equal rollouts?

1. generate the built-in pool (``pool/`` in the run folder);
2. write it to the graph store (the embedded default ``.envsched/store`` unless ``--store``),
   build the dual-relation graph into the store and read it back from there;
3. SFT warm start of the policy (the built-in one, or ``--model PATH``);
4. held-out evaluation of the SFT policy (step 0, shared by every scheduler);
5. GRPO from that same SFT policy once per scheduler (EnvSched and uniform random by
   default), all with the same B, K and steps, i.e. the same rollout budget, evaluated on
   the same held-out tasks every ``eval_every`` steps;
6. the report: ``results.json``, ``report.md``, PNG plots, in ``reports/<run>/``.

The ``demo`` preset is sized to finish in under 20 minutes on 2 CPU cores (budget: pool +
graph under 1 min, SFT 12 min, the step-0 evaluation ~10 s, each GRPO run ~2 min); the
``paper`` preset is the paper's setting (51 x 50 tasks, B = 64, K = 8, 200 steps) for a GPU.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from envsched_gnn.training.grpo_config import GRPOConfig

DEFAULT_STORE = ".envsched/store"


@dataclass(frozen=True)
class Preset:
    """Sizes of one main-job configuration."""

    envs: int
    """Environments of the generated pool."""
    tasks_per_env: int
    """Tasks per environment."""
    test_per_env: int
    """Held-out tasks per environment (split ``test``)."""
    sft_steps: int
    """Optimiser steps of the SFT warm start."""
    sft_extra_tasks_per_env: int
    """Fresh generated tasks per environment added to SFT's train split."""
    sft_include_train_split: bool
    """SFT imitates the pool's train split too (off: only fresh tasks, so GRPO's train tasks
    are as new to the policy as the held-out ones)."""
    batch_size: int
    """B."""
    group_size: int
    """K."""
    steps: int
    """GRPO steps per scheduler."""
    lr: float
    """GRPO learning rate."""
    eval_every: int
    """Held-out evaluation every this many steps (and at step 0)."""
    eval_tasks: int
    """Held-out tasks evaluated (a seeded subset of the test split; 0: all)."""
    eval_samples: int
    """Samples per held-out task."""
    micro_batch_size: int = 32
    """Episodes per forward/backward pass."""
    max_calls: int | None = None
    """Keep only tasks whose reference needs at most this many tool calls (None: 1-6)."""
    lr_warmup_steps: int = 0
    """GRPO's linear learning-rate warm-up, in optimiser steps."""
    ppo_epochs: int = 1
    """GRPO passes over each step's episodes."""
    mini_batches: int = 1
    """GRPO optimiser steps per pass."""
    advantage_estimator: str = "grpo"
    """``grpo`` or ``dr_grpo``."""
    kl_coef: float = 0.0
    """Weight of the KL penalty to the SFT policy."""

    def grpo_config(
        self, scheduler: str, steps: int, seed: int, lr: float | None = None
    ) -> GRPOConfig:
        """The GRPO run of one scheduler under this preset (every scheduler gets the same)."""
        return GRPOConfig(
            scheduler=scheduler,
            batch_size=self.batch_size,
            group_size=self.group_size,
            steps=steps,
            lr=self.lr if lr is None else lr,
            lr_warmup_steps=self.lr_warmup_steps,
            ppo_epochs=self.ppo_epochs,
            mini_batches=self.mini_batches,
            advantage_estimator=self.advantage_estimator,
            kl_coef=self.kl_coef,
            micro_batch_size=self.micro_batch_size,
            eval_every=self.eval_every,
            eval_tasks=self.eval_tasks,
            eval_samples=self.eval_samples,
            seed=seed,
        )


PRESETS: dict[str, Preset] = {
    # 2 CPU cores, < 20 min: tasks of at most 3 calls (what the tiny policy can reach; see
    # shared/notes/tiny-policy-probe.md); the SFT warm start is the packaged policy
    # (envsched_gnn/data/demo_sft, rebuilt when its inputs differ: ~30 min at one thread);
    # the two schedulers train side by side, 50 steps of 8 x 8 each (~10 s a step at one
    # thread); every held-out task x 4 at steps 0, 25 and 50 (~95 s each)
    "demo": Preset(
        envs=51,
        tasks_per_env=20,
        test_per_env=5,
        sft_steps=4400,
        sft_extra_tasks_per_env=200,
        sft_include_train_split=False,
        batch_size=8,
        group_size=8,
        steps=50,
        lr=1e-4,
        eval_every=25,
        eval_tasks=0,
        eval_samples=4,
        micro_batch_size=32,
        max_calls=3,
    ),
    # the paper's setting (spec section 1), for a GPU machine
    "paper": Preset(
        envs=51,
        tasks_per_env=50,
        test_per_env=10,
        sft_steps=8000,
        sft_extra_tasks_per_env=200,
        sft_include_train_split=True,
        batch_size=64,
        group_size=8,
        steps=200,
        lr=1e-6,
        eval_every=20,
        eval_tasks=0,
        eval_samples=8,
        micro_batch_size=16,
    ),
}


@dataclass
class RunOptions:
    """What ``envsched-gnn run`` was asked for."""

    preset: str = "demo"
    """A key of :data:`PRESETS`."""
    seed: int = 0
    """Seed of the pool, SFT, schedulers, rollouts and evaluation subset."""
    out: str | None = None
    """Report folder (default ``reports/<run>``)."""
    store: str = DEFAULT_STORE
    """Graph store: a folder (embedded default) or a Bolt URI."""
    reset_store: bool = False
    """Clear a store that is not the default one before writing (the default one always is)."""
    steps: int | None = None
    """GRPO steps per scheduler (default: the preset's)."""
    schedulers: list[str] = field(default_factory=lambda: ["envsched", "random"])
    """Schedulers compared; the first one's observations go to the store."""
    model: str | None = None
    """A local HF causal LM folder to train instead of the built-in policy."""
    accelerator: str = "auto"
    """``auto``, ``cpu`` or ``gpu``."""
    lr: float | None = None
    """GRPO learning rate (default: the preset's)."""
    workers: int = 0
    """Schedulers trained at once, one process each (0: one per CPU core on a CPU machine,
    1 on a GPU)."""


class Progress:
    """Prints ``[  12.3 s] message`` lines, time since the job started."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.marks: dict[str, float] = {}

    def __call__(self, message: str) -> None:
        print(f"[{time.perf_counter() - self.start:7.1f} s] {message}", flush=True)

    def lap(self, name: str, since: float) -> float:
        seconds = time.perf_counter() - since
        self.marks[name] = round(seconds, 1)
        return seconds


def run_pipeline(options: RunOptions, preset: Preset | None = None) -> dict[str, Any]:
    """Run the main job; returns the results written to ``results.json``. ``preset``
    replaces the sizes of ``options.preset`` (custom sizes, tests)."""
    from envsched_gnn.envs.generator import generate_pool, write_pool_files
    from envsched_gnn.envs.runtime_config import RuntimeConfig
    from envsched_gnn.eval.report import summarize, write_report
    from envsched_gnn.graph_store.builder import GraphConfig, build, graph_stats
    from envsched_gnn.graph_store.connect import open_store
    from envsched_gnn.observations import observations_from_rewards as to_observations
    from envsched_gnn.observations import write_history
    from envsched_gnn.training.agent_format import AgentConfig
    from envsched_gnn.training.grpo_runs import GRPORun, SharedStart, parallel_workers, train_runs
    from envsched_gnn.training.grpo_train import LaunchConfig
    from envsched_gnn.training.warm_start import warm_start

    if preset is None:
        if options.preset not in PRESETS:
            raise ValueError(
                f"unknown preset {options.preset!r}, expected one of {sorted(PRESETS)}"
            )
        preset = PRESETS[options.preset]
    steps = options.steps if options.steps is not None else preset.steps
    run_name = f"{datetime.now():%Y%m%d-%H%M%S}-{options.preset}-seed{options.seed}"
    out = Path(options.out) if options.out else Path("reports") / run_name
    out.mkdir(parents=True, exist_ok=True)
    progress = Progress()
    progress(f"run {out.name}: preset {options.preset}, seed {options.seed}, report in {out}")

    tick = time.perf_counter()
    pool = generate_pool(
        preset.envs,
        preset.tasks_per_env,
        options.seed,
        preset.test_per_env,
        max_calls=preset.max_calls,
    )
    write_pool_files(pool, out / "pool")
    progress(
        f"pool: {len(pool.envs)} environments, {len(pool.split('train'))} train and "
        f"{len(pool.split('test'))} held-out tasks ({progress.lap('pool_s', tick):.1f} s)"
    )
    agent = AgentConfig()
    runtime = RuntimeConfig()
    launch = LaunchConfig(accelerator=options.accelerator, print_steps=True)
    with open_store(options.store) as store:
        tick = time.perf_counter()
        _prepare_store(store, options)
        store.write_pool(pool)
        built = build(pool, GraphConfig(show_progress=False))
        store.write_graph(built.graph)
        graph = store.read_graph()
        stats = graph_stats(graph)
        progress(
            f"graph in store {options.store}: {stats['within_edges']} within edges (mean sim "
            f"{stats['within_mean_sim']:.3f}), {stats['cross_edges']} cross edges (mean sim "
            f"{stats['cross_mean_sim']:.3f}) ({progress.lap('graph_s', tick):.1f} s)"
        )

        tick = time.perf_counter()
        sft = demo_sft_config(preset, options.seed, options.accelerator, agent)
        policy_dir, warm = warm_start(pool, options.model, sft, out / "sft", progress)
        progress(f"SFT policy in {policy_dir} ({progress.lap('sft_s', tick):.1f} s)")

        configs = {
            name: preset.grpo_config(name, steps, options.seed, options.lr)
            for name in options.schedulers
        }
        tick = time.perf_counter()
        first = configs[options.schedulers[0]]
        initial = _initial_eval(pool, policy_dir, first, agent, runtime, options.accelerator)
        progress(
            f"held-out mean reward of the SFT policy: {initial['mean_reward']:.3f} "
            f"({initial['tasks']} tasks x {initial['k']}) "
            f"({progress.lap('initial_eval_s', tick):.1f} s)"
        )

        tick = time.perf_counter()
        workers = parallel_workers(options.workers, len(configs), options.accelerator)
        progress(
            f"GRPO with {', '.join(configs)}: {steps} steps x {first.batch_size} tasks x "
            f"{first.group_size} rollouts each, {workers} at a time ..."
        )
        start = SharedStart(pool, policy_dir, agent, runtime, launch, initial)
        runs = [GRPORun(config, out / "grpo" / name, graph) for name, config in configs.items()]
        trained = list(train_runs(start, runs, workers))
        progress.lap("grpo_s", tick)
        results: dict[str, Any] = {}
        for index, (name, result) in enumerate(zip(configs, trained, strict=True)):
            observations = [o for s, r in enumerate(result.rewards) for o in to_observations(s, r)]
            write_history(out / "grpo" / name / "history.jsonl", observations)
            if index == 0:
                store.write_observations(observations)
            results[name] = {
                "eval": result.evals,
                "steps": result.steps,
                "batches": result.batches,
                "rewards": result.rewards,
                "rollouts": result.rollouts,
                "wall_s": result.wall_s,
                "config": asdict(configs[name]),
                "store": {"written": index == 0, "observations": len(observations)},
            }
            row = summarize(results[name])
            progress(
                f"{name}: held-out {row['heldout_start']:.3f} -> {row['heldout_end']:.3f}, "
                f"mean batch reward variance {row['batch/mean_reward_variance']:.4f}, "
                f"envs/batch {row['batch/envs_covered']:.1f}, {result.rollouts} rollouts "
                f"({result.wall_s:.1f} s)"
            )

    progress.marks["total_s"] = round(time.perf_counter() - progress.start, 1)
    report = {
        "run": out.name,
        "config": {
            "preset": options.preset,
            "preset_sizes": asdict(preset),
            "options": asdict(options),
            "steps": steps,
            "agent": asdict(agent),
            "sft": {k: v for k, v in asdict(sft).items() if k not in ("agent", "policy")},
            "warm_start": {k: v for k, v in warm.items() if k != "sft"},
            "model": options.model or "built-in",
        },
        "notes": _notes(options, preset, steps, pool, initial),
        "graph": stats,
        "timings": progress.marks,
        "schedulers": results,
    }
    paths = write_report(report, out)
    progress(f"report: {', '.join(str(p) for p in paths)}")
    return report


def demo_sft_config(preset: Preset, seed: int, accelerator: str, agent: Any) -> Any:
    """The SFT warm start of a preset (what the packaged demo policy was built with)."""
    from envsched_gnn.training.sft_config import SFTConfig

    return SFTConfig(
        max_steps=preset.sft_steps,
        extra_tasks_per_env=preset.sft_extra_tasks_per_env,
        include_train_split=preset.sft_include_train_split,
        seed=seed,
        accelerator=accelerator,
        agent=agent,
    )


def package_demo_policy(
    out: str | Path, preset_name: str = "demo", seed: int = 0, threads: int = 0
) -> Path:
    """SFT of the built-in policy on the preset's pool, written to ``out`` with the manifest
    the main job checks (:mod:`~envsched_gnn.training.warm_start`)."""
    from envsched_gnn.envs.generator import generate_pool
    from envsched_gnn.training.agent_format import AgentConfig
    from envsched_gnn.training.warm_start import package_policy

    preset = PRESETS[preset_name]
    pool = generate_pool(
        preset.envs, preset.tasks_per_env, seed, preset.test_per_env, max_calls=preset.max_calls
    )
    config = replace(demo_sft_config(preset, seed, "cpu", AgentConfig()), threads=threads)
    command = f"envsched-gnn train demo-policy --preset {preset_name} --seed {seed} --out {out}"
    return package_policy(pool, config, out, command)


def _prepare_store(store: Any, options: RunOptions) -> None:
    """The main job rebuilds its store: the default one is cleared; another one must be
    empty of observations unless ``--reset-store`` (observations are keyed by (task, step),
    so an earlier run's would clash with this run's)."""
    if options.store == DEFAULT_STORE or options.reset_store:
        store.clear()
    elif store.count_observations():
        raise ValueError(
            f"store {options.store} already holds {store.count_observations()} observations; "
            "use an empty store or pass --reset-store to clear it"
        )


def _initial_eval(pool, policy_dir, config, agent, runtime, accelerator) -> dict[str, float]:
    """Held-out evaluation of the SFT policy (step 0), done once for all schedulers."""
    import torch

    from envsched_gnn.envs.runtime import EnvRuntime
    from envsched_gnn.training.held_out import heldout_evaluator, heldout_tasks
    from envsched_gnn.training.policy import load_policy
    from envsched_gnn.training.rollout import RolloutEngine

    cuda = accelerator == "gpu" or (accelerator == "auto" and torch.cuda.is_available())
    device = "cuda" if cuda else "cpu"
    model, tokenizer = load_policy(policy_dir, device=device)
    tasks = heldout_tasks(pool, config.eval_tasks, config.seed)
    with EnvRuntime(pool, runtime) as env_runtime:
        engine = RolloutEngine(model, tokenizer, env_runtime, agent, device, pool)
        return heldout_evaluator(tasks, config.eval_samples, config.seed)(engine, 0)


def _notes(options: RunOptions, preset: Preset, steps: int, pool, initial) -> list[str]:
    budget = steps * preset.batch_size * preset.group_size
    return [
        f"preset `{options.preset}`, seed {options.seed}, policy: {options.model or 'built-in'}",
        f"pool: {len(pool.envs)} environments x {preset.tasks_per_env} tasks "
        f"({len(pool.split('train'))} train, {len(pool.split('test'))} held-out)",
        f"every scheduler: {steps} GRPO steps of B = {preset.batch_size} tasks x K = "
        f"{preset.group_size} rollouts ({budget} rollouts) from the same SFT policy",
        f"held-out evaluation: {initial['tasks']} test tasks x {preset.eval_samples} samples, "
        f"same seed each time, at step 0 and every {preset.eval_every} steps",
        "demo sizes are chosen so that the job ends in under 20 minutes on 2 CPU cores; "
        "they are far smaller than the paper's (use --preset paper on a GPU)"
        if options.preset == "demo"
        else "paper sizes: 51 x 50 tasks, B = 64, K = 8, 200 steps",
        f"observations of `{options.schedulers[0]}` are written to the store "
        f"({options.store}); the others' are in grpo/<name>/history.jsonl",
    ]


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = RunOptions()
    parser.add_argument("--preset", choices=sorted(PRESETS), default=defaults.preset)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--out", help="report folder (default reports/<run>)")
    parser.add_argument("--store", default=defaults.store, help="store folder or Bolt URI")
    parser.add_argument(
        "--reset-store", action="store_true", help="clear a non-default store before writing"
    )
    parser.add_argument("--steps", type=int, help="GRPO steps per scheduler (preset's)")
    parser.add_argument("--lr", type=float, help="GRPO learning rate (preset's)")
    parser.add_argument(
        "--schedulers",
        default=",".join(defaults.schedulers),
        help="comma-separated scheduler names compared at equal rollouts",
    )
    parser.add_argument("--model", help="local HF causal LM folder (default: built-in policy)")
    parser.add_argument("--accelerator", choices=("auto", "cpu", "gpu"), default="auto")
    parser.add_argument(
        "--workers",
        type=int,
        default=defaults.workers,
        help="schedulers trained at once, one process each (0: one per CPU core; 1 on a GPU)",
    )


def run_from_args(args: argparse.Namespace) -> int:
    schedulers = [name.strip() for name in args.schedulers.split(",") if name.strip()]
    from envsched_gnn.scheduler.registry import SCHEDULERS

    unknown = [name for name in schedulers if name not in SCHEDULERS]
    if unknown or not schedulers:
        print(f"error: unknown scheduler(s) {unknown}; expected names of {sorted(SCHEDULERS)}")
        return 2
    options = RunOptions(
        preset=args.preset,
        seed=args.seed,
        out=args.out,
        store=args.store,
        reset_store=args.reset_store,
        steps=args.steps,
        schedulers=schedulers,
        model=args.model,
        accelerator=args.accelerator,
        lr=args.lr,
        workers=args.workers,
    )
    run_pipeline(options)
    return 0
