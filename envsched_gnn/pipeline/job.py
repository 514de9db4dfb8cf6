"""The main job (``envsched-gnn run``): does EnvSched pay, on this machine, at equal rollouts?

1. generate the built-in pool (``pool/`` in the run folder);
2. write it to the graph store (default: managed local ArcadeDB in ``.envsched/store``), build
   the dual-relation graph there and read it back;
3. SFT warm start (built-in policy or ``--model PATH``), for a preset with a start recipe then
   the start that is sometimes right (:mod:`~envsched_gnn.training.competence`);
4. held-out and pool evaluation of the start (step 0, shared by every scheduler);
5. GRPO from that policy once per scheduler at the same B, K and steps, evaluated every
   ``eval_every`` steps on the same held-out tasks;
6. the report in ``reports/<run>/``. Sizes are a preset's (:mod:`~envsched_gnn.pipeline.presets`).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envsched_gnn.observations import DEFAULT_REWARD, Reward
from envsched_gnn.pipeline.demo_policy import demo_sft_config, demo_start_config, preset_pools
from envsched_gnn.pipeline.presets import PRESETS, Preset
from envsched_gnn.scheduler.dynamic_sampling import SUFFIX, DynamicSamplingConfig
from envsched_gnn.scheduler.registry import check_scheduler_name
from envsched_gnn.training.policy_engine import ACCELERATORS
from envsched_gnn.validation import check_bounds, config_error

if TYPE_CHECKING:
    from envsched_gnn.envs.pool import Pool
    from envsched_gnn.graph.task_graph import TaskGraph
    from envsched_gnn.graph_store.store import GraphStore
    from envsched_gnn.training.grpo.config import GRPOConfig
    from envsched_gnn.training.grpo.runs import SharedStart
    from envsched_gnn.training.grpo.train import GRPOResult
    from envsched_gnn.training.sft_config import SFTConfig

DEFAULT_STORE = ".envsched/store"


@dataclass
class RunOptions:
    """What ``envsched-gnn run`` was asked for."""

    preset: str = "demo"
    """Sizes of the run (a preset of ``pipeline/presets.py``): ``demo`` ends in under 20
    minutes on 2 CPU cores, ``paper`` is the paper's setting, for a GPU."""
    seed: int = 0
    """Seed of the pool, SFT, schedulers, rollouts and evaluation subset."""
    out: str | None = None
    """Report folder (default ``reports/<run>``)."""
    store: str = DEFAULT_STORE
    """Graph store: a folder (the default managed local ArcadeDB server) or a Bolt URI."""
    reset_store: bool = False
    """Clear a store that is not the default one before writing (the default one always is)."""
    steps: int | None = None
    """GRPO steps per scheduler (default: the preset's)."""
    schedulers: list[str] = field(default_factory=lambda: ["envsched+ds", "random+ds", "random"])
    """Schedulers compared at equal rollouts (names of the scheduler registry, NAME+ds behind
    dynamic sampling; on the command line comma-separated); the first one's observations go
    to the store. The default: EnvSched behind dynamic sampling against its baseline, random
    behind the same filter, and plain random GRPO (docs/results/dynamic-sampling.md: on a pool
    with waste, EnvSched behind the filter reached 75 % of random's lift in fewer rollouts than
    random behind it, beyond the noise of 5 seeds)."""
    sampling: DynamicSamplingConfig = field(default_factory=DynamicSamplingConfig)
    """Dynamic sampling of the NAME+ds schedulers (the --ds-* flags)."""
    model: str | None = None
    """A local HF causal LM folder to train instead of the built-in policy."""
    accelerator: str = "auto"
    """Where SFT, evaluation and GRPO run: ``auto`` (a GPU when there is one), ``cpu`` or
    ``gpu``."""
    lr: float | None = None
    """GRPO learning rate (default: the preset's)."""
    workers: int = 0
    """Schedulers trained at once, one process each (0: one per CPU core on a CPU machine,
    1 on a GPU)."""
    reward: Reward = DEFAULT_REWARD
    """How a rollout's checks become its reward: fraction (the share that pass) or success (1
    when every check passes, else 0)."""

    def __post_init__(self) -> None:
        check_bounds(
            self,
            integers=("seed", "workers"),
            non_negative=("seed", "workers"),
            at_least={"steps": 1},
            positive=("lr",),
            optional=("steps", "lr"),
        )
        if not self.schedulers:
            raise config_error(self, "schedulers", self.schedulers, "one scheduler name or more")
        for name in self.schedulers:
            check_scheduler_name(name)
        if self.accelerator not in ACCELERATORS:
            raise config_error(self, "accelerator", self.accelerator, f"one of {ACCELERATORS}")


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
    from envsched_gnn.graph_store.connect import open_store
    from envsched_gnn.pipeline.report import write_report

    preset = _resolve_preset(options, preset)
    steps = options.steps if options.steps is not None else preset.grpo.steps
    run_name = f"{datetime.now():%Y%m%d-%H%M%S}-{options.preset}-seed{options.seed}"
    out = Path(options.out) if options.out else Path("reports") / run_name
    out.mkdir(parents=True, exist_ok=True)
    progress = Progress()
    progress(f"run {out.name}: preset {options.preset}, seed {options.seed}, report in {out}")

    base_pool, pool = _write_pools(preset, options, out, progress)
    with open_store(options.store) as store:
        graph, stats = _build_graph(store, options, pool, progress)
        policy = _warm_start(preset, options, base_pool, pool, out, progress)
        configs = {
            name: replace(
                preset.grpo_config(name, steps, options.seed, options.lr),
                sampling=options.sampling,
            )
            for name in options.schedulers
        }
        start, initial = _evaluate_start(
            preset, options, pool, policy.policy_dir, configs, progress
        )
        trained = _train(start, configs, graph, options, steps, out, progress)
        results, evidence = _record_results(
            store, pool, graph, configs, trained, steps, out, progress, options.reward
        )

    progress.marks["total_s"] = round(time.perf_counter() - progress.start, 1)
    report = {
        "run": out.name,
        "config": _report_config(options, preset, steps, policy),
        "notes": _notes(options, preset, steps, pool, initial, policy.start_sft),
        "graph": stats,
        "timings": progress.marks,
        "schedulers": results,
        "evidence": evidence,
    }
    paths = write_report(report, out)
    progress(f"report: {', '.join(str(p) for p in paths)}")
    return report


