"""Opening a store: a Bolt URI or a folder -> the driver (and the managed ArcadeDB), checked.
:func:`open_store` closes the driver, then stops the server, when its ``with`` block ends.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from envsched_gnn.graph_store.arcadedb import DEFAULT_FOLDER, ManagedArcadeDB
from envsched_gnn.graph_store.errors import StoreError
from envsched_gnn.graph_store.store import GraphStore
from envsched_gnn.validation import check_paths

URI_SCHEMES = ("bolt", "bolt+s", "bolt+ssc", "neo4j", "neo4j+s", "neo4j+ssc")


def credentials_from_environment(uri: str) -> tuple[tuple[str, str], str]:
    """``(user, password), database`` from NEO4J_USER / NEO4J_PASSWORD / NEO4J_DATABASE."""
    password = os.environ.get("NEO4J_PASSWORD")
    if password is None:
        raise StoreError(f"store {uri}: set NEO4J_PASSWORD (and NEO4J_USER, NEO4J_DATABASE)")
    user = os.environ.get("NEO4J_USER", "neo4j")
    return (user, password), os.environ.get("NEO4J_DATABASE", "neo4j")


def is_uri(spec: str) -> bool:
    return "://" in spec and spec.split("://", 1)[0].lower() in URI_SCHEMES


def check_store_spec(spec: str | Path | None) -> None:
    """What :func:`open_store` would refuse before it connects, refused now (a command checks
    it before anything loads): a URI of another scheme, a folder path that cannot be one."""
    if spec is None or is_uri(str(spec)):
        return
    if "://" in str(spec):
        raise StoreError(f"store {spec!r}: unsupported URI scheme, expected one of {URI_SCHEMES}")
    check_paths(out_folders={"store": spec})


@contextlib.contextmanager
def connect_store(
    uri: str,
    auth: tuple[str, str],
    database: str,
    *,
    server: ManagedArcadeDB | None = None,
    retry_time: float = 30.0,
    retry_s: float = 0.0,
) -> Iterator[GraphStore]:
    """A store on the server at ``uri``, checked (connectivity, ``auth``, ``database``) and with its
    constraints; closes the driver on exit. ``retry_time`` bounds the driver's retries,
    ``retry_s`` the store's own; ``server`` is the managed server behind ``uri``, if any.
    """
    import neo4j

    try:
        # the project's own statements read properties a store may not hold yet (an empty
        # store's Abstract.text): Neo4j would send a warning for each, which the driver logs
        # on stderr; store query asks for them again (StoreConnection.run_statement)
        driver = neo4j.GraphDatabase.driver(
            uri,
            auth=auth,
            connection_timeout=10.0,
            max_transaction_retry_time=retry_time,
            notifications_min_severity="OFF",
        )
    except (ValueError, neo4j.exceptions.ConfigurationError) as error:
        raise StoreError(f"invalid store URI {uri!r}: {error}") from error
    with driver:
        store = GraphStore(driver, database, server=server, uri=uri, retry_s=retry_s)
        _check(store, user=auth[0])
        yield store


def _check(store: GraphStore, user: str) -> None:
    """The server answers and takes the credentials; the database exists (its constraints)."""
    from neo4j.exceptions import (
        AuthError,
        ClientError,
        DriverError,
        Neo4jError,
        ServiceUnavailable,
    )

    try:
        store.driver.verify_connectivity()
        # verify_connectivity does not open the database (a bolt:// driver accepts any name):
        # the first statement in it does
        store.ensure_constraints()
    except AuthError as error:
        raise StoreError(
            f"the store at {store.uri} rejected the credentials of user {user!r} "
            f"(set NEO4J_USER / NEO4J_PASSWORD): {error.message}"
        ) from error
    except ServiceUnavailable as error:
        raise StoreError(f"cannot reach the store at {store.uri}: {error}") from error
    except ClientError as error:
        raise StoreError(
            f"the store at {store.uri} refused database {store.database!r} "
            f"(set NEO4J_DATABASE): {error.message}"
        ) from error
    except (DriverError, Neo4jError, OSError) as error:
        raise StoreError(f"cannot use the store at {store.uri}: {error}") from error


@contextlib.contextmanager
def open_store(spec: str | Path | None = None) -> Iterator[GraphStore]:
    """Open the store named by ``spec``, closing it (and any managed server) on exit: a
    ``bolt://`` / ``neo4j://`` URI (``NEO4J_USER``, ``NEO4J_PASSWORD``, ``NEO4J_DATABASE``
    default ``neo4j``) or a folder for the managed ArcadeDB; ``None``: ``NEO4J_URI`` when set,
    else ``.envsched/store``.
    """
    if spec is None:
        spec = os.environ.get("NEO4J_URI") or DEFAULT_FOLDER
    spec = str(spec)
    check_store_spec(spec)
    if is_uri(spec):
        auth, database = credentials_from_environment(spec)
        with connect_store(spec, auth, database) as store:
            yield store
    else:
        # transactions are retried by the store, not by the driver, so that a dead server is
        # reported at once
        with (
            ManagedArcadeDB(spec) as server,
            connect_store(
                server.uri,
                server.auth,
                server.database,
                server=server,
                retry_time=0.0,
                retry_s=5.0,
            ) as store,
        ):
            yield store
