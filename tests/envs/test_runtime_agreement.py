"""Inside agrees with plain Python: every task's reference and empty-trajectory reward in the
sandbox and with ``--trust-pool`` equals the in-process reference scorer's
(:func:`tests.envs.in_process.in_process_runs`), on real environment code nobody here wrote
(BFCL's API classes) and on the generated 51 x 50 pool."""

from __future__ import annotations

from pathlib import Path

import pytest

from envsched_gnn.envs.generator import generate_pool
from envsched_gnn.envs.pool import Pool
from envsched_gnn.envs.runtime import EnvRuntime
from envsched_gnn.envs.runtime_config import RuntimeConfig
from tests.envs.bfcl_pool import write_bfcl_pool
from tests.envs.in_process import in_process_runs, trusted_rewards


def _agreement(pool: Pool, folder: Path) -> list[float]:
    """Asserts that the three ways score every task alike; returns the reference rewards."""
    references = [(t.task_id, t.reference_solution or []) for t in pool.tasks]
    empties = [(t.task_id, []) for t in pool.tasks]
    plain_reference = [run.reward for run in in_process_runs(pool, references)]
    plain_empty = [run.reward for run in in_process_runs(pool, empties)]
    with EnvRuntime(pool, RuntimeConfig(workers=2)) as runtime:
        sandboxed_reference = runtime.replay(references)
        sandboxed_empty = runtime.replay(empties)
    assert not [s.unscored for s in sandboxed_reference + sandboxed_empty if s.unscored]
    assert [s.reward for s in sandboxed_reference] == plain_reference
    assert [s.reward for s in sandboxed_empty] == plain_empty
    trusted_reference, trusted_empty = trusted_rewards(pool, folder)
    assert trusted_reference == plain_reference
    assert trusted_empty == plain_empty
    return plain_reference


@pytest.mark.slow  # every task scored three ways
def test_bfcl_rewards_agree_in_process_sandboxed_and_trusted(tmp_path):
    pool = write_bfcl_pool(tmp_path / "bfcl")
    assert set(_agreement(pool, tmp_path)) == {1.0}


@pytest.mark.slow  # every task scored three ways
def test_generated_pool_rewards_agree_in_process_sandboxed_and_trusted(tmp_path):
    pool = generate_pool(n_envs=51, tasks_per_env=50, seed=0)
    assert set(_agreement(pool, tmp_path)) == {1.0}
