"""The two processes of an environment worker: the tool process and the scorer (stdlib only).

Started by :mod:`envsched_gnn.envs.sandbox` as ``python -s -S -B worker.py CONFIG`` (JSON),
tool channel on descriptors 0/1, scorer channel on 3/4; it never imports the project. It sets
its resource limits, then forks:

- the **scorer** (PID 1 of the sandbox) keeps 3/4 and runs check functions on the states it
  is sent, never a tool. Not dumpable, so the tool process can neither trace it nor reach it
  through ``/proc``; as PID 1 it ignores signals from inside the sandbox, and it exits (with
  its status) when the tool process does.
- the **tool process** keeps 0/1 and runs instantiation and tool calls, each under a
  wall-clock alarm; inside the sandbox every other process is killed after each op
  (:class:`Reaper`).

Environment code runs as the module ``envsched_env_<id>`` (in ``sys.modules``), so its
instances pickle by reference; the scorer loads states with
:class:`state_loading.StateUnpickler` (what it resolves and why: :mod:`state_loading`). Tool
results are encoded by :func:`tool_results.encode_result` (docs/design.md §8). Both modules
are imported by their bare names from this file's folder.

Protocol, on both channels: one JSON request line per batch, ``{"ops": [op, ...]}``; each op
answered in order by ``{"i": index, "r": result}`` (flushed at once), with ``"t": 1`` for an
op its alarm stopped, ``"f": 1`` for an error of the worker rather than of the tool, ``"x": 1``
when the process is past half its CPU-time limit. The tool process first writes
``{"ready": 1}``. Tool ops:

- ``define`` ``{"env", "code", "tools"}``: remember an environment's source and tool names.
- ``reset`` ``{"ep", "env", "cls", "init"}``: instantiate as EnvScaler does and pickle the
  initial state.
- ``call`` ``{"ep", "name", "args"}``: the tool's return value, encoded.
- ``state`` ``{"ep"}``: ``{"initial", "final"}``, the pickled states, base64.
- ``snapshot`` ``{"ep"}``: the current state as JSON (other values as their ``repr``).
- ``release`` ``{"ep"}``: forget an episode.

Scorer ops: ``define`` ``{"env", "code"}``; ``score`` ``{"env", "checks", "start", "initial",
"final"}`` loads both states first; if either cannot be loaded it runs no check and answers
``{"success": false, "error": why, "unloadable": "module.Class" or ""}``. Else it runs
``checks[start:]`` (``check_func(final_state)``, ``initial_state`` a global, fresh copies of
both states), one line ``{"i", "c": number, "ok": bool, "e": why}`` per check (passing only
on ``True``), then the op's own line.
"""

from __future__ import annotations
import __future__

import base64
import builtins
import contextlib
import ctypes
import inspect
import json
import os
import pickle
import re
import resource
import signal
import sys
import time
import types

from state_loading import StateRefused, StateUnpickler
from tool_results import ResultNotEncodable, encode_result

CODE_CACHE_SIZE = 4096
TOOL_FDS = (0, 1)
SCORER_FDS = (3, 4)
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
RLIMITS = {
    "as": resource.RLIMIT_AS,
    "nproc": resource.RLIMIT_NPROC,
    "nofile": resource.RLIMIT_NOFILE,
    "fsize": resource.RLIMIT_FSIZE,
    "cpu": resource.RLIMIT_CPU,
    "core": resource.RLIMIT_CORE,
}


class CallTimeout(BaseException):
    """Raised by the alarm; a ``BaseException`` so ``except Exception`` in env code misses it."""


def module_name(env_id: str) -> str:
    """The module environment ``env_id``'s code runs as (an identifier, so pickle finds it)."""
    return "envsched_env_" + re.sub(r"\W", "_", env_id)


