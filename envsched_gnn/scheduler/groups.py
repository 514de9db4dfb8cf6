"""Which rolled-out groups enter which policy update: a scheduler's :class:`GroupSelection`,
and :class:`PendingGroups`, where a learner keeps a group's rollouts until its update.

A group is its :data:`GroupKey` ``(step, task_id)``. ``filter_groups`` returns ``update`` (the
groups step s trains, in rollout order; empty: no update) and ``pending``; the rest are
dropped. Only over-sampling schedulers (DAPO) keep groups pending.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

GroupKey = tuple[int, str]
"""A group rolled out: (the step whose batch rolled it out, task id)."""

T = TypeVar("T")


@dataclass(frozen=True)
class GroupSelection:
    """The groups of one step's update and those kept pending (module docstring), with the
    scheduler's counts behind the choice (``dapo/*``; empty for the other schedulers)."""

    update: tuple[GroupKey, ...]
    pending: tuple[GroupKey, ...] = ()
    metrics: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def every_group(cls, step: int, task_ids: Iterable[str]) -> GroupSelection:
        """Train every group of ``step`` now, keep none."""
        return cls(tuple((step, task_id) for task_id in task_ids))


class PendingGroups(Generic[T]):
    """A learner's side of :class:`GroupSelection`: each group's rollouts, kept from the step that
    rolled it out until the selection that trains or drops it.
    """

    def __init__(self) -> None:
        self.groups: dict[GroupKey, T] = {}

    def __len__(self) -> int:
        return len(self.groups)

    def settle(self, step: int, rolled_out: Mapping[str, T], selection: GroupSelection) -> list[T]:
        """Add step ``step``'s groups (``{task_id: rollouts}``); return the rollouts of
        ``selection.update`` in its order, keep those of ``selection.pending`` and forget the
        rest. A selection naming a group this learner does not hold is refused, unchanged."""
        groups = {**self.groups, **{(step, task_id): v for task_id, v in rolled_out.items()}}
        missing = [key for key in (*selection.update, *selection.pending) if key not in groups]
        if missing:
            raise KeyError(
                f"step {step}: the selection names group(s) {missing[:5]} (step, task) that "
                f"were not rolled out or were already trained or dropped; {len(groups)} held, "
                f"e.g. {sorted(groups)[:5]}"
            )
        self.groups = {key: groups[key] for key in selection.pending}
        return [groups[key] for key in selection.update]
