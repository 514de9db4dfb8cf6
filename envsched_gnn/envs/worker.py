"""The sandboxed worker process of the environment runtime (standard library only).

Started by :mod:`envsched_gnn.envs.runtime` as ``python -s worker.py TIMEOUT MEMORY_MB
MAX_RESULT_BYTES`` with a scrubbed environment. It runs untrusted environment and check code:
each instantiation, tool call and check runs under a wall-clock alarm (``setitimer``), the
whole process under ``RLIMIT_AS``. It never imports the project (so never torch).

Protocol: the parent writes one JSON line per batch, ``{"ops": [op, ...]}``; the worker
answers each op, in order, with one line ``{"i": index, "r": result}`` flushed at once, so
the parent always knows which op is running if the process must be killed; ``"t": 1`` marks
an op that hit its alarm (the parent does not replay those when it rebuilds an episode). Ops:

- ``define``: ``{"env", "code", "tools"}`` remembers an environment's source and tool names.
- ``reset``: ``{"ep", "env", "cls", "init", "checks"}`` instantiates as EnvScaler does:
  ``cls(init_config)``, falling back to ``cls()`` on a ``TypeError``, then ``setattr`` of
  every key.
- ``call``: ``{"ep", "name", "args"}`` calls a tool; the result is the tool's dict.
- ``score``: ``{"ep"}`` runs each check as ``check_func(final_state)`` with
  ``initial_state`` bound as a global; a check passes only if it returns ``True``.
- ``state``: ``{"ep"}`` the episode's current state (its non-dunder attributes) as JSON,
  values JSON cannot hold written as their ``repr``.
- ``release``: ``{"ep"}`` forgets an episode.
"""

from __future__ import annotations

import builtins
import copy
import inspect
import json
import os
import pickle
import resource
import signal
import sys

CODE_CACHE_SIZE = 4096


class CallTimeout(BaseException):
    """Raised by the alarm; a ``BaseException`` so ``except Exception`` in env code misses it."""


class Worker:
    """Holds the environments' classes and the live episodes of one worker process."""

    def __init__(self, timeout_s: float, max_result_bytes: int) -> None:
        self.timeout_s = timeout_s
        self.max_result_bytes = max_result_bytes
        self.sources: dict[str, tuple[str, frozenset[str]]] = {}
        self.classes: dict[tuple[str, str], type] = {}
        self.episodes: dict[str, dict] = {}
        self.check_code: dict[str, object] = {}

    def limited(self, fn, *args):
        """Runs ``fn(*args)`` under the wall-clock alarm."""
        signal.setitimer(signal.ITIMER_REAL, self.timeout_s)
        try:
            return fn(*args)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)

    def handle(self, op: dict) -> tuple[str, bool]:
        """Answers one op: the JSON text of its result, and whether it hit the alarm."""
        try:
            return self.dispatch(op), False
        except CallTimeout:
            return _error(f"timed out after {self.timeout_s:g} s"), True
        except BaseException as error:  # noqa: BLE001 - untrusted code may raise anything
            return _error(_describe(error)), False

    def dispatch(self, op: dict) -> str:
        kind = op.get("op")
        if kind == "define":
            self.sources[op["env"]] = (op["code"], frozenset(op["tools"]))
            return '{"success": true}'
        if kind == "reset":
            return self.reset(op)
        if kind == "call":
            return self.call(op)
        if kind == "score":
            return json.dumps(self.score(op["ep"]))
        if kind == "state":
            return self.state(op["ep"])
        if kind == "release":
            self.episodes.pop(op["ep"], None)
            return '{"success": true}'
        return _error(f"worker: unknown op {kind!r}")

    def env_class(self, env_id: str, class_name: str) -> type:
        key = (env_id, class_name)
        if key not in self.classes:
            code, _ = self.sources[env_id]
            namespace = {"__name__": f"envsched_env_{env_id}", "__builtins__": builtins}
            self.limited(exec, compile(code, f"<env {env_id}>", "exec"), namespace)
            cls = namespace.get(class_name)
            if not isinstance(cls, type):
                raise NameError(f"environment {env_id!r} code defines no class {class_name!r}")
            self.classes[key] = cls
        return self.classes[key]

    def reset(self, op: dict) -> str:
        self.episodes.pop(op["ep"], None)
        cls = self.env_class(op["env"], op["cls"])
        init_config = op["init"]
        env = self.limited(_instantiate, cls, init_config)
        initial = _snapshot(_state_of(env))
        self.episodes[op["ep"]] = {
            "env": env,
            "env_id": op["env"],
            "initial": initial,
            "checks": op["checks"],
        }
        return '{"success": true}'

    def call(self, op: dict) -> str:
        episode = self.episodes.get(op["ep"])
        if episode is None:
            return _error(f"episode {op['ep']!r} is not live on this worker")
        name, arguments = op["name"], op["args"]
        _, tool_names = self.sources[episode["env_id"]]
        method = getattr(episode["env"], name, None) if isinstance(name, str) else None
        if name not in tool_names or name.startswith("_") or not callable(method):
            return _error(f"unknown tool {name!r}; tools: {', '.join(sorted(tool_names))}")
        if not isinstance(arguments, dict):
            return _error(f"bad arguments for {name}: expected an object, got {arguments!r:.200}")
        try:
            inspect.signature(method).bind(**arguments)
        except TypeError as error:
            return _error(f"bad arguments for {name}: {error}")
        except ValueError:
            pass  # no introspectable signature: let the call itself decide
        result = self.limited(_call, method, arguments)
        if not isinstance(result, dict):
            return _error(f"tool {name} returned {type(result).__name__}, not a dict")
        try:
            text = json.dumps(result, allow_nan=False)
        except (TypeError, ValueError) as error:
            return _error(f"tool {name} returned a result that is not JSON: {error}")
        if len(text) > self.max_result_bytes:
            return _error(
                f"tool {name} returned {len(text)} bytes, over the limit {self.max_result_bytes}"
            )
        return text

    def score(self, episode_id: str) -> dict:
        episode = self.episodes.get(episode_id)
        if episode is None:
            return {"success": False, "error": f"episode {episode_id!r} is not live on this worker"}
        final = _snapshot(_state_of(episode["env"]))
        checks, errors = [], []
        for source in episode["checks"]:
            try:
                passed = self.limited(self.run_check, source, episode["initial"], final)
                checks.append(passed is True)
                errors.append("" if passed is True or passed is False else _non_bool(passed))
            except CallTimeout:
                checks.append(False)
                errors.append(f"timed out after {self.timeout_s:g} s")
            except BaseException as error:  # noqa: BLE001 - a check that raises counts False
                checks.append(False)
                errors.append(_describe(error))
        return {"success": True, "checks": checks, "errors": errors}

    def state(self, episode_id: str) -> str:
        episode = self.episodes.get(episode_id)
        if episode is None:
            return _error(f"episode {episode_id!r} is not live on this worker")
        text = json.dumps(
            {"success": True, "data": _state_of(episode["env"])},
            default=repr,
            allow_nan=False,
            sort_keys=True,
        )
        if len(text) > self.max_result_bytes:
            return _error(f"state of {len(text)} bytes, over the limit {self.max_result_bytes}")
        return text

    def run_check(self, source: str, initial: tuple, final: tuple) -> object:
        """Each check gets its own copies of both states, so no check sees another's edits."""
        code = self.check_code.get(source)
        if code is None:
            if len(self.check_code) >= CODE_CACHE_SIZE:
                self.check_code.clear()
            code = self.check_code[source] = compile(source, "<check>", "exec")
        namespace = {"__builtins__": builtins, "initial_state": _restore(initial)}
        exec(code, namespace)
        return namespace["check_func"](_restore(final))


