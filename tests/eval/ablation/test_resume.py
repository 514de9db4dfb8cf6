"""``eval ablate`` resumes: finished runs are kept, a rerun skips them and gives the same table."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

import envsched_gnn.eval.ablation.ablate as ablate
from envsched_gnn.cli import main
from envsched_gnn.envs.pool import Pool
from envsched_gnn.envs.runtime_config import RuntimeConfig
from envsched_gnn.eval.ablation.config import AblationConfig, Job
from envsched_gnn.eval.ablation.runs import RUNS_DIR, FinishedRuns, RunMismatch
from envsched_gnn.eval.simulator.config import SimulatorConfig
from tests.envs.handmade_pool import handmade_pool, write_handmade_pool
from tests.scheduler.scheduler_checks import grid_graph

CONFIG = AblationConfig(
    seeds=2,
    steps=3,
    batch_size=2,
    workers=1,
    schedulers=("envsched", "random"),
    k_grid=(),
    controls=("relabelled",),
)


class Interrupted(Exception):
    """Stands for a machine restart in the middle of an ablation."""


def table(out: Path) -> dict:
    """results.json less wall-clock times and run folders, and the report's table rows."""

    def numbers(value):
        if isinstance(value, dict):
            return {
                k: numbers(v)
                for k, v in value.items()
                if not (k.endswith(("_s", "_s_per_step")) or k == "run_dir")
            }
        return [numbers(v) for v in value] if isinstance(value, list) else value

    results = numbers(json.loads((out / "results.json").read_text()))
    rows = [line for line in (out / "report.md").read_text().splitlines() if line.startswith("|")]
    return {"results": results, "rows": rows}


def finished_files(out: Path) -> list[Path]:
    return sorted((out / RUNS_DIR).glob("*/seed*.json"))


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("uninterrupted")
    ablate.run_ablation(handmade_pool(), CONFIG, out, log=lambda _: None)
    return table(out)


def counting_run_job(monkeypatch, fail_on: int | None = None) -> list[Job]:
    """Patch ``run_job`` to record its jobs, and to raise on call number ``fail_on``."""
    calls: list[Job] = []
    real = ablate.run_job

    def run_job(job, ctx):
        calls.append(job)
        if len(calls) == fail_on:
            raise Interrupted
        return real(job, ctx)

    monkeypatch.setattr(ablate, "run_job", run_job)
    return calls


@pytest.mark.slow  # simulated ablation runs, twice
def test_an_interrupted_ablation_resumes_and_gives_the_same_table(
    tmp_path, monkeypatch, uninterrupted
):
    out = tmp_path / "out"
    pool = handmade_pool()
    counting_run_job(monkeypatch, fail_on=2)
    with pytest.raises(Interrupted):
        ablate.run_ablation(pool, CONFIG, out, log=lambda _: None)
    (first,) = finished_files(out)  # the run that finished before the interruption
    kept = json.loads(first.read_text())
    assert (kept["name"], kept["scheduler"], kept["seed"], kept["control"]) == (
        "envsched",
        "envsched",
        0,
        None,
    )
    assert kept["learner"] == "sim" and len(kept["records"]) == 4  # step 0, then 3 updates

    calls = counting_run_job(monkeypatch)
    lines: list[str] = []
    ablate.run_ablation(pool, CONFIG, out, log=lines.append)
    assert Job("envsched", "envsched", "k6_12", 0) not in calls
    assert len(calls) == 3 * 2 - 1  # every other run, once
    assert any("reusing 1 finished run(s)" in line and "envsched seed 0" in line for line in lines)
    assert json.loads(first.read_text()) == kept  # reused as it was, not rewritten
    assert len(finished_files(out)) == 6
    assert table(out) == uninterrupted

    calls.clear()
    ablate.run_ablation(pool, CONFIG, out, log=lines.append)  # everything done: nothing runs
    assert calls == [] and table(out) == uninterrupted


