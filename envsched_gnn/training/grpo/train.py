"""One GRPO run: the policy, the scheduler on the train split's graph, the Lightning trainer.

:func:`train_grpo` returns the :class:`GRPOResult` and leaves in ``out_dir``: ``checkpoints/``,
``logs/`` (a resumed run's in ``logs/resumed-N/``), ``policy/`` (the trained HF folder),
``grpo_result.json`` and ``history.jsonl``.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import lightning as L

from envsched_gnn.envs.pool import Pool
from envsched_gnn.envs.runtime_config import RuntimeConfig
from envsched_gnn.graph.task_graph import TaskGraph
from envsched_gnn.json_files import write_json_atomically
from envsched_gnn.observations import Observation, observations_from_rewards, write_history
from envsched_gnn.training.agent_format import AgentConfig
from envsched_gnn.training.grpo.config import GRPOConfig, LaunchConfig
from envsched_gnn.training.grpo.step_checkpoints import StepCheckpoints
from envsched_gnn.training.held_out import heldout_evaluator, split_subset
from envsched_gnn.training.lightning_trainer import lightning_trainer, quiet_lightning

if TYPE_CHECKING:
    from lightning.pytorch.loggers import Logger

    from envsched_gnn.training.grpo.module import GRPOModule

RESULT_FILE = "grpo_result.json"
HISTORY_FILE = "history.jsonl"


@dataclass
class GRPOResult:
    """Everything a run measured (also written to ``grpo_result.json``)."""

    scheduler: str
    config: dict
    steps: list[dict[str, float]]
    evals: list[dict[str, Any]]
    batches: list[list[str]]
    rewards: list[dict[str, list[float]]]
    rollouts: int
    world_size: int
    rank: int
    local_rollouts: int
    wall_s: float
    unwritten_observations: int = 0
    rejected_observations: int = 0
    picks: list[dict[str, Any]] = field(default_factory=list)
    """Per step, the stage and score of each pick, in batch order (``pick_record``)."""

    def to_json(self) -> dict:
        return asdict(self)


def train_grpo(
    pool: Pool,
    graph: TaskGraph,
    policy_dir: str | Path,
    config: GRPOConfig,
    out_dir: str | Path,
    *,
    agent_config: AgentConfig | None = None,
    runtime_config: RuntimeConfig | None = None,
    launch: LaunchConfig | None = None,
    write_observations: Callable[[Sequence[Observation]], object] | None = None,
    resume: str | Path | None = None,
    stop_after: int | None = None,
    initial_eval: dict[str, float] | None = None,
    eval_seed: int | None = None,
    retire_envs: Sequence[str] = (),
) -> GRPOResult:
    """GRPO on ``pool``'s train split from the policy in ``policy_dir``, ``config.scheduler``
    choosing each batch from ``graph`` (restricted to the train split).

    ``write_observations`` receives each step's observations through an :class:`ObservationSink`.
    ``resume`` continues a checkpoint (also onto a grown ``graph``); ``stop_after`` stops after
    that many steps in all; ``initial_eval`` is an already measured step-0 evaluation;
    ``eval_seed`` seeds the held-out evaluation instead of ``config.seed``; ``retire_envs`` are
    no longer selected from this call's first step.
    """
    from envsched_gnn.scheduler.base import check_covers, check_state_reward, known_env_ids

    train_graph = graph.subgraph([task.task_id for task in pool.split("train")])
    known_env_ids(train_graph, retire_envs)  # a wrong name fails before anything loads
    if resume is not None:  # and a graph that lost a task the run used, or another reward
        state = checkpoint_state(resume)["scheduler"]
        check_covers(train_graph, state)
        check_state_reward(state, (runtime_config or RuntimeConfig()).reward, str(resume))
    launch = launch or LaunchConfig()
    agent_config = agent_config or AgentConfig()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    trainer = _trainer(config, launch, out, stop_after, retire_envs)
    module = _module(
        pool,
        train_graph,
        policy_dir,
        config,
        agent_config,
        runtime_config,
        write_observations,
        policy_evaluator(pool, config, eval_seed)
        if config.eval_every or config.eval_rollouts
        else None,
    )
    if initial_eval is not None:
        module.eval_results.append({"step": 0, "rollouts": 0, **initial_eval})
    try:
        wall_s = _fit(trainer, module, resume, out)
    except BaseException:
        if module.sink is not None:
            # stop its writer thread; what it still held is in the last checkpoint, which a
            # --resume writes again
            module.sink.close(timeout=0)
        raise
    unwritten: list[Observation] = []
    if module.sink is not None:
        unwritten = module.sink.close(timeout=config.store_flush_timeout_s)
    result = _result(config, trainer, module, wall_s, len(unwritten))
    if trainer.is_global_zero:
        _write_run(out, module, agent_config, result, unwritten)
    return result


def checkpoint_state(path: str | Path) -> dict[str, Any]:
    """The run state a checkpoint holds (the module's ``on_save_checkpoint``), read without
    loading its tensors into memory."""
    import torch

    from envsched_gnn.training.grpo.module import CHECKPOINT_KEY

    return torch.load(path, map_location="cpu", mmap=True, weights_only=False)[CHECKPOINT_KEY]


def policy_evaluator(
    pool: Pool, config: GRPOConfig, eval_seed: int | None = None
) -> Callable[[Any, int], dict[str, Any]]:
    """The run's held-out evaluation (:func:`~envsched_gnn.training.held_out.heldout_evaluator`):
    (a seeded subset of) ``eval_tasks`` held-out tasks x ``eval_samples`` and, with
    ``pool_eval_samples``, ``pool_eval_tasks`` train tasks; seeded by ``eval_seed``, else
    ``config.seed``.
    """
    seed = config.seed if eval_seed is None else eval_seed
    samples = config.pool_eval_samples
    pool_tasks = split_subset(pool, "train", config.pool_eval_tasks, seed) if samples else []
    tasks = split_subset(pool, "test", config.eval_tasks, seed)
    return heldout_evaluator(tasks, config.eval_samples, seed, pool_tasks, samples)


def _trainer(
    config: GRPOConfig,
    launch: LaunchConfig,
    out: Path,
    stop_after: int | None,
    retire_envs: Sequence[str],
) -> L.Trainer:
    """The seeded Lightning trainer of the run, with its checkpoints, step lines and retirements."""
    # Lightning counts optimiser steps; a GRPO step takes ppo_epochs x mini_batches of them
    # (a step without an update too: GRPOUpdate.idle). The module stops the run when its
    # rollout budget is spent; each step spends a group at least, so steps x B bounds them
    per_step = config.optimizer_steps_per_step
    most_steps = config.steps * config.batch_size
    callbacks: list[Any] = []
    if launch.checkpoint_every:
        callbacks.append(StepCheckpoints(out / "checkpoints", launch.checkpoint_every * per_step))
    if launch.progress_bar:
        callbacks.append(L.pytorch.callbacks.TQDMProgressBar(refresh_rate=1))
    if launch.print_steps:
        callbacks.append(StepPrinter())
    if retire_envs:
        callbacks.append(RetireEnvironments(retire_envs))
    return lightning_trainer(
        out,
        config.seed,
        launch.accelerator,
        _loggers(out),
        devices=launch.devices,
        strategy=launch.strategy,
        # a resumed run starts a new epoch of the stream, at the checkpoint's step
        max_steps=per_step * (most_steps if stop_after is None else min(stop_after, most_steps)),
        callbacks=callbacks,
        enable_checkpointing=False,  # StepCheckpoints, and _fit's last.ckpt
        log_every_n_steps=1,
        enable_progress_bar=launch.progress_bar,
        num_sanity_val_steps=0,
    )


def _module(
    pool: Pool,
    train_graph: TaskGraph,
    policy_dir: str | Path,
    config: GRPOConfig,
    agent_config: AgentConfig,
    runtime_config: RuntimeConfig | None,
    write_observations: Callable[[Sequence[Observation]], object] | None,
    evaluator: Callable[[Any, int], dict[str, Any]] | None,
) -> GRPOModule:
    """The ``GRPOModule``: the loaded policy, the scheduler on the train graph, the sink."""
    from envsched_gnn.envs.abstract import operation_patterns
    from envsched_gnn.scheduler.registry import make_scheduler
    from envsched_gnn.training.grpo.module import GRPOModule
    from envsched_gnn.training.observation_sink import ObservationSink
    from envsched_gnn.training.policy import load_policy

    model, tokenizer = load_policy(policy_dir)
    model.train()
    scheduler = make_scheduler(
        config.scheduler,
        train_graph,
        batch_size=config.batch_size,
        seed=config.seed,
        operations=operation_patterns(pool.tasks),
        sampling=config.sampling,
    )
    return GRPOModule(
        model,
        tokenizer,
        pool,
        scheduler,
        config,
        agent_config=agent_config,
        runtime_config=runtime_config,
        sink=ObservationSink(write_observations) if write_observations is not None else None,
        evaluator=evaluator,
    )


def _fit(trainer: L.Trainer, module: GRPOModule, resume: str | Path | None, out: Path) -> float:
    """Trains (from ``resume`` when given) and saves ``last.ckpt``; returns the wall seconds."""
    start = time.perf_counter()
    with quiet_lightning():
        trainer.fit(module, ckpt_path=str(resume) if resume is not None else None)
    # the whole state (optimiser, schedulers, loops): a resumed run continues exactly; said
    # explicitly, since Lightning logs "`weights_only` was not set" for a save without it
    trainer.save_checkpoint(out / "checkpoints" / "last.ckpt", weights_only=False)
    return time.perf_counter() - start


def _result(
    config: GRPOConfig, trainer: L.Trainer, module: GRPOModule, wall_s: float, unwritten: int
) -> GRPOResult:
    """What the run measured, read from the trained module and its trainer."""
    sink = module.sink
    return GRPOResult(
        scheduler=config.scheduler,
        config=config.to_dict(),
        steps=module.step_metrics,
        evals=module.eval_results,
        batches=module.batches,
        rewards=module.rewards,
        rollouts=module.rollouts_total,
        world_size=trainer.world_size,
        rank=trainer.global_rank,
        local_rollouts=module.local_rollouts_total,
        wall_s=wall_s,
        unwritten_observations=unwritten,
        rejected_observations=len(sink.rejected) if sink is not None else 0,
        picks=module.picks,
    )


def _write_run(
    out: Path,
    module: GRPOModule,
    agent_config: AgentConfig,
    result: GRPOResult,
    unwritten: Sequence[Observation],
) -> None:
    """Rank 0's files: the trained policy, the result, the history and unwritten observations."""
    from envsched_gnn.training.policy import save_agent_config

    if unwritten:
        # the store did not come back in time: keep them as history.jsonl, to load later
        write_history(out / "unwritten_observations.jsonl", unwritten)
    module.policy.save_pretrained(out / "policy")
    module.tokenizer.save_pretrained(out / "policy")
    save_agent_config(out / "policy", agent_config)
    write_json_atomically(out / RESULT_FILE, result.to_json(), indent=2)
    reward = module.runtime_config.reward
    write_history(
        out / HISTORY_FILE,
        [
            o
            for s, groups in enumerate(result.rewards)
            for o in observations_from_rewards(s, groups, reward)
        ],
    )


class RetireEnvironments(L.pytorch.callbacks.Callback):
    """Retires environments once the scheduler is restored (a checkpoint's state would
    otherwise replace the retirement), before the first batch is chosen."""

    def __init__(self, env_ids: Sequence[str]) -> None:
        self.env_ids = list(env_ids)

    def on_train_start(self, trainer: Any, module: Any) -> None:
        module.scheduler.retire(self.env_ids)


class StepPrinter(L.pytorch.callbacks.Callback):
    """Prints each step's main numbers on rank 0 (logs and the main job, where a progress
    bar per run would be noise)."""

    def on_train_batch_end(self, trainer: Any, module: Any, *args: Any) -> None:
        if not trainer.is_global_zero or not module.step_metrics:
            return
        m = module.step_metrics[-1]
        last_eval = module.eval_results[-1] if module.eval_results else None
        heldout = ""
        if last_eval is not None and last_eval["step"] == module.next_step:
            heldout = f", held-out {last_eval['mean_reward']:.3f}"
        print(
            f"  {module.config.scheduler} step {int(m['step']) + 1}/{module.config.steps}: reward "
            f"{m['batch/mean_reward']:.3f}, variance {m['batch/mean_reward_variance']:.4f}, "
            f"zero-var {m['batch/zero_variance_share']:.2f}, envs {m['batch/envs_covered']:.0f}, "
            f"rollout {m['time/rollout_s']:.1f} s, update {m['time/update_s']:.1f} s{heldout}",
            flush=True,
        )


def _loggers(out: Path) -> list[Logger]:
    """CSV logs in ``out/logs`` (a resumed run's in ``out/logs/resumed-N``: Lightning's CSV
    logger would delete the metrics.csv it finds), and TensorBoard's beside them when it is
    installed."""
    from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger

    logs, version = out / "logs", ""
    if (logs / "metrics.csv").exists():
        version = next(
            f"resumed-{n}" for n in itertools.count(1) if not (logs / f"resumed-{n}").exists()
        )
    loggers: list[Logger] = [
        CSVLogger(out, name="logs", version=version, flush_logs_every_n_steps=1)
    ]
    with contextlib.suppress(ModuleNotFoundError):  # TensorBoard only when installed
        loggers.append(TensorBoardLogger(out, name="logs", version="tensorboard"))
    return loggers
