"""Rollout observations (spec section 2) and the ``history.jsonl`` exchange format (section 8).

    m(i,s) = (1/K) sum_k r(i,s,k)
    v(i,s) = (1/K) sum_k (r(i,s,k) - m(i,s))^2            (population variance)
    d(i,s) = clip_[0,1]( v(i,s) / max(m(i,s) (1 - m(i,s)), 0.01) )

Rewards outside [0, 1] or not finite are errors naming task and step; groups of fewer than 2
rewards are errors or, with ``small_groups="ignore"``, kept out of the evidence (§2).

Every observation says which reward its rewards are (:data:`REWARDS`, spec section 9.6):
``fraction``, the share of the task's checks that pass (the paper's), or ``success``, 1 when
every check passes and 0 otherwise. A history, a log or a store holds one reward; meeting the
other is an error (:func:`check_reward`), never a silent mix.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TextIO, get_args

import numpy as np

from envsched_gnn.config_cli import add_config_flags
from envsched_gnn.json_files import write_text_atomically
from envsched_gnn.validation import UserError, check_bounds, config_error

DISPERSION_FLOOR = 0.01
SMALL_GROUPS = ("reject", "ignore")
Reward = Literal["fraction", "success"]
REWARDS: tuple[str, ...] = get_args(Reward)
"""How an episode's checks become its reward: ``fraction`` = (checks passed) / (checks);
``success`` = 1 when every check passes, else 0 (spec section 9.6)."""
DEFAULT_REWARD = "fraction"


class ObservationError(UserError, ValueError):
    """An observation that cannot be recorded: bad rewards, unknown task, bad line."""


@dataclass(frozen=True)
class Observation:
    """The K rewards of one task at one step, with their summary statistics."""

    task_id: str
    step: int
    rewards: tuple[float, ...]
    reward: str = DEFAULT_REWARD
    """Which reward ``rewards`` are (:data:`REWARDS`); under ``success`` each is 0 or 1."""

    def __post_init__(self) -> None:
        validate_rewards(self.rewards, task_id=self.task_id, step=self.step, reward=self.reward)
        if isinstance(self.step, bool) or not isinstance(self.step, int) or self.step < 0:
            raise ObservationError(
                f"task {self.task_id!r}: step must be a non-negative integer, got {self.step!r}"
            )

    @classmethod
    def from_json(cls, row: Mapping) -> Observation:
        """The observation of a :meth:`to_json` row (``reward`` absent: ``fraction``)."""
        return cls(
            row["task_id"], row["step"], tuple(row["rewards"]), row.get("reward", DEFAULT_REWARD)
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
        """``{"task_id", "step", "rewards"}``, with ``"reward"`` when it is not ``fraction``
        (so a history of partial-credit rewards reads as it did before the option)."""
        row = {"task_id": self.task_id, "step": self.step, "rewards": list(self.rewards)}
        if self.reward != DEFAULT_REWARD:
            row["reward"] = self.reward
        return row


def validate_rewards(
    rewards: Sequence[float], *, task_id: str, step: int, reward: str = DEFAULT_REWARD
) -> None:
    """Raise :class:`ObservationError` unless ``reward`` is one of :data:`REWARDS` and
    ``rewards`` are finite numbers in [0, 1] (0 or 1 under ``success``)."""
    if reward not in REWARDS:
        raise ObservationError(
            f"task {task_id!r} step {step}: reward {reward!r}, expected one of {REWARDS}"
        )
    if len(rewards) == 0:
        raise ObservationError(f"task {task_id!r} step {step}: rewards must not be empty")
    for k, value in enumerate(rewards):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ObservationError(
                f"task {task_id!r} step {step}: reward {k} is {value!r}, "
                "expected a number in [0, 1]"
            )
        if not math.isfinite(value) or value < 0.0 or value > 1.0:
            raise ObservationError(
                f"task {task_id!r} step {step}: reward {k} is {value!r}, "
                "expected a finite number in [0, 1]"
            )
        if reward == "success" and value not in (0.0, 1.0):
            raise ObservationError(
                f"task {task_id!r} step {step}: reward {k} is {value!r}, expected 0 or 1 "
                "(a success reward)"
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
    step: int, rewards: Mapping[str, Sequence[float]], reward: str = DEFAULT_REWARD
) -> list[Observation]:
    """Turn ``{task_id: [r_1..r_K]}`` of one step, scored under ``reward``, into validated
    observations."""
    return [
        Observation(task_id, step, tuple(float(r) for r in group), reward)
        for task_id, group in rewards.items()
    ]


def check_reward(found: str, expected: str, where: str) -> None:
    """The one refusal of mixed rewards: raises :class:`ObservationError` when ``where`` (an
    observation, a history, a store) holds rewards of ``found`` where ``expected`` ones go."""
    if found != expected:
        raise ObservationError(
            f"{where} holds {found!r} rewards, not {expected!r} ones: the two rewards do not "
            f"mix; pass --reward {found} to use these, or keep the other reward apart (another "
            "history, store or run folder)"
        )


def history_reward(observations: Iterable[Observation], where: str) -> str | None:
    """The one reward of ``observations`` (None when there are none); raises
    :class:`ObservationError` naming ``where`` when they mix rewards."""
    found = None
    for observation in observations:
        found = found or observation.reward
        check_reward(
            observation.reward,
            found,
            f"{where}: task {observation.task_id!r} step {observation.step}",
        )
    return found


def add_history_options(parser) -> None:
    """``--small-groups`` and ``--reward``: the :class:`ObservationConfig` of a command's
    history (build the config back with ``config_from_args(ObservationConfig, args)``)."""
    add_config_flags(
        parser,
        ObservationConfig,
        fields=["small_groups", "reward"],
        choices={"small_groups": SMALL_GROUPS},
    )


def read_history(path: str | Path) -> list[Observation]:
    """Read ``history.jsonl``: one ``{"task_id", "step", "rewards"[, "reward"]}`` object per
    line; a file that mixes rewards is refused (:func:`history_reward`)."""
    path = Path(path)
    observations = []
    with path.open(encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            observations.append(_parse_history_line(line, path, line_no))
    history_reward(observations, str(path))
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
    if not isinstance(row.get("reward", DEFAULT_REWARD), str):
        raise ObservationError(f"{where}: field 'reward' has value {row['reward']!r}, not a name")
    try:
        return Observation.from_json(row | {"task_id": str(row["task_id"])})
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
    """Which groups of rewards are evidence (see the module docstring's decision), and which
    reward they are."""

    min_rewards: int = 2
    """Fewest rewards a group needs to count: variance needs at least 2 (spec section 2)."""
    small_groups: str = "reject"
    """A history group of fewer than ``min_rewards`` rewards carries no variance evidence:
    ``"reject"`` it (an :class:`ObservationError` naming task, step and K) or ``"ignore"`` it
    (recorded, kept in the log's state, but left out of :meth:`ObservationLog.arrays`, the
    statistics every predictor and scheduler reads: no evidence at all)."""
    reward: Reward = DEFAULT_REWARD
    """Which reward the history holds: fraction (the share of a task's checks that pass) or
    success (1 when every check passes, else 0); observations of the other are refused."""

    def __post_init__(self) -> None:
        if self.small_groups not in SMALL_GROUPS:
            raise config_error(self, "small_groups", self.small_groups, f"one of {SMALL_GROUPS}")
        if self.reward not in REWARDS:
            raise config_error(self, "reward", self.reward, f"one of {REWARDS}")
        check_bounds(self, integers=("min_rewards",), at_least={"min_rewards": 2})


class ObservationLog:
    """Append-only, columnar log of observations: the compute view of the history.

    Columns ``task`` (node index), ``step`` int64 and ``m``, ``v``, ``d`` float64. Unknown tasks
    are rejected, and so is an observation of another reward than ``config.reward``; a (task,
    step) seen again is ignored with identical rewards, else rejected.
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
            check_reward(
                observation.reward,
                self.config.reward,
                f"task {observation.task_id!r} step {observation.step}",
            )
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
            yield Observation(self.task_ids[index], step, rewards, self.config.reward)

    def state_dict(self) -> dict:
        return {"observations": [o.to_json() for o in self.observations()]}

    def load_state_dict(self, state: Mapping) -> None:
        self.__init__(self.task_ids, self.config)
        self.extend(Observation.from_json(row) for row in state["observations"])
