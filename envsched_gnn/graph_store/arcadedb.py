"""The default store: a local ArcadeDB server, run as a managed child process speaking Bolt.

:class:`ManagedArcadeDB` runs the ``arcadedb-embedded`` wheel's server on loopback ports with
data, logs and a generated root password under one folder (password file mode 0600, passed
by path, never on a command line; MCP and backups off). A folder with data but no password is
an error (:data:`RECOVERY`). A ``flock`` on the folder's ``lock`` admits one process at a time.
A port another process binds between its choice and Java's bind is never talked to: the server
starts again on new ports (:data:`PORT_ATTEMPTS`).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from envsched_gnn.graph_store.errors import StoreError
from envsched_gnn.graph_store.listener import holds_any, listening_sockets
from envsched_gnn.json_files import write_json_atomically

log = logging.getLogger(__name__)

DEFAULT_FOLDER = Path(".envsched/store")
DATABASE = "envsched"
ROOT_USER = "root"
PASSWORD_FILE = "root_password"
LOG_FILE = "server.log"
LOCK_FILE = "lock"
USERS_FILE = Path("config") / "server-users.jsonl"
MIN_PASSWORD = 8
RECOVERY = (
    "To recover: if you know the password, write it into {password} (one line, chmod 600). "
    "Otherwise reset the root user; the databases are kept: make sure no process uses the "
    "store, delete {users}, and write a new password of at least 8 characters into "
    "{password} (chmod 600); the next start creates the root user with it."
)
MCP_CONFIG = {"enabled": False, "allowedUsers": [], "allowedOrigins": []}
PORT_ATTEMPTS = 5
"""Starts on newly chosen ports before giving up, each after another process took a port first."""
PORT_REFUSED = "Unable to listen"
"""What ArcadeDB logs when it cannot bind a port it was given (Bolt or HTTP); its Java process
then stays up, serving nothing (measured, ArcadeDB 26.10)."""


def arcadedb_home() -> Path:
    """Folder of the installed ``arcadedb_embedded`` package (holds ``jre/`` and ``jars/``)."""
    try:
        import arcadedb_embedded
    except ImportError as error:
        raise StoreError(
            "the embedded store needs the 'arcadedb-embedded' package; install it or set NEO4J_URI"
        ) from error
    return Path(arcadedb_embedded.__file__).resolve().parent


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing is bound to right now (another process may bind it
    before the caller does)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _PortTaken(Exception):
    """Another process bound a port chosen for the server before its Java process did."""


def _holder(fd: int) -> str:
    """Who holds a store's lock, from what the holder wrote into it."""
    try:
        holder = json.loads(os.pread(fd, 4096, 0) or b"{}")
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(holder["since"]))
        return f"process {holder['pid']} ({holder['command']!r}, since {since})"
    except (ValueError, KeyError, TypeError, OSError):
        return "another process"


_LAUNCHER = ThreadPoolExecutor(1, thread_name_prefix="arcadedb-launcher")
"""Starts every managed server (see :meth:`ManagedArcadeDB.start`)."""


def _die_with_parent() -> None:
    """In the child before exec: receive SIGTERM when the Python parent dies (Linux)."""
    if sys.platform.startswith("linux"):
        pr_set_pdeathsig = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


HEAP_VARIABLE = "ENVSCHED_ARCADEDB_HEAP"
"""Environment variable that sets the managed server's maximum Java heap (``-Xmx`` syntax)."""


def default_heap() -> str:
    """The managed server's maximum heap: ``$ENVSCHED_ARCADEDB_HEAP``, else a quarter of the
    machine's memory, between 1 and 8 GiB (a large bulk import needs the room).
    """
    if os.environ.get(HEAP_VARIABLE):
        return os.environ[HEAP_VARIABLE]
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return f"{min(max(total // 4, 1 << 30), 8 << 30) >> 20}m"


def heap_mib(heap: str) -> int:
    """A ``-Xmx`` size (``6144m``, ``8g``, ``1048576k``, bytes) in MiB."""
    units = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}
    text = heap.strip().lower()
    try:
        if text[-1:] in units:
            return max(1, int(float(text[:-1]) * units[text[-1]]))
        return max(1, int(text) >> 20)
    except ValueError:
        raise StoreError(f"{HEAP_VARIABLE}={heap!r}: not a heap size such as 8g or 6144m") from None


