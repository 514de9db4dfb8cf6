"""GRPO's policy update of one step: PPO-style passes of clipped, token-level optimiser steps.

``ppo_epochs`` passes shuffle the groups (step seed) into ``mini_batches`` mini-batches ``M``,
each one optimiser step on (``T(i,k)`` the policy tokens of episode ``(i,k)``; negative
advantages scaled by ``negative_advantage_scale``)

    L(theta) = (1 / D) sum_{(i,k) in M} sum_{t in T(i,k)}
                   [ max(-A(i,k) rho_t, -A(i,k) clip(rho_t, 1 - eps, 1 + eps)) + beta KL3_t ]

    rho_t = pi_theta(y_t | y_<t) / pi_old(y_t | y_<t)
    KL3_t = exp(u_t) - u_t - 1,   u_t = log pi_ref(y_t | y_<t) - log pi_theta(y_t | y_<t)
    D     = sum_{(i,k) in M} |T(i,k)|                           (``token_mean``, DAPO)
          = |M| * max_turns * max_new_tokens                    (``token_sum_norm``, Dr. GRPO)

with ``eps`` = ``clip``, ``beta`` = ``kl_coef``, distributions ``softmax(z / temperature)``;
gradients accumulate over one-task micro-batches (:mod:`.batch`), clipped to
``max_grad_norm``; each DDP rank divides by ``D / world``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import Tensor

from envsched_gnn.training.grpo.batch import (
    UpdateItem,
    collate,
    pack_micro_batches,
    policy_log_probs,
    split_groups,
)
from envsched_gnn.training.grpo.config import GRPOConfig
from envsched_gnn.training.grpo.objective import (
    clipped_tokens,
    get_advantage_estimator,
    kl_penalty,
    loss_denominator,
    policy_loss,
    scale_negative,
)
from envsched_gnn.training.rng import step_seed
from envsched_gnn.training.rollout import Episode


class EpisodeSummary(Protocol):
    """What the update reads of each episode of the step, this rank's or another's."""

    @property
    def index(self) -> int:
        """Position in the update's episodes, group-major: group ``index // K``, sample
        ``index % K``."""

    @property
    def task_id(self) -> str: ...

    @property
    def reward(self) -> float: ...

    @property
    def policy_tokens(self) -> int:
        """``|T(i,k)|``: tokens the policy sampled."""


@dataclass(frozen=True)
class UpdateHooks:
    """What the update takes from the training loop that runs it (Lightning's, in
    :class:`~envsched_gnn.training.grpo.module.GRPOModule`)."""

    optimizer: torch.optim.Optimizer
    """The optimiser; Lightning's wrapper steps it through the strategy (and counts the step)."""
    lr_scheduler: torch.optim.lr_scheduler.LRScheduler
    """Stepped once after every optimiser step."""
    backward: Callable[[Tensor], None]
    """``loss.backward()`` as the strategy runs it (precision plugin, DDP's gradient sync)."""
    no_sync: Callable[[], AbstractContextManager[Any]]
    """A context skipping DDP's gradient sync (all micro-batches but an optimiser step's last)."""
    reduce_sum: Callable[[Tensor], Tensor]
    """Sum of a tensor over the ranks."""
    world_size: int
    device: torch.device


