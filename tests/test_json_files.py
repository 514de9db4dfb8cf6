"""Atomic JSON writes: the content, the file mode, and a failed write that changes nothing."""

from __future__ import annotations

import json
import os

import pytest

from envsched_gnn.json_files import write_json_atomically


def test_writes_the_json_with_a_final_newline_into_a_new_folder(tmp_path):
    path = write_json_atomically(tmp_path / "a" / "b.json", {"é": [1, 2]}, ensure_ascii=False)
    assert path.read_text(encoding="utf-8") == '{\n "é": [\n  1,\n  2\n ]\n}\n'
    write_json_atomically(path, {"x": 1}, indent=None)
    assert path.read_text(encoding="utf-8") == '{"x": 1}\n'


def test_the_file_gets_the_umask_mode_not_mkstemps_0600(tmp_path):
    old = os.umask(0o022)
    try:
        path = write_json_atomically(tmp_path / "f.json", [])
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    path = write_json_atomically(tmp_path / "f.json", {"kept": True})
    with pytest.raises(TypeError):
        write_json_atomically(path, {"bad": object()})
    assert json.loads(path.read_text()) == {"kept": True}
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]
