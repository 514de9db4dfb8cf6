"""The production layout in docker-compose.yml and the Dockerfile stay valid and safe.

No container engine runs on the development machines, so these checks read the files.
"""

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_neo4j_service_is_neo4j5_with_auth_from_environment_and_loopback_ports():
    neo4j = _compose()["services"]["neo4j"]
    assert neo4j["image"].startswith("neo4j:5")
    assert "${NEO4J_PASSWORD" in neo4j["environment"]["NEO4J_AUTH"]
    assert all(port.startswith("127.0.0.1:") for port in neo4j["ports"])
    assert "healthcheck" in neo4j and neo4j["healthcheck"]["test"]
    volume = neo4j["volumes"][0].split(":")[0]
    assert volume in _compose()["volumes"]


def test_trainer_runs_the_main_job_against_neo4j_once_healthy():
    trainer = _compose()["services"]["trainer"]
    assert trainer["build"] == "."
    assert trainer["depends_on"]["neo4j"]["condition"] == "service_healthy"
    assert trainer["environment"]["NEO4J_URI"].startswith("bolt://neo4j:")
    assert trainer["command"][:2] == ["envsched-gnn", "run"]
    assert (ROOT / "Dockerfile").read_text().count("torch==2.13.0") == 1


def test_no_credentials_are_written_in_the_repository():
    text = (ROOT / "docker-compose.yml").read_text()
    assert "NEO4J_PASSWORD:?" in text
    assert "neo4j/neo4j" not in text