@dataclass
class _Policy:
    """The policy GRPO starts from, and how the warm start made it."""

    policy_dir: Path
    sft: SFTConfig
    """The SFT warm start's config."""
    warm: dict[str, Any]
    """The warm start's summary."""
    start_sft: SFTConfig | None
    """The sometimes-right start's config (None: no such start)."""
    started: dict[str, Any] | None
    """The sometimes-right start's summary (None: no such start)."""


def _resolve_preset(options: RunOptions, preset: Preset | None) -> Preset:
    """``preset`` when given, else the sizes of ``options.preset`` (an unknown name refused)."""
    if preset is not None:
        return preset
    if options.preset not in PRESETS:
        raise ValueError(f"unknown preset {options.preset!r}, expected one of {sorted(PRESETS)}")
    return PRESETS[options.preset]


def _write_pools(
    preset: Preset, options: RunOptions, out: Path, progress: Progress
) -> tuple[Pool, Pool]:
    """Step 1: the preset's pools (the base one and the one trained on), the latter in ``pool/``."""
    from envsched_gnn.envs.generator import write_pool_files

    tick = time.perf_counter()
    base_pool, pool = preset_pools(preset, options.seed)
    write_pool_files(pool, out / "pool")
    progress(
        f"pool: {len(pool.envs)} environments, {len(pool.split('train'))} train and "
        f"{len(pool.split('test'))} held-out tasks ({progress.lap('pool_s', tick):.1f} s)"
    )
    return base_pool, pool


def _build_graph(
    store: GraphStore, options: RunOptions, pool: Pool, progress: Progress
) -> tuple[TaskGraph, dict[str, Any]]:
    """Step 2: the pool and its graph written to the store, and the graph read back with its
    statistics."""
    from envsched_gnn.graph_build.builder import GraphConfig, build, graph_stats

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
    return graph, stats