class GRPOUpdate:
    """The update of one GRPO step (module docstring), on ``policy`` in place.

    Args:
        policy: the Hugging Face causal LM being trained.
        config: the run's :class:`GRPOConfig`.
        temperature: the rollouts' sampling temperature.
        max_response_tokens: ``max_turns * max_new_tokens``, for ``token_sum_norm``.
        ref_policy: the frozen initial policy ``pi_ref`` (needed when ``config.kl_coef > 0``).
    """

    def __init__(
        self,
        policy: torch.nn.Module,
        config: GRPOConfig,
        *,
        temperature: float,
        max_response_tokens: int,
        ref_policy: torch.nn.Module | None = None,
    ) -> None:
        self.policy = policy
        self.config = config
        self.temperature = temperature
        self.max_response_tokens = max_response_tokens
        self.ref_policy = ref_policy
        self.advantage_fn = get_advantage_estimator(config.advantage_estimator)

    def __call__(
        self,
        step: int,
        episodes: Sequence[tuple[int, Episode]],
        records: Sequence[EpisodeSummary],
        hooks: UpdateHooks,
    ) -> dict[str, float]:
        """``ppo_epochs`` seeded passes over the groups of ``records`` (group ``index // K``), each
        in ``mini_batches`` optimiser steps; this rank trains its ``episodes``. Returns metrics.
        """
        config, k = self.config, self.config.group_size
        records = sorted(records, key=lambda r: r.index)
        rewards = torch.tensor([r.reward for r in records], dtype=torch.float64)
        advantages = self.advantage_fn(rewards, k) if records else rewards
        advantages = scale_negative(advantages, config.negative_advantage_scale)
        advantage_of = {r.index: float(a) for r, a in zip(records, advantages, strict=True)}
        mine = [(i // k, UpdateItem(advantage_of[i], episode)) for i, episode in episodes]
        groups = list(dict.fromkeys(r.index // k for r in records))
        order = torch.Generator().manual_seed(step_seed(config.seed, step))
        sums = dict.fromkeys(_UPDATE_SUMS, 0.0)
        for epoch in range(config.ppo_epochs):
            shuffled = [groups[i] for i in torch.randperm(len(groups), generator=order).tolist()]
            for part in split_groups(shuffled, config.mini_batches):
                chosen = set(part)
                part_records = [r for r in records if r.index // k in chosen]
                items = [item for group, item in mine if group in chosen]
                done = self._optimizer_step(items, part_records, epoch == 0, hooks)
                for name, value in done.items():
                    sums[name] += value
        totals = torch.tensor(list(sums.values()), dtype=torch.float64, device=hooks.device)
        totals = hooks.reduce_sum(totals)
        sums = dict(zip(sums, totals.tolist(), strict=True))
        n = float(config.optimizer_steps_per_step)
        world = hooks.world_size
        policy_tokens = max(sums["policy_tokens"], 1.0)
        first_pass_tokens = max(sums["first_pass_policy_tokens"], 1.0)
        token_advantages = [(r.policy_tokens, abs(advantage_of[r.index])) for r in records]
        all_tokens = max(sum(t for t, _ in token_advantages), 1)
        return {
            "train/loss": sums["loss"] / world / n,
            "train/kl": sums["kl"] / world / n,
            "train/clip_fraction": sums["clipped"] / policy_tokens,
            "train/approx_kl": sums["approx_kl"] / policy_tokens,
            "train/entropy": sums["entropy"] / first_pass_tokens,
            "train/grad_norm": sums["grad_norm"] / world / n,
            "train/lr": sums["lr"] / world / n,
            "train/advantage_abs_mean": float(advantages.abs().mean()) if records else 0.0,
            "train/advantage_token_mass": sum(t * a for t, a in token_advantages) / all_tokens,
            "train/nonzero_advantage_token_share": (
                sum(t for t, a in token_advantages if a > 0) / all_tokens
            ),
            "train/tokens": sums["tokens"],
            "train/optimizer_steps": n,
        }

    def idle(self, hooks: UpdateHooks) -> dict[str, float]:
        """A step without an update: the metric names of :meth:`__call__`, each NaN. The optimiser
        is still stepped ``ppo_epochs x mini_batches`` times with every gradient None (Lightning
        counts optimiser steps); ``torch.optim`` skips such parameters, so nothing changes.
        """
        optimizer = hooks.optimizer
        optimizer.zero_grad(set_to_none=True)
        for _ in range(self.config.optimizer_steps_per_step):
            optimizer.step()
        return dict.fromkeys(UPDATE_METRICS, float("nan"))

    def _optimizer_step(
        self,
        items: Sequence[UpdateItem],
        part_records: Sequence[EpisodeSummary],
        first_pass: bool,
        hooks: UpdateHooks,
    ) -> dict[str, float]:
        """One optimiser step on a mini-batch (this rank's ``items``); returns this rank's sums."""
        config = self.config
        denominator = loss_denominator(
            config.loss_aggregation,
            sum(r.policy_tokens for r in part_records),
            len(part_records),
            self.max_response_tokens,
        )
        # DDP averages gradients over ranks; scaling by the world size makes the sum of the
        # ranks' partial losses the loss of the whole mini-batch.
        denominator /= hooks.world_size
        sums = dict.fromkeys(_UPDATE_SUMS, 0.0)
        optimizer = hooks.optimizer
        optimizer.zero_grad(set_to_none=True)
        micro_batches = pack_micro_batches(
            items, config.micro_batch_size, config.micro_batch_tokens
        ) or [[]]  # an idle rank still takes part in the gradient synchronisation
        for i, micro in enumerate(micro_batches):
            last = i == len(micro_batches) - 1
            with nullcontext() if last else hooks.no_sync():
                parts = self._micro_loss(micro, denominator, first_pass, hooks.device)
                hooks.backward(parts.pop("loss_tensor"))
            for name, value in parts.items():
                sums[name] += value
        trainable = [p for p in self.policy.parameters() if p.requires_grad]
        sums["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(trainable, config.max_grad_norm))
        sums["lr"] = float(optimizer.param_groups[0]["lr"])
        # with nothing in the mini-batch every gradient is None and AdamW leaves the weights
        # (and its moments) alone; the step still counts, so the schedule stays in line
        optimizer.step()
        hooks.lr_scheduler.step()
        return sums

    def _micro_loss(
        self,
        micro: Sequence[UpdateItem],
        denominator: float,
        first_pass: bool,
        device: torch.device,
    ) -> dict[str, Any]:
        """The micro-batch's share of the mini-batch loss (``/ denominator``) and its sums
        (entropy: first pass only)."""
        config = self.config
        if not micro:
            zero = sum(p.sum() for p in self.policy.parameters()) * 0.0
            return {"loss_tensor": zero}
        batch = collate(micro, device)
        logp, entropy = policy_log_probs(self.policy, batch, self.temperature)
        loss = policy_loss(logp, batch.old_logp, batch.advantages, denominator, config.clip)
        kl = torch.zeros((), device=device)
        if self.ref_policy is not None:
            with torch.no_grad():
                ref_logp, _ = policy_log_probs(self.ref_policy, batch, self.temperature)
            kl = kl_penalty(logp, ref_logp).sum() / denominator
            loss = loss + config.kl_coef * kl
        detached = logp.detach()
        tokens = float(batch.policy_tokens)
        return {
            "loss_tensor": loss,
            "loss": float(loss.detach()),
            "kl": float(kl.detach()),
            "clipped": float(clipped_tokens(detached, batch.old_logp, config.clip)),
            "approx_kl": float(kl_penalty(batch.old_logp, detached).sum()),
            "entropy": float(entropy.sum()) if first_pass else 0.0,
            "policy_tokens": tokens,
            "first_pass_policy_tokens": tokens if first_pass else 0.0,
            "tokens": float(batch.tokens),
        }


UPDATE_METRICS = (
    "train/loss",
    "train/kl",
    "train/clip_fraction",
    "train/approx_kl",
    "train/entropy",
    "train/grad_norm",
    "train/lr",
    "train/advantage_abs_mean",
    "train/advantage_token_mass",
    "train/nonzero_advantage_token_share",
    "train/tokens",
    "train/optimizer_steps",
)
"""The metrics of an update (module docstring), in the order :meth:`GRPOUpdate.__call__`
returns them."""

_UPDATE_SUMS = (
    "loss",
    "kl",
    "clipped",
    "approx_kl",
    "entropy",
    "grad_norm",
    "lr",
    "policy_tokens",
    "first_pass_policy_tokens",
    "tokens",
)
