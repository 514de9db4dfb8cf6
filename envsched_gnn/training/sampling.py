"""Per-episode sampling that does not depend on the batch: uniforms drawn up front from
``episode_seed(seed, task_id, sample)``, and inverse-CDF draws (``top_p`` nucleus; log-probs
under the full tempered distribution)

    x_n = min { v : sum_{w <= v} p(w) > u_n sum_w p(w) },   p = softmax(z_n / T)
"""

from __future__ import annotations

import hashlib

import torch


def episode_seed(seed: int, task_id: str, sample: int) -> int:
    """A 63-bit seed for one episode, independent of the batch it runs in."""
    digest = hashlib.blake2b(f"{seed}\x1f{task_id}\x1f{sample}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def tempered_logprobs(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """``log softmax(logits / T)`` over the last dimension, in float64."""
    return torch.log_softmax(logits.double() / temperature, dim=-1)


def sample_tokens(
    logits: torch.Tensor, uniforms: torch.Tensor, temperature: float, top_p: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Inverse-CDF sampling, row by row.

    Shapes: ``logits (R, V)``, ``uniforms (R,)`` in [0, 1) -> ``tokens (R,)`` int64,
    ``logprobs (R,)`` float64 of the tokens under ``softmax(logits / T)``.
    """
    logp = tempered_logprobs(logits, temperature)
    probs = logp.exp()
    if top_p < 1.0:
        sorted_probs, order = torch.sort(probs, dim=-1, descending=True, stable=True)
        mass_before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
        sorted_probs = torch.where(mass_before < top_p, sorted_probs, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
    cdf = torch.cumsum(probs, dim=-1)
    target = (uniforms.double() * cdf[:, -1]).unsqueeze(-1)
    tokens = torch.searchsorted(cdf, target, right=True).squeeze(-1)
    tokens = tokens.clamp_(max=probs.shape[-1] - 1)
    while True:
        # a token of probability 0 can only be hit by rounding at the CDF's flat end
        zero = probs.gather(-1, tokens.unsqueeze(-1)).squeeze(-1) == 0
        if not zero.any():
            break
        tokens = torch.where(zero, tokens - 1, tokens)
    return tokens, logp.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