def page_cache_mib(heap: str) -> int:
    """The server's page cache (``arcadedb.maxPageRAM``): a third of its heap (room for imports)."""
    return max(64, heap_mib(heap) // 3)


class ManagedArcadeDB:
    """An ArcadeDB server with the Bolt plugin, owned by this process (a context manager, or
    :meth:`start` / :meth:`stop`).

    Args:
        folder: where databases, logs and the root password live (default ``.envsched/store``).
        database: name of the database created on first start (default ``"envsched"``).
        heap: maximum Java heap, as ``-Xmx`` takes it (default :func:`default_heap`).
        start_timeout: seconds to wait for Bolt to answer before giving up (default 120).
        lock_timeout: seconds to wait for another process to release the folder (default 60).
    """

    def __init__(
        self,
        folder: str | Path = DEFAULT_FOLDER,
        *,
        database: str = DATABASE,
        heap: str | None = None,
        start_timeout: float = 120.0,
        lock_timeout: float = 60.0,
    ) -> None:
        self.folder = Path(folder).resolve()
        self.database = database
        self.heap = heap or default_heap()
        self.start_timeout = start_timeout
        self.lock_timeout = lock_timeout
        self.bolt_port: int | None = None
        self.http_port: int | None = None
        self.exit_code: int | None = None
        self._process: subprocess.Popen | None = None
        self._lock_fd: int | None = None
        self._log_offset = 0

    @property
    def uri(self) -> str:
        if self.bolt_port is None:
            raise StoreError(f"the ArcadeDB server of {self.folder} is not started")
        return f"bolt://127.0.0.1:{self.bolt_port}"

    @property
    def auth(self) -> tuple[str, str]:
        return ROOT_USER, self.password()

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def password_path(self) -> Path:
        return self.folder / PASSWORD_FILE

    def recovery(self) -> str:
        return RECOVERY.format(password=self.password_path, users=self.folder / USERS_FILE)

    def holds_data(self) -> bool:
        """Whether ArcadeDB has run in the folder (its users file or a database exists)."""
        databases = self.folder / "databases"
        return (self.folder / USERS_FILE).exists() or (
            databases.is_dir() and any(databases.iterdir())
        )

    @property
    def pid(self) -> int | None:
        """The server process id while it runs."""
        return self._process.pid if self.running else None

    def password(self) -> str:
        """The root password, from the 0600 file ``root_password``; generated for a new folder."""
        path = self.password_path
        if not path.exists():
            if self.holds_data():
                raise StoreError(
                    f"the store folder {self.folder} holds data but its root password file "
                    f"{path} is missing; a new password would not open it. {self.recovery()}"
                )
            self.folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(secrets.token_urlsafe(24))
        password = path.read_text(encoding="utf-8").strip()
        if len(password) < MIN_PASSWORD or "\n" in password:
            raise StoreError(
                f"{path} must hold one line, a password of at least {MIN_PASSWORD} characters "
                f"(ArcadeDB's minimum). {self.recovery()}"
            )
        return password

    def command(self) -> list[str]:
        """The Java command line that runs the server."""
        home = arcadedb_home()
        settings = {
            "arcadedb.server.rootPath": self.folder,
            "arcadedb.server.databaseDirectory": self.folder / "databases",
            "arcadedb.server.rootPasswordPath": self.password_path,
            "arcadedb.server.defaultDatabases": f"{self.database}[{ROOT_USER}]",
            "arcadedb.server.plugins": "Bolt:com.arcadedb.bolt.BoltProtocolPlugin",
            "arcadedb.server.httpIncomingHost": "127.0.0.1",
            "arcadedb.server.httpIncomingPort": self.http_port,
            "arcadedb.bolt.host": "127.0.0.1",
            "arcadedb.bolt.port": self.bolt_port,
            "arcadedb.backup.enabled": "false",
            "arcadedb.maxPageRAM": page_cache_mib(self.heap),
        }
        return [
            str(home / "jre" / "bin" / "java"),
            f"-Xmx{self.heap}",
            "-cp",
            str(home / "jars" / "*"),
            *(f"-D{key}={value}" for key, value in settings.items()),
            "com.arcadedb.server.ArcadeDBServer",
        ]

    def start(self) -> ManagedArcadeDB:
        """Start the server and return once Bolt accepts the root credentials.

        Java binds the ports :func:`free_port` chose a second or two after they were chosen, and
        a process that binds one in between (a parallel start) keeps it. Bolt is therefore tried
        only once this server's own Java process listens on it (an older check met the other
        server, whose refusal of the password read as a wrong password), and a port taken first
        (another listener on it, or ArcadeDB's log saying so) starts the server again on new
        ports, up to :data:`PORT_ATTEMPTS` times.
        """
        if self.running:
            return self
        self.stop()  # a server that died: release what it held
        self.folder.mkdir(parents=True, exist_ok=True)
        self._lock_fd = self._lock()
        try:
            self.password()  # before Java runs: a missing or short password is our error
            config = self.folder / "config"
            config.mkdir(exist_ok=True)
            write_json_atomically(config / "mcp-config.json", MCP_CONFIG, indent=2)
            for attempt in range(1, PORT_ATTEMPTS + 1):
                self._launch()
                try:
                    self._wait_for_bolt()
                    return self
                except _PortTaken as taken:
                    log.info("%s; starting again on new ports (attempt %d)", taken, attempt + 1)
                    self._end_process()
            raise StoreError(
                f"ArcadeDB in {self.folder} lost a chosen port to another process "
                f"{PORT_ATTEMPTS} times while starting; last lines of {LOG_FILE}:\n"
                f"{self.log_tail()}"
            )
        except BaseException:
            self.stop()
            raise

    def _launch(self) -> None:
        """Start Java on two newly chosen ports, its output appended to the folder's log."""
        self.bolt_port, self.http_port = free_port(), free_port()
        self.exit_code = None
        log_path = self.folder / LOG_FILE
        self._log_offset = log_path.stat().st_size if log_path.exists() else 0
        try:
            with log_path.open("ab") as log_file:
                # started from one thread that lives as long as this process: the child's
                # parent-death signal fires when the *thread* that forked it ends, and a store
                # reopened from a short-lived thread (StoreWriter) lost its server with it
                self._process = _LAUNCHER.submit(
                    subprocess.Popen,
                    self.command(),
                    cwd=self.folder,
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    env=self._environment(),
                    pass_fds=(self._lock_fd,),  # the lock lives as long as Java does
                    preexec_fn=_die_with_parent,
                ).result()
        except OSError as error:
            raise StoreError(f"cannot start ArcadeDB's Java runtime: {error}") from error

    def _bolt_is_ours(self) -> bool:
        """Whether this server's Java process listens on its Bolt port (True where that cannot
        be known, off Linux); raises :class:`_PortTaken` when another process holds a chosen
        port or the server logged that it could not bind one."""
        ours = True
        for name, port in (("Bolt", self.bolt_port), ("HTTP", self.http_port)):
            sockets = listening_sockets(port)
            if sockets is None:
                continue
            if sockets and not holds_any(self._process.pid, sockets):
                raise _PortTaken(f"another process listens on {name} port {port}, chosen for it")
            if name == "Bolt":
                ours = bool(sockets)
        with (self.folder / LOG_FILE).open("rb") as log_file:
            log_file.seek(self._log_offset)
            started = log_file.read().decode(errors="replace")
        refused = [line for line in started.splitlines() if PORT_REFUSED in line]
        if refused:
            raise _PortTaken(f"ArcadeDB could not bind a chosen port ({refused[0].strip()})")
        return ours

    def _environment(self) -> dict[str, str]:
        """All the server's environment: no secret of the caller's (NEO4J_PASSWORD...)."""
        return {"PATH": os.defpath, "LC_ALL": "C.UTF-8", "HOME": str(self.folder)}

    def _lock(self) -> int:
        """Holds the folder's lock, waiting up to ``lock_timeout`` s for another holder."""
        fd = os.open(self.folder / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        deadline = time.monotonic() + self.lock_timeout
        announced = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = _holder(fd)
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise StoreError(
                        f"the store folder {self.folder} is in use by {holder}; waited "
                        f"{self.lock_timeout:g} s. Wait for it to finish, stop it, or use "
                        "another --store"
                    ) from None
                if not announced:
                    announced = True
                    log.warning("the store folder %s is in use by %s; waiting", self.folder, holder)
                time.sleep(0.2)
        os.ftruncate(fd, 0)
        holder = {"pid": os.getpid(), "command": " ".join(sys.argv)[:300], "since": time.time()}
        os.pwrite(fd, json.dumps(holder).encode(), 0)
        return fd

    def _wait_for_bolt(self) -> None:
        from neo4j.exceptions import AuthError, ClientError, ServiceUnavailable

        deadline = time.monotonic() + self.start_timeout
        while True:
            if self._process.poll() is not None:
                raise StoreError(
                    f"ArcadeDB exited with code {self._process.returncode} while starting "
                    f"(folder {self.folder}); last lines of {self.folder / LOG_FILE}:\n"
                    f"{self.log_tail()}"
                )
            try:
                if self._bolt_is_ours():
                    self._connect_as_root()
                    return
            except AuthError as error:
                raise StoreError(
                    f"ArcadeDB in {self.folder} rejected the root password in "
                    f"{self.password_path} ({error.message}). {self.recovery()}"
                ) from error
            except (ServiceUnavailable, ClientError, OSError):
                pass
            if time.monotonic() > deadline:
                raise StoreError(
                    f"ArcadeDB's Bolt port {self.bolt_port} did not answer within "
                    f"{self.start_timeout:.0f} s; last lines of {LOG_FILE}:\n{self.log_tail()}"
                )
            time.sleep(0.2)

    def _connect_as_root(self) -> None:
        """Bolt answers, takes the root password and runs a statement in the database."""
        import neo4j

        with neo4j.GraphDatabase.driver(self.uri, auth=self.auth) as driver:
            driver.verify_connectivity()
            # Bolt answers about 0.3 s before the default database is open (measured, ArcadeDB
            # 26.10), and verify_connectivity does not open a database: the first statement does
            with driver.session(database=self.database) as session:
                session.run("RETURN 1").consume()

    def sql(self, command: str, *, transaction: bool = True, timeout: float = 3600.0) -> list:
        """Run one ArcadeDB SQL command over the loopback HTTP API; returns its result rows.

        ``transaction=False`` lets the command manage its own transactions (``IMPORT DATABASE
        ... WITH commitEvery``; one transaction would exhaust the heap). Failures raise
        :class:`StoreError`.
        """
        import base64
        import urllib.error
        import urllib.request

        url = f"http://127.0.0.1:{self.http_port}/api/v1/command/{self.database}"
        body = {"language": "sql", "command": command}
        if not transaction:  # read from the body: as a URL parameter it is ignored, and the
            body["autoCommit"] = False  # import ran in one transaction (out of heap at 1M tasks)
        token = base64.b64encode(":".join(self.auth).encode()).decode()
        request = urllib.request.Request(
            url,
            data=json.dumps(body).encode(),
            headers={"Authorization": f"Basic {token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return json.loads(response.read())["result"]
        except urllib.error.HTTPError as error:
            detail = error.read().decode(errors="replace")[:2000]
            raise StoreError(
                f"ArcadeDB in {self.folder} refused {command[:80]!r}: {detail}"
            ) from None
        except OSError as error:
            time.sleep(0.5)  # a server whose connection just broke may be dying
            raise StoreError(
                self.death() or f"ArcadeDB in {self.folder}: HTTP API unreachable: {error}"
            ) from None

    def log_tail(self, lines: int = 20) -> str:
        path = self.folder / LOG_FILE
        if not path.exists():
            return "(no log)"
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])

    def death(self) -> str | None:
        """Why the server is gone, naming its log; None while it runs (or was never started)."""
        if self._process is None or self._process.poll() is None:
            return None
        return (
            f"the managed ArcadeDB server of {self.folder} is dead (exit code "
            f"{self._process.returncode}); see {self.folder / LOG_FILE}, last lines:\n"
            f"{self.log_tail()}"
        )

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the server: SIGTERM (ArcadeDB flushes and closes), wait, then SIGKILL."""
        self._end_process(timeout)
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _end_process(self, timeout: float = 30.0) -> None:
        """End the Java process (SIGTERM, then SIGKILL after ``timeout``); the lock stays held."""
        process, self._process = self._process, None
        if process is not None:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            self.exit_code = process.returncode
        self.bolt_port = self.http_port = None

    def __enter__(self) -> ManagedArcadeDB:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.stop(timeout=5.0)
