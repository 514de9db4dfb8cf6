"""The ``envsched-gnn`` command line: every group and command answers ``--help``."""

import argparse

import pytest

from envsched_gnn.cli import GROUPS, build_parser, main


def _commands() -> list[list[str]]:
    parser = build_parser()
    root = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found = []
    for name, sub in root.choices.items():
        found.append([name])
        for action in sub._actions:
            if isinstance(action, argparse._SubParsersAction):
                found.extend([name, command] for command in action.choices)
    return found


def test_the_issue_commands_are_all_registered():
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


def _command_parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    root = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    found = []
    for name, sub in root.choices.items():
        groups = [a for a in sub._actions if isinstance(a, argparse._SubParsersAction)]
        if not groups:
            found.append((name, sub))
        for group in groups:
            found.extend((f"{name} {command}", p) for command, p in group.choices.items())
    return found


@pytest.mark.parametrize("name,parser", _command_parsers(), ids=[n for n, _ in _command_parsers()])
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
