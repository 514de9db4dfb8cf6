"""The house stays a house: the import-linter contracts in pyproject.toml hold.

``layers``: each package imports only the packages below it (envs -> graph -> graph_build ->
graph_store -> models -> scheduler -> training -> eval -> pipeline -> bench / integrations ->
cli), imports inside functions included. ``acyclic_siblings``: no import circle between sibling
modules or packages at any depth.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp
import tomllib

ROOT = Path(__file__).resolve().parents[1]


def _contracts() -> list[dict]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return config["tool"]["importlinter"]["contracts"]


def test_import_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(lint), "--no-cache", "--config", str(ROOT / "pyproject.toml")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Contracts: {len(_contracts())} kept, 0 broken" in result.stdout


def test_every_top_level_module_is_in_a_layer():
    """A new package cannot sit outside the layering unnoticed."""
    layers = next(c for c in _contracts() if c["type"] == "layers")["layers"]
    layered = {name.strip() for layer in layers for name in layer.split("|")}
    graph = grimp.build_graph("envsched_gnn", cache_dir=None)
    top_level = {m.split(".")[1] for m in graph.find_children("envsched_gnn")}
    assert top_level == layered