class Alarm:
    """Runs code under the wall-clock alarm of one op."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s

    def run(self, fn, *args):
        signal.setitimer(signal.ITIMER_REAL, self.timeout_s)
        try:
            return fn(*args)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)

    def timed_out(self) -> str:
        return f"timed out after {self.timeout_s:g} s"


class ToolWorker:
    """Holds the environments' modules and the live episodes of the tool process."""

    def __init__(self, alarm: Alarm, max_result_bytes: int, max_state_bytes: int) -> None:
        self.alarm = alarm
        self.max_result_bytes = max_result_bytes
        self.max_state_bytes = max_state_bytes
        self.sources: dict[str, tuple[str, frozenset[str]]] = {}
        self.modules: dict[str, types.ModuleType] = {}
        self.episodes: dict[str, dict] = {}

    def handle(self, op: dict) -> tuple[str, bool, bool]:
        """Answers one op: its result's JSON, whether the alarm stopped it, whether it failed
        in the worker (a raising, hanging or unusable tool) rather than by the tool's answer."""
        try:
            text, fault = self.dispatch(op)
            return text, False, fault
        except CallTimeout:
            return _error(self.alarm.timed_out()), True, True
        except BaseException as error:  # noqa: BLE001 - untrusted code may raise anything
            return _error(_describe(error)), False, True

    def dispatch(self, op: dict) -> tuple[str, bool]:
        kind = op.get("op")
        if kind == "define":
            self.sources[op["env"]] = (op["code"], frozenset(op["tools"]))
            return _OK, False
        if kind == "reset":
            return self.reset(op), False
        if kind == "call":
            return self.call(op)
        if kind == "snapshot":
            return self.snapshot(op["ep"])
        if kind == "state":
            return self.state(op["ep"])
        if kind == "release":
            self.episodes.pop(op["ep"], None)
            return _OK, False
        return _error(f"worker: unknown op {kind!r}"), True

    def env_class(self, env_id: str, class_name: str) -> type:
        module = self.modules.get(env_id)
        if module is None:
            code, _ = self.sources[env_id]
            module = self.alarm.run(_load_module, env_id, code)
            self.modules[env_id] = module
        cls = getattr(module, class_name, None)
        if not isinstance(cls, type):
            raise NameError(f"environment {env_id!r} code defines no class {class_name!r}")
        return cls

    def reset(self, op: dict) -> str:
        self.episodes.pop(op["ep"], None)
        cls = self.env_class(op["env"], op["cls"])
        env = self.alarm.run(_instantiate, cls, op["init"])
        self.episodes[op["ep"]] = {"env": env, "env_id": op["env"], "initial": _pickled(env)}
        return _OK

    def call(self, op: dict) -> tuple[str, bool]:
        episode = self.episodes.get(op["ep"])
        if episode is None:
            return _error(f"episode {op['ep']!r} is not live on this worker"), True
        name, arguments = op["name"], op["args"]
        _, tool_names = self.sources[episode["env_id"]]
        method = getattr(episode["env"], name, None) if isinstance(name, str) else None
        if name not in tool_names or name.startswith("_") or not callable(method):
            return _error(f"unknown tool {name!r}; tools: {', '.join(sorted(tool_names))}"), True
        if not isinstance(arguments, dict):
            return _error(
                f"bad arguments for {name}: expected an object, got {arguments!r:.200}"
            ), True
        try:
            inspect.signature(method).bind(**arguments)
        except TypeError as error:
            return _error(f"bad arguments for {name}: {error}"), True
        except ValueError:
            pass  # no introspectable signature: let the call itself decide
        try:
            text = self.alarm.run(_call, method, arguments)
        except ResultNotEncodable as error:
            return _error(f"tool {name} returned a result that cannot be encoded: {error}"), True
        if len(text) > self.max_result_bytes:
            return _error(
                f"tool {name} returned {len(text)} bytes, over the limit {self.max_result_bytes}"
            ), True
        return text, False

    def state(self, episode_id: str) -> tuple[str, bool]:
        """The pickled initial and final states, for the scorer."""
        episode = self.episodes.get(episode_id)
        if episode is None:
            return _error(f"episode {episode_id!r} is not live on this worker"), True
        initial, final = episode["initial"], self.alarm.run(_pickled, episode["env"])
        size = len(initial) + len(final)
        if size > self.max_state_bytes:
            return _error(
                f"the states of episode {episode_id!r} pickle to {size} bytes, over the limit "
                f"{self.max_state_bytes}"
            ), True
        encoded = {
            key: base64.b64encode(value).decode()
            for key, value in (("initial", initial), ("final", final))
        }
        return json.dumps({"success": True, **encoded}), False

    def snapshot(self, episode_id: str) -> tuple[str, bool]:
        """The episode's current state as JSON (values JSON cannot hold as their ``repr``):
        what ``pool check --write-effects`` diffs around each call."""
        episode = self.episodes.get(episode_id)
        if episode is None:
            return _error(f"episode {episode_id!r} is not live on this worker"), True
        text = json.dumps(
            {"success": True, "data": _state_of(episode["env"])},
            default=repr,
            allow_nan=False,
            sort_keys=True,
        )
        if len(text) > self.max_result_bytes:
            return _error(
                f"state of {len(text)} bytes, over the limit {self.max_result_bytes}"
            ), True
        return text, False


