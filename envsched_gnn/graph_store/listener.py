"""The local process that listens on a TCP port: the server behind a store's URI, or whether the
managed server holds the ports it was given.

Linux names each listening socket's inode in ``/proc/net/tcp{,6}`` and a process's open files
in ``/proc/<pid>/fd``. ``bench graph --store bolt://127.0.0.1:PORT`` measures the memory of the
server it writes to, which it did not start; :class:`~.arcadedb.ManagedArcadeDB` connects only
to a port its own Java process listens on, and starts again on new ports when another process
took one first.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

LOOPBACK = ("127.0.0.1", "localhost", "::1")
LISTEN = "0A"
"""The TCP state LISTEN as ``/proc/net/tcp`` writes it."""


def listening_sockets(port: int, proc: Path = Path("/proc")) -> set[str] | None:
    """The sockets (``socket:[inode]``) listening on ``port`` on any local address; None where
    there is no ``/proc/net/tcp`` (not Linux)."""
    sockets: set[str] = set()
    tables = 0
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        tables += 1
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == LISTEN and int(local.rsplit(":", 1)[1], 16) == port:
                sockets.add(f"socket:[{inode}]")
    return sockets if tables else None


def holds_any(pid: int, sockets: set[str], proc: Path = Path("/proc")) -> bool:
    """Whether process ``pid`` has one of ``sockets`` open (False when it cannot be read)."""
    try:
        return any(os.readlink(fd) in sockets for fd in (proc / str(pid) / "fd").iterdir())
    except OSError:
        return False


def listening_pid(port: int, proc: Path = Path("/proc")) -> int | None:
    """The pid of a process holding a socket that listens on ``port``; None when there is none
    this process may see (another machine, another user's process, not Linux)."""
    sockets = listening_sockets(port, proc)
    if not sockets:
        return None
    for process in proc.iterdir():
        if process.name.isdigit() and holds_any(int(process.name), sockets, proc):
            return int(process.name)
    return None


def server_pid(uri: str) -> int | None:
    """The pid of the server behind a ``bolt://`` / ``neo4j://`` URI on this machine, else None."""
    parts = urlsplit(uri)
    if parts.hostname not in LOOPBACK:
        return None
    return listening_pid(parts.port or 7687)
