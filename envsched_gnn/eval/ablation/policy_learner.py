"""The policy learner of ``eval ablate --learner policy``: one real GRPO run per scheduler and seed.

Every run starts from the same policy (the SFT warm start of ``model`` or the built-in policy,
:mod:`~envsched_gnn.training.warm_start`; ``model`` as is when ``sft_steps`` = 0) and trains
with :func:`~envsched_gnn.training.grpo.train.train_grpo` on the ablation's train-split graph
(a control's: its draw for seed s), ``workers`` runs at a time. Budget: S x B x K rollouts per
run, every rollout counted (a scheduler behind dynamic sampling spends more a step and makes
fewer steps).

Score: the held-out mean reward (1/N) sum_i m_i on one fixed seeded subset of N test tasks,
every e = ceil(S / evaluations) steps
(:func:`~envsched_gnn.eval.ablation.config.eval_every_for`), or at the first step to reach
each count of the rollout grid ``eval_rollouts``, and after the last; the step-0 evaluation
is shared.
Finished runs, the SFT start (``policy/start.json``) and the step-0 evaluation
(``policy/heldout_step0.json``) are kept with the fingerprints they depend on, so a rerun
trains only what is missing. Records have the simulator path's layout (``ablate.run_job``),
``score`` None where no evaluation followed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from envsched_gnn.envs.pool import Pool
from envsched_gnn.eval.ablation.config import (
    STEP_METRICS,
    AblationConfig,
    Job,
    PolicyLearnerConfig,
    eval_every_for,
    job_graph,
)
from envsched_gnn.eval.ablation.runs import FinishedRuns, folder_fingerprint
from envsched_gnn.graph.task_graph import TaskGraph
from envsched_gnn.json_files import canonical_sha256, write_json_atomically
from envsched_gnn.training.agent_format import AgentConfig
from envsched_gnn.training.sft_config import SFTConfig

START_RECORD = "start.json"
"""Beside the SFT warm start: the fingerprint of its inputs and its folder."""
STEP0_RECORD = "heldout_step0.json"
"""The starting policy's held-out evaluation, with what it depends on."""


def check_model(config: PolicyLearnerConfig) -> None:
    """``--model`` must be a local HF model folder (checked before anything is written)."""
    if config.model is not None and not (Path(config.model) / "config.json").is_file():
        raise ValueError(f"--model {config.model}: not a local model folder (no config.json)")


def starting_policy(
    pool: Pool, config: PolicyLearnerConfig, out: Path, log: Callable[[str], None]
) -> Path:
    """The folder of the policy every run starts from (SFT into ``out/sft`` unless skipped).

    The SFT warm start is kept: ``out/start.json`` records the fingerprint of its inputs
    (:func:`~envsched_gnn.training.warm_start.sft_fingerprint`, and the files of ``model``),
    and a rerun with the same inputs starts from the policy already trained."""
    check_model(config)
    if config.sft_steps == 0:
        log(f"policy: starting every run from {config.model} as is (no SFT)")
        return Path(config.model)
    from envsched_gnn.training.warm_start import sft_fingerprint, warm_start

    sft = SFTConfig(
        max_steps=config.sft_steps,
        extra_tasks_per_env=config.sft_extra_tasks_per_env,
        accelerator=config.accelerator,
        agent=config.agent or AgentConfig(),
    )
    model = folder_fingerprint(config.model) if config.model is not None else None
    inputs = canonical_sha256({"sft": sft_fingerprint(pool, sft), "model": model})
    kept = _read_json(out / START_RECORD)
    if kept is not None and kept["inputs"] == inputs and (out / kept["policy"]).is_dir():
        log(f"policy: reusing the SFT warm start {out / kept['policy']} (same SFT inputs)")
        return out / kept["policy"]
    start = time.perf_counter()
    log(f"policy: SFT warm start of {config.model or 'the built-in policy'} ...")
    path, _ = warm_start(pool, config.model, sft, out / "sft", log)
    log(f"policy: SFT done in {time.perf_counter() - start:.0f} s: {path}")
    write_json_atomically(
        out / START_RECORD, {"inputs": inputs, "policy": path.relative_to(out).as_posix()}
    )
    return path


