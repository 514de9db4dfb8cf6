"""The ablation harness (``eval ablate``): EnvSched, its ablations and the baselines at one budget.

Every scheduler gets the same rollout budget, steps x B x K rollouts, every rollout counted;
one behind dynamic sampling (``NAME+ds``, ``dapo``) spends more per step and so makes fewer
updates, and the groups of an update may come from several steps' batches. Both learners run
the one step loop (:class:`~envsched_gnn.scheduler.steps.StepLoop`). Two learners share the harness:
``--learner sim`` (:mod:`envsched_gnn.eval.simulator.simulate`; run seed s drives both the
simulator and the scheduler, common random numbers) and ``--learner policy`` (a real GRPO run
per scheduler and seed, :mod:`envsched_gnn.eval.ablation.policy_learner`). Score columns:
:func:`~envsched_gnn.eval.ablation.config.score_steps_for`; the score at budget step T is the
score curve through the evaluations (piecewise linear) at T x B x K rollouts.

Per step: the batch metrics of spec section 6 (tools used = distinct (environment, tool)
pairs of the reference solutions), the score after the update, ``trained_groups`` and, for
schedulers with a predictor, the Spearman of q with the realised variance
(``predict/spearman_batch``, ``..._seen``, ``..._unseen``, ``predict/seen_share``) and, with
the simulator, with the true expected variance (``predict/spearman_true``).

Runs are resumable by key (:mod:`~envsched_gnn.eval.ablation.runs`). Graphs are built over the
train split once and cached under ``out/graphs/``; the neighbour-size grid truncates one
build at the largest sizes. Controls: spec section 7 and :mod:`envsched_gnn.eval.controls`;
``--oracle-graph`` adds EnvSched on the hidden-structure graph
(:mod:`envsched_gnn.eval.ablation.oracle`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from envsched_gnn.envs.abstract import operation_patterns
from envsched_gnn.envs.pool import Pool
from envsched_gnn.eval.ablation.config import (
    DEFAULT_K,
    LEARNER_LABELS,
    ORACLE,
    AblationConfig,
    Job,
    control_graph_name,
    control_name,
    control_scheduler,
    grid_name,
    job_graph,
)
from envsched_gnn.eval.ablation.picks import diagnose_picks
from envsched_gnn.eval.ablation.policy_learner import check_model, run_policy_jobs
from envsched_gnn.eval.ablation.report import write_ablation_report
from envsched_gnn.eval.ablation.runs import FinishedRuns
from envsched_gnn.eval.ablation.summary import summarise
from envsched_gnn.eval.controls import PREDICTOR_CONTROLS, SHUFFLED_CONTROL, shuffled_pool
from envsched_gnn.eval.simulator.simulate import LearnerSimulator, Rollouts, build_world
from envsched_gnn.eval.simulator.world import SimulatorWorld
from envsched_gnn.eval.stats import spearman
from envsched_gnn.graph.task_graph import RelationEdges, TaskGraph, read_graph, write_graph
from envsched_gnn.scheduler.metrics import batch_metrics
from envsched_gnn.scheduler.registry import make_scheduler, over_samples
from envsched_gnn.scheduler.steps import StepLoop
from envsched_gnn.workers import map_in_workers

# -- graphs --------------------------------------------------------------------------------


def train_pool(pool: Pool) -> Pool:
    """The pool restricted to its train split (the schedulable tasks)."""
    tasks = pool.split("train")
    if not tasks:
        raise ValueError("ablate: the pool has no train-split tasks to schedule")
    return Pool(pool.envs, tasks)


def truncate_graph(graph: TaskGraph, k_in: int, k_cross: int) -> TaskGraph:
    """Keep each target's top ``k_in`` within / ``k_cross`` cross neighbours, ranked as the
    builder ranks them (similarity, then the pair key), so the result equals a build at the
    smaller sizes."""
    from envsched_gnn.graph_build.neighbours import rank_candidates, task_hashes

    hashes = task_hashes(graph.task_ids)
    edges = {}
    for relation, k in (("within", k_in), ("cross", k_cross)):
        e = graph.edges[relation]
        keep = np.sort(rank_candidates(e.sim, hashes[e.dst], hashes[e.src], k, e.dst))
        edges[relation] = RelationEdges(e.src[keep], e.dst[keep], e.sim[keep])
    return TaskGraph(list(graph.task_ids), list(graph.env_ids), edges)


def build_pool_graph(pool: Pool, k_in: int, k_cross: int) -> TaskGraph:
    """The dual-relation graph of ``pool`` (spec section 3) with the given neighbour sizes."""
    from envsched_gnn.graph_build.builder import GraphConfig, build_graph

    return build_graph(pool, GraphConfig(k_within=k_in, k_cross=k_cross))


def cached_graph(
    path: Path, build: Callable[[], TaskGraph], log: Callable[[str], None]
) -> tuple[TaskGraph, float]:
    """Read ``path`` if present, else build and write it; returns the graph and build seconds.
    The file keeps the edges in the built graph's order, so a rerun that reads it runs on the
    graph a first run built (the same arrays, the same fingerprint)."""
    if path.exists():
        log(f"graph: reusing {path}")
        return read_graph(path), 0.0
    start = time.perf_counter()
    graph = build()
    seconds = time.perf_counter() - start
    path.parent.mkdir(parents=True, exist_ok=True)
    write_graph(path, graph, sort_edges=False)
    log(f"graph: built {path.name} in {seconds:.1f} s")
    return graph, seconds


# -- one run -------------------------------------------------------------------------------


@dataclass
class JobContext:
    """What every simulator job shares: the pool, the simulator's world, the graphs by key
    and the config (handed to each worker process once, by its initializer)."""

    pool: Pool
    world: SimulatorWorld
    graphs: dict[str, TaskGraph]
    config: AblationConfig


def run_job(job: Job, ctx: JobContext) -> dict:
    """Run one scheduler with the simulated learner for the whole budget; per-step records."""
    cfg = ctx.config
    k = cfg.simulator.rollouts
    graph = job_graph(job.graph, job.seed, ctx.graphs, cfg)
    sim_config = replace(cfg.simulator, batch_size=cfg.batch_size)
    sim = LearnerSimulator(ctx.pool, sim_config, seed=job.seed, world=ctx.world)
    options = {}
    if job.penalty_graph is not None:
        options["penalty_graph"] = job_graph(job.penalty_graph, job.seed, ctx.graphs, cfg)
    scheduler = make_scheduler(
        job.scheduler,
        graph,
        batch_size=cfg.batch_size,
        seed=job.seed,
        operations=operation_patterns(ctx.pool.tasks),
        sampling=cfg.sampling,
        **options,
    )
    env_of = {t.task_id: t.env_id for t in ctx.pool.tasks}
    tools_of = {
        t.task_id: {(t.env_id, call.name) for call in (t.reference_solution or [])}
        for t in ctx.pool.tasks
    }
    on_graph = sim.indices(graph.task_ids)
    predicts = hasattr(scheduler, "last_prediction")
    records = [{"step": -1, "budget_step": 0.0, "score": sim.score()}]
    observed = np.zeros(graph.num_tasks, bool)
    start = time.perf_counter()
    schedule_seconds = 0.0
    loop: StepLoop[Rollouts] = StepLoop(scheduler, k, cfg.budget_rollouts)
    step = 0
    while not loop.done:
        batch = loop.choose(step)
        schedule_seconds += batch.schedule_s
        truth = sim.expected_group_variance(on_graph) if predicts else None
        rollouts = sim.rollout(list(batch.task_ids))
        rewards = rollouts.as_mapping(sim.world.task_ids)
        groups = {task_id: rollouts.subset(np.array([row])) for row, task_id in enumerate(rewards)}
        trained, selection = loop.settle(step, rewards, groups)
        if trained:
            sim.update(Rollouts.concat(trained))
        tools = len(set().union(*(tools_of[t] for t in batch.task_ids)))
        budget_step = loop.spent / cfg.rollouts_per_step
        record = {"step": step, "budget_step": budget_step, "score": sim.score()}
        record.update(batch_metrics(rewards, env_of, tools))
        record.update(prediction_quality(scheduler, graph, rewards, truth, observed))
        observed[[graph.index[t] for t in rewards]] = True
        record["groups"] = len(batch.task_ids)
        record["trained_groups"] = len(selection.update)
        record.update(selection.metrics)
        records.append(record)
        step += 1
    return {
        "name": job.name,
        "seed": job.seed,
        "records": records,
        "wall_s": time.perf_counter() - start,
        "schedule_s": schedule_seconds,
        "rollouts": loop.spent,
    }


def prediction_quality(
    scheduler,
    graph: TaskGraph,
    rewards: dict[str, list[float]],
    truth: np.ndarray | None,
    observed: np.ndarray,
) -> dict[str, float]:
    """Spearman of the step's q with the realised variance of the batch's groups, over the
    batch and over its tasks ``observed`` at an earlier step and its unseen ones (whose q
    comes from the graph alone), and (when ``truth`` holds every graph task's true expected
    variance) with the truth; {} without q.

    A correlation with a constant side, or over fewer than 3 tasks, is undefined (NaN)."""
    prediction = getattr(scheduler, "last_prediction", None)
    if prediction is None:
        return {}
    q = np.asarray(prediction.q, dtype=np.float64)
    rows = np.array([graph.index[t] for t in rewards], np.int64)
    realised = np.array([float(np.var(r)) for r in rewards.values()])
    seen = observed[rows]
    out = {
        "predict/spearman_batch": spearman(q[rows], realised),
        "predict/spearman_batch_seen": spearman(q[rows[seen]], realised[seen]),
        "predict/spearman_batch_unseen": spearman(q[rows[~seen]], realised[~seen]),
        "predict/seen_share": float(seen.mean()),
    }
    if truth is not None:
        out["predict/spearman_true"] = spearman(q, truth)
    return out


# -- the whole harness ---------------------------------------------------------------------


def plan_jobs(config: AblationConfig) -> list[Job]:
    """Every (name, scheduler, graph, seed) the config asks for, the slowest kinds first."""
    default = grid_name(*DEFAULT_K)
    named = [(s, s, default, None) for s in config.schedulers]
    named += [
        (grid_name(*k), "envsched", grid_name(*k), None) for k in config.k_grid if k != DEFAULT_K
    ]
    for c in config.controls:
        graph, scheduler = control_graph_name(c), control_scheduler(c)
        if graph in PREDICTOR_CONTROLS:
            named.append((control_name(c), scheduler, PREDICTOR_CONTROLS[graph], default))
        else:
            named.append((control_name(c), scheduler, graph, None))
    if config.oracle_graph:
        named.append((ORACLE, "envsched", "oracle", None))
    named.sort(key=lambda item: 0 if item[1] == "learned" else 2 if over_samples(item[1]) else 1)
    return [
        Job(name, sched, graph, seed, penalty)
        for name, sched, graph, penalty in named
        for seed in range(config.seeds)
    ]


def run_ablation(
    pool: Pool, config: AblationConfig, out: str | Path, log: Callable[[str], None] = print
) -> dict:
    """Build (or reuse) the graphs, run every job, write the results, report and plots."""
    train = train_pool(pool)
    if not pool.split("test"):
        raise ValueError("ablate: the pool has no held-out (split == 'test') tasks to score on")
    if config.learner == "policy":
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
    finished = FinishedRuns(out, pool, graphs, config, log)
    run_start = time.perf_counter()
    if config.learner == "sim":
        runs, learner_info = simulate_jobs(pool, graphs, jobs, config, log, finished)
    else:
        runs, learner_info = run_policy_jobs(pool, graphs, jobs, config, out, log, finished)
    timings["runs_s"] = time.perf_counter() - run_start
    timings["total_s"] = time.perf_counter() - started
    results = summarise(runs, config)
    diagnosis = diagnose_picks({name: entry["runs"] for name, entry in results.items()}, pool)
    for name, picks in diagnosis.items():
        results[name]["picks"] = picks
    run_info = {
        **learner_info,
        "config": asdict(config),
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
    """The train-split graphs the jobs read, keyed by ``grid_name``, ``oracle`` and ``shuffled``
    (the drawn controls come from the default graph per run seed: ``job_graph``)."""
    sizes = [DEFAULT_K, *config.k_grid]
    k_max = (max(k for k, _ in sizes), max(k for _, k in sizes))
    full, build_s = cached_graph(
        graphs_dir / f"graph_{grid_name(*k_max)}.json", lambda: build_pool_graph(train, *k_max), log
    )
    graphs = {grid_name(*k): truncate_graph(full, *k) for k in sizes}
    timings = {"graph_build_s": build_s}
    if config.oracle_graph:
        from envsched_gnn.eval.ablation.oracle import oracle_graph

        graphs["oracle"] = oracle_graph(train, *DEFAULT_K)
    if SHUFFLED_CONTROL in map(control_graph_name, config.controls):
        graphs[SHUFFLED_CONTROL], timings["shuffled_graph_build_s"] = cached_graph(
            graphs_dir / f"graph_shuffled{config.control_seed}_{grid_name(*DEFAULT_K)}.json",
            lambda: build_pool_graph(shuffled_pool(train, config.control_seed), *DEFAULT_K),
            log,
        )
    return graphs, timings


def simulate_jobs(
    pool: Pool,
    graphs: dict[str, TaskGraph],
    jobs: Sequence[Job],
    config: AblationConfig,
    log: Callable[[str], None],
    finished: FinishedRuns,
) -> tuple[list[dict], dict]:
    """Every job with the learner simulator (``config.workers`` spawned processes), less
    those ``finished`` holds; each run is saved there as soon as it ends."""
    done, todo = finished.split(jobs)
    world = build_world(pool, config.simulator)
    context = JobContext(pool, world, graphs, config)
    runs: list[dict] = list(done.values())
    run_start = time.perf_counter()
    results = map_in_workers(run_job, todo, context, config.workers)
    for n, (job, result) in enumerate(zip(todo, results, strict=True), 1):
        runs.append(finished.save(job, result))
        _progress(log, n, len(todo), result, run_start)
    info = {
        "learner": "simulator (envsched_gnn.eval.simulator.simulate), not a language model",
        "world": {
            "kind": world.kind,
            **world.info,
            "tasks_shuffled": config.simulator.shuffle_tasks,
        },
        "skills": world.op_names,
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
