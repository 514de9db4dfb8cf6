"""Reference scorers for tests: a pool scored in plain Python, and with ``--trust-pool``.

:func:`in_process_runs` is how EnvScaler's own harness scores a pool, in one Python process
and without any sandbox, pickle or scorer: import the environment's class (execute its code),
instantiate it (``cls(init_config)``, falling back to ``cls()``, then every key of
``init_config`` set as an attribute), replay the calls on the live instance, run each check on
(copies of) its live state. The runtime must agree with it task for task.

:func:`trusted_rewards` replays a pool with ``RuntimeConfig(trust_pool=True)`` where the
kernel refuses namespaces (a user namespace whose ``max_user_namespaces`` is 0), so that the
pool runs in plain worker processes: the path ``--trust-pool`` takes. Run as a script, this
module is that replay's child process.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from envsched_gnn.envs.pool import Pool, ToolCall
from envsched_gnn.envs.pool_io import load_pool, save_pool

REFUSE_NAMESPACES = [
    "unshare",
    "-U",
    "-r",
    "sh",
    "-c",
    'echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"',
    "sh",
]
"""A prefix that runs a command where the kernel refuses new user namespaces."""


@dataclass
class InProcessRun:
    """One task's calls replayed in this process."""

    reward: float
    results: list[Any]
    """Each call's return value as the tool returned it (a copy taken at once), or the
    exception it raised."""


def in_process_runs(
    pool: Pool, runs: Sequence[tuple[str, Sequence[ToolCall]]]
) -> list[InProcessRun]:
    """For each ``(task_id, calls)``: a fresh instance, the calls, the checks (EnvScaler's way)."""
    modules: dict[str, dict] = {}
    done = []
    for task_id, calls in runs:
        task = pool.task(task_id)
        namespace = modules.get(task.env_id)
        if namespace is None:
            namespace = modules[task.env_id] = {"__name__": f"in_process_{len(modules)}"}
            exec(pool.envs[task.env_id].env_class_code, namespace)
        cls = namespace[task.env_class_name]
        try:
            env = cls(copy.deepcopy(task.init_config))
        except TypeError:
            env = cls()
        for key, value in copy.deepcopy(task.init_config).items():
            setattr(env, key, value)
        initial = copy.deepcopy(_state(env))
        results: list[Any] = []
        for call in calls:
            try:
                result = getattr(env, call.name)(**copy.deepcopy(call.arguments))
                results.append(copy.deepcopy(result))  # as it was then: tools return live state
            except Exception as error:  # noqa: BLE001 - recorded: the runtime reports it
                results.append(error)
        passed = 0
        for check in task.checklist_with_func:
            scope = {"initial_state": copy.deepcopy(initial)}
            try:
                exec(check.check_func, scope)
                passed += scope["check_func"](copy.deepcopy(_state(env))) is True
            except Exception:  # noqa: BLE001 - a check that raises counts False
                pass
        done.append(InProcessRun(passed / len(task.checklist_with_func), results))
    return done


def _state(env: object) -> dict:
    return {k: v for k, v in vars(env).items() if not (k.startswith("__") and k.endswith("__"))}


def trusted_rewards(pool: Pool, folder: Path) -> tuple[list[float], list[float]]:
    """Each task's reference and empty-trajectory reward with ``--trust-pool``, in a child
    process where the kernel refuses the sandbox (skips where this machine refuses the outer
    user namespace or has no ``unshare``)."""
    if shutil.which("unshare") is None:
        pytest.skip("needs util-linux unshare")
    save_pool(pool, folder / "pool")
    out = folder / "trusted.json"
    command = [sys.executable, str(Path(__file__)), str(folder / "pool"), str(out)]
    done = subprocess.run(
        REFUSE_NAMESPACES + command,
        capture_output=True,
        text=True,
        cwd=Path(__file__).parents[2],
    )
    if done.stderr.startswith("unshare:"):
        pytest.skip(f"this machine refuses the outer user namespace: {done.stderr}")
    assert done.returncode == 0, done.stderr
    assert "running the trusted pool's code without one" in done.stderr  # no sandbox ran
    rewards = json.loads(out.read_text())
    return rewards["reference"], rewards["empty"]


def _replay_trusted(pool_folder: str, out: str) -> None:
    from envsched_gnn.envs.runtime import EnvRuntime
    from envsched_gnn.envs.runtime_config import RuntimeConfig

    pool = load_pool(pool_folder)
    warnings.simplefilter("default")
    with EnvRuntime(pool, RuntimeConfig(workers=2, trust_pool=True)) as runtime:
        reference = runtime.replay([(t.task_id, t.reference_solution or []) for t in pool.tasks])
        empty = runtime.replay([(t.task_id, []) for t in pool.tasks])
    rewards = {"reference": [s.reward for s in reference], "empty": [s.reward for s in empty]}
    Path(out).write_text(json.dumps(rewards))


if __name__ == "__main__":
    _replay_trusted(sys.argv[1], sys.argv[2])
