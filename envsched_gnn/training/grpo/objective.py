"""GRPO as pure functions: group-relative advantages, the clipped token-level loss, the KL term.

Advantage estimators, registered by name as in verl's ``core_algos``:

- ``"grpo"`` (Shao et al., 2024): ``A(i,k) = (r(i,k) - mean_k r(i,.)) / (std_k r(i,.) + eps)``
- ``"dr_grpo"`` (Liu et al., 2025): ``A(i,k) = r(i,k) - mean_k r(i,.)``

(exactly 0 for a group of equal rewards). The policy loss, per token, summed and divided by
``D`` (``"token_mean"``: the mini-batch's tokens; ``"token_sum_norm"``: episodes x budget):

    rho_t = exp(log pi(y_t) - log pi_old(y_t))
    l_t   = max(-A_t rho_t, -A_t clip(rho_t, 1 - eps, 1 + eps))
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from envsched_gnn.advantages import relative_advantages

AdvantageEstimator = Callable[[Tensor, int], Tensor]
ADVANTAGE_ESTIMATORS: dict[str, AdvantageEstimator] = {}
LOSS_AGGREGATIONS = ("token_mean", "token_sum_norm")


def register_advantage_estimator(name: str) -> Callable[[AdvantageEstimator], AdvantageEstimator]:
    """Register an estimator ``fn(rewards (B*K,), group_size K) -> advantages (B*K,)``."""

    def decorator(fn: AdvantageEstimator) -> AdvantageEstimator:
        if name in ADVANTAGE_ESTIMATORS:
            raise ValueError(f"advantage estimator {name!r} is already registered")
        ADVANTAGE_ESTIMATORS[name] = fn
        return fn

    return decorator


def get_advantage_estimator(name: str) -> AdvantageEstimator:
    try:
        return ADVANTAGE_ESTIMATORS[name]
    except KeyError:
        known = ", ".join(sorted(ADVANTAGE_ESTIMATORS))
        raise ValueError(
            f"unknown advantage estimator {name!r}; expected one of: {known}"
        ) from None


def group_advantages(
    rewards: Tensor, group_size: int, normalize_std: bool = True, eps: float = 1e-6
) -> Tensor:
    """Group-relative advantages of K consecutive rollouts per task:
    :func:`~envsched_gnn.advantages.relative_advantages` (exactly 0 for a group of equal
    rewards), computed in float64.

    Shapes:
        rewards: (B*K,), the K rollouts of a task consecutive -> advantages: (B*K,), same dtype.
    """
    if rewards.dim() != 1:
        raise ValueError(f"rewards must have shape (B*K,), got {tuple(rewards.shape)}")
    if group_size < 2 or rewards.numel() % group_size:
        raise ValueError(
            f"group_size must be >= 2 and divide the number of rewards ({rewards.numel()}), "
            f"got {group_size}"
        )
    groups = rewards.detach().cpu().double().numpy().reshape(-1, group_size)
    advantages = relative_advantages(groups, normalize_std, eps).reshape(-1)
    return torch.from_numpy(advantages).to(rewards)


@register_advantage_estimator("grpo")
def grpo_advantages(rewards: Tensor, group_size: int) -> Tensor:
    """GRPO: centred and divided by the group std. ``(B*K,) -> (B*K,)``."""
    return group_advantages(rewards, group_size, normalize_std=True)


@register_advantage_estimator("dr_grpo")
def dr_grpo_advantages(rewards: Tensor, group_size: int) -> Tensor:
    """Dr. GRPO: centred only, no std division. ``(B*K,) -> (B*K,)``."""
    return group_advantages(rewards, group_size, normalize_std=False)


def scale_negative(advantages: Tensor, scale: float) -> Tensor:
    """``A`` where ``A >= 0``, ``scale * A`` elsewhere. Shapes: (B*K,) -> (B*K,)."""
    return torch.where(advantages < 0, advantages * scale, advantages)


def clipped_token_losses(logp: Tensor, old_logp: Tensor, advantages: Tensor, clip: float) -> Tensor:
    """PPO's clipped surrogate per token, ``max(-A rho, -A clip(rho, 1-eps, 1+eps))``.

    Shapes: logp, old_logp, advantages: (..., T) -> (..., T).
    """
    ratio = torch.exp(logp - old_logp)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip, 1.0 + clip)
    return torch.maximum(unclipped, clipped)


def loss_denominator(
    aggregation: str, policy_tokens: int, episodes: int, max_response_tokens: int
) -> float:
    """The constant ``D`` dividing a mini-batch's summed token losses: its policy tokens
    (``"token_mean"``) or ``|M| * max_response_tokens`` (``"token_sum_norm"``); at least 1.
    """
    if aggregation == "token_mean":
        denominator = float(policy_tokens)
    elif aggregation == "token_sum_norm":
        denominator = float(episodes * max_response_tokens)
    else:
        raise ValueError(
            f"unknown loss aggregation {aggregation!r}; expected one of {LOSS_AGGREGATIONS}"
        )
    return max(denominator, 1.0)


def policy_loss(
    logp: Tensor, old_logp: Tensor, advantages: Tensor, denominator: float, clip: float = 0.2
) -> Tensor:
    """The clipped policy-gradient loss, ``(1 / D) sum_t max(-A_t rho_t, -A_t clip(rho_t, 1 - eps,
    1 + eps))`` with ``rho_t = exp(log pi(y_t) - log pi_old(y_t))`` and ``eps`` = ``clip``.

    Shapes:
        logp, old_logp: (N,) log-probabilities of the policy's N sampled tokens under the
        current and the rollout policy; advantages: (N,) (the episode's advantage on each of
        its tokens) -> scalar.
    """
    return clipped_token_losses(logp, old_logp, advantages, clip).sum() / denominator


def kl_penalty(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """The k3 estimator of KL(pi || pi_ref) per token (Schulman, 2020):
    ``exp(ref - logp) - (ref - logp) - 1``, non-negative and unbiased.

    Shapes: logp, ref_logp: (..., T) -> (..., T).
    """
    delta = ref_logp - logp
    return torch.exp(delta) - delta - 1.0


def clipped_tokens(logp: Tensor, old_logp: Tensor, clip: float = 0.2) -> Tensor:
    """How many tokens have their ratio ``rho_t`` outside ``[1 - clip, 1 + clip]``.

    Shapes: logp, old_logp: (N,) -> scalar.
    """
    ratio = torch.exp(logp - old_logp)
    return ((ratio < 1.0 - clip) | (ratio > 1.0 + clip)).sum()
