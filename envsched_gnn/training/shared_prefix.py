"""One forward pass over rows that share a prompt: the prefix once, the head only where a token
is predicted. SFT's loss and GRPO's log-probabilities both go through it.

For R right-padded rows of length L sharing P first tokens and a mask ``m`` of predicted tokens:

    h_{0..P-1}   = body(x_{0..P-1})                 once, its KV cache repeated R times
    h_{r,P..L-1} = body(x_{r,P..L-1} | cache)       the rows' own suffixes
    z_{r,t}      = W h_{r,t-1}                      only where m_{r,t} = 1 (t >= 1)

equal to a plain forward of every row, at ``P + R (L - P)`` positions instead of ``R L``.
"""

from __future__ import annotations

import torch
from torch import Tensor


def shared_prefix_length(ids: Tensor, predicted: Tensor) -> int:
    """``P = max(min(LCP, f - 1), 0)``: the rows' longest common prefix, cut before ``f - 1`` (``f``
    the earliest predicted position); rows with no predicted token do not shorten it.
    Shapes: ``ids (R, L)`` int, ``predicted (R, L)`` bool -> int.
    """
    if not predicted.any():
        return 0
    same = (ids == ids[:1]).all(dim=0)
    lcp = int(same.long().cumprod(dim=0).sum())
    first = int(predicted.any(dim=0).long().argmax())
    return max(min(lcp, first - 1), 0)


def predicted_logits(
    model: torch.nn.Module,
    ids: Tensor,
    predicted: Tensor,
    attention_mask: Tensor | None = None,
) -> Tensor:
    """The logits ``z_{r,t}`` predicting each token with ``predicted[r, t]`` (t >= 1), row-major, in
    line with ``ids[:, 1:][predicted[:, 1:]]`` (module docstring). ``model``: a Hugging Face causal
    LM; ``attention_mask`` is handed to its body when given.
    Shapes: ``ids (R, L)``, ``predicted (R, L)`` bool -> ``(N, V)``, N the predicted tokens.
    """
    rows, length = ids.shape
    body, head = model.get_decoder(), model.get_output_embeddings()
    p = shared_prefix_length(ids, predicted)
    masked = {} if attention_mask is None else {"attention_mask": attention_mask}
    if p > 0:
        cache = body(input_ids=ids[:1, :p], use_cache=True).cache
        cache.batch_repeat_interleave(rows)
        positions = torch.arange(p, length, device=ids.device).expand(rows, -1)
        hidden = body(
            input_ids=ids[:, p:], **masked, position_ids=positions, cache=cache, use_cache=True
        ).last_hidden_state
    else:
        hidden = body(input_ids=ids, **masked, use_cache=False).last_hidden_state
    return head(hidden[:, :-1][predicted[:, p + 1 :]])
