"""The interface every scheduler offers an RL loop, and the bookkeeping they share::

    batch = scheduler.next_batch(step)            # B distinct task ids, before rollouts
    rewards = {task_id: [r_1..r_K] for task_id in batch}   # roll out K times each
    selection = scheduler.filter_groups(step, rewards, final=last_step)
    train_on(selection.update)                    # (step, task) groups; none: no update
    scheduler.observe(step, rewards)              # every group rolled out
    log(scheduler.metrics())

``next_batch`` is deterministic in ``(seed, step)`` and the state; over-sampling baselines
filter groups (:mod:`~envsched_gnn.scheduler.groups`); growth and retirement: §9.2.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from envsched_gnn.graph.task_graph import TaskGraph
from envsched_gnn.observations import (
    DEFAULT_REWARD,
    Observation,
    ObservationLog,
    check_reward,
    observations_from_rewards,
)
from envsched_gnn.scheduler.groups import GroupSelection
from envsched_gnn.scheduler.metrics import batch_metrics
from envsched_gnn.scheduler.selections import SelectionHistory
from envsched_gnn.validation import UserError

MISSING_SHOWN = 20
"""Missing task ids an error names one by one (the rest are counted)."""


class SchedulerError(UserError, ValueError):
    """A scheduler used wrongly: bad step, state of another scheduler, pool too small."""


@dataclass
class BatchInfo:
    """The last batch: task ids, the stage that chose each, quotas relaxed, extras, and each
    task's score at its pick (EnvSched: q; empty without per-task scores) and predicted spread.
    """

    step: int
    batch: list[str]
    stage: dict[str, str]
    relaxed: list[str] = field(default_factory=list)
    seconds: float = 0.0
    extra: dict[str, float] = field(default_factory=dict)
    score: dict[str, float] = field(default_factory=dict)
    spread: dict[str, float] = field(default_factory=dict)
    """Each task's predicted P(v > 0) at its pick (the spread target's E_z; else empty)."""

    def to_json(self) -> dict:
        return {"batch": list(self.batch), "stage": dict(self.stage), "relaxed": list(self.relaxed)}

    def picks(self, task_ids: Sequence[str]) -> dict[str, list]:
        """``stage``, ``score`` and ``spread`` of each of ``task_ids`` at its pick (a list, or
        None when the scheduler has no such per-task value); {} unless this is their batch."""
        if list(self.batch) != list(task_ids):
            return {}
        out: dict[str, list] = {"stage": [self.stage.get(t) for t in task_ids]}
        for name, values in (("score", self.score), ("spread", self.spread)):
            out[name] = [values[t] for t in task_ids] if values else None
        return out


@runtime_checkable
class Scheduler(Protocol):
    """What an RL framework needs from a scheduler."""

    name: str
    batch_size: int
    """B: the tasks of a step's update (an over-sampling scheduler may return more)."""
    last_batch: BatchInfo | None
    over_samples: bool
    """True for over-sampling baselines (DAPO); their ``filter_groups`` keeps state."""

    def next_batch(self, step: int, size: int | None = None) -> list[str]: ...

    def observe(self, step: int, rewards: Mapping[str, Sequence[float]]) -> None: ...

    def filter_groups(
        self, step: int, rewards: Mapping[str, Sequence[float]], *, final: bool = False
    ) -> GroupSelection: ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...

    def metrics(self) -> dict[str, float]: ...

    def grow(self, graph: TaskGraph) -> None: ...

    def retire(self, env_ids: Iterable[str]) -> None: ...


