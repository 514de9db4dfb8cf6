"""The sandbox against each escape of issue 16: every test here escaped before the sandbox.

A hostile environment (``tests/envs/abuse_pool.py``) tries, from its tools and its top-level
code, to read host files and secrets, write anywhere, reach the store over the network, see
or signal other processes, leave processes behind, use ``ctypes``, and patch the scorer. Each
test asserts that the attempt fails and that the runtime, the store and the rewards of honest
environments are untouched.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from envsched_gnn.envs.episode import EpisodeScore, ToolFault
from envsched_gnn.envs.generator import generate_pool
from envsched_gnn.envs.pool import Check, Environment, Pool, ToolCall
from envsched_gnn.envs.runtime import EnvRuntime
from envsched_gnn.envs.runtime_config import RuntimeConfig, SandboxConfig
from envsched_gnn.envs.sandbox import interpreter, sandbox_ids
from tests.envs.abuse_pool import ABUSER_CODE, abuse_pool
from tests.envs.handmade_pool import handmade_pool, write_handmade_pool

SANDBOX = SandboxConfig(max_processes=24, max_open_files=64, max_file_mb=4, scratch_mb=8)
CONFIG = RuntimeConfig(workers=1, call_timeout_s=5.0, grace_s=2.0, sandbox=SANDBOX)
SECRET = "hunter2-do-not-leak"


@pytest.fixture(scope="module")
def abuse():
    with EnvRuntime(abuse_pool(handmade_pool()), CONFIG) as runtime:
        yield runtime


def attempt(runtime: EnvRuntime, tool: str, **arguments) -> dict:
    """Calls one tool of a fresh ``abuse`` episode; returns its data."""
    runtime.reset([("a", "abuse")])
    try:
        [result] = runtime.call([("a", ToolCall(tool, arguments))])
    finally:
        runtime.release(["a"])
    assert result["success"] is True, result
    return result["data"]


def host_processes_with(marker: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                    found.append(int(name))
            except OSError:
                pass
    return found


def test_host_files_and_secrets_are_out_of_reach(abuse, store_server, tmp_path):
    home_file = Path.home() / ".bashrc"
    targets = ["/etc/passwd", "/etc/shadow", str(home_file), str(Path.cwd() / "pyproject.toml")]
    if store_server.managed is not None:
        targets.append(str(store_server.managed.folder / "root_password"))
    for target in targets:
        outcome = attempt(abuse, "read", path=target)
        assert outcome["ok"] is False, target
        assert outcome["error"].startswith(("FileNotFoundError", "PermissionError")), outcome
    root = attempt(abuse, "listdir", path="/")["value"]
    system = {"bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc", "dev", "proc", "tmp"}
    interpreter_top = Path(os.path.realpath(sys.base_prefix)).parts[1]
    assert set(root) <= system | {"sandbox", interpreter_top}, root
    assert attempt(abuse, "listdir", path="/etc")["value"] in ([], ["ld.so.cache"])
    assert attempt(abuse, "listdir", path="/sandbox/site")["value"] == ["mpmath"]


def test_writes_outside_the_private_scratch_fail(abuse, tmp_path):
    for target in [
        "/usr/escaped",
        "/etc/escaped",
        "/escaped",
        "/proc/escaped",
        str(tmp_path / "x"),
    ]:
        outcome = attempt(abuse, "write", path=target)
        assert outcome["ok"] is False, target
    assert not (tmp_path / "x").exists()
    name = f"envsched-scratch-{os.getpid()}"
    assert attempt(abuse, "write", path=f"/tmp/{name}")["ok"] is True
    assert not Path("/tmp", name).exists()  # the scratch is the sandbox's own


def test_no_host_process_or_environment_is_visible(monkeypatch, abuse):
    monkeypatch.setenv("NEO4J_PASSWORD", SECRET)
    with EnvRuntime(abuse_pool(), CONFIG) as runtime:  # started with the secret exported
        seen = attempt(runtime, "environ_of_all")
        parent = attempt(runtime, "read", path=f"/proc/{os.getpid()}/environ")
    pids = {int(key) for key in seen if key.isdigit()}
    assert pids <= {1, 2}, pids  # the scorer and the tool process: nothing of the host
    assert SECRET not in json.dumps(seen)
    assert "NEO4J_PASSWORD" not in json.dumps(seen)
    assert parent["ok"] is False


def test_the_store_is_unreachable_from_the_sandbox(abuse, store_server, store):
    port = int(store_server.uri.rsplit(":", 1)[1])
    before = store.count_nodes("Task")
    outcome = attempt(abuse, "connect", host="127.0.0.1", port=port)
    assert outcome["ok"] is False
    assert "unreachable" in outcome["error"].lower() or "refused" in outcome["error"].lower()
    assert attempt(abuse, "resolve", name="pypi.org")["ok"] is False
    assert store.count_nodes("Task") == before


def test_processes_run_unprivileged_and_die_with_the_call(abuse):
    uid, gid = sandbox_ids()
    ran = attempt(abuse, "run", argv=["id"])
    assert ran["ok"] is True, ran
    assert ran["value"]["out"].startswith(f"uid={uid}")
    for pid in abuse.pids:
        status = Path(f"/proc/{pid}/status").read_text()
        assert re.search(rf"^Uid:\s+{uid}\s", status, re.M), status
    marker = f"envsched-detached-{os.getpid()}-{time.monotonic_ns()}"
    assert attempt(abuse, "detach", marker=marker)["ok"] is True
    assert host_processes_with(marker) == []  # killed when the call ended
    assert_only_the_worker_lives(abuse)


def assert_only_the_worker_lives(runtime: EnvRuntime) -> None:
    """Besides the scorer (1) and the tool process (2), only dead processes not yet reaped."""
    states = attempt(runtime, "processes")
    assert {pid: state for pid, state in states.items() if pid not in ("1", "2")} in (
        {},
        {pid: "Z" for pid in states if pid not in ("1", "2")},
    ), states


def test_a_sandbox_killed_on_timeout_takes_what_its_tool_started_along():
    config = dataclasses.replace(CONFIG, call_timeout_s=0.5, grace_s=0.5)
    marker = f"envsched-hung-{os.getpid()}-{time.monotonic_ns()}"
    with EnvRuntime(abuse_pool(), config) as runtime:
        runtime.reset([("a", "abuse")])
        results = []
        call = ToolCall("detach_and_hang", {"marker": marker})
        caller = threading.Thread(target=lambda: results.extend(runtime.call([("a", call)])))
        caller.start()
        deadline = time.monotonic() + 30
        while not host_processes_with(marker) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert host_processes_with(marker), "the tool's process never started"
        caller.join()
        [result] = results
        assert isinstance(result, ToolFault) and "worker replaced" in result["error"], result
        assert runtime.restarts == 1
    deadline = time.monotonic() + 5
    while host_processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert host_processes_with(marker) == []


def descendants(pid: int) -> set[int]:
    """Every living process below ``pid`` on the host (its sandboxes' processes too)."""
    parents = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parents[int(name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


STARTER = """
import json, sys, time
from envsched_gnn.envs.pool import ToolCall
from envsched_gnn.envs.runtime import EnvRuntime
from tests.envs.abuse_pool import abuse_pool
from tests.envs.test_sandbox import CONFIG
runtime = EnvRuntime(abuse_pool(), CONFIG)
runtime.reset([("a", "abuse")])
runtime.call([("a", ToolCall("run", {"argv": ["sleep", "300"], "timeout": 300.0}))])
"""


def test_the_sandbox_dies_with_the_process_that_started_it():
    """kill -9 of the trainer (here a process blocked in a tool call): nothing it started
    outlives it, neither the sandbox nor what the tool runs in it."""
    root = Path(__file__).parents[2]
    starter = subprocess.Popen([sys.executable, "-c", STARTER], cwd=root)
    try:
        deadline = time.monotonic() + 60
        while not any(
            b"sleep" in Path(f"/proc/{pid}/cmdline").read_bytes()
            for pid in descendants(starter.pid)
            if alive(pid)
        ):
            assert starter.poll() is None and time.monotonic() < deadline, "no tool call ran"
            time.sleep(0.1)
        below = descendants(starter.pid)
        assert len(below) >= 4  # the sandbox's first process, scorer, tool process, sleep
    finally:
        starter.kill()
        starter.wait()
    deadline = time.monotonic() + 5
    while any(alive(pid) for pid in below) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [pid for pid in below if alive(pid)] == []


def test_workers_started_by_a_thread_that_ended_live_on():
    """The sandbox watches the process that started it, not the thread (a trainer may start
    its runtime from a thread that then ends)."""
    pool = handmade_pool()
    runtime = EnvRuntime(pool, CONFIG)
    try:
        starter = threading.Thread(target=runtime.start)
        starter.start()
        starter.join()
        time.sleep(0.2)
        assert all(alive(pid) for pid in runtime.pids)
        scores = runtime.replay([(task.task_id, task.reference_solution) for task in pool.tasks])
        assert {score.reward for score in scores} == {1.0}
        assert runtime.restarts == 0
    finally:
        runtime.close()


def test_ctypes_reaches_nothing(abuse):
    tricks = attempt(abuse, "ctypes_tricks", host_pid=os.getpid())
    assert tricks["kill_host"] == [-1, errno.ESRCH]
    assert tricks["unshare_user"][0] == -1  # nested user namespaces are disabled
    assert tricks["unshare_net"] == [-1, errno.EPERM]
    assert tricks["mount_tmpfs"] == [-1, errno.EPERM]
    assert tricks["setuid_0"][0] == -1
    assert tricks["ptrace_scorer"] == [-1, errno.EPERM]
    assert tricks["scorer_mem"]["ok"] is False
    assert tricks["scorer_fd"]["ok"] is False
    status = tricks["status"]
    for field in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert re.search(rf"^{field}:\s+0+$", status, re.M), field
    assert re.search(r"^NoNewPrivs:\s+1$", status, re.M)
    abuse.reset([("a", "abuse")])
    assert abuse.score(["a"])[0].reward == 0.5  # the scorer outlived kill(1, SIGKILL)
    abuse.release(["a"])


def test_tool_code_cannot_patch_the_scorer(abuse):
    abuse.reset([("a", "abuse")])
    [patched] = abuse.call([("a", ToolCall("patch_scoring"))])
    assert patched["success"] is True
    [score] = abuse.score(["a"])
    abuse.release(["a"])
    assert score.checks == (False, True)  # judged on the real state, not by patched code


def test_an_environment_cannot_change_another_ones_scores():
    pool = handmade_pool()
    honest = [(f"h{n}", task.task_id) for n, task in enumerate(pool.tasks)]
    with EnvRuntime(pool, CONFIG) as runtime:
        runtime.reset(honest)
        expected = runtime.score([e for e, _ in honest])
    with EnvRuntime(abuse_pool(pool), CONFIG) as runtime:
        runtime.reset([("p", "patch")])  # its top-level code patches the worker it runs in
        runtime.reset(honest)
        scores = runtime.score([e for e, _ in honest])
    assert [s.reward for s in scores] == [s.reward for s in expected]
    assert all(s.reward < 1.0 for s in scores)


def test_one_sandbox_per_environment_never_shared():
    base = abuse_pool()
    twin = Environment("abuser-twin", ABUSER_CODE, base.envs["abuser"].tools)
    twin_task = dataclasses.replace(base.tasks[0], task_id="twin", env_id="abuser-twin")
    pool = Pool(envs={**base.envs, "abuser-twin": twin}, tasks=[*base.tasks, twin_task])
    config = RuntimeConfig(workers=1, max_sandboxes=1, sandbox=SANDBOX)
    with EnvRuntime(pool, config) as runtime:
        runtime.reset([("a", "abuse"), ("b", "twin")])
        wrote, _ = runtime.call([("a", write_call("/tmp/mine")), ("b", listdir_call("/tmp"))])
        [listing] = runtime.call([("b", listdir_call("/tmp"))])
        assert wrote["data"]["ok"] is True and listing["data"]["value"] == []
        assert len(runtime.pids) == 2  # over max_sandboxes while both have live episodes
        runtime.release(["a", "b"])
        assert len(runtime.pids) == 1  # the idle one beyond max_sandboxes is stopped
        runtime.reset([("c", "abuse")])
        runtime.call([("c", write_call("/tmp/again"))])
        runtime.release(["c"])
        [abuser_pid] = runtime.pids
        runtime.reset([("d", "twin")])  # the idle abuser sandbox must not take the twin
        [twin_pid] = runtime.pids
        [listing] = runtime.call([("d", listdir_call("/tmp"))])
        assert twin_pid != abuser_pid and listing["data"]["value"] == []


def write_call(path: str) -> ToolCall:
    return ToolCall("write", {"path": path})


def listdir_call(path: str) -> ToolCall:
    return ToolCall("listdir", {"path": path})


def test_limits_hold(abuse):
    assert attempt(abuse, "limits") == {
        "RLIMIT_AS": CONFIG.memory_limit_mb << 20,
        "RLIMIT_NPROC": SANDBOX.max_processes,
        "RLIMIT_NOFILE": SANDBOX.max_open_files,
        "RLIMIT_FSIZE": SANDBOX.max_file_mb << 20,
        "RLIMIT_CPU": SANDBOX.cpu_limit_s,
    }
    bomb = attempt(abuse, "fork_bomb")
    assert bomb["ok"] is False and "BlockingIOError" in bomb["error"], bomb
    assert_only_the_worker_lives(abuse)  # the bomb's processes died with the call
    files = attempt(abuse, "open_many", count=SANDBOX.max_open_files + 10)
    assert files["ok"] is False and "Too many open files" in files["error"]
    big = attempt(abuse, "write_big", megabytes=SANDBOX.max_file_mb + 1)
    assert big["ok"] is False and ("too large" in big["error"] or "space" in big["error"])


def test_cpu_limit_stops_a_spinning_child():
    config = RuntimeConfig(workers=1, call_timeout_s=60.0, sandbox=SandboxConfig(cpu_limit_s=1))
    spin = [interpreter(), "-c", "while True: pass"]
    with EnvRuntime(abuse_pool(), config) as runtime:
        ran = attempt(runtime, "run", argv=spin, timeout=50.0)  # wall time is no limit here
    assert ran["ok"] is True and ran["value"]["code"] in (-24, -9), ran  # SIGXCPU, SIGKILL


@pytest.mark.slow  # spends half a worker's CPU limit
def test_a_worker_past_half_its_cpu_limit_is_replaced_with_its_episodes():
    config = RuntimeConfig(workers=1, call_timeout_s=30.0, sandbox=SandboxConfig(cpu_limit_s=2))
    with EnvRuntime(abuse_pool(), config) as runtime:
        runtime.reset([("a", "abuse")])
        [before] = runtime.pids
        [burned] = runtime.call([("a", ToolCall("burn", {"seconds": 1.2}))])
        assert burned == {"success": True, "data": 1}
        assert runtime.pids != [before]  # replaced after the call, not killed during it
        [again] = runtime.call([("a", ToolCall("burn", {"seconds": 0.0}))])
        assert again == {"success": True, "data": 2}  # the rebuilt state holds the first note
        assert runtime.restarts == 0


def test_floods_and_forged_replies_only_cost_a_restart():
    config = RuntimeConfig(workers=1, max_result_bytes=10_000, max_state_bytes=10_000)
    with EnvRuntime(abuse_pool(), config) as runtime:
        runtime.reset([("a", "abuse")])
        flood, after = runtime.call(
            [("a", ToolCall("flood", {"megabytes": 64})), ("a", ToolCall("limits"))]
        )
        assert isinstance(flood, ToolFault) and "over" in flood["error"], flood
        assert after["success"] is True
        good, forged = runtime.call([("a", ToolCall("limits")), ("a", ToolCall("forge"))])
        assert good["success"] is True
        assert forged.get("data") != "forged" or isinstance(forged, ToolFault)
        assert runtime.score(["a"])[0].reward == 0.5
        assert runtime.restarts >= 1


def _state(env: object) -> dict:
    return {k: v for k, v in vars(env).items() if not (k.startswith("__") and k.endswith("__"))}


def _in_process_rewards(pool: Pool, with_reference: bool) -> list[float]:
    """Rewards computed in this process, the way EnvScaler does, for comparison."""
    import copy

    modules: dict[str, dict] = {}
    rewards = []
    for task in pool.tasks:
        namespace = modules.setdefault(task.env_id, {})
        if not namespace:
            exec(pool.envs[task.env_id].env_class_code, namespace)
        cls = namespace[task.env_class_name]
        try:
            env = cls(copy.deepcopy(task.init_config))
        except TypeError:
            env = cls()
        for key, value in copy.deepcopy(task.init_config).items():
            setattr(env, key, value)
        initial = copy.deepcopy(_state(env))
        for call in task.reference_solution if with_reference else []:
            getattr(env, call.name)(**call.arguments)
        passed = 0
        for check in task.checklist_with_func:
            scope = {"initial_state": copy.deepcopy(initial)}
            exec(check.check_func, scope)
            passed += scope["check_func"](copy.deepcopy(_state(env))) is True
        rewards.append(passed / len(task.checklist_with_func))
    return rewards


@pytest.mark.slow  # every task of a generated pool in the sandbox
def test_the_generated_pool_scores_the_same_inside_the_sandbox():
    pool = generate_pool(n_envs=51, tasks_per_env=50, seed=0)
    with EnvRuntime(pool, RuntimeConfig(workers=2)) as runtime:
        reference = runtime.replay([(t.task_id, t.reference_solution) for t in pool.tasks])
        empty = runtime.replay([(t.task_id, []) for t in pool.tasks])
        assert len(runtime.pids) == len(pool.envs)  # one sandbox per environment
    assert [s.reward for s in reference] == _in_process_rewards(pool, with_reference=True)
    assert [s.reward for s in empty] == _in_process_rewards(pool, with_reference=False)
    assert {s.reward for s in reference} == {1.0}


@pytest.mark.slow  # pool checks in subprocesses
@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare")
def test_where_the_kernel_refuses_namespaces_untrusted_pools_are_refused(tmp_path):
    pool = write_handmade_pool(tmp_path / "pool")
    # a user namespace whose limit forbids creating more: the kernel refuses the sandbox
    prefix = [
        "unshare",
        "-U",
        "-r",
        "sh",
        "-c",
        'echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"',
        "sh",
    ]
    command = [
        sys.executable,
        "-m",
        "envsched_gnn.cli",
        "pool",
        "check",
        str(pool),
        "--no-progress",
    ]
    root = Path(__file__).parents[2]
    refused = subprocess.run(prefix + command, capture_output=True, text=True, cwd=root)
    if refused.stderr.startswith("unshare:"):
        pytest.skip(f"this machine refuses the outer user namespace: {refused.stderr}")
    assert refused.returncode == 1, refused.stderr
    assert "untrusted pools are refused" in refused.stderr
    assert "--trust-pool" in refused.stderr
    trusted = subprocess.run(
        [*prefix, *command, "--trust-pool"], capture_output=True, text=True, cwd=root
    )
    assert trusted.returncode == 0, trusted.stderr
    assert json.loads(trusted.stdout.strip().splitlines()[-1])["reference_min_reward"] == 1.0
    assert "running the trusted pool's code without one" in trusted.stderr


REALISTIC_CODE = """
import copy
import dataclasses
import os
import subprocess

import mpmath


@dataclasses.dataclass
class Account:
    owner: str
    balance: mpmath.mpf


class Bank:
    def __init__(self, init_config):
        self.accounts = {"A1": Account("kim", mpmath.mpf("10.5"))}
        self.log = copy.deepcopy(init_config.get("log", []))

    def deposit(self, account: str, amount: str):
        self.accounts[account].balance += mpmath.mpf(amount)
        self.log.append(subprocess.run(["true"]).returncode)
        return {"success": True, "data": str(self.accounts[account].balance)}
"""


def test_real_pools_imports_and_state_classes_score_as_they_did():
    """Top-level imports of os, subprocess, copy, mpmath; a state holding instances of the
    environment's own class and of mpmath's: the scorer loads them and judges honestly."""
    checks = [
        "final_state['accounts']['A1'].balance == 13",
        "final_state['accounts']['A1'].owner == 'kim' and final_state['log'] == [0]",
        "initial_state['accounts']['A1'].balance == 10.5",
    ]
    env = Environment(
        "bank", REALISTIC_CODE, [{"type": "function", "function": {"name": "deposit"}}]
    )
    task = dataclasses.replace(
        abuse_pool().tasks[0],
        task_id="bank",
        env_id="bank",
        env_class_name="Bank",
        checklist_with_func=[
            Check(c, f"def check_func(final_state):\n    return {c}\n") for c in checks
        ],
    )
    with EnvRuntime(Pool(envs={"bank": env}, tasks=[task]), CONFIG) as runtime:
        [done] = runtime.replay(
            [("bank", [ToolCall("deposit", {"account": "A1", "amount": "2.5"})])]
        )
        [nothing] = runtime.replay([("bank", [])])
    assert done == EpisodeScore(1.0, (True, True, True))
    assert nothing.checks == (False, False, True)
