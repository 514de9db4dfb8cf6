"""``run`` and ``train demo-policy``: their flags build the job's options (no job is run)."""

from __future__ import annotations

from envsched_gnn.cli import build_parser, main
from envsched_gnn.config_cli import config_from_args
from envsched_gnn.pipeline.commands import DemoPolicyArgs
from envsched_gnn.pipeline.job import RunOptions


def test_run_flags_build_the_run_options():
    parser = build_parser()
    assert config_from_args(RunOptions, parser.parse_args(["run"])) == RunOptions()
    argv = ["run", "--preset", "paper", "--seed", "3", "--out", "o", "--store", "s"]
    argv += ["--reset-store", "--steps", "5", "--lr", "0.1", "--schedulers", " random, envsched,"]
    argv += ["--model", "m", "--accelerator", "cpu", "--workers", "2"]
    assert config_from_args(RunOptions, parser.parse_args(argv)) == RunOptions(
        preset="paper",
        seed=3,
        out="o",
        store="s",
        reset_store=True,
        steps=5,
        schedulers=["random", "envsched"],
        model="m",
        accelerator="cpu",
        lr=0.1,
        workers=2,
    )


def test_run_refuses_unknown_schedulers_before_doing_anything(capsys, tmp_path):
    assert main(["run", "--schedulers", "envsched,nope", "--out", str(tmp_path / "r")]) == 2
    assert capsys.readouterr().err.startswith("error: unknown scheduler 'nope'")
    assert main(["run", "--schedulers", " , ", "--out", str(tmp_path / "r")]) == 2
    assert not (tmp_path / "r").exists()


def test_demo_policy_flags():
    args = build_parser().parse_args(["train", "demo-policy", "--out", "o", "--threads", "2"])
    assert config_from_args(DemoPolicyArgs, args) == DemoPolicyArgs(out="o")
    assert args.threads == 2