def _warm_start(
    preset: Preset, options: RunOptions, base_pool: Pool, pool: Pool, out: Path, progress: Progress
) -> _Policy:
    """Step 3: the SFT warm start, then the sometimes-right start when the preset has one."""
    from envsched_gnn.training.warm_start import PACKAGED_DEMO_START, warm_start

    tick = time.perf_counter()
    sft = demo_sft_config(preset, options.seed, options.accelerator, preset.agent)
    policy_dir, warm = warm_start(base_pool, options.model, sft, out / "sft", progress)
    progress(f"SFT policy in {policy_dir} ({progress.lap('sft_s', tick):.1f} s)")
    if preset.start is None or options.model is not None:
        return _Policy(policy_dir, sft, warm, None, None)
    tick = time.perf_counter()
    start_sft = demo_start_config(preset, options.seed, options.accelerator, preset.agent)
    policy_dir, started = warm_start(
        pool, policy_dir, start_sft, out / "start", progress, PACKAGED_DEMO_START,
        warm["fingerprint"],
    )  # fmt: skip
    progress(
        f"start (sometimes right, {_profile_words(start_sft.competence)}) in "
        f"{policy_dir} ({progress.lap('start_s', tick):.1f} s)"
    )
    return _Policy(policy_dir, sft, warm, start_sft, started)


def _evaluate_start(
    preset: Preset,
    options: RunOptions,
    pool: Pool,
    policy_dir: Path,
    configs: dict[str, GRPOConfig],
    progress: Progress,
) -> tuple[SharedStart, dict[str, Any]]:
    """Step 4: what every GRPO run shares, with the start's held-out evaluation made once."""
    from envsched_gnn.envs.runtime_config import RuntimeConfig
    from envsched_gnn.training.grpo.config import LaunchConfig
    from envsched_gnn.training.grpo.runs import SharedStart, evaluate_start

    tick = time.perf_counter()
    launch = LaunchConfig(accelerator=options.accelerator, print_steps=True)
    runtime = RuntimeConfig(reward=options.reward)
    start = SharedStart(pool, policy_dir, preset.agent, runtime, launch)
    start.initial_eval = initial = evaluate_start(start, configs[options.schedulers[0]])
    progress(
        f"held-out mean reward of the policy GRPO starts from: {initial['mean_reward']:.3f} "
        f"({initial['tasks']} tasks x {initial['k']}) "
        f"({progress.lap('initial_eval_s', tick):.1f} s)"
    )
    return start, initial


def _train(
    start: SharedStart,
    configs: dict[str, GRPOConfig],
    graph: TaskGraph,
    options: RunOptions,
    steps: int,
    out: Path,
    progress: Progress,
) -> list[GRPOResult]:
    """Step 5: GRPO from the same start once per scheduler, at equal rollouts."""
    from envsched_gnn.training.grpo.runs import GRPORun, parallel_workers, train_runs

    tick = time.perf_counter()
    first = configs[options.schedulers[0]]
    workers = parallel_workers(options.workers, len(configs), options.accelerator)
    progress(
        f"GRPO with {', '.join(configs)}: {steps} steps x {first.batch_size} tasks x "
        f"{first.group_size} rollouts each, {workers} at a time ..."
    )
    runs = [GRPORun(config, out / "grpo" / name, graph) for name, config in configs.items()]
    trained = list(train_runs(start, runs, workers))
    progress.lap("grpo_s", tick)
    return trained


def _record_results(
    store: GraphStore,
    pool: Pool,
    graph: TaskGraph,
    configs: dict[str, GRPOConfig],
    trained: list[GRPOResult],
    steps: int,
    out: Path,
    progress: Progress,
    reward: str,
) -> tuple[dict[str, Any], dict]:
    """Each scheduler's results, with a line each; the first one's observations (of
    ``reward``) go to the store and give the top evidence (returned second)."""
    from envsched_gnn.observations import observations_from_rewards as to_observations
    from envsched_gnn.pipeline.evidence import write_top_evidence
    from envsched_gnn.pipeline.report import summarize

    results: dict[str, Any] = {}
    for index, (name, result) in enumerate(zip(configs, trained, strict=True)):
        observations = [
            o for s, r in enumerate(result.rewards) for o in to_observations(s, r, reward)
        ]
        if index == 0:
            store.write_observations(observations)
            evidence = write_top_evidence(pool, graph, observations, steps - 1, out)
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
            f"envs/batch {row['batch/envs_covered']:.1f}, {result.rollouts} rollouts, "
            f"{row['updates']:.0f} updates, {row['rolled_per_trained']:.2f} groups rolled per "
            f"group trained ({result.wall_s:.1f} s)"
        )
    return results, evidence


