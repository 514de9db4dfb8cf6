"""Every flag of every command refuses a bad value with one ``error: ...`` line and a non-zero
exit status, before anything expensive starts: no traceback, no policy loaded, no sandbox or
store server started, no run folder written.

The flags come from the parser itself: a flag added later fails
:func:`test_every_flag_that_takes_a_value_has_a_row` until :data:`BAD` holds a row for it (one
line: the command and the flag, the bad value, and the other arguments when the command's
:data:`VALID` ones do not suit it). The error line must name the bad value, and the flag (or
its config field), so that a row cannot pass by failing for another reason.
"""

from __future__ import annotations

import argparse
import shlex
import time
from pathlib import Path
from typing import NamedTuple

import pytest

from envsched_gnn.cli import build_parser, main
from envsched_gnn.graph.task_graph import write_graph
from envsched_gnn.observations import observations_from_rewards, write_history
from tests.envs.handmade_pool import write_handmade_pool
from tests.training.grpo_setup import POOL, handmade_graph

ROOT = Path(__file__).resolve().parents[1]
BFCL = ROOT / "tests" / "envs" / "data" / "bfcl-eval-2026.3.23"
SECONDS = 60.0
"""A hang guard only: a refusal takes milliseconds (a few stat calls and the configs' bounds).
What makes it cheap is checked structurally, by the expensive loaders that fail the row when
called (``nothing_expensive``); timing targets live in benchmarks, not in tests on a loaded
machine."""

VALID = {
    "pool check": "{pool}",
    "pool import-envscaler": "{pool} --out {out}",
    "pool import-bfcl": "{bfcl} --out {out}",
    "pool generate": "--out {out}",
    "graph build": "--pool {pool} --store {out}",
    "graph export": "--out {out}/graph.json --store {out}",
    "graph add-env": "--pool {pool} --store {out}",
    "store query": "'RETURN 1' --store {out}",
    "store export-history": "--out {out}/history.jsonl --store {out}",
    "store import-history": "{history} --store {out}",
    "train sft": "--pool {pool} --out {out}",
    "train grpo": "--pool {pool} --model {model} --out {out} --graph {graph}",
    "train demo-policy": "--out {out}",
    "eval policy": "--pool {pool} --model {model}",
    "eval headroom": "--pool {pool} --model {model} --out {out}",
    "eval compare-predictors": "--history {history} --graph {graph}",
    "eval graph-signal": "--history {history} --graph {graph}",
    "eval ablate": "--pool {pool} --out {out}",
    "eval worlds": "--world a={folder}",
    "eval cold-start": "--history {history} --graph {graph} --folds 2",
    "bench predictor": "",
    "bench scheduler": "",
    "bench graph": "",
    "bench runtime": "--pool {pool}",
    "bench grpo": "--model {model}",
    "predict": "--graph {graph} --history {history} --step 0 --out {out}/pred.json",
    "explain": "library-checkout --step 0 --graph {graph} --history {history}",
    "select": "--graph {graph} --step 0 --out {out}/batch.json",
    "run": "--out {out}",
}
"""Arguments each command accepts, placeholders in braces: ``{pool}`` (the hand-made pool),
``{graph}``, ``{history}``, ``{model}`` (a model folder), ``{bfcl}`` (the BFCL sample),
``{file}`` (an existing file), ``{folder}`` (an existing folder), ``{out}`` (a path that does
not exist: a command that refuses its arguments must not create it)."""


class Bad(NamedTuple):
    """A bad value, the arguments it goes with (default: the command's :data:`VALID`), and
    what the error may call the flag instead of its name or its config field's."""

    value: str
    valid: str | None = None
    called: str | None = None


