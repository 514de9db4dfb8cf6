"""User errors and the checks that raise them: one ``error:`` line, bounds, paths."""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

from envsched_gnn.validation import (
    ConfigError,
    PathError,
    UsageError,
    UserError,
    check_bounds,
    check_paths,
    config_error,
    fail,
)


def test_fail_names_the_error_on_stderr_and_gives_the_exit_status(capsys):
    assert fail("--step must be >= 0, got -1") == 2
    assert fail(ValueError("no such file"), 1) == 1
    assert capsys.readouterr() == ("", "error: --step must be >= 0, got -1\nerror: no such file\n")


@dataclass
class _Bounded:
    """Every kind of bound :func:`check_bounds` checks, each field at its edge."""

    count: int = 1
    scale: float = 1e-9
    weight: float = 0.0
    floor: int = 64
    share: float = 1.0
    clip: float = 0.5
    cap: float = 0.25

    def __post_init__(self) -> None:
        check_bounds(
            self,
            integers=("count",),
            finite=("scale",),
            positive=("scale",),
            non_negative=("weight",),
            at_least={"count": 1, "floor": 64},
            unit=("share",),
            open_unit=("clip",),
            within={"cap": (0.0, 0.25)},
        )


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("count", 2.0, "an integer"),
        ("count", True, "an integer"),
        ("count", 0, "a number >= 1"),
        ("scale", float("inf"), "a finite number"),
        ("scale", 0.0, "a number > 0"),
        ("weight", -0.5, "a number >= 0"),
        ("weight", float("nan"), "a number >= 0"),
        ("weight", "1", "a number >= 0"),
        ("floor", 63, "a number >= 64"),
        ("share", 1.5, "a number in [0, 1]"),
        ("clip", 1.0, "a number in (0, 1)"),
        ("cap", 0.3, "a number in [0, 0.25]"),
    ],
)
def test_a_value_out_of_bounds_names_the_class_field_value_and_bound(field, value, expected):
    with pytest.raises(ValueError) as raised:
        _Bounded(**{field: value})
    assert str(raised.value) == f"_Bounded.{field} = {value!r}, expected {expected}"


def test_values_at_the_edges_of_their_bounds_pass():
    assert _Bounded() == _Bounded(1, 1e-9, 0.0, 64, 1.0, 0.5, 0.25)


def test_a_config_error_is_the_same_message():
    error = config_error(_Bounded(), "cap", 2, "<= clip")
    assert isinstance(error, ValueError) and str(error) == "_Bounded.cap = 2, expected <= clip"


def test_an_optional_field_may_be_none_and_a_sequence_is_checked_item_by_item():
    @dataclass
    class _Temperatures:
        temperatures: tuple[float, ...] | None = None

        def __post_init__(self) -> None:
            check_bounds(self, positive=("temperatures",), optional=("temperatures",))

    assert _Temperatures().temperatures is None
    assert _Temperatures((0.5, 1.0)).temperatures == (0.5, 1.0)
    with pytest.raises(ConfigError, match=r"temperatures = \(0.5, -1.0\), expected a number > 0"):
        _Temperatures((0.5, -1.0))


def test_every_user_error_is_a_user_error_with_its_exit_status():
    from envsched_gnn.envs.pool_parse import PoolError
    from envsched_gnn.graph_store.errors import StoreError
    from envsched_gnn.scheduler.base import SchedulerError

    assert issubclass(ConfigError, UsageError) and issubclass(ConfigError, ValueError)
    assert ConfigError("x").exit_status == UsageError.exit_status == 2
    for error in (PoolError, StoreError, SchedulerError):
        assert issubclass(error, UserError) and error("x").exit_status == 1


def test_paths_are_checked_by_kind_and_named_as_the_user_knows_them(tmp_path):
    folder, file = tmp_path / "pool", tmp_path / "graph.json"
    folder.mkdir()
    file.write_text("{}")
    check_paths(
        folders={"--pool": folder},
        files={"--graph": file, "--history": None},
        out_folders={"--out": tmp_path / "new" / "run", "--cache": folder},
        out_files={"--json": tmp_path / "new" / "a.json", "--report": file},
    )
    cases = [
        ({"folders": {"--pool": file}}, f"--pool {str(file)!r}: expected an existing folder"),
        ({"files": {"--graph": folder}}, f"--graph {str(folder)!r}: expected an existing file"),
        ({"folders": {"--world": [folder, tmp_path / "x"]}}, "--world"),
        ({"out_folders": {"--out": file}}, "expected a folder to write (it is a file)"),
        ({"out_files": {"--json": folder}}, "expected a file to write (it is a folder)"),
        ({"out_folders": {"--out": file / "run"}}, f"a path under a folder ({file} is a file)"),
    ]
    for kinds, message in cases:
        with pytest.raises(PathError) as raised:
            check_paths(**kinds)
        assert message in str(raised.value)


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into any folder")
def test_an_output_under_a_folder_this_process_cannot_write_is_refused(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(PathError, match="is not writable"):
        check_paths(out_folders={"--out": locked / "run"})
