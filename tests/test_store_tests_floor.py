"""``ENVSCHED_STORE_TESTS_FLOOR`` (tests/conftest.py), which the Neo4j pass of ``.ci/run`` sets:
a pytest run in which fewer store tests passed fails, one whose store tests were all skipped
too. Each case is a real pytest run in a process of its own, on tests that start no server."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import FLOOR_VARIABLE

ROOT = Path(__file__).resolve().parents[1]
QUICK_STORE_TEST = "tests/graph_store/test_connect.py::test_unreachable_server_gives_a_clear_error"
NEO4J_ONLY_TEST = (
    "tests/graph_store/test_neo4j_import.py::"
    "test_neo4j_admin_imports_the_files_and_the_store_reads_the_graph_built"
)


def pytest_run(test: str, floor: int) -> subprocess.CompletedProcess:
    environment = {
        name: value for name, value in os.environ.items() if not name.startswith("NEO4J_")
    }
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "store", test],
        env={**environment, FLOOR_VARIABLE: str(floor), "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_run_at_the_floor_passes_and_one_below_it_fails() -> None:
    at_floor = pytest_run(QUICK_STORE_TEST, 1)
    assert at_floor.returncode == 0, at_floor.stdout[-2000:]
    below = pytest_run(QUICK_STORE_TEST, 2)
    assert below.returncode == 1, below.stdout[-2000:]
    assert f"1 store tests passed, fewer than {FLOOR_VARIABLE}=2" in below.stdout


def test_a_run_whose_store_tests_were_all_skipped_fails() -> None:
    skipped = pytest_run(NEO4J_ONLY_TEST, 1)  # no NEO4J_URI: skipped, with the reason
    assert "1 skipped" in skipped.stdout
    assert skipped.returncode == 1, skipped.stdout[-2000:]
    assert f"0 store tests passed, fewer than {FLOOR_VARIABLE}=1" in skipped.stdout


def test_ci_runs_the_readme_command_then_the_neo4j_pass_with_a_floor() -> None:
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    readme = (ROOT / "README.md").read_text().splitlines()
    first = next(line for line in ci if line and not line.startswith(("#", "set ", "cd ")))
    assert first == readme[readme.index("```bash") + 2]  # the README's second command
    floor = re.search(
        rf"^{FLOOR_VARIABLE}=(\d+) \\\n\s+scripts/with_neo4j\.sh .* -m store ",
        "\n".join(ci),
        re.MULTILINE,
    )
    assert floor is not None and int(floor[1]) >= 1
