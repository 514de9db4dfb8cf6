"""SFT warm start: teach the policy the reference trajectories, loss on its own tokens only.

    L     = - sum_{t: mask_t = 1} log p(x_t | x_<t) / sum_t mask_t
    lr(p) = lr_min + (lr - lr_min) * (1 + cos(pi * p)) / 2     (after a linear warm-up)

p the larger elapsed share of ``max_steps`` and of ``minutes``.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader

from envsched_gnn.envs.pool import Pool, Task
from envsched_gnn.json_files import write_json_atomically
from envsched_gnn.training.agent_format import ChatFormat, RenderedEpisode
from envsched_gnn.training.competence import COMPETENCE_FILE, mixture_examples
from envsched_gnn.training.lightning_trainer import lightning_trainer, quiet_lightning
from envsched_gnn.training.policy import (
    build_default_policy,
    load_policy,
    save_agent_config,
)
from envsched_gnn.training.policy_engine import on_gpu
from envsched_gnn.training.sft_config import SFTConfig
from envsched_gnn.training.sft_data import (
    GroupedBatchSampler,
    SFTDataset,
    pad_collate,
    render_references,
    run_references,
)
from envsched_gnn.training.shared_prefix import predicted_logits


class CosineBudget:
    """Learning-rate factor: linear warm-up, then cosine over the step or time budget."""

    def __init__(self, config: SFTConfig) -> None:
        self.config = config
        self.started: float | None = None

    def progress(self, step: int) -> float:
        shares = []
        if self.config.max_steps > 0:
            shares.append(step / self.config.max_steps)
        if self.started is not None and self.config.minutes > 0:
            shares.append((time.monotonic() - self.started) / (60.0 * self.config.minutes))
        return min(max(shares, default=0.0), 1.0)

    def __call__(self, step: int) -> float:
        if step < self.config.warmup_steps:
            return (step + 1) / self.config.warmup_steps
        low = self.config.min_lr_ratio
        return low + (1.0 - low) * 0.5 * (1.0 + math.cos(math.pi * self.progress(step)))


class SFTDataModule(L.LightningDataModule):
    """Right-padded batches, each from one environment and of similar lengths, in seeded order."""

    def __init__(self, dataset: SFTDataset, batch_size: int, pad_id: int, seed: int) -> None:
        super().__init__()
        self.dataset, self.pad_id = dataset, pad_id
        lengths = [len(example.input_ids) for example in dataset.examples]
        self.sampler = GroupedBatchSampler(dataset.groups, batch_size, seed, lengths)

    def train_dataloader(self) -> DataLoader:
        return DataLoader(
            self.dataset, batch_sampler=self.sampler, collate_fn=pad_collate(self.pad_id)
        )


def policy_token_loss(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Mean next-token cross-entropy over labelled tokens (labels -100 elsewhere), through
    :func:`~envsched_gnn.training.shared_prefix.predicted_logits` (equal to a plain forward).
    Shapes: ``input_ids, attention_mask, labels (B, L)`` -> scalar.
    """
    labels = batch["labels"]
    labelled = labels != -100
    logits = predicted_logits(model, batch["input_ids"], labelled, batch["attention_mask"])
    targets = labels[:, 1:][labelled[:, 1:]]
    return torch.nn.functional.cross_entropy(logits.float(), targets)


class SFTModule(L.LightningModule):
    """Next-token cross-entropy on the policy's tokens (:func:`policy_token_loss`)."""

    def __init__(self, model: torch.nn.Module, config: SFTConfig) -> None:
        super().__init__()
        self.model = model
        self.config = config
        self.schedule = CosineBudget(config)
        self.losses: list[float] = []

    def on_train_start(self) -> None:
        self.model.train()
        self.schedule.started = time.monotonic()

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss = policy_token_loss(self.model, batch)
        tokens = int((batch["labels"] != -100).sum())
        self.losses.append(float(loss.detach()))
        self.log("sft/loss", loss, prog_bar=True, batch_size=len(batch["input_ids"]))
        self.log("sft/policy_tokens", float(tokens), batch_size=len(batch["input_ids"]))
        self.log("sft/lr", self.lr_schedulers().get_last_lr()[0], prog_bar=True)
        return loss

    def configure_optimizers(self) -> dict[str, Any]:
        optimizer = torch.optim.AdamW(
            self.model.parameters(),
            lr=self.config.learning_rate,
            weight_decay=self.config.weight_decay,
        )
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, self.schedule)
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "step"},
        }


