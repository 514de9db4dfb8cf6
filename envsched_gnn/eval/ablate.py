"""The ablation harness (``eval ablate``): EnvSched, its ablations and the baselines at one budget.

Every scheduler gets the same rollout budget, steps x B x K rollouts; an over-sampling
baseline (DAPO) spends its generation batch each step, so it takes fewer policy updates.
Two learners, one harness (graphs, jobs, aggregation, report and plots are shared):

- ``--learner sim``: the SIMULATOR of :mod:`envsched_gnn.eval.simulate`, the same world for
  every scheduler and seed; run seed s drives both the simulator's sampling and the
  scheduler's tie-breaking, so schedulers are compared on common random numbers. Score =
  simulated expected reward on the held-out split, after every update.
- ``--learner policy``: a real GRPO run of the policy per scheduler and seed, all from one
  starting policy (:mod:`envsched_gnn.eval.policy_learner`). Score = held-out mean reward
  of the policy on a fixed subset of the test split, every e = ceil(S / 5) steps.

Score columns (:func:`score_steps_for`): budget steps e, 3e and S with e = ceil(S / 5),
i.e. the paper's 40 / 120 / 200 when S = 200 (10 steps: 2 / 6 / 10).

Per step the harness records the batch metrics of spec section 6 (``batch_metrics``; the
environments are the pool's real ones, tools used = distinct (environment, tool) pairs of
the selected tasks' reference solutions) over every group rolled out, and the downstream
score (simulated expected reward on the held-out split) after the update. The budget step
of a record is rollouts spent / (B K); the score at budget step T is the score after the
last update that fits in T x B x K rollouts.

Graphs are built over the train split only (held-out tasks are never scheduled), once per
(pool, neighbour sizes, shuffle) and cached under ``out/graphs/``; the neighbour-size grid
reuses one build at the largest sizes, truncated per task to its top k by (sim, pair key),
which is what a build at the smaller k keeps. ``--shuffle-graph`` adds ``envsched_shuffled``:
EnvSched on a graph built after environment membership and abstract descriptions were
reassigned at random (spec section 7).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from multiprocessing import get_context
from pathlib import Path

import numpy as np

from envsched_gnn.envs.pool import Pool
from envsched_gnn.eval.policy_learner import PolicyLearnerConfig
from envsched_gnn.eval.simulate import (
    LearnerSimulator,
    SimulatorConfig,
    SimulatorWorld,
    build_world,
)
from envsched_gnn.graph_store.snapshot import RelationEdges, TaskGraph, read_graph, write_graph
from envsched_gnn.scheduler.metrics import BATCH_METRICS

ENVSCHED_VARIANTS = ("envsched", "within_only", "cross_only", "rho0", "rho1")
BASELINES = ("random", "dapo", "mopps", "greso", "dps", "learned")
K_GRID = ((3, 12), (12, 12), (6, 6), (6, 24))
DEFAULT_K = (6, 12)
SHUFFLED = "envsched_shuffled"
STEP_METRICS = BATCH_METRICS


LEARNER_LABELS = {"sim": "simulator", "policy": "policy (real GRPO)"}


def grid_name(k_in: int, k_cross: int) -> str:
    return f"k{k_in}_{k_cross}"


def eval_every_for(steps: int) -> int:
    """e = ceil(S / 5): the policy learner evaluates every e steps (and after the last)."""
    return max(1, math.ceil(steps / 5))


def score_steps_for(steps: int) -> tuple[int, ...]:
    """The report's score columns: budget steps e, 3e and S (40 / 120 / 200 for S = 200)."""
    e = eval_every_for(steps)
    return tuple(sorted({min(e, steps), min(3 * e, steps), steps}))


