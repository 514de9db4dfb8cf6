"""Inverse-CDF sampling: each token in its slice of the tempered CDF; top-p keeps the nucleus."""

from __future__ import annotations

import pytest
import torch

from envsched_gnn.training.sampling import sample_tokens, tempered_logprobs


def test_sampling_follows_the_tempered_distribution():
    logits = torch.tensor([[0.0, 1.0, 2.0, 3.0]])
    probs = tempered_logprobs(logits, 0.7).exp()[0]
    cdf = torch.cumsum(probs, 0)
    for i in range(4):
        low = 0.0 if i == 0 else float(cdf[i - 1])
        for u in (low + 1e-9, (low + float(cdf[i])) / 2, float(cdf[i]) - 1e-9):
            token, logp = sample_tokens(logits, torch.tensor([u], dtype=torch.float64), 0.7, 1.0)
            assert int(token) == i
            assert float(logp) == pytest.approx(float(probs[i].log()))


def test_top_p_keeps_the_nucleus_only():
    logits = torch.tensor([[0.0, 0.1, 5.0, 0.2]])
    tokens, _ = sample_tokens(logits.repeat(50, 1), torch.linspace(0, 0.999, 50), 1.0, 0.5)
    assert set(tokens.tolist()) == {2}
