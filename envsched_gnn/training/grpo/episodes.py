"""What a GRPO step keeps of its episodes: the records every rank gathers, each group as a rank
holds it until its update, and their checkpoint forms. Episodes are numbered
``index = position * K + sample`` over a step's batch and over an update (:func:`numbered`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch

from envsched_gnn.envs.pool import ToolCall
from envsched_gnn.training.constrained import MaskTable
from envsched_gnn.training.rollout import Episode


@dataclass(frozen=True)
class EpisodeRecord:
    """What every rank learns about one episode of the step (gathered across ranks)."""

    index: int
    task_id: str
    reward: float
    tools: frozenset[tuple[str, str]]
    policy_tokens: int
    calls: int = 0
    malformed: int = 0
    answered: bool = False


@dataclass(frozen=True)
class HeldGroup:
    """One group as a rank holds it: its K records (every rank has them) and this rank's
    episodes of it (all K or none: groups are dealt whole)."""

    records: tuple[EpisodeRecord, ...]
    episodes: tuple[Episode, ...]


def held_groups(
    task_ids: Sequence[str],
    episodes: Sequence[tuple[int, Episode]],
    records: Sequence[EpisodeRecord],
) -> dict[str, HeldGroup]:
    """The step's groups ``{task_id: HeldGroup}`` in batch order, from this rank's
    ``episodes`` (as (index, episode)) and every rank's ``records``."""
    held = {task_id: ([], []) for task_id in task_ids}
    for record in records:
        held[record.task_id][0].append(record)
    for _, episode in episodes:
        held[episode.task_id][1].append(episode)
    return {t: HeldGroup(tuple(r), tuple(e)) for t, (r, e) in held.items()}


def numbered(
    groups: Sequence[HeldGroup], group_size: int
) -> tuple[list[tuple[int, Episode]], list[EpisodeRecord]]:
    """The episodes (this rank's, as (index, episode)) and records of an update's ``groups``,
    group g's sample k at index ``g * K + k``."""
    episodes: list[tuple[int, Episode]] = []
    records: list[EpisodeRecord] = []
    for g, group in enumerate(groups):
        base = g * group_size
        records += [replace(r, index=base + r.index % group_size) for r in group.records]
        episodes += [(base + e.sample, e) for e in group.episodes]
    return episodes, records


# -- checkpoint forms -----------------------------------------------------------------------


def record_state(record: EpisodeRecord) -> dict[str, Any]:
    return {**asdict(record), "tools": sorted([env, tool] for env, tool in record.tools)}


def record_from_state(state: Mapping[str, Any]) -> EpisodeRecord:
    tools = frozenset((env, tool) for env, tool in state["tools"])
    return EpisodeRecord(**{**state, "tools": tools})


def episode_state(episode: Episode) -> dict[str, Any]:
    """``episode`` as tensors and plain values; of the shared mask table, only the masks its
    policy tokens were sampled under (renumbered)."""
    state = {
        name: getattr(episode, name)
        for name in (
            "task_id",
            "sample",
            "prompt_length",
            "reward",
            "malformed_calls",
            "num_turns",
            "finish_reason",
        )
    }
    state.update(
        token_ids=episode.token_ids.cpu(),
        policy_mask=episode.policy_mask.cpu(),
        old_logprobs=episode.old_logprobs.cpu(),
        checks=list(episode.checks),
        tool_calls=[{"name": c.name, "arguments": c.arguments} for c in episode.tool_calls],
        texts=list(episode.texts),
        timings=dict(episode.timings),
        allowed_ids=None,
        allowed_masks=None,
    )
    if episode.allowed_ids is not None and episode.allowed_table is not None:
        ids = episode.allowed_ids.cpu()
        used = sorted(set(ids[ids >= 0].tolist()))
        local = {old: new for new, old in enumerate(used)}
        state["allowed_ids"] = torch.tensor([local.get(i, -1) for i in ids.tolist()])
        state["allowed_masks"] = episode.allowed_table.stack(torch.tensor(used, dtype=torch.long))
    return state


def episode_from_state(state: Mapping[str, Any]) -> Episode:
    """The episode :func:`episode_state` saved (its own mask table when constrained)."""
    table = None
    if state["allowed_masks"] is not None:
        masks = state["allowed_masks"]
        table = MaskTable(masks.shape[1])
        for mask in masks:
            table.add(mask)
    return Episode(
        task_id=state["task_id"],
        sample=state["sample"],
        token_ids=state["token_ids"],
        policy_mask=state["policy_mask"],
        old_logprobs=state["old_logprobs"],
        prompt_length=state["prompt_length"],
        reward=state["reward"],
        checks=tuple(state["checks"]),
        tool_calls=[ToolCall(c["name"], c["arguments"]) for c in state["tool_calls"]],
        malformed_calls=state["malformed_calls"],
        num_turns=state["num_turns"],
        finish_reason=state["finish_reason"],
        texts=list(state["texts"]),
        timings=dict(state["timings"]),
        allowed_ids=state["allowed_ids"],
        allowed_table=table,
    )


def held_state(groups: Mapping[tuple[int, str], HeldGroup], rank: int) -> list[dict[str, Any]]:
    """This rank's held groups as checkpoint rows ``{step, task_id, records, episodes}``, each
    episode as ``[rank, state]``."""
    return [
        {
            "step": step,
            "task_id": task_id,
            "records": [record_state(r) for r in group.records],
            "episodes": [[rank, episode_state(e)] for e in group.episodes],
        }
        for (step, task_id), group in groups.items()
    ]


def merge_held_states(parts: Sequence[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Every rank's :func:`held_state` rows as one row per group (the records are every
    rank's; the episodes those of the rank that held them)."""
    merged: dict[tuple[int, str], dict[str, Any]] = {}
    for part in parts:
        for row in part:
            key = (row["step"], row["task_id"])
            if key not in merged:
                merged[key] = {**row, "episodes": []}
            merged[key]["episodes"] += row["episodes"]
    return list(merged.values())


def held_from_state(
    rows: Sequence[Mapping[str, Any]], rank: int, world_size: int
) -> dict[tuple[int, str], HeldGroup]:
    """The held groups of ``rank`` from merged checkpoint rows: an episode saved by rank r goes
    to rank ``r % world_size`` (the same rank when the world size is unchanged)."""
    return {
        (int(row["step"]), str(row["task_id"])): HeldGroup(
            tuple(record_from_state(r) for r in row["records"]),
            tuple(
                episode_from_state(state)
                for saved_rank, state in row["episodes"]
                if saved_rank % world_size == rank
            ),
        )
        for row in rows
    }
