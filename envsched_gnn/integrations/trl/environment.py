"""Multi-turn episodes through TRL's own mechanism: ``environment_factory`` (TRL >= 1.15).

TRL creates environment instances, calls ``reset(**row)`` before each rollout (the row's
``environment`` column picks the factory), exposes the class's public methods as tools
(schema from signature and docstring) and calls ``get_reward()`` once per finished rollout.
:func:`environment_factories` builds one such class per pool environment, its tool methods
generated from the OpenAI tool schemas, each call run in the environment runtime on the
rollout's own episode; ``get_reward`` is ``r = checks passed / checks`` of the final state.
The chat template must support tool calling.
"""

from __future__ import annotations

import inspect
import itertools
import json
import keyword
from collections.abc import Callable
from typing import Any

from envsched_gnn.envs.pool import Environment, Pool, ToolCall
from envsched_gnn.integrations.rewards import RoundRewards
from envsched_gnn.training.agent_format import tool_schema

JSON_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
}
RESERVED = frozenset({"reset", "get_reward"})
_episode_numbers = itertools.count()


class PoolEnvironment:
    """One rollout's episode in the runtime; subclasses add the environment's tools."""

    env_id: str = ""
    runtime: Any = None
    rewards: RoundRewards | None = None

    def __init__(self) -> None:
        self.episode_id: str | None = None
        self.task_id: str | None = None

    def reset(self, task_id: str, **_: Any) -> None:
        """Start a fresh episode of ``task_id`` (the dataset row's column)."""
        if self.episode_id is not None:
            self.runtime.release([self.episode_id])
        self.episode_id = f"trl-{self.env_id}-{next(_episode_numbers)}"
        self.task_id = task_id
        result = self.runtime.reset([(self.episode_id, task_id)])[0]
        if result.get("success") is not True:
            raise RuntimeError(f"task {task_id!r}: the environment did not start: {result}")

    def get_reward(self) -> float:
        """The verifier's reward of the episode's current state."""
        reward = float(self.runtime.score([self.episode_id])[0].reward)
        if self.rewards is not None:
            self.rewards.add([(self.task_id, reward)])
        return reward

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        result = self.runtime.call([(self.episode_id, ToolCall(name, arguments))])[0]
        return json.dumps(result, ensure_ascii=False)


def tool_method(env_id: str, tool: dict[str, Any]) -> Callable[..., str]:
    """A method calling ``tool`` in the runtime, with the signature and docstring TRL reads."""
    schema = tool_schema(tool)
    name = schema.get("name", "")
    parameters = schema.get("parameters") or {}
    properties = parameters.get("properties") or {}
    required = set(parameters.get("required", properties))
    if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_"):
        raise ValueError(f"environment {env_id!r}: tool name {name!r} is not a method name")
    if name in RESERVED:
        raise ValueError(f"environment {env_id!r}: tool {name!r} clashes with TRL's {name}()")

    def method(self: PoolEnvironment, **arguments: Any) -> str:
        return self._call(name, arguments)

    signature = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    lines = []
    for argument, spec in properties.items():
        if not argument.isidentifier() or keyword.iskeyword(argument):
            raise ValueError(
                f"environment {env_id!r}, tool {name!r}: argument {argument!r} is not a "
                "Python identifier, so TRL cannot expose it"
            )
        annotation = JSON_TYPES.get((spec or {}).get("type"), str)
        default = inspect.Parameter.empty if argument in required else None
        kind = inspect.Parameter.KEYWORD_ONLY
        signature.append(inspect.Parameter(argument, kind, default=default, annotation=annotation))
        annotations[argument] = annotation
        lines.append(f"    {argument}: {(spec or {}).get('description') or argument}")
    annotations["return"] = str
    description = str(schema.get("description") or name).strip()
    method.__name__ = method.__qualname__ = name
    method.__signature__ = inspect.Signature(signature, return_annotation=str)
    method.__annotations__ = annotations
    method.__doc__ = description + ("\n\nArgs:\n" + "\n".join(lines) if lines else "")
    return method


def environment_class(
    env: Environment, runtime: Any, rewards: RoundRewards | None = None
) -> type[PoolEnvironment]:
    """The TRL environment class of one pool environment."""
    methods = {tool_schema(t).get("name"): tool_method(env.env_id, t) for t in env.tools}
    attributes = {"env_id": env.env_id, "runtime": runtime, "rewards": rewards, **methods}
    return type(f"{env.env_id.title().replace('_', '')}Environment", (PoolEnvironment,), attributes)


def environment_factories(
    pool: Pool, runtime: Any, rewards: RoundRewards | None = None
) -> dict[str, type[PoolEnvironment]]:
    """TRL's multi-environment ``environment_factory``: ``{env_id: class}`` for every pool
    environment (a class is a factory: calling it makes an instance)."""
    return {env_id: environment_class(env, runtime, rewards) for env_id, env in pool.envs.items()}
