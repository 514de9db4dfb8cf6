"""Opening a store (Bolt/Cypher tests against ArcadeDB, the managed default; ``NEO4J_URI``
when set): connection errors, credentials from the environment, the managed server's folder
across a restart."""

from __future__ import annotations

import pytest

from envsched_gnn.graph_store.arcadedb import free_port
from envsched_gnn.graph_store.connect import connect_store, open_store
from envsched_gnn.graph_store.errors import StoreError
from envsched_gnn.observations import Observation
from tests.envs.handmade_pool import handmade_pool

pytestmark = pytest.mark.store


def test_wrong_credentials_give_a_clear_error(store_server) -> None:
    user = store_server.auth[0]
    wrong = connect_store(store_server.uri, (user, "not-the-password"), store_server.database)
    with pytest.raises(StoreError, match="rejected the credentials"), wrong:
        pass


def test_unknown_database_gives_a_clear_error(store_server) -> None:
    """verify_connectivity does not open a database: the constraints, the first work in it, do."""
    unknown = connect_store(store_server.uri, store_server.auth, "no-such-database")
    with pytest.raises(StoreError, match="refused database 'no-such-database'"), unknown:
        pass


def test_unreachable_server_gives_a_clear_error() -> None:
    nowhere = connect_store(f"bolt://127.0.0.1:{free_port()}", ("root", "whatever1"), "envsched")
    with pytest.raises(StoreError, match="cannot reach"), nowhere:
        pass


def test_open_store_uri_needs_password_from_environment(monkeypatch) -> None:
    monkeypatch.delenv("NEO4J_PASSWORD", raising=False)
    with pytest.raises(StoreError, match="NEO4J_PASSWORD"), open_store("bolt://127.0.0.1:1"):
        pass


@pytest.mark.slow  # a managed server started twice
@pytest.mark.managed
def test_observations_survive_a_restart_of_the_managed_server(tmp_path) -> None:
    folder = tmp_path / "store"
    with open_store(folder) as first:
        first.write_pool(handmade_pool())
        first.write_observations([Observation("clinic-move", 2, (0.0, 1.0))])
        assert first.server is not None and first.server.running
    assert (folder / "root_password").stat().st_mode & 0o777 == 0o600
    with open_store(folder) as second:
        assert second.read_observations() == [Observation("clinic-move", 2, (0.0, 1.0))]
        assert second.write_observations([Observation("clinic-move", 2, (0.0, 1.0))]) == 0
        assert second.count_observations() == 1