class Scorer:
    """Runs checks on states; holds compiled checks and, when states need them, env modules."""

    def __init__(self, alarm: Alarm, packages: frozenset[str]) -> None:
        self.alarm = alarm
        self.packages = packages
        self.sources: dict[str, str] = {}
        self.modules: dict[str, types.ModuleType] = {}
        self.check_code: dict[str, object] = {}

    def env_module(self, env_id: str) -> types.ModuleType:
        if env_id not in self.modules:
            self.modules[env_id] = _load_module(env_id, self.sources[env_id])
        return self.modules[env_id]

    def score(self, op: dict, emit) -> str:
        """Runs ``checks[start:]``, emitting one line per check; returns the op's result."""
        try:
            initial = base64.b64decode(op["initial"])
            final = base64.b64decode(op["final"])
        except (KeyError, ValueError, TypeError) as error:
            return _error(f"scorer: bad state payload: {error}")
        unloadable = self.unloadable(op["env"], initial, final)
        if unloadable is not None:
            return json.dumps({"success": False, **unloadable})
        for number in range(op["start"], len(op["checks"])):
            try:
                passed = self.alarm.run(
                    self.run_check, op["checks"][number], op["env"], initial, final
                )
                error = "" if passed is True or passed is False else _non_bool(passed)
            except CallTimeout:
                passed, error = False, self.alarm.timed_out()
            except BaseException as failure:  # noqa: BLE001 - a check that raises counts False
                passed, error = False, _describe(failure)
            emit({"c": number, "ok": passed is True, "e": error})
        return _OK

    def run_check(self, source: str, env_id: str, initial: bytes, final: bytes) -> object:
        """Each check gets its own copies of both states, so no check sees another's edits."""
        code = self.check_code.get(source)
        if code is None:
            if len(self.check_code) >= CODE_CACHE_SIZE:
                self.check_code.clear()
            code = self.check_code[source] = _compile(source, "<check>")
        namespace = {"__builtins__": builtins, "initial_state": self.load(initial, env_id)}
        exec(code, namespace)
        return namespace["check_func"](self.load(final, env_id))

    def unloadable(self, env_id: str, initial: bytes, final: bytes) -> dict | None:
        """``{"error", "unloadable"}`` when a state cannot be loaded (``unloadable`` names
        the class it needed, or is ``""``); None when both load. Checked once, before any
        check runs, so such a state is reported as such, not as checks that fail."""
        for payload in (initial, final):
            unpickler = self.unpickler(payload, env_id)
            try:
                self.alarm.run(unpickler.load)
            except CallTimeout:
                why = f"loading it {self.alarm.timed_out()}"
            except StateRefused as refused:
                why = str(refused)
            except BaseException as failure:  # noqa: BLE001 - env code may raise anything
                why = _describe(failure)
            else:
                continue
            return {"error": why, "unloadable": unpickler.last_global}
        return None

    def load(self, payload: bytes, env_id: str) -> object:
        return self.unpickler(payload, env_id).load()

    def unpickler(self, payload: bytes, env_id: str) -> StateUnpickler:
        return StateUnpickler(
            payload, module_name(env_id), lambda: self.env_module(env_id), self.packages
        )