def run_policy_jobs(
    pool: Pool,
    graphs: dict[str, TaskGraph],
    jobs: Sequence[Job],
    config: AblationConfig,
    out: Path,
    log: Callable[[str], None],
    finished: FinishedRuns,
) -> tuple[list[dict], dict[str, Any]]:
    """Train every job from one starting policy (``config.policy.workers`` at a time), less
    those ``finished`` holds, saving each there as soon as it ends; returns the run records
    and what the report says about the learner (starting policy, evaluation set, step-0
    score). The starting policy is evaluated once, before any run, and that evaluation is
    kept for reruns (:func:`kept_heldout_start`)."""
    # imported here: grpo.runs loads Lightning (seconds), which the simulator never needs
    from envsched_gnn.training.grpo.config import LaunchConfig
    from envsched_gnn.training.grpo.runs import GRPORun, SharedStart, train_runs
    from envsched_gnn.training.policy import load_agent_config

    start_dir = starting_policy(pool, config.policy, out / "policy", log)
    start_id = folder_fingerprint(start_dir)
    done, todo = finished.split(jobs, start=start_id)
    # seed by seed: an interrupted comparison leaves whole seeds, each paired across names
    todo = sorted(todo, key=lambda job: job.seed)
    learner = replace(config.policy, agent=config.policy.agent or load_agent_config(start_dir))
    launch = LaunchConfig(accelerator=learner.accelerator)
    start = SharedStart(
        pool, start_dir, learner.agent, learner.runtime, launch, eval_seed=learner.eval_seed
    )
    recipe = replace(
        learner.recipe,
        eval_tasks=learner.eval_tasks,
        eval_samples=learner.eval_samples,
        pool_eval_samples=learner.pool_eval_samples,
        pool_eval_tasks=learner.pool_eval_tasks,
    )
    record = out / "policy" / STEP0_RECORD
    start.initial_eval = initial = kept_heldout_start(
        start, recipe, learner, record, start_id, finished.pool, log
    )
    grpo_runs = []
    for job in todo:
        grpo = replace(
            recipe,
            scheduler=job.scheduler,
            batch_size=config.batch_size,
            group_size=config.simulator.rollouts,
            steps=config.steps,
            sampling=config.sampling,
            eval_every=0
            if config.eval_rollouts
            else eval_every_for(config.steps, config.evaluations),
            eval_rollouts=config.eval_rollouts,
            seed=job.seed,
        )
        graph = job_graph(job.graph, job.seed, graphs, config)
        grpo_runs.append(GRPORun(grpo, out / "runs" / job.name / f"seed{job.seed}", graph))
    runs: list[dict] = list(done.values())
    started = time.perf_counter()
    if learner.workers > 1:
        log(f"policy: {len(todo)} runs, {learner.workers} at a time")
    trained = train_runs(start, grpo_runs, learner.workers)
    for n, (job, run, result) in enumerate(zip(todo, grpo_runs, trained, strict=True), 1):
        record = run_record(job, result, config, run.out_dir.relative_to(out))
        runs.append(finished.save(job, record, start_id))
        elapsed = time.perf_counter() - started
        evals = result.evals
        log(
            f"[{n}/{len(todo)}] {job.name} seed {job.seed}: held-out "
            f"{evals[0]['mean_reward']:.4f} -> {evals[-1]['mean_reward']:.4f}, "
            f"{result.rollouts} rollouts, {result.wall_s:.0f} s; elapsed {elapsed:.0f} s, "
            f"eta {elapsed / n * (len(todo) - n):.0f} s"
        )
    info = {
        "learner": "policy (real GRPO): envsched_gnn.training.grpo.train.train_grpo",
        "starting_policy": str(start_dir),
        "policy": learner.model or "built-in",
        "sft_steps": learner.sft_steps,
        "recipe": asdict(learner.recipe),
        "agent": asdict(learner.agent),
        "heldout": {
            "tasks": initial["tasks"],
            "samples": learner.eval_samples,
            "seed": learner.eval_seed,
            "every_steps": eval_every_for(config.steps, config.evaluations),
            "rollouts": list(config.eval_rollouts),
            "step0": initial,
        },
    }
    return runs, info


