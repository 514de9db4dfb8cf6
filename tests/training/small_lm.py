"""What the update's tests share: a small float64 Qwen3 and hand-made episodes."""

from __future__ import annotations

import pytest
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from envsched_gnn.training.grpo.batch import UpdateItem
from envsched_gnn.training.rollout import Episode

VOCAB = 40


def float64_norms(monkeypatch: pytest.MonkeyPatch) -> None:
    """transformers' RMSNorm computes in float32 whatever the weights' dtype, which rounds
    every gradient to float32 precision; in the input's dtype the comparison is exact."""
    from transformers.models.qwen3 import modeling_qwen3

    def forward(self, hidden_states):
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        return self.weight * (hidden_states * torch.rsqrt(variance + self.variance_epsilon))

    monkeypatch.setattr(modeling_qwen3.Qwen3RMSNorm, "forward", forward)


def small_model() -> torch.nn.Module:
    config = Qwen3Config(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=128,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    return Qwen3ForCausalLM(config).to(torch.float64)


def episode(task_id: str, prompt: list[int], turns: list[tuple[list[int], list[int]]]) -> Episode:
    """An episode: the prompt, then (policy tokens, environment tokens) turns."""
    ids, mask = list(prompt), [False] * len(prompt)
    for sampled, response in turns:
        ids += sampled + response
        mask += [True] * len(sampled) + [False] * len(response)
    old = torch.where(torch.tensor(mask), -torch.rand(len(ids), dtype=torch.float64) - 1.0, 0.0)
    return Episode(
        task_id=task_id,
        sample=0,
        token_ids=torch.tensor(ids, dtype=torch.long),
        policy_mask=torch.tensor(mask),
        old_logprobs=old.float(),
        prompt_length=len(prompt),
        reward=0.0,
        checks=(),
        tool_calls=[],
        malformed_calls=0,
        num_turns=len(turns),
        finish_reason="answer",
    )


def group(task_id: str, seed: int, rows: int) -> list[UpdateItem]:
    """``rows`` episodes of one task (a shared 11-token prompt, two turns of lengths varying
    by row), each with a random advantage."""
    generator = torch.Generator().manual_seed(seed)

    def tokens(n: int) -> list[int]:
        return torch.randint(1, VOCAB, (n,), generator=generator).tolist()

    prompt = tokens(11)
    items = []
    for row in range(rows):
        turns = [(tokens(3 + row), tokens(4)), (tokens(2 + 2 * row % 3), [])]
        advantage = float(torch.randn((), generator=generator))
        items.append(UpdateItem(advantage, episode(task_id, prompt, turns)))
    return items