def _report_config(
    options: RunOptions, preset: Preset, steps: int, policy: _Policy
) -> dict[str, Any]:
    """The report's ``config``: what was asked, the sizes, and how the start was made."""
    started = policy.started
    return {
        "preset": options.preset,
        "preset_sizes": asdict(preset),
        "options": asdict(options),
        "steps": steps,
        "agent": asdict(preset.agent),
        "sft": {k: v for k, v in asdict(policy.sft).items() if k not in ("agent", "policy")},
        "warm_start": {k: v for k, v in policy.warm.items() if k != "sft"},
        "start": None
        if started is None
        else {
            "sft": {
                k: v for k, v in asdict(policy.start_sft).items() if k not in ("agent", "policy")
            },
            **{k: v for k, v in started.items() if k != "sft"},
        },
        "model": options.model or "built-in",
    }


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


def _profile_words(profile: Any) -> str:
    return (
        f"imperfect demonstrations at rates ~ Beta(mean {profile.mean}, concentration "
        f"{profile.concentration}) per {profile.by}"
        + (" and mistake kind" if profile.by == "environment" else "")
        + f" ({', '.join(profile.kinds)}; seed {profile.seed})"
    )


def _sampling_notes(options: RunOptions) -> list[str]:
    """What dynamic sampling does, when a scheduler runs behind it (design section 9.5)."""
    behind = [name for name in options.schedulers if name.endswith(SUFFIX)]
    if not behind:
        return []
    sampling = options.sampling
    if sampling.generation == "greso":
        size = (
            "GRESO's rule (what is missing / (1 - the expected zero-variance share) x "
            f"{sampling.headroom:g}, at most {sampling.max_oversample:g} B)"
        )
    else:
        size = "B" if sampling.oversample == 1 else f"{sampling.oversample:g} B"
    surplus = (
        "the surplus waits for the next update"
        if sampling.surplus == "keep"
        else "the surplus is dropped"
    )
    return [
        f"{', '.join(behind)}: dynamic sampling (DAPO's filter and refill): a step rolls out "
        f"a generation batch of {size} tasks, groups whose K rewards are all equal are "
        f"dropped and cost their rollouts, and an update waits for B groups with spread; "
        f"{surplus}. Every rollout counts, so all schedulers spend the same budget"
    ]


def _notes(options: RunOptions, preset: Preset, steps: int, pool, initial, start) -> list[str]:
    budget = steps * preset.grpo.batch_size * preset.grpo.group_size
    starts = []
    if start is not None:
        starts.append(
            "the start is made *sometimes right* on purpose, a stand-in for a pretrained "
            "model's uneven competence (no pretrained weights here): the base SFT policy "
            f"fine-tuned {start.max_steps} steps on {_profile_words(start.competence)}, each "
            "executed in the runtime (`training/competence.py`)"
        )
    return [
        f"preset `{options.preset}`, seed {options.seed}, policy: {options.model or 'built-in'}",
        *starts,
        f"pool: {len(pool.envs)} environments x {preset.tasks_per_env} tasks "
        f"({len(pool.split('train'))} train, {len(pool.split('test'))} held-out)",
        f"every scheduler: {steps} GRPO steps of B = {preset.grpo.batch_size} tasks x K = "
        f"{preset.grpo.group_size} rollouts ({budget} rollouts) from the same start",
        *_sampling_notes(options),
        f"held-out evaluation: {initial['tasks']} test tasks x {preset.grpo.eval_samples} samples, "
        f"same seed each time, at step 0 and every {preset.grpo.eval_every} steps",
        "demo sizes are chosen so that the job ends in under 20 minutes on 2 CPU cores; "
        "they are far smaller than the paper's (use --preset paper on a GPU)"
        if options.preset == "demo"
        else "paper sizes: 51 x 50 tasks, B = 64, K = 8, 200 steps",
        f"observations of `{options.schedulers[0]}` are written to the store "
        f"({options.store}); the others' are in grpo/<name>/history.jsonl",
    ]
