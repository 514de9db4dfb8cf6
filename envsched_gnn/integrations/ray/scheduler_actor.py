"""``EnvSchedActor``: one scheduler, as a Ray actor, for many rollout processes (docs/trainers.md,
Ray).

- ``next_batch(step)`` is chosen once per step and cached; it waits until the previous step's
  batch was fully observed, so the choice sees what a single process would have seen (after
  ``wait_timeout_s`` it raises, naming the missing tasks).
- ``observe(step, rewards)`` is idempotent by (task, step), so Ray may retry it.
- ``filter_groups(step, final=...)`` waits until the step's batch was fully observed, asks the
  scheduler once which groups the update trains (``GroupSelection``: ``update`` and ``pending``,
  ``(step, task)`` keys) and returns that answer to every caller; each process trains the
  groups it holds. A scheduler behind dynamic sampling (``NAME+ds``, ``dapo``) filters here:
  its ``next_batch(step)`` returns a generation batch of G tasks (``size`` caps it) and waits
  until step - 1 was filtered, since G and the tasks depend on what is pending.
- With ``checkpoint_path`` the actor writes its state after every observation and restores it
  on start (with ``max_restarts``), and keeps a grown graph beside it
  (``<checkpoint>.graph.json``); with ``store`` observations are written there, buffered.
- ``grow(graph)`` continues on a grown graph, ``retire(env_ids)`` stops selecting
  environments (docs/design.md §9.2).

The actor is asynchronous (asyncio): waiting calls do not block the others.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import ray

from envsched_gnn.integrations.schedulers import adapter_scheduler
from envsched_gnn.json_files import write_json_atomically
from envsched_gnn.observations import observations_from_rewards
from envsched_gnn.scheduler.groups import GroupSelection


class SchedulerService:
    """The scheduler behind :data:`EnvSchedActor` (see the module docstring).

    Args:
        name: a scheduler of ``envsched_gnn.scheduler.registry`` (``envsched``, ``random``,
            ``envsched_spread+ds``...), built by
            :func:`~envsched_gnn.integrations.schedulers.adapter_scheduler`.
        graph: the ``TaskGraph`` it chooses from.
        batch_size: B (default 64).
        seed: the scheduler's seed (default 0).
        pool: the pool, whose operation patterns ``envsched_ops`` reads (default none).
        operations: ``{task_id: pattern}`` instead of ``pool`` (default none).
        sampling: the ``DynamicSamplingConfig`` of a ``NAME+ds`` (default: its defaults).
        wait_timeout_s: longest wait in ``next_batch`` for the previous step (default 600).
        checkpoint_path: JSON file the state is kept in across restarts (default none).
        store: store URI or folder the observations are written to (default none).
        **overrides: fields of the scheduler's config.
    """

    def __init__(
        self,
        name: str,
        graph: Any,
        *,
        batch_size: int = 64,
        seed: int = 0,
        pool: Any = None,
        operations: Mapping[str, str] | None = None,
        sampling: Any = None,
        wait_timeout_s: float = 600.0,
        checkpoint_path: str | None = None,
        store: str | None = None,
        **overrides: Any,
    ) -> None:
        self.checkpoint_path = Path(checkpoint_path) if checkpoint_path else None
        graph = self._grown_graph(graph)
        self.scheduler = adapter_scheduler(
            "ray",
            name,
            graph,
            batch_size=batch_size,
            seed=seed,
            pool=pool,
            operations=operations,
            sampling=sampling,
            **overrides,
        )
        self.wait_timeout_s = wait_timeout_s
        self.batches: dict[int, list[str]] = {}
        self.observed: dict[int, set[str]] = {}
        self.rewards: dict[int, dict[str, list[float]]] = {}
        """The rewards of each step not yet filtered (a scheduler that over-samples only)."""
        self.selections: dict[int, GroupSelection] = {}
        self.finals: dict[int, bool] = {}
        self._changed = asyncio.Condition()
        self._sink = self._writer = None
        if store is not None:
            from envsched_gnn.training.observation_sink import ObservationSink, StoreWriter

            self._writer = StoreWriter(store)
            self._sink = ObservationSink(self._writer)
        if self.checkpoint_path is not None and self.checkpoint_path.is_file():
            self.load_state_dict(json.loads(self.checkpoint_path.read_text()))

    async def next_batch(self, step: int, size: int | None = None) -> list[str]:
        """Step ``step``'s tasks: chosen once, after the previous step was fully observed (and,
        for a scheduler that over-samples, filtered); ``size`` caps a generation batch."""
        step = int(step)
        async with self._changed:
            if step not in self.batches:
                if step - 1 in self.batches:
                    await self._wait(step - 1, f"next_batch({step})", filtered=self._over_samples)
                if step not in self.batches:  # another caller may have chosen it meanwhile
                    self.batches[step] = list(self.scheduler.next_batch(step, size))
                    self.observed.setdefault(step, set())
                    self._save()
            return list(self.batches[step])

    async def observe(self, step: int, rewards: Mapping[str, Sequence[float]]) -> int:
        """Record rewards of tasks of ``step``; returns how many (task, step) pairs were new."""
        step = int(step)
        async with self._changed:
            seen = self.observed.setdefault(step, set())
            new = [task for task in rewards if task not in seen]
            self.scheduler.observe(step, rewards)
            seen.update(rewards)
            if self._over_samples and step not in self.selections:
                kept = self.rewards.setdefault(step, {})
                kept.update({task: [float(r) for r in rewards[task]] for task in new})
            if new:
                if self._sink is not None:
                    self._sink.put(observations_from_rewards(step, {t: rewards[t] for t in new}))
                self._save()
            self._changed.notify_all()
            return len(new)

    async def filter_groups(self, step: int, final: bool = False) -> GroupSelection:
        """The groups step ``step``'s update trains and those kept pending, decided once after
        every group of the step was observed (``final``: the run's last step)."""
        step = int(step)
        async with self._changed:
            if step not in self.batches:
                raise ValueError(f"filter_groups({step}): step {step} has no batch yet")
            if step not in self.selections:
                await self._wait(step, f"filter_groups({step})", filtered=False)
            if step not in self.selections:  # another caller may have filtered it meanwhile
                if self._over_samples:
                    rewards = self.rewards.pop(step)
                    groups = {task: rewards[task] for task in self.batches[step]}
                    selection = self.scheduler.filter_groups(step, groups, final=bool(final))
                else:
                    selection = GroupSelection.every_group(step, self.batches[step])
                self.selections[step], self.finals[step] = selection, bool(final)
                self._save()
                self._changed.notify_all()
            elif self.finals[step] != bool(final):
                raise ValueError(
                    f"filter_groups({step}, final={bool(final)}): step {step} was filtered with "
                    f"final={self.finals[step]}"
                )
            return self.selections[step]

    async def grow(self, graph: Any) -> int:
        """Continue on ``graph``, the old task ids plus new ones (``scheduler.grow``); the
        batches already chosen stay. Returns the number of tasks."""
        async with self._changed:
            self.scheduler.grow(graph)
            if self.checkpoint_path is not None:
                write_json_atomically(self._graph_path, graph.to_json(), indent=None)
            self._save()
            return graph.num_tasks

    async def retire(self, env_ids: Sequence[str]) -> list[str]:
        """Stop selecting the tasks of ``env_ids`` from the next batch chosen; returns every
        retired environment."""
        async with self._changed:
            self.scheduler.retire(env_ids)
            self._save()
            return sorted(self.scheduler.retired)

    def metrics(self) -> dict[str, float]:
        return self.scheduler.metrics()

    def state_dict(self) -> dict:
        return {
            "scheduler": self.scheduler.state_dict(),
            "batches": {str(step): batch for step, batch in self.batches.items()},
            "observed": {str(step): sorted(tasks) for step, tasks in self.observed.items()},
            "rewards": {str(step): groups for step, groups in self.rewards.items()},
            "selections": {
                str(step): {
                    "update": [list(key) for key in selection.update],
                    "pending": [list(key) for key in selection.pending],
                    "metrics": dict(selection.metrics),
                    "final": self.finals[step],
                }
                for step, selection in self.selections.items()
            },
        }

    def load_state_dict(self, state: dict) -> None:
        self.scheduler.load_state_dict(state["scheduler"])
        self.batches = {int(step): list(batch) for step, batch in state["batches"].items()}
        self.observed = {int(step): set(tasks) for step, tasks in state["observed"].items()}
        self.rewards = {int(step): groups for step, groups in state.get("rewards", {}).items()}
        saved = {int(step): row for step, row in state.get("selections", {}).items()}
        self.selections = {
            step: GroupSelection(
                tuple((int(s), str(t)) for s, t in row["update"]),
                tuple((int(s), str(t)) for s, t in row["pending"]),
                row["metrics"],
            )
            for step, row in saved.items()
        }
        self.finals = {step: bool(row["final"]) for step, row in saved.items()}

    def flush(self, timeout_s: float | None = None) -> bool:
        """Wait until the store has every observation (True when nothing is left)."""
        return self._sink.flush(timeout_s) if self._sink is not None else True

    def pid(self) -> int:
        return os.getpid()

    @property
    def _graph_path(self) -> Path:
        assert self.checkpoint_path is not None
        return self.checkpoint_path.with_name(self.checkpoint_path.name + ".graph.json")

    def _grown_graph(self, graph: Any) -> Any:
        """The graph this actor last grew to (kept beside its checkpoint), unless ``graph``
        holds all of its tasks: a restart comes back on the grown graph."""
        if self.checkpoint_path is None or not self._graph_path.is_file():
            return graph
        from envsched_gnn.graph.task_graph import read_graph

        grown = read_graph(self._graph_path)
        return graph if set(grown.task_ids) <= set(graph.task_ids) else grown

    @property
    def _over_samples(self) -> bool:
        return bool(self.scheduler.over_samples)

    def _complete(self, step: int) -> bool:
        return set(self.batches[step]) <= self.observed.get(step, set())

    async def _wait(self, step: int, caller: str, *, filtered: bool) -> None:
        """Wait (holding ``self._changed``) until ``step`` was fully observed, and filtered
        when ``filtered``; a ``TimeoutError`` after ``wait_timeout_s`` names what is missing."""

        def ready() -> bool:
            return self._complete(step) and (not filtered or step in self.selections)

        try:
            await asyncio.wait_for(self._changed.wait_for(ready), self.wait_timeout_s)
        except asyncio.TimeoutError:
            missing = sorted(set(self.batches[step]) - self.observed[step])
            if missing:
                waits_for = f"the rewards of {len(missing)} task(s), e.g. {missing[:3]}"
            else:
                waits_for = f"filter_groups({step}) (the scheduler over-samples)"
            raise TimeoutError(
                f"{caller}: step {step} still misses {waits_for} after {self.wait_timeout_s:g} s"
            ) from None

    def _save(self) -> None:
        if self.checkpoint_path is None:
            return
        write_json_atomically(self.checkpoint_path, self.state_dict(), indent=None)


EnvSchedActor = ray.remote(num_cpus=0)(SchedulerService)
"""The Ray actor class: ``EnvSchedActor.options(max_restarts=-1, max_task_retries=-1,
name=...).remote(name, graph, batch_size=..., checkpoint_path=...)``."""
