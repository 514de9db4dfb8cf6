"""How a worker of the environment runtime is started: inside a sandbox, with its two channels.

:class:`WorkerProcess` is the launcher every runtime uses (an ``EnvRuntime`` holds one per
environment it runs; a Ray actor reuses it as is). It starts ``sandbox_init.py``, which
unshares new user, mount, PID, network, IPC and UTS namespaces (``unshare(2)``, no setuid
helper); this process writes the namespace's id maps, and the sandbox execs
:mod:`~envsched_gnn.envs.worker`. Both run as ``python -s -S -B`` with a full, scrubbed
environment (as ``python -I``, except that ``PYTHONHASHSEED=0`` is honoured, so set order in
environment code is reproducible). Tools answer on the child's stdin/stdout, the scorer on
descriptors 3/4 (protocol: :mod:`~envsched_gnn.envs.worker`). A sandbox is started once per
worker and reused for every call; :meth:`WorkerProcess.stop` kills it with all it started.

What the sandbox guarantees and what not: docs/sandbox.md.
Where the kernel refuses namespaces, :class:`SandboxUnavailable` is raised unless the pool is
trusted (``RuntimeConfig.trust_pool``, ``--trust-pool``): the worker then runs as a plain
child process with the same limits, channels and interpreter flags but no isolation.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import select
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from envsched_gnn.validation import UserError

if TYPE_CHECKING:
    from envsched_gnn.envs.runtime_config import RuntimeConfig

INIT_SCRIPT = Path(__file__).with_name("sandbox_init.py")
WORKER_SCRIPT = Path(__file__).with_name("worker.py")
WORKER_MODULES = tuple(
    Path(__file__).with_name(name) for name in ("tool_results.py", "state_loading.py")
)
"""The standard-library-only modules the worker imports from its own folder."""
SANDBOX_WORKER = "/sandbox/worker.py"
SANDBOX_SITE = "/sandbox/site"
NOBODY = 65534
START_TIMEOUT_S = 60.0
INTERPRETER_FLAGS = ("-s", "-S", "-B")
BASE_ENVIRONMENT = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LC_ALL": "C.UTF-8",
    "PYTHONHASHSEED": "0",
    "PYTHONDONTWRITEBYTECODE": "1",
}
REFUSED_HINT = (
    "untrusted pools are refused. The kernel must allow user namespaces (sysctls "
    "user.max_user_namespaces > 0, kernel.unprivileged_userns_clone = 1 where it exists, "
    "kernel.apparmor_restrict_unprivileged_userns = 0 when not run as root). If you trust "
    "this pool's code, pass --trust-pool (RuntimeConfig.trust_pool) to run it without a sandbox"
)


class SandboxUnavailable(UserError, RuntimeError):
    """The kernel refused the sandbox, and the pool is not trusted."""


def sandbox_ids() -> tuple[int, int]:
    """The sandbox's uid and gid, inside and outside: ``nobody`` for root, else the caller's."""
    return (NOBODY, NOBODY) if os.geteuid() == 0 else (os.geteuid(), os.getegid())


def interpreter() -> str:
    """The system interpreter behind this one (a virtualenv's ``python`` is a link to it)."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def package_folders(packages: tuple[str, ...]) -> list[tuple[str, str]]:
    """``(host path, name)`` of each package and of its compiled libraries' ``<name>.libs``."""
    found = []
    for name in packages:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None and not spec.submodule_search_locations:
            raise ValueError(f"SandboxConfig.packages: {name!r} is not installed")
        if spec.submodule_search_locations:
            folder = os.path.realpath(next(iter(spec.submodule_search_locations)))
            found.append((folder, name))
            libs = folder + ".libs"
            if os.path.isdir(libs):
                found.append((libs, name + ".libs"))
        else:
            found.append((os.path.realpath(spec.origin), os.path.basename(spec.origin)))
    return found


def _worker_config(config: RuntimeConfig, site: list[str]) -> str:
    sandbox = config.sandbox
    limits = {
        "as": config.memory_limit_mb << 20,
        "nproc": sandbox.max_processes,
        "nofile": sandbox.max_open_files,
        "fsize": sandbox.max_file_mb << 20,
        "cpu": sandbox.cpu_limit_s,
        "core": 0,
    }
    return json.dumps(
        {
            "timeout_s": config.call_timeout_s,
            "max_result_bytes": config.max_result_bytes,
            "max_state_bytes": config.max_state_bytes,
            "limits": limits,
            "site": site,
            "packages": list(sandbox.packages),
        }
    )


def launch_spec(config: RuntimeConfig, pass_fds: list[int], *, isolate: bool) -> dict:
    """What ``sandbox_init.py`` is told: binds, ids, the worker's command and environment."""
    python = interpreter()
    packages = package_folders(config.sandbox.packages)
    if not isolate:
        site = sorted({os.path.dirname(path) for path, _ in packages})
        argv = [python, *INTERPRETER_FLAGS, str(WORKER_SCRIPT), _worker_config(config, site)]
        return {"isolate": False, "pass_fds": pass_fds, "argv": argv, "env": BASE_ENVIRONMENT}
    prefix = os.path.realpath(sys.base_prefix)
    binds = [("/usr", "/usr")]
    for folder in (prefix, os.path.dirname(python)):
        if not any(folder == bound or folder.startswith(bound + "/") for bound, _ in binds):
            binds.append((folder, folder))
    if os.path.exists("/etc/ld.so.cache"):
        binds.append(("/etc/ld.so.cache", "/etc/ld.so.cache"))
    binds.append((str(WORKER_SCRIPT), SANDBOX_WORKER))
    binds += [(str(path), f"/sandbox/{path.name}") for path in WORKER_MODULES]
    binds += [(path, f"{SANDBOX_SITE}/{name}") for path, name in packages]
    uid, gid = sandbox_ids()
    argv = [python, *INTERPRETER_FLAGS, SANDBOX_WORKER, _worker_config(config, [SANDBOX_SITE])]
    return {
        "isolate": True,
        "pass_fds": pass_fds,
        "launcher": os.getpid(),
        "uid": uid,
        "gid": gid,
        "binds": binds,
        "scratch_mb": config.sandbox.scratch_mb,
        "argv": argv,
        "env": {**BASE_ENVIRONMENT, "HOME": "/tmp", "TMPDIR": "/tmp"},
    }


_warned_untrusted = False


def start_all(processes: list[WorkerProcess]) -> list[WorkerProcess]:
    """Completes the start of launched workers, in parallel; the workers to use, in order."""
    for process in processes:
        process.map_ids()
    return [process.wait_ready() for process in processes]


class WorkerProcess:
    """One worker (tool process and scorer), started in a sandbox.

    Construction launches it; :meth:`map_ids` then :meth:`wait_ready` complete the start, so
    that many start in parallel (:func:`start_all`). :meth:`wait_ready` returns the worker to
    use: on a failed sandbox, an unsandboxed one if ``config.trust_pool``, else it raises
    :class:`SandboxUnavailable`.
    """

    def __init__(self, config: RuntimeConfig, *, isolate: bool = True) -> None:
        self.config = config
        self.isolated = isolate
        scorer_in, child_in = os.pipe()[::-1]
        child_out, scorer_out = os.pipe()[::-1]
        pass_fds = [child_in, child_out]
        spec = launch_spec(config, pass_fds, isolate=isolate)
        try:
            self.proc = subprocess.Popen(
                [interpreter(), *INTERPRETER_FLAGS, str(INIT_SCRIPT), json.dumps(spec)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=dict(BASE_ENVIRONMENT),
                pass_fds=pass_fds,
                start_new_session=True,
            )
        finally:
            os.close(child_in)
            os.close(child_out)
        self.tools_in: BinaryIO = self.proc.stdin
        self.tools_out: BinaryIO = self.proc.stdout
        self.scorer_in: BinaryIO = os.fdopen(scorer_in, "wb")
        self.scorer_out: BinaryIO = os.fdopen(scorer_out, "rb")
        self.ready = False
        self._first_line: dict | None = None
        self._deadline = 0.0

    @property
    def pid(self) -> int:
        return self.proc.pid

    def map_ids(self) -> None:
        """First half of the start: the id maps, once the child has unshared (when sandboxed)."""
        if self.ready or self._first_line is not None:
            return
        self._deadline = time.monotonic() + START_TIMEOUT_S
        line = self._line()
        if self.isolated and line.get("sandbox") == "unshared":
            self._write_id_maps()
            self.tools_in.write(b"go\n")
            self.tools_in.flush()
        self._first_line = line

    def wait_ready(self) -> WorkerProcess:
        """Completes the start: the worker to use (see the class docstring)."""
        self.map_ids()
        if self.ready:
            return self
        line, self._first_line = self._first_line, None
        if line.get("sandbox") == "unshared":
            line = self._line()
        if line.get("ready") == 1:
            self.ready = True
            return self
        self.stop()
        reason = line.get("sandbox_error") or f"unexpected start-up line {line!r:.300}"
        if not self.isolated:
            raise RuntimeError(f"the environment worker failed to start: {reason}")
        if not self.config.trust_pool:
            raise SandboxUnavailable(
                f"the sandbox for environment code failed: {reason}; " + REFUSED_HINT
            )
        global _warned_untrusted
        if not _warned_untrusted:
            _warned_untrusted = True
            warnings.warn(
                f"the sandbox failed ({reason}); running the trusted pool's code without one",
                RuntimeWarning,
                stacklevel=2,
            )
        return WorkerProcess(self.config, isolate=False).wait_ready()

    def _line(self) -> dict:
        """One start-up line of the child, read without taking a byte more."""
        fd, data = self.tools_out.fileno(), b""
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while not data.endswith(b"\n"):
            remaining = self._deadline - time.monotonic()
            if remaining <= 0 or not poller.poll(remaining * 1000):
                return {"sandbox_error": f"no answer within {START_TIMEOUT_S:g} s"}
            byte = os.read(fd, 1)
            if not byte:
                code = self.proc.wait()
                return {
                    "sandbox_error": data.decode(errors="replace") or f"exited with code {code}"
                }
            data += byte
        try:
            line = json.loads(data)
        except ValueError:
            line = None
        return line if isinstance(line, dict) else {"sandbox_error": f"bad line {data!r:.300}"}

    def _write_id_maps(self) -> None:
        uid, gid = sandbox_ids()
        proc = Path(f"/proc/{self.proc.pid}")
        if os.geteuid() != 0:
            (proc / "setgroups").write_text("deny")  # required before an unprivileged gid map
        (proc / "uid_map").write_text(f"{uid} {uid} 1\n")
        (proc / "gid_map").write_text(f"{gid} {gid} 1\n")

    def finish(self) -> None:
        """Asks the worker to exit (closes its requests); :meth:`stop` then waits for it."""
        for stream in (self.tools_in, self.scorer_in):
            if not stream.closed:
                with contextlib.suppress(BrokenPipeError):
                    stream.close()

    def stop(self, patience_s: float = 0.0) -> None:
        """Kills the worker and all it started (its session; in a sandbox, its namespace),
        after up to ``patience_s`` seconds for it to exit by itself (after :meth:`finish`)."""
        if self.proc.poll() is None and patience_s > 0:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=patience_s)
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.finish()
        for stream in (self.tools_out, self.scorer_out):
            if not stream.closed:
                stream.close()