BAD: dict[str, str | Bad] = {
    "pool check DIR": "nope",
    "pool check --workers": "0",
    "pool check --call-timeout": "0",
    "pool check --memory-limit-mb": "1",
    "pool check --sandbox-package": "no_such_package_x",
    "pool import-envscaler SRC": "nope",
    "pool import-envscaler --out": "{file}",
    "pool import-bfcl SRC": "nope",
    "pool import-bfcl --out": "{file}",
    "pool import-bfcl --category": "nope",
    "pool generate --envs": "0",
    "pool generate --tasks-per-env": "0",
    "pool generate --seed": "-1",
    "pool generate --test-per-env": "-1",
    "pool generate --holdout-envs": "-1",
    "pool generate --max-calls": "0",
    "pool generate --operations": "nope",
    "pool generate --out": "{file}",
    "graph build --pool": "nope",
    "graph build --k-within": "0",
    "graph build --k-cross": "0",
    "graph build --ann-threshold": "0",
    "graph build --within-workers": "0",
    "graph build --embed-workers": "0",
    "graph build --ray": "no-such-host",
    "graph build --store": "nope://store",
    "graph build --neo4j-import": "{file}",
    "graph build --max-memory-gib": "0",
    "graph export --out": "{folder}",
    "graph export --store": "nope://store",
    "graph add-env --pool": "nope",
    "graph add-env --env": "no_such_env",
    "graph add-env --k-within": "0",
    "graph add-env --k-cross": "0",
    "graph add-env --store": "nope://store",
    "store query CYPHER": " ",
    "store query --param": "no_equals_sign",
    "store query --format": "nope",
    "store query --store": "nope://store",
    "store export-history --out": "{folder}",
    "store export-history --store": "nope://store",
    "store import-history FILE": "nope.jsonl",
    "store import-history --store": "nope://store",
    "train sft --pool": "nope",
    "train sft --out": "{file}",
    "train sft --model": "nope",
    "train sft --minutes": "-1",
    "train sft --max-steps": "-1",
    "train sft --batch-size": "0",
    "train sft --lr": "-1",
    "train sft --extra-per-env": "-1",
    "train sft --extra-operations": Bad("nope", called="operation"),
    "train sft --tool-format": "nope",
    "train sft --threads": "-1",
    "train sft --seed": "-1",
    "train sft --accelerator": "nope",
    "train sft --competence-by": "nope",
    "train sft --competence-mean": "1.5",
    "train sft --competence-concentration": "0",
    "train sft --competence-kinds": "nope",
    "train sft --competence-seed": "-1",
    "train sft --sandbox-package": "no_such_package_x",
    "train grpo --pool": "nope",
    "train grpo --model": "nope",
    "train grpo --out": "{file}",
    "train grpo --graph": "nope",
    "train grpo --store": "nope://store",
    "train grpo --scheduler": "nope",
    "train grpo --batch-size": "0",
    "train grpo --group-size": "1",
    "train grpo --steps": "0",
    "train grpo --lr": "-1",
    "train grpo --lr-warmup-steps": "-1",
    "train grpo --ppo-epochs": "0",
    "train grpo --mini-batches": "0",
    "train grpo --clip": "1.5",
    "train grpo --kl-coef": "-1",
    "train grpo --advantage": "nope",
    "train grpo --micro-batch-size": "0",
    "train grpo --micro-batch-tokens": "0",
    "train grpo --eval-every": "-1",
    "train grpo --eval-tasks": "-1",
    "train grpo --eval-samples": "0",
    "train grpo --pool-eval-samples": "-1",
    "train grpo --pool-eval-tasks": "-1",
    "train grpo --temperature": "-1",
    "train grpo --max-turns": "0",
    "train grpo --max-new-tokens": "0",
    "train grpo --workers": "0",
    "train grpo --seed": "-1",
    "train grpo --resume": "nope.ckpt",
    "train grpo --stop-after": "-1",
    "train grpo --retire-env": Bad("no_such_env", called="environment"),
    "train grpo --checkpoint-every": "-1",
    "train grpo --accelerator": "nope",
    "train grpo --devices": "0",
    "train grpo --strategy": "nope",
    "train grpo --sandbox-package": "no_such_package_x",
    "train grpo --eval-rollouts": "0",
    "train grpo --ds-generation": "nope",
    "train grpo --ds-oversample": "0.5",
    "train grpo --ds-max-oversample": "0.5",
    "train grpo --ds-headroom": "0.5",
    "train grpo --ds-surplus": "nope",
    "train grpo --ds-max-generation-batches": "0",
    "train demo-policy --out": "{file}",
    "train demo-policy --preset": "nope",
    "train demo-policy --seed": "-1",
    "train demo-policy --stage": "nope",
    "train demo-policy --threads": "-1",
    "train demo-policy --sandbox-package": "no_such_package_x",
    "eval policy --pool": "nope",
    "eval policy --model": "nope",
    "eval policy --split": "nope",
    "eval policy --k": "0",
    "eval policy --seed": "-1",
    "eval policy --limit": "0",
    "eval policy --temperature": "-1",
    "eval policy --tool-format": "nope",
    "eval policy --tasks-per-batch": "0",
    "eval policy --workers": "0",
    "eval policy --device": "nope",
    "eval policy --threads": "-1",
    "eval policy --out": "{folder}",
    "eval policy --sandbox-package": "no_such_package_x",
    "eval headroom --pool": "nope",
    "eval headroom --model": "nope",
    "eval headroom --out": "{file}",
    "eval headroom --splits": "nope",
    "eval headroom --k": "0",
    "eval headroom --temperatures": "-1",
    "eval headroom --limit": "-1",
    "eval headroom --seed": "-1",
    "eval headroom --tasks-per-batch": "0",
    "eval headroom --device": "nope",
    "eval headroom --threads": "-1",
    "eval headroom --workers": "0",
    "eval headroom --sandbox-package": "no_such_package_x",
    "eval compare-predictors --history": "nope.jsonl",
    "eval compare-predictors --graph": "nope.json",
    "eval compare-predictors --out": "{file}",
    "eval compare-predictors --seed": "-1",
    "eval compare-predictors --learned-steps": "-1",
    "eval compare-predictors --replay-steps": "0",
    "eval compare-predictors --replay-round": "-1",
    "eval graph-signal --history": "nope.jsonl",
    "eval graph-signal --store": Bad("nope://store", ""),
    "eval graph-signal --model": Bad("nope", "--pool {pool}"),
    "eval graph-signal --graph": "nope.json",
    "eval graph-signal --pool": "nope",
    "eval graph-signal --split": Bad("nope", "--model {model} --pool {pool}"),
    "eval graph-signal --k": "1",
    "eval graph-signal --seed": "-1",
    "eval graph-signal --limit": "-1",
    "eval graph-signal --temperature": "-1",
    "eval graph-signal --device": "nope",
    "eval graph-signal --threads": "-1",
    "eval graph-signal --workers": "0",
    "eval graph-signal --permutations": "-1",
    "eval graph-signal --bootstrap": "-1",
    "eval graph-signal --out": "{file}",
    "eval ablate --pool": "nope",
    "eval ablate --out": "{file}",
    "eval ablate --seeds": "0",
    "eval ablate --steps": "0",
    "eval ablate --batch-size": "0",
    "eval ablate --learner": "nope",
    "eval ablate --evaluations": "-1",
    "eval ablate --workers": "0",
    "eval ablate --rollouts": "0",
    "eval ablate --schedulers": "nope",
    "eval ablate --controls": "nope",
    "eval ablate --control-seed": "-1",
    "eval ablate --world": "nope",
    "eval ablate --kappa": "-1",
    "eval ablate --world-seed": "-1",
    "eval ablate --model": "nope",
    "eval ablate --sft-steps": "-1",
    "eval ablate --lr": "-1",
    "eval ablate --advantage-estimator": "nope",
    "eval ablate --policy-workers": "0",
    "eval ablate --eval-tasks": "-1",
    "eval ablate --eval-samples": "0",
    "eval ablate --pool-eval-samples": "-1",
    "eval ablate --pool-eval-tasks": "-1",
    "eval ablate --accelerator": "nope",
    "eval ablate --sandbox-package": "no_such_package_x",
    "eval ablate --eval-rollouts": "0",
    "eval ablate --ds-generation": "nope",
    "eval ablate --ds-oversample": "0.5",
    "eval ablate --ds-max-oversample": "0.5",
    "eval ablate --ds-headroom": "0.5",
    "eval ablate --ds-surplus": "nope",
    "eval ablate --ds-max-generation-batches": "0",
    "eval worlds --world": "no_equals_sign",
    "eval worlds --out": "{folder}",
    "eval worlds --plot": "{folder}",
    "eval cold-start --history": "nope.jsonl",
    "eval cold-start --store": Bad("nope://store", ""),
    "eval cold-start --pool": Bad("nope", ""),
    "eval cold-start --graph": "nope.json",
    "eval cold-start --split": Bad("nope", "--pool {pool} --folds 2"),
    "eval cold-start --k": "1",
    "eval cold-start --drop-calls": "1.5",
    "eval cold-start --workers": "0",
    "eval cold-start --folds": "0",
    "eval cold-start --join-step": "-1",
    "eval cold-start --control-draws": "-1",
    "eval cold-start --bootstrap": "-1",
    "eval cold-start --seed": "-1",
    "eval cold-start --out": "{file}",
    "eval cold-start --sandbox-package": "no_such_package_x",
    "bench predictor --tasks": "0",
    "bench predictor --edges-per-task": "-1",
    "bench predictor --repeats": "0",
    "bench predictor --seed": "-1",
    "bench predictor --steps": "0",
    "bench predictor --observations-per-step": "-1",
    "bench predictor --threads": "-1",
    "bench scheduler --tasks": "0",
    "bench scheduler --repeats": "0",
    "bench scheduler --history-steps": "-1",
    "bench scheduler --seed": "-1",
    "bench graph --tasks": "0",
    "bench graph --tasks-per-env": "0",
    "bench graph --ann-threshold": "0",
    "bench graph --within-workers": "0",
    "bench graph --embed-workers": "0",
    "bench graph --ray": "no-such-host",
    "bench graph --chunk": "0",
    "bench graph --recall-sample": "-1",
    "bench graph --seed": "-1",
    "bench graph --threads": "-1",
    "bench graph --pool-dir": "{file}",
    "bench graph --store-dir": "{file}",
    "bench graph --add-env-tasks": "-1",
    "bench graph --max-memory-gib": "0",
    "bench graph --store": "nope://store",
    "bench runtime --pool": "nope",
    "bench runtime --episodes": "0",
    "bench runtime --calls": "-1",
    "bench runtime --repeats": "-1",
    "bench runtime --workers": "0",
    "bench runtime --call-timeout": "0",
    "bench runtime --memory-limit-mb": "1",
    "bench runtime --sandbox-package": "no_such_package_x",
    "bench grpo --model": "nope",
    "bench grpo --pool": "nope",
    "bench grpo --batch-size": "0",
    "bench grpo --group-size": "1",
    "bench grpo --steps": "0",
    "bench grpo --micro-batch-size": "0",
    "bench grpo --threads": "-1",
    "bench grpo --seed": "-1",
    "bench grpo --sandbox-package": "no_such_package_x",
    "predict --graph": "nope.json",
    "predict --history": "nope.jsonl",
    "predict --small-groups": "nope",
    "predict --step": "-1",
    "predict --out": "{folder}",
    "explain TASK": "no_such_task",
    "explain --step": "-1",
    "explain --graph": "nope.json",
    "explain --history": "nope.jsonl",
    "explain --small-groups": "nope",
    "explain --store": Bad("nope://store", "library-checkout --step 0"),
    "explain --png": "{folder}",
    "explain --html": "{folder}",
    "select --graph": "nope.json",
    "select --history": "nope.jsonl",
    "select --small-groups": "nope",
    "select --step": "-1",
    "select --batch": "0",
    "select --seed": "-1",
    "select --out": "{folder}",
    "select --scheduler": "nope",
    "run --preset": "nope",
    "run --seed": "-1",
    "run --out": "{file}",
    "run --store": "nope://store",
    "run --steps": "0",
    "run --lr": "-1",
    "run --schedulers": "nope",
    "run --model": "nope",
    "run --accelerator": "nope",
    "run --workers": "-1",
    "run --sandbox-package": "no_such_package_x",
    "run --ds-generation": "nope",
    "run --ds-oversample": "0.5",
    "run --ds-max-oversample": "0.5",
    "run --ds-headroom": "0.5",
    "run --ds-surplus": "nope",
    "run --ds-max-generation-batches": "0",
    "eval ablate --reward": "partial",
    "eval cold-start --reward": "partial",
    "eval graph-signal --reward": "partial",
    "eval headroom --reward": "partial",
    "eval policy --reward": "partial",
    "explain --reward": "partial",
    "predict --reward": "partial",
    "run --reward": "partial",
    "select --reward": "partial",
    "train grpo --reward": "partial",
    "select --pool": "nope",
}
"""One bad value per command and flag (a positional by its metavar)."""


