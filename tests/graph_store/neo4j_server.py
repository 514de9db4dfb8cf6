"""A Neo4j of a test's own that the test kills (SIGKILL) and starts again on the same folder and
port, as its operator would restart a production server.

It is started the way every Neo4j of the project is, by ``scripts/with_neo4j.sh --home DIR``
(``tools/neo4j-server``; the password is generated once into ``DIR/password``), which runs a
holder process beside it for as long as the server should live. The first start lets the
server bind a free port; later ones ask for that port, so that a client that knew the URI finds
the server again.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import AbstractContextManager
from pathlib import Path
from urllib.parse import urlsplit

from envsched_gnn.graph_store.connect import connect_store
from envsched_gnn.graph_store.listener import listening_pid, listening_sockets
from envsched_gnn.graph_store.store import GraphStore

ROOT = Path(__file__).resolve().parents[2]
WITH_NEO4J = ROOT / "scripts" / "with_neo4j.sh"
JAR = ROOT / "tools" / "neo4j-server" / "target" / "neo4j-server.jar"
HOLD = "import os, sys; print(os.environ['NEO4J_URI'], flush=True); sys.stdin.read()"
"""The command beside the server: says where it is, then waits for its stdin to close."""
PORT_IN_USE = 3
"""with_neo4j.sh's exit status when the server's port is held by another process."""
DATABASE = "neo4j"


class RestartableNeo4j:
    """Neo4j in ``home``; :meth:`start`, :meth:`kill` and :meth:`start` again on the same port.

    Args:
        home: the server's folder (databases, logs, ``password``); kept across restarts.
        heap: the server's Java heap (default 512m: these tests' graphs are small).
        retry_time: seconds the driver of :meth:`connect` retries a failed transaction (default 2;
            the project's own 30 s would make each killed write wait that long).
    """

    def __init__(self, home: Path, *, heap: str = "512m", retry_time: float = 2.0) -> None:
        self.home = Path(home)
        self.heap = heap
        self.retry_time = retry_time
        self.port = 0
        self.uri = ""
        self._holder: subprocess.Popen | None = None

    @property
    def running(self) -> bool:
        return self._holder is not None and self._holder.poll() is None

    @property
    def auth(self) -> tuple[str, str]:
        return "neo4j", (self.home / "password").read_text().strip()

    @property
    def environment(self) -> dict[str, str]:
        """The variables that point ``open_store`` and every command at this server."""
        user, password = self.auth
        return {
            "NEO4J_URI": self.uri,
            "NEO4J_USER": user,
            "NEO4J_PASSWORD": password,
            "NEO4J_DATABASE": DATABASE,
        }

    def start(self, timeout: float = 300.0) -> RestartableNeo4j:
        """Start the server (on its earlier port after the first start); returns when Bolt
        answers. A port still held by another process is asked for again for ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            self._holder = subprocess.Popen(
                [str(WITH_NEO4J), "--home", str(self.home), "--port", str(self.port)]
                + ["--heap", self.heap, "--page-cache", "64m", "--", sys.executable, "-c", HOLD],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=(self.home.parent / f"{self.home.name}.log").open("ab"),
                text=True,
            )
            uri = self._holder.stdout.readline().strip()
            if uri:
                self.uri = uri
                self.port = urlsplit(uri).port
                return self
            status = self._holder.wait()
            if status != PORT_IN_USE or time.monotonic() > deadline:
                raise RuntimeError(f"Neo4j in {self.home} did not start (status {status})")
            time.sleep(1.0)

    def kill(self) -> None:
        """SIGKILL of the server, as the OOM killer would; returns once its port is closed."""
        pid = listening_pid(self.port)
        assert pid is not None, f"no process listens on {self.port}"
        os.kill(pid, signal.SIGKILL)
        while listening_sockets(self.port):
            time.sleep(0.05)
        self._end_holder()

    def stop(self) -> None:
        """Stop the server cleanly (with_neo4j.sh sends it SIGTERM)."""
        self._end_holder()

    def connect(self) -> AbstractContextManager[GraphStore]:
        """A store on this server, as a ``with`` block (closing it leaves the server running)."""
        return connect_store(self.uri, self.auth, DATABASE, retry_time=self.retry_time)

    def _end_holder(self) -> None:
        if self._holder is not None:
            self._holder.stdin.close()
            self._holder.wait(timeout=120)
            self._holder.stdout.close()
            self._holder = None

    def __enter__(self) -> RestartableNeo4j:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
