"""Flags generated from documented config dataclasses: help, types, defaults, round trip."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest

from envsched_gnn.config_cli import add_config_flags, config_from_args, field_docs


@dataclass
class _Base:
    seed: int = 0
    """Seed of everything random."""


@dataclass
class _Config(_Base):
    pool: Path = Path("pool")
    """Pool folder (envs.json, tasks.json): 100% of it is read."""
    lr: float = 1e-4
    """AdamW learning rate, spread over
    two lines."""
    store: str = "s"
    """Like :class:`~envsched_gnn.graph_store.store.GraphStore` or :attr:`Runtime.x`: ``s``."""
    out: str | None = None
    """Run folder."""
    k_grid: bool = True
    """Sweep K."""
    freeze: bool = False
    """Freeze the embeddings."""
    halves: tuple[float, ...] = (0.5, 1.0)
    """Half-lives."""
    mode: Literal["a", "b"] = "a"
    """Mode."""
    names: list[str] = field(default_factory=lambda: ["x"])
    """Names."""


@dataclass
class _Undocumented:
    steps: int = 1


@dataclass
class _Required:
    model: str
    """Policy folder."""


def _parser(**kwargs) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    add_config_flags(parser, _Config, **kwargs)
    return parser


def test_field_docs_come_from_attribute_docstrings_including_base_classes():
    docs = field_docs(_Config)
    assert docs["seed"] == "Seed of everything random."
    assert docs["lr"] == "AdamW learning rate, spread over two lines."
    assert docs["store"] == "Like envsched_gnn.graph_store.store.GraphStore or Runtime.x: s."


def test_defaults_types_and_round_trip():
    args = _parser().parse_args([])
    assert config_from_args(_Config, args) == _Config()
    args = _parser().parse_args(
        ["--lr", "0.5", "--seed", "3", "--no-k-grid", "--freeze", "--halves", "2", "4"]
        + ["--mode", "b", "--out", "o", "--names", "p", "q", "--pool", "elsewhere"]
    )
    got = config_from_args(_Config, args)
    assert got == _Config(
        seed=3,
        pool=Path("elsewhere"),
        lr=0.5,
        out="o",
        k_grid=False,
        freeze=True,
        halves=(2.0, 4.0),
        mode="b",
        names=["p", "q"],
    )
    with pytest.raises(SystemExit):
        _parser().parse_args(["--mode", "c"])


def test_help_is_the_docstring_with_the_default():
    actions = {a.dest: a for a in _parser()._actions}
    assert (
        actions["lr"].help == "AdamW learning rate, spread over two lines. (default: %(default)s)"
    )
    assert actions["lr"].config_field == "_Config.lr"
    assert actions["out"].help == "Run folder."
    assert "100%%" in actions["pool"].help
    assert actions["k_grid"].option_strings == ["--no-k-grid"]
    assert actions["k_grid"].help == "Sweep K. (on by default; this flag turns it off)"
    help_text = " ".join(_parser().format_help().split())
    assert "(default: 0.0001)" in help_text and "100% of it" in help_text


def test_overrides_selection_flags_positionals_and_prefix():
    parser = argparse.ArgumentParser()
    added = add_config_flags(
        parser,
        _Config,
        fields=["lr", "mode", "pool"],
        exclude=["mode"],
        defaults={"lr": 0.25},
        flags={"lr": "--learning-rate"},
        positional=["pool"],
        dest_prefix="grpo_",
    )
    assert added == ["lr", "pool"]
    args = parser.parse_args(["somewhere"])
    assert (args.grpo_lr, args.grpo_pool) == (0.25, Path("somewhere"))
    assert "--learning-rate LR" in parser.format_usage()
    got = config_from_args(_Config, args, dest_prefix="grpo_", base=_Config(seed=7), out="x")
    assert got == _Config(seed=7, lr=0.25, pool=Path("somewhere"), out="x")


def test_required_field_is_a_required_option():
    parser = argparse.ArgumentParser()
    add_config_flags(parser, _Required)
    with pytest.raises(SystemExit):
        parser.parse_args([])
    assert config_from_args(_Required, parser.parse_args(["--model", "m"])) == _Required("m")


def test_mistakes_are_clear_errors():
    with pytest.raises(ValueError, match="no docstring"):
        add_config_flags(argparse.ArgumentParser(), _Undocumented)
    with pytest.raises(ValueError, match="no field"):
        add_config_flags(argparse.ArgumentParser(), _Config, fields=["nope"])


@dataclass
class _Extras:
    step: int = 0
    """Scheduling step."""
    sizes: list[int] | None = None
    """Pool sizes."""
    grid: bool | None = None
    """Run the grid (absent: the learner decides)."""
    folder: str = "."
    """Pool folder."""


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text}")
    return value


def test_types_metavars_repeatable_and_optional_switch():
    parser = argparse.ArgumentParser()
    add_config_flags(
        parser,
        _Extras,
        types={"step": _non_negative},
        metavars={"folder": "DIR"},
        repeatable=["sizes"],
        positional=["folder"],
    )
    args = parser.parse_args(["here", "--step", "3", "--sizes", "1", "--sizes", "2", "--no-grid"])
    assert config_from_args(_Extras, args) == _Extras(
        step=3, sizes=[1, 2], grid=False, folder="here"
    )
    assert config_from_args(_Extras, parser.parse_args(["x", "--grid"])).grid is True
    assert config_from_args(_Extras, parser.parse_args(["x"])) == _Extras(folder="x")
    with pytest.raises(SystemExit):
        parser.parse_args(["x", "--step", "-1"])
    assert "usage: " in parser.format_usage() and " DIR" in parser.format_usage()
    actions = {a.dest: a for a in parser._actions}
    assert actions["grid"].option_strings == ["--grid", "--no-grid"]
    assert actions["sizes"].help == "Pool sizes."


def test_only_a_list_defaulting_to_none_repeats():
    with pytest.raises(TypeError, match="repeats"):
        add_config_flags(argparse.ArgumentParser(), _Config, fields=["names"], repeatable=["names"])
    with pytest.raises(ValueError, match="no field"):
        add_config_flags(argparse.ArgumentParser(), _Extras, types={"nope": int})


def test_a_parser_turns_one_text_into_the_whole_list():
    parser = argparse.ArgumentParser()
    add_config_flags(
        parser,
        _Config,
        fields=["names"],
        defaults={"names": "x,y"},  # a text default goes through the parser too
        parsers={"names": lambda text: [n.strip() for n in text.split(",") if n.strip()]},
    )
    assert parser.parse_args([]).names == ["x", "y"]
    args = parser.parse_args(["--names", " p, q,"])
    assert config_from_args(_Config, args) == _Config(names=["p", "q"])
    assert "Names. (default: x,y)" in " ".join(parser.format_help().split())
    with pytest.raises(ValueError, match="no field"):
        add_config_flags(argparse.ArgumentParser(), _Config, parsers={"nope": str})


def test_a_repeatable_tuple_collects_one_value_per_option():
    parser = argparse.ArgumentParser()
    add_config_flags(
        parser,
        _Config,
        fields=["halves"],
        defaults={"halves": None},
        flags={"halves": "--half"},
        repeatable=["halves"],
        metavars={"halves": "H"},
    )
    assert parser.parse_args([]).halves is None
    args = parser.parse_args(["--half", "2", "--half", "4"])
    assert config_from_args(_Config, args).halves == (2.0, 4.0)
    assert "--half H" in parser.format_usage()
