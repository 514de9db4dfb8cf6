"""A pool streamed from disk environment by environment equals the pool loaded whole."""

from __future__ import annotations

import json

import pytest

from envsched_gnn.envs.generator.tasks import generate_replicated_pool, write_replicated_pool
from envsched_gnn.envs.pool_io import load_pool, save_pool
from envsched_gnn.envs.pool_parse import PoolError
from envsched_gnn.envs.pool_stream import PoolStream
from tests.envs.handmade_pool import write_handmade_pool


def assert_same_pool(stream: PoolStream, pool) -> None:
    assert stream.envs == pool.envs
    assert stream.tool_effects == pool.tool_effects
    assert stream.task_refs() == pool.task_refs()
    for env_id in pool.envs:
        assert stream.tasks_of(env_id) == pool.tasks_of(env_id), env_id
    assert [task for _, tasks in stream.env_tasks() for task in tasks] == sorted(
        pool.tasks, key=lambda t: list(pool.envs).index(t.env_id)
    )


@pytest.mark.parametrize("layout", ["json", "jsonl"])
def test_streamed_pool_equals_the_loaded_pool(tmp_path, layout) -> None:
    folder = write_handmade_pool(tmp_path / "pool")  # tools as a JSON string in one env
    tasks = json.loads((folder / "tasks.json").read_text())
    tasks[2]["task"] += " — für Zoë, 日本"  # multi-byte UTF-8: offsets are in bytes
    (folder / "tasks.json").write_text(json.dumps(tasks, ensure_ascii=False, indent=1))
    if layout == "jsonl":
        (folder / "tasks.json").unlink()
        lines = [json.dumps(t, ensure_ascii=False) for t in tasks]
        (folder / "tasks.jsonl").write_text("\n".join(lines[:2]) + "\n\n" + "\n".join(lines[2:]))
    assert_same_pool(PoolStream(folder), load_pool(folder))


def test_replicated_pool_written_streamed_equals_the_generated_pool(tmp_path) -> None:
    folder = write_replicated_pool(tmp_path / "big", n_envs=53, tasks_per_env=4, seed=3)
    pool = generate_replicated_pool(53, 4, seed=3)
    assert load_pool(folder).tasks == pool.tasks
    assert_same_pool(PoolStream(folder), pool)
    save_pool(pool, tmp_path / "array")  # the same pool as one tasks.json array
    assert_same_pool(PoolStream(tmp_path / "array"), pool)


def test_streamed_pool_reports_the_defects_load_pool_reports(tmp_path) -> None:
    folder = write_handmade_pool(tmp_path / "pool")
    tasks = json.loads((folder / "tasks.json").read_text())
    tasks[1]["env_id"] = "nowhere"
    tasks[3]["task_id"] = tasks[0]["task_id"]
    (folder / "tasks.json").write_text(json.dumps(tasks, indent=2))
    with pytest.raises(PoolError) as loaded:
        load_pool(folder)
    with pytest.raises(PoolError) as streamed:
        PoolStream(folder)
    assert streamed.value.errors == loaded.value.errors
    (folder / "tasks.json").write_text(json.dumps(tasks)[:-40])
    with pytest.raises(PoolError, match="invalid JSON"):
        PoolStream(folder)


def test_the_task_array_is_read_across_chunk_boundaries(tmp_path, monkeypatch) -> None:
    import envsched_gnn.envs.pool_stream as pool_stream

    folder = write_handmade_pool(tmp_path / "pool")
    tasks = json.loads((folder / "tasks.json").read_text())
    tasks[0]["task"] += " ü" * 40  # multi-byte characters split between chunks
    (folder / "tasks.json").write_text(json.dumps(tasks, ensure_ascii=False))
    monkeypatch.setattr(pool_stream, "READ_BYTES", 7)
    assert_same_pool(PoolStream(folder), load_pool(folder))


def test_a_task_file_changed_after_the_scan_is_an_error_not_wrong_tasks(tmp_path) -> None:
    folder = write_replicated_pool(tmp_path / "pool", 2, 5, seed=0)
    stream = PoolStream(folder)
    env_id = next(iter(stream.envs))
    assert len(stream.tasks_of(env_id)) == 5
    path = folder / "tasks.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(lines[1:] + lines[:1]), encoding="utf-8")  # same size, moved
    with pytest.raises(PoolError, match="changed since it was scanned"):
        stream.tasks_of(env_id)