def _instantiate(cls: type, init_config: dict) -> object:
    """EnvScaler's ``init_env_instance``: only a ``TypeError`` (a constructor without the
    ``init_config`` parameter) falls back to ``cls()``; other exceptions fail the reset."""
    try:
        env = cls(init_config)
    except TypeError:
        env = cls()
    for key, value in init_config.items():
        setattr(env, key, value)
    return env


def _call(method, arguments: dict) -> object:
    return method(**arguments)


def _state_of(env: object) -> dict:
    """State = the instance's non-dunder attributes."""
    return {
        key: value
        for key, value in vars(env).items()
        if not (key.startswith("__") and key.endswith("__"))
    }


def _snapshot(state: dict) -> tuple:
    """A frozen copy of a state: pickled (fast to restore), or deep-copied if unpicklable."""
    try:
        return pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL), pickle.loads
    except Exception:  # noqa: BLE001 - e.g. a lambda or a lock in the state
        return copy.deepcopy(state), copy.deepcopy


def _restore(snapshot: tuple) -> object:
    payload, load = snapshot
    return load(payload)


def _non_bool(value: object) -> str:
    return f"check_func returned {type(value).__name__}, not bool"


def _describe(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    return text if len(text) <= 500 else text[:497] + "..."


def _error(message: str) -> str:
    return json.dumps({"success": False, "error": message})


def _on_alarm(signum, frame) -> None:
    raise CallTimeout


def main() -> None:
    timeout_s, memory_mb, max_result_bytes = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
        sys.path.pop(0)  # env code must not import the project's modules by accident
    # The protocol gets private descriptors; env code printing or reading stdin hits /dev/null.
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process
    limit = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    worker = Worker(timeout_s, max_result_bytes)
    for line in requests:
        ops = json.loads(line)["ops"]
        for index, op in enumerate(ops):
            text, timed_out = worker.handle(op)
            replies.write(b'{"i": %d, "t": %d, "r": %s}\n' % (index, timed_out, text.encode()))
            replies.flush()


if __name__ == "__main__":
    main()
