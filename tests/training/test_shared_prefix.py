"""The shared-prefix forward (float64, a small model): where the prefix stops, and the same
logits as a plain forward of every row, with and without an attention mask."""

from __future__ import annotations

import pytest
import torch

from envsched_gnn.training.grpo.batch import collate
from envsched_gnn.training.shared_prefix import predicted_logits, shared_prefix_length
from tests.training.small_lm import float64_norms, group, small_model


@pytest.fixture(autouse=True)
def norms_in_float64(monkeypatch):
    float64_norms(monkeypatch)


def test_shared_prefix_stops_before_the_first_predicted_token():
    ids = torch.tensor([[1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 9, 9]])
    predicted = torch.zeros_like(ids, dtype=torch.bool)
    assert shared_prefix_length(ids, predicted) == 0
    predicted[:, 5] = True
    assert shared_prefix_length(ids, predicted) == 4
    predicted[1, 3] = True
    assert shared_prefix_length(ids, predicted) == 2
    predicted[1] = False  # a row that predicts nothing does not shorten the prefix
    assert shared_prefix_length(ids, predicted) == 4
    predicted[0, 1] = True  # the token at 1 is predicted from position 0: nothing to share
    assert shared_prefix_length(ids, predicted) == 0


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize(("tasks", "prefix"), [(("t",), 10), (("a", "b"), 0)])
def test_logits_equal_a_plain_forward_of_every_row(masked, tasks, prefix):
    model = small_model()
    items = [item for seed, task in enumerate(tasks) for item in group(task, seed, rows=3)]
    batch = collate(items)
    assert shared_prefix_length(batch.ids, batch.policy) == prefix
    lengths = batch.lengths.unsqueeze(1)
    attention = (torch.arange(batch.ids.shape[1]) < lengths).long() if masked else None
    shared = predicted_logits(model, batch.ids, batch.policy, attention)
    plain = model(input_ids=batch.ids, attention_mask=attention).logits[:, :-1]
    assert shared.shape == (batch.policy_tokens, model.config.vocab_size)
    torch.testing.assert_close(shared, plain[batch.policy[:, 1:]], rtol=0, atol=1e-12)
