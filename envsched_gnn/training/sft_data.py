"""SFT examples: reference solutions executed in the runtime and rendered in the agent format;
trajectories that do not pass all checks are dropped.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import Dataset, Sampler

from envsched_gnn.envs.pool import Pool, Task
from envsched_gnn.envs.replay import EpisodeRuntime, replay
from envsched_gnn.training.agent_format import (
    AgentConfig,
    ChatFormat,
    RenderedEpisode,
    reference_turns,
    render_trajectory,
)


@dataclass(frozen=True)
class ReferenceRun:
    """A task's reference solution as executed: the tool results and the reward reached."""

    task: Task
    results: list[Any]
    reward: float


def run_references(
    runtime: EpisodeRuntime, tasks: Sequence[Task], chunk: int = 512, keep_empty: bool = False
) -> list[ReferenceRun]:
    """Execute every task's reference solution in ``runtime``, ``chunk`` tasks at a time."""
    runs: list[ReferenceRun] = []
    for start in range(0, len(tasks), chunk):
        part = [t for t in tasks[start : start + chunk] if keep_empty or t.reference_solution]
        replayed = replay(runtime, [(t.task_id, t.reference_solution or []) for t in part])
        runs += [
            ReferenceRun(task, run.results, float(run.score.reward))
            for task, run in zip(part, replayed, strict=True)
        ]
    return runs


def render_run(
    fmt: ChatFormat, pool: Pool, run: ReferenceRun, agent: AgentConfig
) -> tuple[str, RenderedEpisode]:
    """An executed run as an SFT example (mask = the policy's tokens), with its environment id."""
    task = run.task
    turns = reference_turns(task.reference_solution or [], run.results, agent)
    return task.env_id, render_trajectory(fmt, pool.envs[task.env_id], task, turns, agent)


def render_references(
    fmt: ChatFormat, pool: Pool, runs: Sequence[ReferenceRun], agent: AgentConfig
) -> list[tuple[str, RenderedEpisode]]:
    """Render the runs that reached reward 1 as SFT examples (:func:`render_run`)."""
    return [render_run(fmt, pool, run, agent) for run in runs if run.reward >= 1.0]


class SFTDataset(Dataset):
    """Rendered episodes as ``(input_ids, labels)``; ``groups`` holds each environment's indices."""

    def __init__(self, examples: Sequence[tuple[str, RenderedEpisode]], max_length: int) -> None:
        kept = [(env, e) for env, e in examples if len(e.input_ids) <= max_length]
        self.examples = [e for _, e in kept]
        self.dropped = len(examples) - len(kept)
        self.mean_length = sum(len(e.input_ids) for e in self.examples) / max(len(kept), 1)
        by_env: dict[str, list[int]] = {}
        for index, (env, _) in enumerate(kept):
            by_env.setdefault(env, []).append(index)
        self.groups = list(by_env.values())

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        example = self.examples[index]
        ids = torch.tensor(example.input_ids, dtype=torch.long)
        mask = torch.tensor(example.policy_mask, dtype=torch.bool)
        return ids, torch.where(mask, ids, -100)


class GroupedBatchSampler(Sampler[list[int]]):
    """Batches within one group (environment), shuffled by ``seed + e`` at epoch e, remainders
    dropped; with ``lengths``, windows of ``bucket_batches`` batches are sorted by length first.
    """

    def __init__(
        self,
        groups: Sequence[Sequence[int]],
        batch_size: int,
        seed: int,
        lengths: Sequence[int] | None = None,
        bucket_batches: int = 8,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if bucket_batches < 1:
            raise ValueError(f"bucket_batches must be >= 1, got {bucket_batches}")
        self.groups = [list(g) for g in groups if g]
        self.batch_size, self.seed, self.epoch = batch_size, seed, 0
        self.lengths = lengths
        self.window = batch_size * bucket_batches

    def _bucketed(self, order: list[int]) -> list[int]:
        if self.lengths is None:
            return order
        lengths = self.lengths
        return [
            index
            for start in range(0, len(order), self.window)
            for index in sorted(order[start : start + self.window], key=lambda i: lengths[i])
        ]

    def _batches(self, generator: torch.Generator) -> list[list[int]]:
        batches = []
        for group in self.groups:
            order = [group[i] for i in torch.randperm(len(group), generator=generator).tolist()]
            if len(order) <= self.batch_size:
                batches.append(order)
                continue
            full = len(order) // self.batch_size * self.batch_size
            order = self._bucketed(order[:full])
            batches += [order[i : i + self.batch_size] for i in range(0, full, self.batch_size)]
        return [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]

    def __iter__(self) -> Iterator[list[int]]:
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        self.epoch += 1
        yield from self._batches(generator)

    def __len__(self) -> int:
        return sum(max(len(g) // self.batch_size, 1) for g in self.groups)


def pad_collate(pad_id: int):
    """Collate ``(input_ids, labels)`` items into right-padded ``input_ids``,
    ``attention_mask`` and ``labels`` of shape (batch, longest)."""

    def collate(items: list[tuple[torch.Tensor, torch.Tensor]]) -> dict[str, torch.Tensor]:
        width = max(len(ids) for ids, _ in items)
        input_ids = torch.full((len(items), width), pad_id, dtype=torch.long)
        labels = torch.full((len(items), width), -100, dtype=torch.long)
        attention = torch.zeros((len(items), width), dtype=torch.long)
        for row, (ids, lab) in enumerate(items):
            input_ids[row, : len(ids)] = ids
            labels[row, : len(ids)] = lab
            attention[row, : len(ids)] = 1
        return {"input_ids": input_ids, "attention_mask": attention, "labels": labels}

    return collate
