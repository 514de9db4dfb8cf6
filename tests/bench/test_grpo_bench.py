"""``bench grpo``'s plain update: the log-probability of each next token, on hand-made numbers."""

from __future__ import annotations

import math

import pytest
import torch

from envsched_gnn.bench.grpo import token_log_probs


def test_token_log_probs_picks_next_token():
    logits = torch.log(torch.tensor([[[0.7, 0.2, 0.1], [0.1, 0.1, 0.8], [1 / 3, 1 / 3, 1 / 3]]]))
    ids = torch.tensor([[0, 1, 2]])
    assert token_log_probs(logits, ids)[0].tolist() == pytest.approx([math.log(0.2), math.log(0.8)])
    tempered = torch.log_softmax(logits[0, :2] / 2.0, dim=-1)
    expected = [tempered[0, 1].item(), tempered[1, 2].item()]
    assert token_log_probs(logits, ids, temperature=2.0)[0].tolist() == pytest.approx(expected)
