"""Atomic JSON writes (the content, the file mode, a failed write that changes nothing) and
the canonical-JSON hash."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from envsched_gnn.json_files import canonical_sha256, write_json_atomically

ROOT = Path(__file__).resolve().parents[1]


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


def test_a_write_killed_before_the_rename_leaves_the_previous_file(tmp_path):
    """A real crash: a process killed after the temporary file is written and before the
    rename leaves the previous file whole (and its complete temporary beside it)."""
    path = write_json_atomically(tmp_path / "state.json", {"step": 1})
    child = textwrap.dedent(
        f"""
        import os, signal
        from envsched_gnn import json_files
        json_files.os.replace = lambda *args: os.kill(os.getpid(), signal.SIGKILL)
        json_files.write_json_atomically({str(path)!r}, {{"step": 2}})
        """
    )
    done = subprocess.run([sys.executable, "-c", child], cwd=ROOT, timeout=60)
    assert done.returncode == -signal.SIGKILL
    assert json.loads(path.read_text()) == {"step": 1}
    (temporary,) = tmp_path.glob(".state.json.*.tmp")
    assert json.loads(temporary.read_text()) == {"step": 2}


def test_non_finite_floats_as_null_on_request(tmp_path):
    payload = {"nan": float("nan"), "rows": [(1.5, float("inf")), -float("inf")], "n": 2}
    path = write_json_atomically(tmp_path / "f.json", payload, indent=None, non_finite_as_null=True)
    assert path.read_text() == '{"nan": null, "rows": [[1.5, null], null], "n": 2}\n'
    write_json_atomically(path, {"nan": float("nan")}, indent=None)
    assert path.read_text() == '{"nan": NaN}\n'


def test_the_canonical_hash_is_of_sorted_compact_utf8_json():
    """Pinned: finished ablation runs and packaged policies are keyed by these values."""
    value = {"b": [1, "\u00e9"], "a": None}
    # SHA-256 of the UTF-8 bytes of {"a":null,"b":[1,"é"]}
    digest = "f8f17faab95c024891d173fa43442b0e52007736a1f36715ac721ab22deeefc5"
    assert canonical_sha256(value) == digest
    assert canonical_sha256(dict(reversed(value.items()))) == digest