@dataclass
class AblationConfig:
    """What the harness runs; every scheduler shares the budget steps x B x K."""

    seeds: int = 5
    """Number of run seeds (0 .. seeds-1)."""
    steps: int = 200
    """Budget in steps of B groups of K rollouts."""
    batch_size: int = 64
    """B, groups per step."""
    learner: str = "sim"
    """``sim`` (the learner simulator) or ``policy`` (real GRPO runs of the policy)."""
    shuffle_graph: bool = False
    """Also run EnvSched on a graph built from shuffled environments and abstracts."""
    schedulers: tuple[str, ...] = ENVSCHED_VARIANTS + BASELINES
    """Registered scheduler names to run on the default graph."""
    k_grid: tuple[tuple[int, int], ...] = K_GRID
    """(k_in, k_cross) pairs of the neighbour-size grid (EnvSched on each graph)."""
    score_steps: tuple[int, ...] | None = None
    """Budget steps at which the downstream score is reported (None: ``score_steps_for``)."""
    workers: int = 2
    """Worker processes."""
    shuffle_seed: int = 0
    """Seed of the shuffled-graph control."""
    simulator: SimulatorConfig = field(default_factory=SimulatorConfig)
    """The learner simulator's parameters; K = ``simulator.rollouts`` for both learners."""
    policy: PolicyLearnerConfig = field(default_factory=PolicyLearnerConfig)
    """The policy learner's settings (``learner = "policy"``)."""

    def __post_init__(self) -> None:
        if self.learner not in ("sim", "policy"):
            raise ValueError(f"--learner {self.learner!r}, expected 'sim' or 'policy'")
        for name in ("seeds", "steps", "batch_size", "workers"):
            if getattr(self, name) < 1:
                raise ValueError(
                    f"--{name.replace('_', '-')} = {getattr(self, name)}, expected >= 1"
                )
        if self.score_steps is None:
            self.score_steps = score_steps_for(self.steps)
        from envsched_gnn.scheduler.registry import SCHEDULERS

        unknown = [name for name in self.schedulers if name not in SCHEDULERS]
        if unknown or not self.schedulers:
            raise ValueError(
                f"--schedulers: unknown {unknown}, expected names of {sorted(SCHEDULERS)}"
            )


# -- graphs --------------------------------------------------------------------------------


def train_pool(pool: Pool) -> Pool:
    """The pool restricted to its train split (the schedulable tasks)."""
    tasks = pool.split("train")
    if not tasks:
        raise ValueError("ablate: the pool has no train-split tasks to schedule")
    return Pool(pool.envs, tasks)


def shuffled_pool(pool: Pool, seed: int) -> Pool:
    """Reassign environment membership (sizes kept) and abstract descriptions at random."""
    from envsched_gnn.envs.abstract import abstract_of

    rng = np.random.default_rng(seed)
    class_of = {t.env_id: t.env_class_name for t in pool.tasks}
    envs = [t.env_id for t in pool.tasks]
    abstracts = [abstract_of(t, pool.envs.get(t.env_id)) for t in pool.tasks]
    env_order = rng.permutation(len(envs))
    abstract_order = rng.permutation(len(abstracts))
    tasks = [
        replace(
            task,
            env_id=envs[env_order[i]],
            env_class_name=class_of[envs[env_order[i]]],
            abstract=abstracts[abstract_order[i]],
        )
        for i, task in enumerate(pool.tasks)
    ]
    return Pool(pool.envs, tasks)


def truncate_graph(graph: TaskGraph, k_in: int, k_cross: int) -> TaskGraph:
    """Keep each target's top ``k_in`` within / ``k_cross`` cross neighbours, ranked as the
    builder ranks them (similarity, then the pair key), so the result equals a build at the
    smaller sizes."""
    from envsched_gnn.graph_store.builder import pair_keys, task_hashes

    hashes = task_hashes(graph.task_ids)
    edges = {}
    for relation, k in (("within", k_in), ("cross", k_cross)):
        e = graph.edges[relation]
        keys = pair_keys(hashes[e.dst], hashes[e.src])
        order = np.lexsort((keys, -e.sim, e.dst))
        dst = e.dst[order]
        starts = np.flatnonzero(np.r_[True, dst[1:] != dst[:-1]]) if len(dst) else dst
        rank = np.arange(len(dst)) - np.repeat(starts, np.diff(np.r_[starts, len(dst)]))
        keep = np.sort(order[rank < k])
        edges[relation] = RelationEdges(e.src[keep], e.dst[keep], e.sim[keep])
    return TaskGraph(list(graph.task_ids), list(graph.env_ids), edges)


def build_pool_graph(pool: Pool, k_in: int, k_cross: int) -> TaskGraph:
    """The dual-relation graph of ``pool`` (spec section 3) with the given neighbour sizes."""
    from envsched_gnn.graph_store.builder import GraphConfig, build_graph

    return build_graph(pool, GraphConfig(k_within=k_in, k_cross=k_cross))


def cached_graph(
    path: Path, build: Callable[[], TaskGraph], log: Callable[[str], None]
) -> tuple[TaskGraph, float]:
    """Read ``path`` if present, else build and write it; returns the graph and build seconds."""
    if path.exists():
        log(f"graph: reusing {path}")
        return read_graph(path), 0.0
    start = time.perf_counter()
    graph = build()
    seconds = time.perf_counter() - start
    path.parent.mkdir(parents=True, exist_ok=True)
    write_graph(path, graph)
    log(f"graph: built {path.name} in {seconds:.1f} s")
    return graph, seconds


# -- one run -------------------------------------------------------------------------------


@dataclass
class _Context:
    """What every job needs; set before the workers fork so they inherit it."""

    pool: Pool
    world: SimulatorWorld
    graphs: dict[str, TaskGraph]
    config: AblationConfig


