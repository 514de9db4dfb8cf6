"""``envsched-gnn bench runtime`` runs end to end on the hand-made pool and prints its numbers."""

from __future__ import annotations

import json

from envsched_gnn.cli import main
from tests.envs.handmade_pool import write_handmade_pool


def test_bench_runtime_prints_throughput_and_the_sandbox_cost(tmp_path, capsys):
    pool = write_handmade_pool(tmp_path / "pool")
    argv = ["bench", "runtime", "--pool", str(pool), "--episodes", "24", "--calls", "2"]
    assert main([*argv, "--repeats", "1", "--workers", "2"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["episodes"] == 24 and result["calls_per_episode"] == 2
    assert result["sandboxed"] is True
    assert result["workers_used"] == 2  # one per environment: half of the episodes each
    for name in ("reset_s", "calls_s", "score_s", "warmup_s", "worker_start_s"):
        assert result[name] > 0, name
    assert result["calls_per_s"] > 0 and result["episodes_per_s_end_to_end"] > 0
