"""A pool folder read one environment at a time, so memory does not grow with the pool.

:class:`PoolStream` scans the task file once (``tasks.jsonl`` by line, ``tasks.json`` by array
item), validating every task as ``load_pool`` does but keeping only its id, environment and
byte offset; :meth:`PoolStream.tasks_of` then reads one environment's tasks back. The tasks
equal ``load_pool``'s (tested). The task file must not change while the pool is open.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from envsched_gnn.envs.pool import Environment, Task
from envsched_gnn.envs.pool_io import ENVS_FILE, TASKS_FILE, TASKS_JSONL_FILE, read_json
from envsched_gnn.envs.pool_parse import PoolError, parse_envs, parse_task
from envsched_gnn.envs.tool_effects import read_tool_effects, typical_effects

READ_BYTES = 8 << 20
"""Bytes of ``tasks.json`` decoded at a time while scanning it."""
CHECK_CACHE = 100_000
"""Check sources whose verdict the scan remembers (then it forgets them all): repeated
sources are checked once, and the 6M sources of a 1M-task pool are not all held."""


class PoolStream:
    """The pool in ``directory``, its tasks read from disk environment by environment (a
    :class:`~envsched_gnn.envs.pool.PoolSource`)."""

    def __init__(self, directory: str | Path) -> None:
        directory = Path(directory)
        envs_path = directory / ENVS_FILE
        tasks_path, jsonl_path = directory / TASKS_FILE, directory / TASKS_JSONL_FILE
        if not envs_path.is_file():
            raise PoolError([f"{envs_path}: missing (a pool needs {ENVS_FILE})"])
        if tasks_path.is_file() == jsonl_path.is_file():
            raise PoolError([f"{directory}: needs exactly one of {TASKS_FILE}, {TASKS_JSONL_FILE}"])
        self.path = jsonl_path if jsonl_path.is_file() else tasks_path
        errors: list[str] = []
        envs_raw = read_json(envs_path)
        self.envs, self._classes = parse_envs(envs_raw, str(envs_path), errors)
        self._declared = set(envs_raw) if isinstance(envs_raw, dict) else set()
        self._check_cache: dict[str, str | None] = {}  # bounded: CHECK_CACHE entries
        self._refs: list[tuple[str, str]] = []
        self._where: dict[str, list[tuple[int, int, int]]] = {}  # env -> (offset, length, #)
        seen: dict[str, int] = {}
        items = _jsonl_items(self.path) if self.path == jsonl_path else _array_items(self.path)
        for index, (offset, length, item) in enumerate(items):
            if len(self._check_cache) > CHECK_CACHE:
                self._check_cache.clear()
            task = self._parse(item, index, seen, errors)
            if task is not None:
                self._refs.append((task.task_id, task.env_id))
                self._where.setdefault(task.env_id, []).append((offset, length, index))
        if errors:
            raise PoolError(errors)
        self._check_cache = _CHECKED  # every check of the file is known sound from here on
        self._stamp = _stamp(self.path)
        try:
            self.tool_effects = typical_effects(read_tool_effects(directory))
        except ValueError as error:
            raise PoolError([str(error)]) from error

    def _parse(self, item: Any, index: int, seen: dict[str, int], errors: list[str]):
        """The checked task of item ``index`` (None with its defects added to ``errors``)."""
        context = (self.envs, self._classes, self._declared, self._check_cache)
        return parse_task(item, index, str(self.path), context, seen, errors)

    def __len__(self) -> int:
        return len(self._refs)

    def task_refs(self) -> list[tuple[str, str]]:
        """``(task_id, env_id)`` of every task, in file order."""
        return list(self._refs)

    def tasks_of(self, env_id: str) -> list[Task]:
        """The tasks of ``env_id`` in file order, read from the task file (whose checks the
        scan compiled, so they are not compiled again)."""
        if _stamp(self.path) != self._stamp:
            raise PoolError([f"{self.path} changed since it was scanned; open the pool again"])
        tasks = []
        with self.path.open("rb") as handle:
            for offset, length, index in self._where.get(env_id, ()):
                handle.seek(offset)
                item = json.loads(handle.read(length))
                errors: list[str] = []
                task = self._parse(item, index, {}, errors)
                if task is None:  # the file changed since it was scanned
                    raise PoolError([f"{self.path} changed while it was read", *errors])
                tasks.append(task)
        return tasks

    def env_tasks(self) -> Iterator[tuple[Environment, list[Task]]]:
        """Every environment with tasks and its tasks, environments in file order."""
        for env_id in self._where:
            yield self.envs[env_id], self.tasks_of(env_id)


class _Checked(dict):
    """The check cache once a scan has checked every source of the file: no defects."""

    def __contains__(self, source: object) -> bool:
        return True

    def __getitem__(self, source: str) -> None:
        return None


_CHECKED = _Checked()


def _stamp(path: Path) -> tuple[int, int]:
    """Size and modification time of a file, to tell that it changed."""
    stat = path.stat()
    return stat.st_size, stat.st_mtime_ns


def _jsonl_items(path: Path) -> Iterator[tuple[int, int, Any]]:
    """``(byte offset, byte length, decoded item)`` of each non-blank line."""
    offset = 0
    errors = []
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                try:
                    yield offset, len(line), json.loads(line)
                except (json.JSONDecodeError, UnicodeDecodeError) as error:
                    errors.append(f"{path}: line {number}: invalid JSON: {error}")
            offset += len(line)
    if errors:
        raise PoolError(errors)


def _array_items(path: Path) -> Iterator[tuple[int, int, Any]]:
    """``(byte offset, byte length, decoded item)`` of each item of the JSON array in ``path``,
    decoded :data:`READ_BYTES` at a time."""
    decoder = json.JSONDecoder()
    text_decoder = codecs.getincrementaldecoder("utf-8")()
    buffer, position, consumed_bytes, at_end = "", 0, 0, False
    started = False
    with path.open("rb") as handle:

        def more() -> bool:
            nonlocal buffer, position, at_end
            chunk = handle.read(READ_BYTES)
            at_end = not chunk
            buffer = buffer[position:] + text_decoder.decode(chunk, final=at_end)
            position = 0
            return not at_end

        more()
        while True:
            while position < len(buffer) and buffer[position] in " \t\r\n,[]":
                if buffer[position] == "[":
                    started = True
                elif buffer[position] == "]":
                    return
                consumed_bytes += 1  # all of these are one byte in UTF-8
                position += 1
            if position >= len(buffer):
                if not more():
                    if not started:
                        raise PoolError([f"{path}: expected a list of tasks"])
                    return
                continue
            if not started:
                raise PoolError([f"{path}: expected a list of tasks"])
            try:
                item, end = decoder.raw_decode(buffer, position)
            except json.JSONDecodeError as error:
                if more():
                    continue
                raise PoolError([f"{path}: invalid JSON in the task list: {error.msg}"]) from None
            length = len(buffer[position:end].encode("utf-8"))
            yield consumed_bytes, length, item
            consumed_bytes += length
            position = end
