"""The train sampler: each generation round's B slots, in ``RepeatSampler``'s layout.

TRL's ``RepeatSampler`` yields per round B prompt indices, each ``mini_repeat_count = K``
times in a row, the block ``repeat_count`` times; ranks split the stream, so every rank must
draw the same sequence. :class:`ScheduledSlots` yields that layout over *slots* ``0..B-1``;
slot b is filled with the scheduler's b-th task when the round is generated
(:class:`~envsched_gnn.integrations.trl.trainer.EnvSchedGRPOTrainer`), because Accelerate
fetches one batch ahead and a sampler choosing itself would ask ``next_batch(s + 1)`` before
step s's rewards exist (trl#2801's recipe has that lag). The sequence depends only on B, K and
the repeat count: the same on every rank and after a resume.
"""

from __future__ import annotations

from collections.abc import Iterator

from torch.utils.data import Sampler


class ScheduledSlots(Sampler[int]):
    """Slots ``0..B-1``, each ``group_size`` times, the block ``repeat_count`` times, per round.

    Args:
        batch_size: B, tasks per generation round.
        group_size: K, generations per task (TRL's ``num_generations``).
        repeat_count: dataloader batches per round (``num_iterations * steps_per_generation``).
        rounds: rounds per epoch (TRL's trainer iterates the sampler once per epoch).
    """

    def __init__(self, batch_size: int, group_size: int, repeat_count: int, rounds: int) -> None:
        for name, value in (
            ("batch_size", batch_size),
            ("group_size", group_size),
            ("repeat_count", repeat_count),
            ("rounds", rounds),
        ):
            if value < 1:
                raise ValueError(f"ScheduledSlots.{name} must be >= 1, got {value}")
        self.batch_size = batch_size
        self.group_size = group_size
        self.repeat_count = repeat_count
        self.rounds = rounds

    def __iter__(self) -> Iterator[int]:
        for _ in range(self.rounds):
            for _ in range(self.repeat_count):
                for slot in range(self.batch_size):
                    for _ in range(self.group_size):
                        yield slot

    def __len__(self) -> int:
        return self.rounds * self.repeat_count * self.batch_size * self.group_size