def kept_heldout_start(
    start: Any,
    recipe: Any,
    learner: PolicyLearnerConfig,
    record: Path,
    start_id: str,
    pool_id: str,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """:func:`heldout_start`, kept in ``record`` with the fingerprints of the starting policy
    and the pool and the evaluation's settings; a rerun with the same ones reads it back."""
    identity = {
        "start": start_id,
        "pool": pool_id,
        "eval": [learner.eval_tasks, learner.eval_samples, learner.pool_eval_samples],
        "eval_seed": learner.eval_seed,
        "agent": asdict(learner.agent),
        "accelerator": learner.accelerator,
    }
    if learner.runtime.reward != "fraction":  # a record of the partial-credit reward keeps its key
        identity["reward"] = learner.runtime.reward
    kept = _read_json(record)
    if kept is not None and kept["key"] == canonical_sha256(identity):
        initial = kept["evaluation"]
        log(f"policy: held-out {initial['mean_reward']:.4f} at step 0 (kept in {record})")
        return initial
    tick = time.perf_counter()
    initial = heldout_start(start, recipe)
    log(
        f"policy: held-out {initial['mean_reward']:.4f} at step 0 ({initial['tasks']} tasks x "
        f"{initial['k']}, {time.perf_counter() - tick:.0f} s)"
    )
    payload = {"key": canonical_sha256(identity), "identity": identity, "evaluation": initial}
    write_json_atomically(record, payload)
    return _read_json(record)["evaluation"]  # as a rerun reads it


def _read_json(path: Path) -> Any:
    """The JSON in ``path``, or None when there is no such file."""
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def heldout_start(start: Any, recipe: Any) -> dict[str, Any]:
    """The starting policy's held-out evaluation (the step-0 score every run shares)."""
    from envsched_gnn.training.grpo.runs import evaluate_start

    return evaluate_start(start, recipe)


def run_record(job: Job, result: Any, config: AblationConfig, run_dir: Path) -> dict:
    """A :class:`GRPOResult` as a harness run (the layout of ``ablate.run_job``'s);
    ``run_dir`` is the run's folder relative to the ablation's output folder."""
    per_budget_step = config.rollouts_per_step
    scores = {int(e["step"]): float(e["mean_reward"]) for e in result.evals}
    pool = {int(e["step"]): float(e["pool"]["mean_reward"]) for e in result.evals if "pool" in e}
    fractions = {
        int(e["step"]): float(e["mean_check_fraction"])
        for e in result.evals
        if "mean_check_fraction" in e
    }
    records: list[dict] = [{"step": -1, "budget_step": 0.0, "score": scores[0]}]
    if pool:
        records[0]["pool_score"] = pool[0]
    if fractions:
        records[0]["check_fraction"] = fractions.get(0)
    for metrics in result.steps:
        step = int(metrics["step"])
        record = {
            "step": step,
            "budget_step": metrics["train/rollouts_total"] / per_budget_step,
            "score": scores.get(step + 1),
        }
        if pool:
            record["pool_score"] = pool.get(step + 1)
        if fractions:
            record["check_fraction"] = fractions.get(step + 1)
        record.update({name: float(metrics[name]) for name in STEP_METRICS})
        record["groups"] = int(metrics["batch/rollouts"]) // config.simulator.rollouts
        record["trained_groups"] = int(metrics["batch/kept_groups"])
        record["rollout_s"] = float(metrics["time/rollout_s"])
        record.update({k: float(v) for k, v in metrics.items() if k.startswith("sampling/")})
        records.append(record)
    return {
        "name": job.name,
        "seed": job.seed,
        "records": records,
        "wall_s": result.wall_s,
        "schedule_s": sum(m["time/schedule_s"] for m in result.steps),
        "rollouts": result.rollouts,
        "extra": {
            "evals": result.evals,
            "run_dir": str(run_dir),
            # the run's own history, for the pick diagnosis (eval.ablation.picks)
            "groups": [
                {"step": step, "task_ids": list(groups), "rewards": list(groups.values()), **picks}
                for step, (groups, picks) in enumerate(
                    zip(result.rewards, _picks_by_step(result, len(result.rewards)), strict=True)
                )
            ],
        },
    }


def _picks_by_step(result: Any, steps: int) -> list[dict]:
    """The pick record of each step (stage and score lists), {} where the run has none."""
    by_step = {int(p["step"]): {k: v for k, v in p.items() if k != "step"} for p in result.picks}
    return [by_step.get(step, {}) for step in range(steps)]
