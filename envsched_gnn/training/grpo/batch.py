"""GRPO's update batches: the kept groups cut into mini-batches (one optimiser step each), their
episodes packed by shared prompt into micro-batches, the policy tokens' log-probabilities
computed with the shared prompt run once (:mod:`~envsched_gnn.training.shared_prefix`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from envsched_gnn.training.rollout import Episode
from envsched_gnn.training.shared_prefix import predicted_logits


@dataclass(frozen=True)
class UpdateItem:
    """One episode in an update with its advantage (the same on all its policy tokens)."""

    advantage: float
    episode: Episode


@dataclass
class MicroBatch:
    """Right-padded tensors of a micro-batch's episodes.

    Shapes: ``ids (R, L)`` int64, ``policy (R, L)`` bool (True at the policy's tokens),
    ``old_logp (N,)`` and ``advantages (N,)`` over the N policy tokens in row-major order,
    ``lengths (R,)``; ``allowed (N, V)`` bool, the grammar's allowed set at each policy token
    when the episodes were decoded constrained (else None).
    """

    ids: Tensor
    policy: Tensor
    old_logp: Tensor
    advantages: Tensor
    lengths: Tensor
    allowed: Tensor | None = None

    @property
    def policy_tokens(self) -> int:
        return int(self.policy.sum())

    @property
    def tokens(self) -> int:
        return int(self.lengths.sum())


def split_groups(groups: Sequence[str], parts: int) -> list[list[str]]:
    """``groups`` cut into ``parts`` consecutive chunks of sizes differing by at most one (the
    larger ones first): the mini-batches of one pass."""
    size, extra = divmod(len(groups), parts)
    bounds = [i * size + min(i, extra) for i in range(parts + 1)]
    return [list(groups[bounds[i] : bounds[i + 1]]) for i in range(parts)]


def pack_micro_batches(
    items: Sequence[UpdateItem], max_rows: int, max_tokens: int
) -> list[list[UpdateItem]]:
    """Micro-batches of one task's episodes each, at most ``max_rows`` rows and
    ``rows x longest <= max_tokens``; tasks in order of first appearance, episodes by length.
    """
    by_task: dict[str, list[UpdateItem]] = {}
    for item in items:
        by_task.setdefault(item.episode.task_id, []).append(item)
    batches: list[list[UpdateItem]] = []
    for group in by_task.values():
        current: list[UpdateItem] = []
        for item in sorted(group, key=lambda i: i.episode.token_ids.numel()):
            longest = item.episode.token_ids.numel()
            if current and (len(current) >= max_rows or (len(current) + 1) * longest > max_tokens):
                batches.append(current)
                current = []
            current.append(item)
        if current:
            batches.append(current)
    return batches


def collate(items: Sequence[UpdateItem], device: torch.device | str = "cpu") -> MicroBatch:
    """Right-pad a micro-batch's episodes (pad id 0: padding sits after every real token, so
    under the causal mask it never changes a real token's result)."""
    lengths = torch.tensor([i.episode.token_ids.numel() for i in items], dtype=torch.long)
    longest = int(lengths.max())
    ids = torch.zeros((len(items), longest), dtype=torch.long)
    policy = torch.zeros((len(items), longest), dtype=torch.bool)
    old, adv, allowed = [], [], []
    for row, item in enumerate(items):
        episode = item.episode
        n = episode.token_ids.numel()
        ids[row, :n] = episode.token_ids
        policy[row, :n] = episode.policy_mask
        old.append(episode.old_logprobs[episode.policy_mask])
        adv.append(torch.full((int(episode.policy_mask.sum()),), float(item.advantage)))
        allowed.append(episode.allowed_masks())
    constrained = [a is not None for a in allowed]
    if any(constrained) and not all(constrained):
        raise ValueError("a micro-batch mixes constrained and unconstrained episodes")
    return MicroBatch(
        ids=ids.to(device),
        policy=policy.to(device),
        old_logp=torch.cat(old).to(device),
        advantages=torch.cat(adv).to(device),
        lengths=lengths,
        allowed=torch.cat(allowed).to(device) if all(constrained) else None,
    )


def policy_log_probs(
    model: torch.nn.Module, batch: MicroBatch, temperature: float = 1.0
) -> tuple[Tensor, Tensor]:
    """``log pi(x_t | x_<t)`` under ``softmax(z / T)`` (``z`` -inf outside ``batch.allowed``) at the
    policy's tokens and the detached entropy there, both ``(N,)`` row-major, float32 or wider.
    """
    ids, policy = batch.ids, batch.policy
    logits = predicted_logits(model, ids, policy)
    if logits.dtype not in (torch.float32, torch.float64):
        logits = logits.float()
    if batch.allowed is not None:
        logits = logits.masked_fill(~batch.allowed, float("-inf"))
    logp_all = torch.log_softmax(logits / temperature, dim=-1)
    targets = ids[:, 1:][policy[:, 1:]]
    logp = logp_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    with torch.no_grad():
        entropy = torch.special.entr(logp_all.exp()).sum(dim=-1)
    return logp, entropy
