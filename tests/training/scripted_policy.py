"""A "policy" whose output the test controls, for rollouts with a known outcome.

:class:`ScriptedLM` has the causal-LM interface the rollout engine uses (``forward(input_ids,
attention_mask, position_ids, cache, use_cache, logits_to_keep)`` returning ``.logits`` and
a ``.cache`` with ``batch_select_indices``). Its cache holds each row's token history; from
it the model reads which task the row is on (the instruction in the user turn) and forces
the next token of that task's script. A script is a list of alternative trajectories (lists
of assistant turn texts); alternatives must differ in their first token, which gets equal
probability, so sampling picks an alternative and the rest is forced along it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import torch

from envsched_gnn.envs.pool import Pool
from envsched_gnn.training.agent_format import ChatFormat, user_message

FORCED = 0.0
EXCLUDED = -1.0e4


@dataclass
class ScriptCache:
    """Per-row token histories; follows the engine's row selection."""

    histories: list[list[int]] = field(default_factory=list)
    scripts: list[list[list[list[int]]] | None] = field(default_factory=list)

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        self.histories = [list(self.histories[i]) for i in indices.tolist()]
        self.scripts = [self.scripts[i] for i in indices.tolist()]


class ScriptedLM(torch.nn.Module):
    """Forces, per task, one of the scripted trajectories (see the module docstring)."""

    def __init__(self, tokenizer, pool: Pool, scripts: dict[str, list[list[str]]]) -> None:
        super().__init__()
        self.format = ChatFormat(tokenizer)
        self.vocab = len(tokenizer)
        self.turn_start = self.format.encode("<|im_start|>assistant\n")
        self.by_instruction = {
            tuple(self.format.encode(user_message(pool.task(task_id)))): [
                [self.format.assistant_ids(text) for text in alternative]
                for alternative in alternatives
            ]
            for task_id, alternatives in scripts.items()
        }

    def forward(self, input_ids, attention_mask, position_ids, cache, use_cache, logits_to_keep):
        rows = len(input_ids)
        cache = cache or ScriptCache([[] for _ in range(rows)], [None] * rows)
        width = input_ids.shape[1]
        logits = torch.full((rows, 1, self.vocab), EXCLUDED, dtype=torch.float64)
        for row, history in enumerate(cache.histories):
            real = attention_mask[row, -width:].bool()
            history.extend(input_ids[row][real].tolist())
            if cache.scripts[row] is None:
                cache.scripts[row] = next(
                    alts for key, alts in self.by_instruction.items() if _contains(history, key)
                )
            for token in self._next(history, cache.scripts[row]):
                logits[row, 0, token] = FORCED
        return SimpleNamespace(logits=logits, cache=cache)

    def _next(self, history: list[int], alternatives: list[list[list[int]]]) -> set[int]:
        starts = [i for i in range(len(history)) if _startswith(history, self.turn_start, i)]
        turn = len(starts) - 1
        current = history[starts[-1] + len(self.turn_start) :]
        if turn == 0 and not current:
            return {alt[0][0] for alt in alternatives}
        first_token = history[starts[0] + len(self.turn_start)]
        chosen = next(alt for alt in alternatives if alt[0][0] == first_token)
        target = chosen[turn] if turn < len(chosen) else chosen[-1]
        return {target[len(current)] if len(current) < len(target) else self.format.eot_id}


def _startswith(history: list[int], piece: list[int], at: int) -> bool:
    return history[at : at + len(piece)] == piece


def _contains(history: list[int], piece: tuple[int, ...]) -> bool:
    return any(_startswith(history, list(piece), i) for i in range(len(history)))