FIRST_MISTAKES = {
    "train grpo --pool": "nope",
    "train grpo --scheduler": "nope",
    "train grpo --clip": "1.5",
    "train grpo --lr": "-1",
    "train grpo --model": "nope",
    "train sft --batch-size": "0",
    "eval headroom --pool": "nope",
    "eval policy --pool": "nope",
}
"""The mistakes a new user made first, each of which once ended in a traceback."""


def _commands(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()):
    """``(words, parser)`` of every command that runs something."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield words, parser
        return
    for name, sub in subs[0].choices.items():
        yield from _commands(sub, (*words, name))


def _value_flags() -> dict[str, argparse.Action]:
    """``"command flag"`` -> its action, for every flag (or positional) that takes a value."""
    found = {}
    for words, parser in _commands(build_parser()):
        for action in parser._actions:
            if action.nargs == 0 or isinstance(action, argparse._HelpAction):
                continue
            name = action.option_strings[0] if action.option_strings else action.metavar
            found[" ".join((*words, name))] = action
    return found


FLAGS = _value_flags()


def test_every_flag_that_takes_a_value_has_a_row():
    missing = sorted(set(FLAGS) - set(BAD))
    stale = sorted(set(BAD) - set(FLAGS))
    assert not missing, f"flags without a bad value in BAD: {missing}"
    assert not stale, f"rows of BAD for no flag: {stale}"
    assert set(VALID) == {row.rsplit(" ", 1)[0] for row in FLAGS}


def test_the_first_mistakes_of_a_new_user_are_rows():
    assert {row: BAD[row] for row in FIRST_MISTAKES} == FIRST_MISTAKES


class ExpensiveStart(BaseException):
    """Something expensive started before the bad value was refused (a BaseException, so that
    no ``except Exception`` of a command takes it for a user error)."""


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, str]:
    """The placeholders of :data:`VALID` and :data:`BAD`."""
    folder = tmp_path_factory.mktemp("inputs")
    pool = write_handmade_pool(folder / "pool")
    write_graph(folder / "graph.json", handmade_graph())
    rewards = {task.task_id: [1.0, 0.0] for task in POOL.tasks}
    rounds = [o for step in (0, 1) for o in observations_from_rewards(step, rewards)]
    write_history(folder / "history.jsonl", rounds)
    model = folder / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    return {
        "pool": str(pool),
        "graph": str(folder / "graph.json"),
        "history": str(folder / "history.jsonl"),
        "model": str(model),
        "bfcl": str(BFCL),
        "file": str(folder / "graph.json"),
        "folder": str(folder),
    }


@pytest.fixture
def nothing_expensive(monkeypatch):
    """Loading a policy, starting a sandbox, a store server, Ray or a trainer raises
    :class:`ExpensiveStart`."""

    def expensive(*args, **kwargs):
        raise ExpensiveStart

    import lightning
    import transformers

    from envsched_gnn.envs.runtime import EnvRuntime
    from envsched_gnn.graph_store.arcadedb import ManagedArcadeDB

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", expensive)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", expensive)
    monkeypatch.setattr(EnvRuntime, "__enter__", expensive)
    monkeypatch.setattr(ManagedArcadeDB, "__enter__", expensive)
    monkeypatch.setattr(lightning.Trainer, "fit", expensive)
    monkeypatch.setattr("envsched_gnn.training.policy.train_tokenizer", expensive)
    monkeypatch.setattr("envsched_gnn.graph_build.builder.build_graph", expensive)
    monkeypatch.setattr("envsched_gnn.graph_build.parallel.connect_ray", expensive)


@pytest.mark.parametrize("row", sorted(BAD))
def test_a_bad_value_is_one_error_line(row, inputs, nothing_expensive, tmp_path, capsys):
    command, flag = row.rsplit(" ", 1)
    bad = BAD[row] if isinstance(BAD[row], Bad) else Bad(BAD[row])
    places = {**inputs, "out": str(tmp_path / "out")}
    value = bad.value.format(**places)
    valid = shlex.split((VALID[command] if bad.valid is None else bad.valid).format(**places))
    argv = [*command.split(), *_with(valid, FLAGS[row], flag, value)]

    started = time.perf_counter()
    try:
        status = main(argv)
    except SystemExit as exit_:
        status = exit_.code
    seconds = time.perf_counter() - started

    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert status not in (0, None), f"{shlex.join(argv)} exited {status}: {out}{err}"
    assert len(lines) == 1 and lines[0].startswith("error: "), shlex.join(argv) + "\n" + err
    assert value in lines[0], f"the error does not name {value!r}: {lines[0]}"
    if FLAGS[row].option_strings:  # a positional is the command's subject: its value says it
        names = {_words(flag), _words(FLAGS[row].config_field.rsplit(".", 1)[1]), bad.called}
        said = _words(lines[0])
        assert any(name and name in said for name in names), f"{lines[0]} names none of {names}"
    assert seconds < SECONDS, f"{shlex.join(argv)} took {seconds:.1f} s to refuse"
    assert not (tmp_path / "out").exists(), f"{shlex.join(argv)} wrote {tmp_path / 'out'}"


def _words(name: str) -> str:
    """``--max-new-tokens`` / ``max_new_tokens`` -> ``max new token``: a flag or field as a
    message may write it (a plural as its singular)."""
    return name.lstrip("-").replace("-", " ").replace("_", " ").lower().rstrip("s")


def _with(valid: list[str], action: argparse.Action, flag: str, value: str) -> list[str]:
    """``valid`` with ``flag``'s value replaced by ``value`` (or added)."""
    if not action.option_strings:
        positionals = [i for i, word in enumerate(valid) if not word.startswith("-")]
        # the command's positional is the first word that no option takes
        index = next(i for i in positionals if i == 0 or not valid[i - 1].startswith("-"))
        return [*valid[:index], value, *valid[index + 1 :]]
    if flag in valid:
        index = valid.index(flag)
        return [*valid[:index], flag, value, *valid[index + 2 :]]
    return [*valid, flag, value]