def _compile(source: str, name: str):
    """Pool code is compiled with postponed annotations, as this runtime always compiled it
    (a method may then name its own class in an annotation)."""
    return compile(
        source, name, "exec", flags=__future__.annotations.compiler_flag, dont_inherit=True
    )


def _load_module(env_id: str, code: str) -> types.ModuleType:
    """Executes an environment's code as its own module, registered in ``sys.modules`` first
    (as an import does: ``dataclasses`` looks its module up there), so pickle finds it."""
    module = types.ModuleType(module_name(env_id))
    module.__builtins__ = builtins
    sys.modules[module.__name__] = module
    try:
        exec(_compile(code, f"<env {env_id}>"), module.__dict__)
    except BaseException:
        del sys.modules[module.__name__]
        raise
    return module


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


def _call(method, arguments: dict) -> str:
    """The tool's result, encoded under the call's alarm (encoding may run environment code:
    an object's ``__str__``)."""
    return encode_result(method(**arguments))


def _state_of(env: object) -> dict:
    """State = the instance's non-dunder attributes."""
    return {
        key: value
        for key, value in vars(env).items()
        if not (key.startswith("__") and key.endswith("__"))
    }


def _pickled(env: object) -> bytes:
    """The state (:func:`_state_of`), pickled."""
    state = _state_of(env)
    try:
        return pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as error:  # noqa: BLE001 - e.g. a lambda or a lock in the state
        raise TypeError(f"the state cannot be pickled for the scorer: {_describe(error)}") from None


def _non_bool(value: object) -> str:
    return f"check_func returned {type(value).__name__}, not bool"