@pytest.mark.slow  # simulated ablation runs, twice
def test_a_changed_option_is_refused_and_a_selection_change_reuses(tmp_path, monkeypatch):
    out = tmp_path / "out"
    pool = handmade_pool()
    small = replace(CONFIG, schedulers=("random",), controls=())
    ablate.run_ablation(pool, small, out, log=lambda _: None)
    before = {p: p.read_text() for p in finished_files(out)}
    assert len(before) == 2

    calls = counting_run_job(monkeypatch)
    with pytest.raises(RunMismatch, match=r"seed0\.json: settings\.steps differ"):
        ablate.run_ablation(pool, replace(small, steps=4), out, log=lambda _: None)
    changed_world = replace(small, simulator=SimulatorConfig(kappa=0.25))
    with pytest.raises(RunMismatch, match=r"settings\.simulator\.kappa differ"):
        ablate.run_ablation(pool, changed_world, out, log=lambda _: None)
    assert calls == [] and {p: p.read_text() for p in finished_files(out)} == before

    monkeypatch.undo()  # spawned workers get the module's run_job, not a test's closure
    lines: list[str] = []
    more = replace(small, seeds=3, schedulers=("random", "dump"), workers=2, score_steps=(3,))
    ablate.run_ablation(pool, more, out, log=lines.append)
    assert any("reusing 2 finished run(s)" in line and "4 to run" in line for line in lines)
    assert {p: p.read_text() for p in finished_files(out) if p in before} == before


def test_a_run_key_follows_what_determines_the_run():
    pool = handmade_pool()
    graph = grid_graph(2, 3)
    job = Job("envsched", "envsched", "k6_12", 0)

    def identity(config=CONFIG, pool=pool, graph=graph, job=job, start=None):
        return FinishedRuns("unused", pool, {"k6_12": graph}, config).identity(job, start)

    same = identity()
    for config in (
        replace(CONFIG, seeds=7, workers=2, schedulers=("envsched",), k_grid=((3, 12),)),
        replace(CONFIG, controls=(), oracle_graph=True, score_steps=(1,)),
    ):
        assert identity(config=config) == same
    assert identity(config=replace(CONFIG, batch_size=3)) != same
    assert identity(job=replace(job, seed=1)) != same
    assert identity(graph=grid_graph(2, 3, seed=1)) != same
    assert identity(start="abc") != same
    first, *rest = pool.tasks
    other_pool = Pool(pool.envs, [replace(first, task=first.task + " today"), *rest])
    assert identity(pool=other_pool) != same
    # the target is part of the run: EnvSched's spread target and Dr. GRPO are other runs
    spread = identity(job=Job("envsched", "envsched_spread", "k6_12", 0))
    assert spread["job"]["scheduler"] == "envsched_spread" and spread != same
    recipe = replace(CONFIG.policy.recipe, advantage_estimator="dr_grpo")
    dr_grpo = replace(CONFIG.policy, recipe=recipe)
    assert identity(config=replace(CONFIG, policy=dr_grpo, learner="policy")) != identity(
        config=replace(CONFIG, learner="policy")
    )
    # the reward is part of the run: a success run is never reused for a fraction one
    success = replace(CONFIG.policy, runtime=RuntimeConfig(reward="success"))
    under_success = identity(config=replace(CONFIG, policy=success, learner="policy"))
    assert under_success["settings"]["policy"]["runtime"] == {"reward": "success"}
    assert under_success != identity(config=replace(CONFIG, learner="policy"))
    with pytest.raises(ValueError, match=r"AblationConfig.learner = 'sim', expected 'policy' un"):
        replace(CONFIG, policy=success)
    # a drawn control is keyed by the default graph it is drawn from, and its seed
    control = Job("envsched_relabelled", "envsched", "relabelled", 0)
    assert identity(job=control)["graph"] == same["graph"]


@pytest.mark.slow
def test_the_cli_killed_after_its_first_finished_run_resumes(tmp_path, capsys, uninterrupted):
    """The done-when of issue 29: kill ``eval ablate`` once its first run is written, rerun
    the same command; it skips the finished runs and gives the uninterrupted table."""
    pool_dir = write_handmade_pool(tmp_path / "pool")
    out = tmp_path / "out"
    argv = ["eval", "ablate", "--pool", str(pool_dir), "--out", str(out), "--seeds", "2"]
    argv += ["--steps", "3", "--batch-size", "2", "--workers", "1", "--no-k-grid"]
    argv += ["--schedulers", "envsched,random", "--controls", "relabelled"]
    code = "import sys; from envsched_gnn.cli import main; sys.exit(main(sys.argv[1:]))"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path.cwd())}
    process = subprocess.Popen([sys.executable, "-c", code, *argv], env=env)
    deadline = time.monotonic() + 300
    while not finished_files(out) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    done = finished_files(out)
    assert done and not (out / "results.json").exists()

    assert main(argv) == 0
    assert table(out) == uninterrupted
    assert len(finished_files(out)) == 6

    capsys.readouterr()
    assert main([*argv, "--kappa", "0.25"]) == 1  # a changed option: refused, nothing run
    assert "settings.simulator.kappa differ" in capsys.readouterr().err


