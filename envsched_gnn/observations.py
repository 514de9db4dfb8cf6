"""Rollout observations (spec section 2) and the ``history.jsonl`` exchange format (section 8).

    m(i,s) = (1/K) sum_k r(i,s,k)
    v(i,s) = (1/K) sum_k (r(i,s,k) - m(i,s))^2            (population variance)
    d(i,s) = clip_[0,1]( v(i,s) / max(m(i,s) (1 - m(i,s)), 0.01) )

Rewards outside [0, 1] or not finite are errors naming task and step; groups of fewer than 2
rewards are errors or, with ``small_groups="ignore"``, kept out of the evidence (§2).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import numpy as np

from envsched_gnn.config_cli import add_config_flags
from envsched_gnn.json_files import write_text_atomically
from envsched_gnn.validation import UserError, check_bounds, config_error

DISPERSION_FLOOR = 0.01
SMALL_GROUPS = ("reject", "ignore")


class ObservationError(UserError, ValueError):
    """An observation that cannot be recorded: bad rewards, unknown task, bad line."""


@dataclass(frozen=True)
class Observation:
    """The K rewards of one task at one step, with their summary statistics."""

    task_id: str
    step: int
    rewards: tuple[float, ...]

    def __post_init__(self) -> None:
        validate_rewards(self.rewards, task_id=self.task_id, step=self.step)
        if isinstance(self.step, bool) or not isinstance(self.step, int) or self.step < 0:
            raise ObservationError(
                f"task {self.task_id!r}: step must be a non-negative integer, got {self.step!r}"
            )

    @property
    def mean(self) -> float:
        return reward_stats(self.rewards)[0]

    @property
    def variance(self) -> float:
        return reward_stats(self.rewards)[1]

    @property
    def dispersion(self) -> float:
        return reward_stats(self.rewards)[2]

    def to_json(self) -> dict:
        return {"task_id": self.task_id, "step": self.step, "rewards": list(self.rewards)}


def validate_rewards(rewards: Sequence[float], *, task_id: str, step: int) -> None:
    """Raise :class:`ObservationError` unless ``rewards`` are finite numbers in [0, 1]."""
    if len(rewards) == 0:
        raise ObservationError(f"task {task_id!r} step {step}: rewards must not be empty")
    for k, reward in enumerate(rewards):
        if isinstance(reward, bool) or not isinstance(reward, (int, float)):
            raise ObservationError(
                f"task {task_id!r} step {step}: reward {k} is {reward!r}, "
                "expected a number in [0, 1]"
            )
        if not math.isfinite(reward) or reward < 0.0 or reward > 1.0:
            raise ObservationError(
                f"task {task_id!r} step {step}: reward {k} is {reward!r}, "
                "expected a finite number in [0, 1]"
            )


def reward_stats(rewards: Sequence[float]) -> tuple[float, float, float]:
    """Return (m, v, d) of one group of K rewards, in float64 (spec section 2)."""
    r = np.asarray(rewards, dtype=np.float64)
    m = float(r.mean())
    v = float(np.mean((r - m) ** 2))
    d = min(max(v / max(m * (1.0 - m), DISPERSION_FLOOR), 0.0), 1.0)
    return m, v, d


def group_stats(rewards: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised :func:`reward_stats`. Shapes: ``rewards (G, K) -> m, v, d: (G,)``."""
    r = np.asarray(rewards, dtype=np.float64)
    m = r.mean(axis=1)
    v = np.mean((r - m[:, None]) ** 2, axis=1)
    d = np.clip(v / np.maximum(m * (1.0 - m), DISPERSION_FLOOR), 0.0, 1.0)
    return m, v, d


def observations_from_rewards(
    step: int, rewards: Mapping[str, Sequence[float]]
) -> list[Observation]:
    """Turn ``{task_id: [r_1..r_K]}`` of one step into validated observations."""
    return [
        Observation(task_id, step, tuple(float(r) for r in group))
        for task_id, group in rewards.items()
    ]


def add_small_groups_option(parser) -> None:
    """``--small-groups``: the :attr:`ObservationConfig.small_groups` of a command's history
    (build the config back with ``config_from_args(ObservationConfig, args)``)."""
    add_config_flags(
        parser, ObservationConfig, fields=["small_groups"], choices={"small_groups": SMALL_GROUPS}
    )


