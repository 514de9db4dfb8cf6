"""The ``envsched-gnn`` command line: every group and command answers ``--help``."""

import argparse

import pytest

from envsched_gnn.cli import GROUPS, build_parser, main


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return {
        name: sub
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for name, sub in action.choices.items()
    }


def _parsers() -> dict[tuple[str, ...], argparse.ArgumentParser]:
    """Every group and command (its argv words) and its parser, from one parser build."""
    found = {}
    for name, sub in _subcommands(build_parser()).items():
        found[(name,)] = sub
        found.update({(name, command): p for command, p in _subcommands(sub).items()})
    return found


PARSERS = _parsers()
COMMANDS = {argv: p for argv, p in PARSERS.items() if not _subcommands(p)}
"""The commands that run something (no sub-commands of their own)."""


def _commands() -> list[list[str]]:
    return [list(argv) for argv in PARSERS]


def test_the_documented_commands_and_groups_are_registered():
    commands = {" ".join(c) for c in _commands()}
    expected = {
        "run", "predict", "explain", "select",
        "pool generate", "pool check", "pool import-envscaler",
        "graph build", "graph export", "graph add-env",
        "train sft", "train grpo",
        "eval policy", "eval compare-predictors", "eval graph-signal", "eval ablate",
        "bench predictor", "bench scheduler",
    }  # fmt: skip
    assert expected <= commands
    assert set(GROUPS) <= commands


@pytest.mark.parametrize("command", _commands(), ids=" ".join)
def test_every_command_has_help(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([*command, "--help"])
    assert exit_info.value.code == 0
    assert "usage: envsched-gnn " + " ".join(command) in capsys.readouterr().out


def test_a_group_without_command_prints_its_help_and_fails(capsys):
    assert main(["pool"]) == 2
    assert "generate" in capsys.readouterr().out


@pytest.mark.parametrize(
    "name,parser",
    [(" ".join(argv), p) for argv, p in COMMANDS.items()],
    ids=[" ".join(argv) for argv in COMMANDS],
)
def test_every_flag_takes_its_help_from_a_config_field(name, parser):
    """Flags are generated from documented config dataclasses (envsched_gnn.config_cli): each
    flag's help starts with its field's docstring, so the two cannot drift apart."""
    from envsched_gnn.config_cli import field_docs

    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        flag = action.option_strings or action.dest
        cls = getattr(action, "config_class", None)
        assert cls is not None, f"{name}: {flag} is not generated from a config field"
        doc = field_docs(cls)[action.config_field.rsplit(".", 1)[1]]
        assert action.help.replace("%%", "%").startswith(doc), f"{name}: {flag}"