def _describe(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    return text if len(text) <= 500 else text[:497] + "..."


_OK = '{"success": true}'


def _error(message: str) -> str:
    return json.dumps({"success": False, "error": message})


def _on_alarm(signum, frame) -> None:
    raise CallTimeout


def _prctl(option: int, value: int) -> None:
    ctypes.CDLL(None).prctl(option, ctypes.c_ulong(value), 0, 0, 0)


class Channel:
    """One side of the protocol: a batch per request line, one reply line per answer."""

    def __init__(self, fds: tuple[int, int], cpu_limit_s: float) -> None:
        self.requests = os.fdopen(fds[0], "rb")
        self.replies = os.fdopen(fds[1], "wb")
        self.cpu_limit_s = cpu_limit_s

    def write(self, payload: dict) -> None:
        self.replies.write(json.dumps(payload).encode() + b"\n")
        self.replies.flush()

    def answer(self, index: int, text: str, timed_out: bool = False, fault: bool = False) -> None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        exhausted = usage.ru_utime + usage.ru_stime > self.cpu_limit_s / 2
        flags = b"".join(
            b', "%s": 1' % name
            for name, on in ((b"t", timed_out), (b"f", fault), (b"x", exhausted))
            if on
        )
        self.replies.write(b'{"i": %d%s, "r": %s}\n' % (index, flags, text.encode()))
        self.replies.flush()

    def batches(self):
        for line in self.requests:
            yield json.loads(line)["ops"]


class Reaper:
    """Inside the sandbox's PID namespace: after each op, kills every process but PID 1 and
    this one, and waits for this one's children to die (orphans are the scorer's to reap).

    The namespace's last allocated pid (``/proc/sys/kernel/ns_last_pid``, which only a
    process with capabilities could write) tells whether any process or thread was created
    since the last op; when none was, there is nothing to kill (``kill(-1)`` walks every
    process of the host: 30 us per op, the read 2 us).
    """

    def __init__(self) -> None:
        self.last_pid_fd = os.open("/proc/sys/kernel/ns_last_pid", os.O_RDONLY)
        self.seen = self.last_pid()

    def last_pid(self) -> bytes | None:
        try:
            return os.pread(self.last_pid_fd, 32, 0)
        except OSError:
            return None  # closed by environment code: reap after every op

    def reap(self, patience_s: float = 1.0) -> None:
        if self.seen is not None and self.last_pid() == self.seen:
            return
        end = time.monotonic() + patience_s
        while True:
            with contextlib.suppress(ProcessLookupError):
                os.kill(-1, signal.SIGKILL)
            try:
                while os.waitpid(-1, os.WNOHANG)[0] != 0:
                    pass
            except ChildProcessError:
                break
            if time.monotonic() > end:
                break  # a child in uninterruptible sleep: the next op tries again
            time.sleep(0.001)
        self.seen = self.last_pid()


def _run_tools(config: dict, sandboxed: bool) -> None:
    for fd in SCORER_FDS:
        os.close(fd)
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # outside a sandbox: die with the scorer
    channel = Channel(_private(TOOL_FDS), config["limits"]["cpu"])
    worker = ToolWorker(
        Alarm(config["timeout_s"]), config["max_result_bytes"], config["max_state_bytes"]
    )
    reaper = Reaper() if sandboxed else None
    channel.write({"ready": 1})
    for ops in channel.batches():
        for index, op in enumerate(ops):
            text, timed_out, fault = worker.handle(op)
            if reaper is not None:
                reaper.reap()
            channel.answer(index, text, timed_out, fault)


def _run_scorer(config: dict, tools_pid: int) -> None:
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in TOOL_FDS:
        os.dup2(devnull, fd)  # the tool channel is the tool process's alone
    for fd in SCORER_FDS:
        os.set_inheritable(fd, False)
    _prctl(PR_SET_DUMPABLE, 0)

    def reap(flags: int) -> None:
        """Reaps children (orphans the tool process left); exits with its status when it is
        one of them. ``WNOHANG``: only those already dead; 0: waits for the tool process."""
        try:
            while True:
                pid, status = os.waitpid(-1, flags)
                if pid == 0:
                    return
                if pid == tools_pid:
                    code = os.waitstatus_to_exitcode(status)
                    os._exit(code if code >= 0 else 128 - code)
        except ChildProcessError:
            return

    def on_child(signum, frame) -> None:
        reap(os.WNOHANG)

    signal.signal(signal.SIGCHLD, on_child)
    channel = Channel(SCORER_FDS, config["limits"]["cpu"])
    scorer = Scorer(Alarm(config["timeout_s"]), frozenset(config["packages"]))
    for ops in channel.batches():
        for index, op in enumerate(ops):
            kind = op.get("op")
            if kind == "define":
                scorer.sources[op["env"]] = op["code"]
                channel.answer(index, _OK)
            elif kind == "score":
                channel.answer(
                    index, scorer.score(op, lambda line, i=index: channel.write({"i": i, **line}))
                )
            else:
                channel.answer(index, _error(f"scorer: unknown op {kind!r}"), fault=True)
    # asked to finish: the tool process's exit ends this one. Waited for, not paused for: a
    # SIGCHLD that arrives just before pause() would leave it paused forever
    reap(0)
    os._exit(0)


def _private(fds: tuple[int, int]) -> tuple[int, int]:
    """The protocol moves to private descriptors; env code printing or reading hits /dev/null."""
    moved = (os.dup(fds[0]), os.dup(fds[1]))
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in fds:
        os.dup2(devnull, fd)
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process
    return moved


def _start(config: dict) -> tuple[int, bool]:
    """Limits and signals, then the fork: (the tool process's pid or 0 in it, sandboxed)."""
    if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
        sys.path.pop(0)  # env code must not import the runtime's own modules by accident
    sys.path.extend(config["site"])
    for name, value in config["limits"].items():
        resource.setrlimit(RLIMITS[name], (value, value))
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    sandboxed = os.getpid() == 1  # PID 1 only in a PID namespace of our own
    return os.fork(), sandboxed


def main() -> None:
    config = json.loads(sys.argv[1])
    try:
        tools_pid, sandboxed = _start(config)
    except OSError as error:
        os.write(1, json.dumps({"sandbox_error": f"worker start-up: {error}"}).encode() + b"\n")
        os._exit(3)
    if tools_pid == 0:
        _run_tools(config, sandboxed)
        os._exit(0)
    _run_scorer(config, tools_pid)


if __name__ == "__main__":
    main()