def sft_tasks(pool: Pool, config: SFTConfig) -> tuple[Pool, list[Task]]:
    """The SFT tasks (train split and fresh generated ones) and the pool that serves them all."""
    tasks = pool.split("train") if config.include_train_split else []
    if config.extra_tasks_per_env <= 0:
        return pool, tasks
    from envsched_gnn.envs.generator import GeneratorError, generate_extra_tasks

    # fresh tasks as long as the pool's own (a pool generated with max_calls keeps its cap)
    max_calls = max((len(t.reference_solution or ()) for t in pool.tasks), default=0) or None
    try:
        extra = generate_extra_tasks(
            pool, config.extra_tasks_per_env, config.seed, max_calls, config.extra_operations
        )
    except GeneratorError as error:
        warnings.warn(f"SFT without extra tasks: {error}", stacklevel=2)
        return pool, tasks
    return Pool(envs=pool.envs, tasks=[*pool.tasks, *extra]), [*tasks, *extra]


def build_examples(
    pool: Pool, tokenizer: Any, config: SFTConfig
) -> tuple[list[tuple[str, RenderedEpisode]], dict[str, float], dict[str, Any] | None]:
    """Execute and render the SFT tasks' references (or the competence mixture, whose summary is
    returned third; else None).
    """
    from envsched_gnn.envs.runtime import EnvRuntime
    from envsched_gnn.envs.runtime_config import RuntimeConfig

    start = time.perf_counter()
    serving, tasks = sft_tasks(pool, config)
    fmt = ChatFormat(tokenizer)
    mixture = None
    with EnvRuntime(serving, RuntimeConfig(workers=config.runtime_workers)) as runtime:
        if config.competence is None:
            runs = run_references(runtime, tasks)
            examples = render_references(fmt, serving, runs, config.agent)
            below_1 = sum(run.reward < 1.0 for run in runs)
        else:
            examples, mixture = mixture_examples(
                runtime, fmt, serving, tasks, config.competence, config.agent
            )
            below_1 = mixture["references_below_1"]
    stats = {
        "tasks": float(len(tasks)),
        "extra_tasks": float(len(tasks) - len(pool.split("train"))),
        "examples": float(len(examples)),
        "references_below_1": float(below_1),
        "prepare_s": time.perf_counter() - start,
    }
    return examples, stats, mixture


def run_sft(
    pool: Pool, model_dir: str | Path | None, config: SFTConfig, out_dir: str | Path
) -> Path:
    """SFT warm start; returns ``out_dir/policy`` (``model_dir`` None: builds the policy first)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    trainer = lightning_trainer(
        out,
        config.seed,
        config.accelerator,
        L.pytorch.loggers.CSVLogger(out, name="sft_logs"),
        devices=1,
        max_steps=config.max_steps,
        max_time=timedelta(minutes=config.minutes) if config.minutes > 0 else None,
        gradient_clip_val=config.gradient_clip,
        callbacks=[
            L.pytorch.callbacks.TQDMProgressBar(refresh_rate=10),
            L.pytorch.callbacks.ModelCheckpoint(
                dirpath=out / "checkpoints",
                every_n_train_steps=config.checkpoint_every_steps,
                save_last=True,
            ),
        ],
        log_every_n_steps=config.log_every_steps,
    )
    if model_dir is None:
        model_dir = build_default_policy(pool, config.policy, out / "init", config.agent)
    model, tokenizer = load_policy(model_dir)
    model.train()
    examples, stats, mixture = build_examples(pool, tokenizer, config)
    dataset = SFTDataset(examples, config.max_length)
    if not len(dataset):
        raise ValueError(
            f"no SFT example: the train split of the pool has no usable reference "
            f"solution ({int(stats['tasks'])} tasks, max_length {config.max_length})"
        )
    data = SFTDataModule(dataset, config.batch_size, int(tokenizer.pad_token_id), config.seed)
    module = SFTModule(model, config)
    threads = torch.get_num_threads()
    if config.threads > 0 and not on_gpu(config.accelerator):
        torch.set_num_threads(config.threads)
    start = time.perf_counter()
    try:
        with quiet_lightning():
            trainer.fit(module, datamodule=data)
    finally:
        torch.set_num_threads(threads)
    train_s = time.perf_counter() - start
    policy_dir = out / "policy"
    module.model.save_pretrained(policy_dir)
    tokenizer.save_pretrained(policy_dir)
    save_agent_config(policy_dir, config.agent)
    if mixture is not None:
        write_json_atomically(policy_dir / COMPETENCE_FILE, mixture)
    steps = trainer.global_step
    summary = {
        **stats,
        "dropped_too_long": dataset.dropped,
        "steps": steps,
        "epochs": steps * config.batch_size / len(dataset),
        "train_s": train_s,
        "trajectories_per_s": steps * config.batch_size / max(train_s, 1e-9),
        "tokens_per_s": steps * config.batch_size * dataset.mean_length / max(train_s, 1e-9),
        "first_loss": module.losses[0] if module.losses else None,
        "final_loss": sum(module.losses[-20:]) / max(len(module.losses[-20:]), 1),
        "config": asdict(config),
    }
    write_json_atomically(out / "sft_summary.json", summary, indent=2)
    return policy_dir
