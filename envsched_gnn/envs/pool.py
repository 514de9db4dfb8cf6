"""The types of a pool of executable environments in the EnvScaler layout (docs/design.md §8);
reading and writing: :mod:`~envsched_gnn.envs.pool_io`, validation:
:mod:`~envsched_gnn.envs.pool_parse`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class Check:
    """One verifier check; ``check_func`` is ``def check_func(final_state) -> bool`` source."""

    check_item: str
    check_func: str


@dataclass(frozen=True)
class ToolCall:
    """A call of the tool ``name`` with JSON ``arguments``."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Environment:
    """An executable environment: one Python class whose methods are its tools."""

    env_id: str
    env_class_code: str
    tools: list[dict[str, Any]]
    environment_introduction: str = ""
    environment_summary: str = ""
    constraints_rules: str = ""

    @property
    def tool_names(self) -> list[str]:
        return [tool.get("function", tool).get("name", "") for tool in self.tools]


@dataclass(frozen=True)
class Task:
    """An environment-task pair: an instruction, the initial state, and its checks."""

    task_id: str
    env_id: str
    env_class_name: str
    init_config: dict[str, Any]
    task: str
    checklist_with_func: list[Check]
    reference_solution: list[ToolCall] | None = None
    abstract: str | None = None
    split: str = "train"


@dataclass
class Pool:
    """Environments and their tasks, tasks in file order."""

    envs: dict[str, Environment]
    tasks: list[Task]
    tool_effects: dict[str, dict[str, frozenset[str]]] = field(default_factory=dict)
    """env id -> tool -> the kinds of change its replayed calls showed (``tool_effects.json``,
    :mod:`envsched_gnn.envs.tool_effects`); empty when the pool was never replayed so."""

    def __post_init__(self) -> None:
        self._by_id = {task.task_id: task for task in self.tasks}
        self._by_env: dict[str, list[Task]] = {}
        for task in self.tasks:
            self._by_env.setdefault(task.env_id, []).append(task)

    def task(self, task_id: str) -> Task:
        try:
            return self._by_id[task_id]
        except KeyError:
            raise KeyError(f"unknown task {task_id!r}") from None

    def tasks_of(self, env_id: str) -> list[Task]:
        """The tasks of ``env_id``, in file order (indexed: O(1) per call, not O(N))."""
        return list(self._by_env.get(env_id, ()))

    def split(self, name: str) -> list[Task]:
        return [task for task in self.tasks if task.split == name]

    def task_refs(self) -> list[tuple[str, str]]:
        """``(task_id, env_id)`` of every task, in file order."""
        return [(task.task_id, task.env_id) for task in self.tasks]


class PoolSource(Protocol):
    """What a graph build reads of a pool, environment by environment: a :class:`Pool` in
    memory, or a :class:`~envsched_gnn.envs.pool_stream.PoolStream` reading each environment's
    tasks from disk when asked (so memory does not grow with the pool)."""

    envs: dict[str, Environment]
    tool_effects: dict[str, dict[str, frozenset[str]]]

    def task_refs(self) -> list[tuple[str, str]]: ...

    def tasks_of(self, env_id: str) -> list[Task]: ...
