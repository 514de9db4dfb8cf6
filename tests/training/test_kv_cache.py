"""The growing KV cache gives the same logits as a plain forward pass and selects rows."""

from __future__ import annotations

import torch

from envsched_gnn.training.kv_cache import GrowingLayer, growing_cache
from envsched_gnn.training.policy import load_policy
from tests.training.tiny_policy import untrained_policy_dir


def test_chunked_decoding_with_the_growing_cache_equals_a_full_forward():
    model, tokenizer = load_policy(untrained_policy_dir(), dtype=torch.float64)
    ids = torch.randint(5, len(tokenizer), (3, 300), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        plain = model(input_ids=ids, use_cache=False).logits
        cache = growing_cache()
        chunks = []
        for start, end in [(0, 200), (200, 201), (201, 202), (202, 300)]:
            out = model(
                input_ids=ids[:, start:end],
                position_ids=torch.arange(start, end).expand(3, -1),
                cache=cache,
                use_cache=True,
            )
            chunks.append(out.logits)
        assert isinstance(cache.layers[0], GrowingLayer)
        assert cache.get_seq_length() == 300 and cache.layers[0].keys.shape[-2] == 512
        torch.testing.assert_close(torch.cat(chunks, dim=1), plain)
        cache.batch_select_indices(torch.tensor([2, 0]))
        last = model(
            input_ids=ids[[2, 0], 299:],
            position_ids=torch.tensor([[300], [300]]),
            cache=cache,
            use_cache=True,
        ).logits
    full = model(input_ids=torch.cat([ids[[2, 0]], ids[[2, 0], 299:]], dim=1)).logits
    torch.testing.assert_close(last[:, -1], full[:, -1])
