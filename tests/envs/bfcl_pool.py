"""The compatibility pool: BFCL's multi-turn base category (bfcl-eval 2026.3.23, vendored under
``tests/envs/data``; see its ``SOURCE.md``), converted by ``pool import-bfcl``."""

from __future__ import annotations

from pathlib import Path

from envsched_gnn.envs.bfcl import import_bfcl
from envsched_gnn.envs.pool import Pool
from envsched_gnn.envs.pool_io import load_pool

VENDORED = Path(__file__).parent / "data" / "bfcl-eval-2026.3.23"


def write_bfcl_pool(out: Path) -> Pool:
    """Converts the vendored files into ``out`` and reads the pool back as users get it."""
    import_bfcl(VENDORED, out)
    return load_pool(out)