@pytest.mark.slow
def test_a_policy_ablation_resumes_with_its_kept_start_and_step0_evaluation(tmp_path, monkeypatch):
    """The policy learner: the run finished before the interruption and the step-0 evaluation
    are reused, the other run is trained, and the table is the uninterrupted one."""
    import envsched_gnn.eval.ablation.policy_learner as policy_learner
    from envsched_gnn.eval.ablation.config import PolicyLearnerConfig
    from envsched_gnn.training.grpo.config import GRPOConfig
    from tests.training.grpo_setup import AGENT, POOL, RUNTIME
    from tests.training.tiny_policy import trained_policy_dir

    policy = PolicyLearnerConfig(
        model=str(trained_policy_dir()),
        sft_steps=0,
        recipe=GRPOConfig(lr=1e-3, micro_batch_size=2),
        eval_tasks=2,
        eval_samples=2,
        accelerator="cpu",
        agent=AGENT,
        runtime=RUNTIME,
    )
    config = AblationConfig(
        seeds=2,
        steps=1,
        batch_size=2,
        learner="policy",
        schedulers=("random",),
        k_grid=(),
        simulator=SimulatorConfig(rollouts=2),
        policy=policy,
    )
    ablate.run_ablation(POOL, config, tmp_path / "uninterrupted", log=lambda _: None)

    evaluations = []
    real_heldout_start = policy_learner.heldout_start

    def heldout_start(*args):
        evaluations.append(args)
        return real_heldout_start(*args)

    monkeypatch.setattr(policy_learner, "heldout_start", heldout_start)
    real_save = FinishedRuns.save

    def save_then_stop(self, job, run, start=None):
        real_save(self, job, run, start)
        raise Interrupted

    out = tmp_path / "out"
    monkeypatch.setattr(FinishedRuns, "save", save_then_stop)
    with pytest.raises(Interrupted):
        ablate.run_ablation(POOL, config, out, log=lambda _: None)
    assert len(finished_files(out)) == 1 and len(evaluations) == 1

    monkeypatch.setattr(FinishedRuns, "save", real_save)
    lines: list[str] = []
    ablate.run_ablation(POOL, config, out, log=lines.append)
    assert len(evaluations) == 1  # the step-0 evaluation was kept
    assert any("reusing 1 finished run(s)" in line and "random seed 0" in line for line in lines)
    assert any(line.startswith("[1/1] random seed 1") for line in lines)
    assert table(out) == table(tmp_path / "uninterrupted")


def test_the_sft_warm_start_is_kept_for_a_rerun_with_the_same_inputs(tmp_path, monkeypatch):
    import envsched_gnn.training.warm_start as warm_start_module
    from envsched_gnn.eval.ablation.config import PolicyLearnerConfig
    from envsched_gnn.eval.ablation.policy_learner import starting_policy

    trained: list[int] = []

    def warm_start(pool, model, sft, out, log):
        trained.append(sft.max_steps)
        path = Path(out) / "policy"
        path.mkdir(parents=True, exist_ok=True)
        (path / "weights").write_text(str(len(trained)))
        return path, {}

    monkeypatch.setattr(warm_start_module, "warm_start", warm_start)
    pool = handmade_pool()
    config = PolicyLearnerConfig(sft_steps=5, sft_extra_tasks_per_env=0)
    first = starting_policy(pool, config, tmp_path, lambda _: None)
    lines: list[str] = []
    assert starting_policy(pool, config, tmp_path, lines.append) == first
    assert trained == [5] and "reusing the SFT warm start" in lines[0]
    starting_policy(pool, replace(config, sft_steps=6), tmp_path, lambda _: None)
    assert trained == [5, 6]  # other SFT inputs: trained again


def test_a_cached_graph_is_the_graph_that_was_built(tmp_path):
    """A rerun reads the graph a first run built and cached: the same edge arrays in the same
    order (a sum over edges keeps its last bit), hence the same fingerprint in the run keys."""
    from envsched_gnn.envs.generator import generate_pool
    from envsched_gnn.eval.ablation.ablate import cached_graph
    from envsched_gnn.eval.ablation.runs import graph_fingerprint
    from envsched_gnn.graph_build.builder import build_graph

    pool = generate_pool(4, 10, seed=3, test_per_env=0)
    path = tmp_path / "graphs" / "g.json"
    built, _ = cached_graph(path, lambda: build_graph(pool), print)
    read, seconds = cached_graph(path, lambda: build_graph(pool), print)
    assert seconds == 0.0 and graph_fingerprint(read) == graph_fingerprint(built)
    for relation, edges in built.edges.items():
        for name in ("src", "dst", "sim"):
            assert (getattr(read.edges[relation], name) == getattr(edges, name)).all()