_CONTEXT: _Context | None = None


@dataclass(frozen=True)
class Job:
    """One (run name, registered scheduler, graph key, seed)."""

    name: str
    scheduler: str
    graph: str
    seed: int


def run_job(job: Job, context: _Context | None = None) -> dict:
    """Run one scheduler with the simulated learner for the whole budget; per-step records."""
    from envsched_gnn.scheduler.metrics import batch_metrics
    from envsched_gnn.scheduler.registry import make_scheduler

    ctx = context if context is not None else _CONTEXT
    cfg = ctx.config
    k = cfg.simulator.rollouts
    graph = ctx.graphs[job.graph]
    sim_config = replace(cfg.simulator, batch_size=cfg.batch_size)
    sim = LearnerSimulator(ctx.pool, sim_config, seed=job.seed, world=ctx.world)
    scheduler = make_scheduler(job.scheduler, graph, batch_size=cfg.batch_size, seed=job.seed)
    env_of = {t.task_id: t.env_id for t in ctx.pool.tasks}
    tools_of = {
        t.task_id: {(t.env_id, call.name) for call in (t.reference_solution or [])}
        for t in ctx.pool.tasks
    }
    budget = cfg.steps * cfg.batch_size * k
    spent, step = 0, 0
    records = [{"step": -1, "budget_step": 0.0, "score": sim.score()}]
    start = time.perf_counter()
    schedule_seconds = 0.0
    while spent < budget:
        t0 = time.perf_counter()
        batch = scheduler.next_batch(step)
        schedule_seconds += time.perf_counter() - t0
        batch = batch[: (budget - spent) // k]
        rollouts = sim.rollout(batch)
        rewards = rollouts.as_mapping(sim.world.task_ids)
        kept = scheduler.filter_groups(step, rewards)
        sim.update(rollouts, keep=kept)
        scheduler.observe(step, rewards)
        spent += len(batch) * k
        tools = len(set().union(*(tools_of[t] for t in batch)))
        record = {"step": step, "budget_step": spent / (cfg.batch_size * k), "score": sim.score()}
        record.update(batch_metrics(rewards, env_of, tools))
        record["trained_groups"] = len(kept)
        records.append(record)
        step += 1
    return {
        "name": job.name,
        "seed": job.seed,
        "records": records,
        "wall_s": time.perf_counter() - start,
        "schedule_s": schedule_seconds,
        "rollouts": spent,
    }


def _init_worker() -> None:
    import torch

    torch.set_num_threads(1)


# -- the whole harness ---------------------------------------------------------------------


def run_names(config: AblationConfig) -> list[str]:
    """Result names in table order: the schedulers, the neighbour-size grid, the control."""
    names = list(config.schedulers)
    names += [grid_name(*k) for k in config.k_grid if k != DEFAULT_K]
    return names + ([SHUFFLED] if config.shuffle_graph else [])


def plan_jobs(config: AblationConfig) -> list[Job]:
    """Every (name, scheduler, graph, seed) the config asks for, the slowest kinds first."""
    named = [(s, s, grid_name(*DEFAULT_K)) for s in config.schedulers]
    named += [(grid_name(*k), "envsched", grid_name(*k)) for k in config.k_grid if k != DEFAULT_K]
    if config.shuffle_graph:
        named.append((SHUFFLED, "envsched", "shuffled"))
    cost = {"learned": 0, "dapo": 2}
    named.sort(key=lambda item: cost.get(item[1], 1))
    return [
        Job(name, sched, graph, seed)
        for name, sched, graph in named
        for seed in range(config.seeds)
    ]


def curve_steps(config: AblationConfig) -> np.ndarray:
    """Budget steps of the score curve: every step (simulator), the evaluations (policy)."""
    if config.learner == "sim":
        return np.arange(config.steps + 1, dtype=np.float64)
    e = eval_every_for(config.steps)
    return np.array(sorted({*range(0, config.steps, e), config.steps}), dtype=np.float64)


def run_ablation(
    pool: Pool, config: AblationConfig, out: str | Path, log: Callable[[str], None] = print
) -> dict:
    """Build (or reuse) the graphs, run every job, write the results, report and plots."""
    train = train_pool(pool)
    if not pool.split("test"):
        raise ValueError("ablate: the pool has no held-out (split == 'test') tasks to score on")
    if config.learner == "policy":
        from envsched_gnn.eval.policy_learner import check_model

        check_model(config.policy)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    graphs, timings = prepare_graphs(train, config, out / "graphs", log)
    jobs = plan_jobs(config)
    log(
        f"ablate (learner: {LEARNER_LABELS[config.learner]}): {len(jobs)} runs = "
        f"{len(jobs) // config.seeds} schedulers x {config.seeds} seeds, {config.steps} budget "
        f"steps" + (f", {config.workers} worker(s)" if config.learner == "sim" else "")
    )
    run_start = time.perf_counter()
    if config.learner == "sim":
        runs, learner_info = simulate_jobs(pool, graphs, jobs, config, log)
    else:
        from envsched_gnn.eval.policy_learner import run_policy_jobs

        runs, learner_info = run_policy_jobs(pool, graphs, jobs, config, out, log)
    timings["runs_s"] = time.perf_counter() - run_start
    timings["total_s"] = time.perf_counter() - started

    from envsched_gnn.eval.ablation_report import summarise, write_ablation_report

    results = summarise(runs, config)
    run_info = {
        **learner_info,
        "config": _jsonable(asdict(config)),
        "pool": {
            "tasks": len(pool.tasks),
            "train_tasks": len(train.tasks),
            "held_out_tasks": len(pool.split("test")),
            "envs": len(pool.envs),
        },
        "timings": timings,
        "cpu_count": os.cpu_count(),
    }
    write_ablation_report(results, run_info, config, out)
    log(f"ablate: wrote {out / 'results.json'}, {out / 'report.md'} ({timings['total_s']:.0f} s)")
    return results


def prepare_graphs(
    train: Pool, config: AblationConfig, graphs_dir: Path, log: Callable[[str], None]
) -> tuple[dict[str, TaskGraph], dict[str, float]]:
    """The train-split graphs every job needs, keyed by ``grid_name`` (and ``shuffled``)."""
    sizes = [DEFAULT_K, *config.k_grid]
    k_max = (max(k for k, _ in sizes), max(k for _, k in sizes))
    full, build_s = cached_graph(
        graphs_dir / f"graph_{grid_name(*k_max)}.json",
        lambda: build_pool_graph(train, *k_max),
        log,
    )
    graphs = {grid_name(*k): truncate_graph(full, *k) for k in sizes}
    timings = {"graph_build_s": build_s}
    if config.shuffle_graph:
        graphs["shuffled"], timings["shuffled_graph_build_s"] = cached_graph(
            graphs_dir / f"graph_shuffled{config.shuffle_seed}_{grid_name(*DEFAULT_K)}.json",
            lambda: build_pool_graph(shuffled_pool(train, config.shuffle_seed), *DEFAULT_K),
            log,
        )
    return graphs, timings


def simulate_jobs(
    pool: Pool,
    graphs: dict[str, TaskGraph],
    jobs: Sequence[Job],
    config: AblationConfig,
    log: Callable[[str], None],
) -> tuple[list[dict], dict]:
    """Every job with the learner simulator (``config.workers`` forked processes)."""
    global _CONTEXT
    world = build_world(pool, config.simulator)
    _CONTEXT = _Context(pool, world, graphs, config)
    runs: list[dict] = []
    run_start = time.perf_counter()
    if config.workers == 1:
        for n, job in enumerate(jobs, 1):
            runs.append(run_job(job))
            _progress(log, n, len(jobs), runs[-1], run_start)
    else:
        context = get_context("fork")
        with ProcessPoolExecutor(
            config.workers, mp_context=context, initializer=_init_worker
        ) as ex:
            for n, result in enumerate(ex.map(run_job, jobs), 1):
                runs.append(result)
                _progress(log, n, len(jobs), result, run_start)
    _CONTEXT = None
    info = {
        "learner": "simulator (envsched_gnn.eval.simulate), not a language model",
        "operation_categories": world.op_names,
    }
    return runs, info


def _progress(log, n: int, total: int, result: dict, start: float) -> None:
    elapsed = time.perf_counter() - start
    log(
        f"[{n}/{total}] {result['name']} seed {result['seed']}: final score "
        f"{result['records'][-1]['score']:.4f}, {result['wall_s']:.1f} s "
        f"(scheduling {result['schedule_s']:.1f} s); elapsed {elapsed:.0f} s, "
        f"eta {elapsed / n * (total - n):.0f} s"
    )


def _jsonable(value):
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def scores_at(records: Sequence[dict], budget_steps: Sequence[float]) -> np.ndarray:
    """Score after the last scored update within each budget step (records in budget order;
    records without a score, updates the policy learner did not evaluate after, are skipped)."""
    scored = [r for r in records if r["score"] is not None]
    spent = np.array([r["budget_step"] for r in scored])
    score = np.array([r["score"] for r in scored])
    idx = (
        np.searchsorted(spent, np.asarray(budget_steps, dtype=np.float64) + 1e-9, side="right") - 1
    )
    return score[np.clip(idx, 0, len(score) - 1)]


def save_json(path: Path, data) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(_jsonable(data), indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)
