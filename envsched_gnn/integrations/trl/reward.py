"""TRL reward function (single-turn form): run a completion's tool calls, score the task.

:class:`RuntimeReward` parses each completion's ``<tool_call>`` blocks
(:func:`parse_assistant`), replays the well-formed calls in a fresh episode of its task
(``EnvRuntime.replay``, batched over the slice) and returns ``r = (checks returning True) /
(number of checks)``. The policy writes all its calls in one completion without seeing tool
results; for multi-turn episodes use :mod:`envsched_gnn.integrations.trl.environment`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from envsched_gnn.integrations.rewards import RoundRewards
from envsched_gnn.training.agent_format import parse_assistant


def completion_text(completion: Any) -> str:
    """The assistant text of a TRL completion (a string, or a list of chat messages)."""
    if isinstance(completion, str):
        return completion
    return "".join(
        str(message.get("content") or "")
        for message in completion
        if message.get("role") == "assistant"
    )


class RuntimeReward:
    """A TRL reward function scoring completions in the environment runtime.

    Args:
        runtime: an ``EnvRuntime`` (or anything with its ``replay`` method) serving the pool.
        rewards: where each ``(task_id, reward)`` also goes, for the scheduler (optional).
        max_calls: calls executed per completion; later ones are ignored (default 16).
    """

    __name__ = "envsched_runtime_reward"

    def __init__(self, runtime: Any, rewards: RoundRewards | None = None, max_calls: int = 16):
        self.runtime = runtime
        self.rewards = rewards
        self.max_calls = max_calls

    def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], task_id: Sequence[str], **_: Any
    ) -> list[float]:
        runs = []
        for task, completion in zip(task_id, completions, strict=True):
            parsed = parse_assistant(completion_text(completion))
            calls = [item.call for item in parsed.calls if item.call is not None]
            runs.append((task, calls[: self.max_calls]))
        scores = [float(score.reward) for score in self.runtime.replay(runs)]
        if self.rewards is not None:
            self.rewards.add(zip(task_id, scores, strict=True))
        return scores
