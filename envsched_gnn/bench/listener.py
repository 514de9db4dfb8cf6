"""The local process that listens on a TCP port: the server behind a store given by URI.

``bench graph --store bolt://127.0.0.1:PORT`` measures the memory of the server it writes to,
which it did not start; Linux names the listening socket's inode in ``/proc/net/tcp{,6}`` and
the owner's open files in ``/proc/<pid>/fd``.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

LOOPBACK = ("127.0.0.1", "localhost", "::1")
LISTEN = "0A"
"""The TCP state LISTEN as ``/proc/net/tcp`` writes it."""


def listening_pid(port: int, proc: Path = Path("/proc")) -> int | None:
    """The pid of a process holding a socket that listens on ``port``; None when there is none
    this process may see (another machine, another user's process, not Linux)."""
    sockets = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == LISTEN and int(local.rsplit(":", 1)[1], 16) == port:
                sockets.add(f"socket:[{inode}]")
    if not sockets:
        return None
    for process in proc.iterdir():
        if not process.name.isdigit():
            continue
        try:
            for fd in (process / "fd").iterdir():
                if os.readlink(fd) in sockets:
                    return int(process.name)
        except OSError:
            continue
    return None


def server_pid(uri: str) -> int | None:
    """The pid of the server behind a ``bolt://`` / ``neo4j://`` URI on this machine, else None."""
    parts = urlsplit(uri)
    if parts.hostname not in LOOPBACK:
        return None
    return listening_pid(parts.port or 7687)