class BaseScheduler:
    """Graph, observation log, selection history, last batch; subclasses choose batches.

    A subclass implements ``_select(step, size) -> (indices, stages, relaxed, extra)``, ``size``
    distinct tasks of ``self.eligible``, and may extend ``_extra_state`` / ``_load_extra_state`` and
    ``_graph_changed`` (rebuilt by :meth:`grow`).
    """

    name = "base"
    over_samples = False

    def __init__(self, graph: TaskGraph, *, batch_size: int = 64, seed: int = 0) -> None:
        if graph.num_tasks < batch_size:
            raise SchedulerError(
                f"the pool has {graph.num_tasks} tasks, fewer than the batch size B = {batch_size}"
            )
        if batch_size < 1:
            raise SchedulerError(f"batch size B = {batch_size}, expected >= 1")
        self.batch_size = int(batch_size)
        self.seed = int(seed)
        self.retired: frozenset[str] = frozenset()
        self.log = ObservationLog([])
        self._set_graph(graph)
        self.last_batch: BatchInfo | None = None
        self._last_rewards: dict[str, list[float]] = {}
        self._seen: set[tuple[str, int]] = set()

    def _set_graph(self, graph: TaskGraph) -> None:
        """The graph and what is indexed by its nodes, with an empty log (its config kept) and
        history."""
        self.graph = graph
        self.task_ids = list(graph.task_ids)
        self.env_names, self.env = graph.env_index()
        self.num_envs = len(self.env_names)
        self.log = ObservationLog(self.task_ids, self.log.config)
        self.selections = SelectionHistory(self.env, self.num_envs)
        self.eligible = self._eligible_mask(self.retired)

    # -- driving -------------------------------------------------------------------------
    def next_batch(self, step: int, size: int | None = None) -> list[str]:
        """The ``size`` distinct tasks to roll out at ``step`` (default B); choosing again at
        the same step replaces the step's recorded selection."""
        step = _check_step(step)
        size = self._check_size(size)
        start = time.perf_counter()
        indices, stages, relaxed, extra = self._select(step, size)
        seconds = time.perf_counter() - start
        self.selections.record(step, indices)
        batch = [self.task_ids[i] for i in indices]
        scores = self._pick_scores(indices)
        spread = self._pick_spread(indices)
        self.last_batch = BatchInfo(
            step,
            batch,
            dict(zip(batch, stages, strict=True)),
            list(relaxed),
            seconds,
            extra,
            {} if scores is None else dict(zip(batch, map(float, scores), strict=True)),
            {} if spread is None else dict(zip(batch, map(float, spread), strict=True)),
        )
        self._last_rewards = {}
        return batch

    def _check_size(self, size: int | None) -> int:
        """``size`` (B when None) checked against the selectable tasks."""
        if size is None:
            return self.batch_size
        selectable = int(self.eligible.sum())
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
            raise SchedulerError(f"batch size {size!r}, expected an integer >= 1")
        if size > selectable:
            raise SchedulerError(
                f"batch size {size} exceeds the {selectable} selectable tasks of the pool"
            )
        return int(size)

    def observe(self, step: int, rewards: Mapping[str, Sequence[float]]) -> None:
        """Record the K rewards of each task rolled out at ``step`` (of the reward its log's
        config names, ``log.config.reward``)."""
        step = _check_step(step)
        observations = observations_from_rewards(step, rewards, self.log.config.reward)
        self._record(observations)
        if self.last_batch is not None and self.last_batch.step == step:
            self._last_rewards.update({t: list(r) for t, r in rewards.items()})

    def filter_groups(
        self, step: int, rewards: Mapping[str, Sequence[float]], *, final: bool = False
    ) -> GroupSelection:
        """The groups of step ``step``'s update: every group it rolled out (an over-sampling
        scheduler overrides this); ``final``: the run's last step."""
        return GroupSelection.every_group(step, rewards)

    def record_selection(self, step: int, task_ids: Iterable[str]) -> None:
        """Record that ``task_ids`` were selected at ``step`` (made by ``next_batch``)."""
        self.selections.record(_check_step(step), [self.log.index_of(t) for t in task_ids])

    def load_history(self, observations: Iterable[Observation]) -> None:
        """Load past observations: each task observed at step s counts as selected at s."""
        observations = sorted(observations, key=lambda o: o.step)
        self._record(observations)
        by_step: dict[int, list[str]] = {}
        for o in observations:
            by_step.setdefault(o.step, []).append(o.task_id)
        for step, task_ids in sorted(by_step.items()):
            self.record_selection(step, task_ids)

    # -- a live pool ---------------------------------------------------------------------
    def grow(self, graph: TaskGraph) -> None:
        """Continue on ``graph``: this one's task ids plus new ones (``graph add-env``).

        All state is kept, reloaded onto the new nodes; new tasks start unobserved. A graph lacking
        a task this scheduler observed or selected raises :class:`SchedulerError`, changing nothing.
        """
        state = self.state_dict()
        check_covers(graph, state)
        if graph.num_tasks < self.batch_size:
            raise SchedulerError(
                f"the grown graph has {graph.num_tasks} tasks, fewer than the batch size "
                f"B = {self.batch_size}"
            )
        self._set_graph(graph)
        self._graph_changed()
        self.load_state_dict(state)

    def retire(self, env_ids: Iterable[str]) -> None:
        """Stop selecting the tasks of ``env_ids``; their observations stay evidence."""
        self._set_retired(self.retired | known_env_ids(self.graph, env_ids))

    def reinstate(self, env_ids: Iterable[str]) -> None:
        """Select the tasks of retired environments ``env_ids`` again."""
        env_ids = _env_set(env_ids)
        unknown = sorted(env_ids - self.retired)
        if unknown:
            raise SchedulerError(
                f"environment(s) {unknown} are not retired; retired: {sorted(self.retired)}"
            )
        self._set_retired(self.retired - env_ids)

    def _set_retired(self, retired: frozenset[str]) -> None:
        eligible = self._eligible_mask(retired)
        if int(eligible.sum()) < self.batch_size:
            raise SchedulerError(
                f"retiring {sorted(retired)} leaves {int(eligible.sum())} selectable tasks, "
                f"fewer than the batch size B = {self.batch_size}; nothing retired"
            )
        self.retired, self.eligible = frozenset(retired), eligible

    def _eligible_mask(self, retired: frozenset[str]) -> np.ndarray:
        """Tasks not in a retired environment, bool (N,); a retired environment the graph
        does not hold (any more) excludes nothing."""
        codes = [c for c, name in enumerate(self.env_names) if name in retired]
        return ~np.isin(self.env, codes)

    def metrics(self) -> dict[str, float]:
        """Metrics of the last batch; reward metrics once its rewards were observed."""
        if self.last_batch is None:
            return {}
        info = self.last_batch
        env_of = {t: self.graph.env_ids[self.log.index_of(t)] for t in info.batch}
        out = {
            "scheduler/batch_size": float(len(info.batch)),
            "scheduler/select_seconds": info.seconds,
            "scheduler/relaxed_quotas": float(len(info.relaxed)),
            "batch/envs_covered": float(len(set(env_of.values()))),
        }
        out.update(info.extra)
        observed = {t: r for t, r in self._last_rewards.items() if t in env_of}
        if observed:
            out.update(batch_metrics(observed, env_of))
        return out

    # -- state -------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Everything a resumed run needs, JSON-serialisable."""
        return {
            "name": self.name,
            "batch_size": self.batch_size,
            "seed": self.seed,
            "num_tasks": len(self.task_ids),
            "retired": sorted(self.retired),
            "log": self.log.state_dict(),
            "selections": self.selections.state_dict(self.task_ids),
            "extra": self._extra_state(),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`, also onto a grown graph (as :meth:`grow` does)."""
        for key, mine in (("name", self.name), ("batch_size", self.batch_size)):
            if state.get(key) != mine:
                raise SchedulerError(
                    f"scheduler state has {key} = {state.get(key)!r}, this scheduler has {mine!r}"
                )
        check_covers(self.graph, state)
        self.retired = frozenset(state.get("retired", ()))
        self.eligible = self._eligible_mask(self.retired)
        self.seed = int(state["seed"])
        self.log.load_state_dict(state["log"])
        self._seen = set()
        self._reset_stats()
        self._record(sorted(self.log.observations(), key=lambda o: o.step), extend=False)
        self.selections.load_state_dict(state["selections"], self.graph.index)
        self._load_extra_state(state.get("extra", {}))
        self.last_batch = None
        self._last_rewards = {}

    def _record(self, observations: list[Observation], *, extend: bool = True) -> None:
        """Log observations; hand the new ones, step by step, to :meth:`_on_observe`."""
        if extend:
            self.log.extend(observations)
        new: dict[int, list[Observation]] = {}
        for o in observations:
            if (o.task_id, o.step) not in self._seen:
                self._seen.add((o.task_id, o.step))
                new.setdefault(o.step, []).append(o)
        for step, group in new.items():
            self._on_observe(step, group)

    def _pick_scores(self, indices: np.ndarray) -> np.ndarray | None:
        """Hook: the per-task score the last selection ranked ``indices`` by; None: none."""
        return None

    def _pick_spread(self, indices: np.ndarray) -> np.ndarray | None:
        """Hook: the predicted P(v > 0) of ``indices`` at the last selection; None: none."""
        return None

    def _graph_changed(self) -> None:
        """Hook: rebuild what a subclass derives from ``self.graph`` (after :meth:`grow`)."""
        return None

    def _on_observe(self, step: int, observations: list[Observation]) -> None:
        """Hook: observations new to this scheduler (a restore walks the log in step order)."""
        return None

    def _reset_stats(self) -> None:
        """Hook: forget the statistics :meth:`_on_observe` built (before a restore)."""
        return None

    def _extra_state(self) -> dict:
        return {}

    def _load_extra_state(self, state: dict) -> None:
        return None

    # -- for subclasses ------------------------------------------------------------------
    def rng(self, step: int, salt: int = 0) -> np.random.Generator:
        """The generator of ``step``: seeded by (seed, step, salt), independent of call order."""
        return np.random.default_rng([self.seed, step, salt])

    def _select(
        self, step: int, size: int
    ) -> tuple[np.ndarray, list[str], list[str], dict[str, float]]:
        raise NotImplementedError


def check_covers(graph: TaskGraph, state: dict) -> None:
    """Raise unless ``graph`` holds every task ``state`` (a scheduler's, or a composition's
    holding one under ``"scheduler"``) observed or selected."""
    while "scheduler" in state:
        state = state["scheduler"]
    known = graph.index
    used = {row["task_id"] for row in state["log"]["observations"]}
    used.update(t for batch in state["selections"]["batches"].values() for t in batch)
    missing = sorted(t for t in used if t not in known)
    if missing:
        shown = ", ".join(repr(t) for t in missing[:MISSING_SHOWN])
        more = f" and {len(missing) - MISSING_SHOWN} more" if len(missing) > MISSING_SHOWN else ""
        raise SchedulerError(
            f"the graph ({graph.num_tasks} tasks) lacks {len(missing)} task(s) that this "
            f"scheduler state (saved on {state.get('num_tasks')} tasks) observed or "
            f"selected: {shown}{more}. A scheduler continues on the same task ids plus new ones "
            "(graph add-env); to stop selecting an environment, retire it. Nothing was changed"
        )


def check_state_reward(state: dict, reward: str, where: str) -> None:
    """Raise unless every observation of ``state`` (a scheduler's, or a composition's holding
    one under ``"scheduler"``) is of ``reward`` (:func:`~envsched_gnn.observations.check_reward`;
    ``where`` names the state's file)."""
    while "scheduler" in state:
        state = state["scheduler"]
    for row in state["log"]["observations"]:
        found = row.get("reward", DEFAULT_REWARD)
        check_reward(found, reward, f"{where}: task {row['task_id']!r} step {row['step']}")


def known_env_ids(graph: TaskGraph, env_ids: Iterable[str] | str) -> frozenset[str]:
    """``env_ids`` as a set; a :class:`SchedulerError` names those ``graph`` has no task of."""
    env_ids = _env_set(env_ids)
    unknown = sorted(env_ids - set(graph.env_ids))
    if unknown:
        raise SchedulerError(f"unknown environment(s) {unknown}: not in the scheduler's graph")
    return env_ids


def _env_set(env_ids: Iterable[str] | str) -> frozenset[str]:
    """Environment ids as a set (one id given as a string is one id, not its letters)."""
    return frozenset([env_ids]) if isinstance(env_ids, str) else frozenset(env_ids)


def _check_step(step: int) -> int:
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 0:
        raise SchedulerError(f"step must be a non-negative integer, got {step!r}")
    return int(step)
