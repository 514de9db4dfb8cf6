"""Worker processes: spawned, one torch thread each, results in the jobs' order."""

from __future__ import annotations

import os

from envsched_gnn.workers import map_in_workers, process_context


def _job(job: int, shared: int) -> tuple[int, int, int]:
    import torch

    return job * shared, torch.get_num_threads(), os.getpid()


def test_every_pool_spawns():
    assert process_context().get_start_method() == "spawn"


def test_jobs_in_two_processes_answer_in_order_with_one_thread_each():
    results = list(map_in_workers(_job, range(6), 10, workers=2))
    assert [value for value, _, _ in results] == [0, 10, 20, 30, 40, 50]
    assert {threads for _, threads, _ in results} == {1}
    assert os.getpid() not in {pid for _, _, pid in results}


def test_one_worker_runs_the_jobs_here():
    assert list(map_in_workers(_job, range(2), 3, workers=1))[1][::2] == (3, os.getpid())