def read_history(path: str | Path) -> list[Observation]:
    """Read ``history.jsonl``: one ``{"task_id", "step", "rewards"}`` object per line."""
    path = Path(path)
    observations = []
    with path.open(encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            observations.append(_parse_history_line(line, path, line_no))
    return observations


def _parse_history_line(line: str, path: Path, line_no: int) -> Observation:
    where = f"{path}:{line_no}"
    try:
        row = json.loads(line)
    except json.JSONDecodeError as error:
        raise ObservationError(f"{where}: not valid JSON ({error.msg})") from error
    if not isinstance(row, dict):
        raise ObservationError(f"{where}: expected a JSON object, got {type(row).__name__}")
    for field, kind in (("task_id", (str, int)), ("step", int), ("rewards", list)):
        if field not in row:
            raise ObservationError(f"{where}: missing field {field!r}")
        if not isinstance(row[field], kind) or isinstance(row[field], bool):
            raise ObservationError(
                f"{where}: field {field!r} has value {row[field]!r} of the wrong type"
            )
    try:
        return Observation(str(row["task_id"]), row["step"], tuple(row["rewards"]))
    except ObservationError as error:
        raise ObservationError(f"{where}: {error}") from error


def write_history(path: str | Path, observations: Iterable[Observation]) -> None:
    """Write observations as ``history.jsonl`` (one object per line, in the given order),
    atomically: on any failure the file keeps what it held (a resume reads it)."""

    def write(handle: TextIO) -> None:
        for observation in observations:
            handle.write(json.dumps(observation.to_json()) + "\n")

    write_text_atomically(path, write)


@dataclass(frozen=True)
class ObservationConfig:
    """Which groups of rewards are evidence (see the module docstring's decision)."""

    min_rewards: int = 2
    """Fewest rewards a group needs to count: variance needs at least 2 (spec section 2)."""
    small_groups: str = "reject"
    """A history group of fewer than ``min_rewards`` rewards carries no variance evidence:
    ``"reject"`` it (an :class:`ObservationError` naming task, step and K) or ``"ignore"`` it
    (recorded, kept in the log's state, but left out of :meth:`ObservationLog.arrays`, the
    statistics every predictor and scheduler reads: no evidence at all)."""

    def __post_init__(self) -> None:
        if self.small_groups not in SMALL_GROUPS:
            raise config_error(self, "small_groups", self.small_groups, f"one of {SMALL_GROUPS}")
        check_bounds(self, integers=("min_rewards",), at_least={"min_rewards": 2})


class ObservationLog:
    """Append-only, columnar log of observations: the compute view of the history.

    Columns ``task`` (node index), ``step`` int64 and ``m``, ``v``, ``d`` float64. Unknown tasks
    are rejected; a (task, step) seen again is ignored with identical rewards, else rejected.
    """

    def __init__(self, task_ids: Sequence[str], config: ObservationConfig | None = None) -> None:
        self.config = config or ObservationConfig()
        self.task_ids = list(task_ids)
        self._index = {task_id: i for i, task_id in enumerate(self.task_ids)}
        self._rows: dict[tuple[int, int], tuple[float, ...]] = {}
        self._columns: dict[str, list] = {"task": [], "step": [], "m": [], "v": [], "d": []}
        self._arrays: dict[str, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self._columns["task"])

    def index_of(self, task_id: str) -> int:
        try:
            return self._index[task_id]
        except KeyError:
            raise ObservationError(
                f"unknown task {task_id!r}: it is not a node of the graph"
            ) from None

    def extend(self, observations: Iterable[Observation]) -> int:
        """Record observations, all validated before any is stored; returns how many were new."""
        observations = list(observations)
        new: list[tuple[int, Observation]] = []
        seen: dict[tuple[int, int], tuple[float, ...]] = {}
        for observation in observations:
            key = (self.index_of(observation.task_id), observation.step)
            if len(observation.rewards) < self.config.min_rewards and (
                self.config.small_groups == "reject"
            ):
                raise ObservationError(
                    f"task {observation.task_id!r} step {observation.step}: "
                    f"{len(observation.rewards)} reward(s), fewer than "
                    f"{self.config.min_rewards}: one group carries no variance evidence (its v "
                    "is 0 whatever the task); roll out K >= 2, or ignore such groups "
                    "(ObservationConfig(small_groups='ignore'), --small-groups ignore)"
                )
            previous = self._rows.get(key, seen.get(key))
            if previous is not None:
                if previous != observation.rewards:
                    raise ObservationError(
                        f"task {observation.task_id!r} step {observation.step}: already recorded "
                        f"with rewards {list(previous)}, refusing different rewards "
                        f"{list(observation.rewards)}"
                    )
                continue
            seen[key] = observation.rewards
            new.append((key[0], observation))
        for index, observation in new:
            self._rows[(index, observation.step)] = observation.rewards
            if len(observation.rewards) < self.config.min_rewards:
                continue  # "ignore": recorded, but no evidence
            m, v, d = reward_stats(observation.rewards)
            for name, value in (
                ("task", index),
                ("step", observation.step),
                ("m", m),
                ("v", v),
                ("d", d),
            ):
                self._columns[name].append(value)
        if new:
            self._arrays = None
        return len(new)

    def arrays(self) -> dict[str, np.ndarray]:
        """Columns ``task``, ``step`` (int64) and ``m``, ``v``, ``d`` (float64), each (n_obs,)."""
        if self._arrays is None:
            self._arrays = {
                "task": np.asarray(self._columns["task"], dtype=np.int64),
                "step": np.asarray(self._columns["step"], dtype=np.int64),
                "m": np.asarray(self._columns["m"], dtype=np.float64),
                "v": np.asarray(self._columns["v"], dtype=np.float64),
                "d": np.asarray(self._columns["d"], dtype=np.float64),
            }
        return self._arrays

    def observations(self) -> Iterator[Observation]:
        for (index, step), rewards in self._rows.items():
            yield Observation(self.task_ids[index], step, rewards)

    def state_dict(self) -> dict:
        return {"observations": [o.to_json() for o in self.observations()]}

    def load_state_dict(self, state: Mapping) -> None:
        self.__init__(self.task_ids, self.config)
        self.extend(
            Observation(row["task_id"], row["step"], tuple(row["rewards"]))
            for row in state["observations"]
        )
