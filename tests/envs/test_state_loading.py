"""The scorer loads the standard library's data classes from a state and still refuses every
pickle that would run code; a refusal is reported once as "state cannot be loaded (class X,
task Y)", by the runtime and by ``pool check``, never as checks that fail."""

from __future__ import annotations

import json
import os
import pickle
import random
import subprocess
import types

import pytest

from envsched_gnn.cli import main
from envsched_gnn.envs.pool import Check, Environment, Pool, Task, ToolCall
from envsched_gnn.envs.pool_io import save_pool
from envsched_gnn.envs.runtime import EnvRuntime
from envsched_gnn.envs.runtime_config import RuntimeConfig
from envsched_gnn.envs.state_loading import StateRefused, StateUnpickler

STDLIB_STATE_CODE = """
import array
import collections
import datetime
import decimal
import fractions
import ipaddress
import pathlib
import random
import re
import string
import time
import types
import uuid


class Ledger:
    def __init__(self, init_config):
        self.rng = random.Random(7)
        self.opened = datetime.datetime(2026, 3, 1, 9, 30, tzinfo=datetime.timezone.utc)
        self.balance = decimal.Decimal("10.50")
        self.recent = collections.deque([1, 2], maxlen=3)
        self.profile = types.SimpleNamespace(name="kim", tier=2)
        self.pattern = re.compile(r"INV-\\d+", re.IGNORECASE)
        self.extra = {
            "counts": collections.Counter("aab"),
            "by_day": collections.defaultdict(list, {"mon": [1]}),
            "order": collections.OrderedDict(a=1),
            "share": fractions.Fraction(1, 3),
            "codes": array.array("i", [4, 5]),
            "home": pathlib.PurePosixPath("/srv/ledger"),
            "stamp": time.gmtime(0),
            "id": uuid.UUID(int=5),
            "host": ipaddress.ip_address("10.0.0.1"),
            "note": string.Template("$who paid"),
            "span": datetime.timedelta(days=2),
        }

    def pay(self, amount: str):
        self.balance -= decimal.Decimal(amount)
        self.recent.append(self.rng.randint(0, 9))
        self.profile.tier += 1
"""
CHECKS = [
    "final_state['balance'] == decimal.Decimal('8.25')",
    "final_state['recent'][-1] == random.Random(7).randint(0, 9)",
    "final_state['recent'].maxlen == 3 and list(final_state['recent'])[:2] == [1, 2]",
    "final_state['rng'].getstate() != initial_state['rng'].getstate()",
    "final_state['opened'].isoformat() == '2026-03-01T09:30:00+00:00'",
    "final_state['profile'].tier == 3 and final_state['profile'].name == 'kim'",
    "final_state['pattern'].match('inv-42') is not None",
    "final_state['extra']['counts']['a'] == 2 and final_state['extra']['by_day']['tue'] == []",
    "final_state['extra']['share'] * 3 == 1 and list(final_state['extra']['codes']) == [4, 5]",
    "str(final_state['extra']['home']) == '/srv/ledger'",
    "final_state['extra']['stamp'].tm_year == 1970",
    "final_state['extra']['id'].int == 5 and final_state['extra']['host'].is_private",
    "final_state['extra']['note'].substitute(who='kim') == 'kim paid'",
    "final_state['extra']['span'].days == 2 and list(final_state['extra']['order']) == ['a']",
]


def _check(body: str) -> Check:
    return Check(
        body, f"import decimal\nimport random\n\ndef check_func(final_state):\n    return {body}\n"
    )


def _tools(*names: str) -> list[dict]:
    return [{"type": "function", "function": {"name": name}} for name in names]


def test_states_holding_the_standard_librarys_data_classes_are_scored():
    env = Environment("ledger", STDLIB_STATE_CODE, _tools("pay"))
    task = Task("ledger", "ledger", "Ledger", {}, "pay", [_check(body) for body in CHECKS])
    with EnvRuntime(Pool(envs={"ledger": env}, tasks=[task]), RuntimeConfig(workers=1)) as runtime:
        [paid] = runtime.replay([("ledger", [ToolCall("pay", {"amount": "2.25"})])])
        [idle] = runtime.replay([("ledger", [])])
    assert paid.unscored == "" and paid.checks == (True,) * len(CHECKS), paid.errors
    # doing nothing: the balance, the drawn number, the generator and the tier are unchanged
    assert idle.unscored == "" and [idle.checks[i] for i in (0, 1, 3, 5)] == [False] * 4


REFUSED_CODE = r"""
import os
import subprocess
import sys
from subprocess import Popen

MARKER = "/tmp/the-scorer-ran-it"


class Spawner:
    def __reduce__(self):
        return (subprocess.Popen, (["touch", MARKER],))


class Shell:
    def __reduce__(self):
        return (os.system, ("touch " + MARKER,))


class Smuggler:
    # pickled as a global of the environment's own module: envsched_env_<id>.subprocess.Popen
    def __reduce__(self):
        Popen.__module__, Popen.__qualname__ = __name__, "subprocess.Popen"
        return (Popen, (["touch", MARKER],))


class Forger:
    pass


def _forged(env):
    # what a tool process taken over could send: a pickle no object pickles to
    return b"ctypes\nFunctionType\n(tR."


class Holder:
    def __init__(self, init_config):
        self.kept = None

    def keep(self, kind: str):
        kinds = {"popen": Spawner, "system": Shell, "smuggle": Smuggler, "forge": Forger}
        self.kept = kinds[kind]()
        if kind == "forge":
            sys.modules["__main__"]._pickled = _forged  # the tool process's own pickler

    def ran(self):
        return os.path.exists(MARKER)
"""
REFUSED = {
    "popen": "subprocess.Popen",
    "system": "posix.system",
    "smuggle": "envsched_env_hsmuggle.subprocess.Popen",
    "forge": "types.FunctionType",
}


def refusal_pool() -> Pool:
    """One task per refused kind, each in an environment (so a worker) of its own: the
    smuggling and the forging tools change their worker for good."""
    envs = {f"h{k}": Environment(f"h{k}", REFUSED_CODE, _tools("keep", "ran")) for k in REFUSED}
    check = _check("final_state['kept'] is not None")
    tasks = [
        Task(
            kind,
            f"h{kind}",
            "Holder",
            {},
            f"keep {kind}",
            [check, check],
            reference_solution=[ToolCall("keep", {"kind": kind})],
        )
        for kind in REFUSED
    ]
    return Pool(envs=envs, tasks=tasks)


def test_pickles_that_would_run_code_are_refused_and_reported_once_as_such():
    pool = refusal_pool()
    with EnvRuntime(pool, RuntimeConfig(workers=1)) as runtime:
        with pytest.warns(RuntimeWarning) as warned:
            scores = runtime.replay([(t.task_id, t.reference_solution) for t in pool.tasks])
            again = runtime.replay([(t.task_id, t.reference_solution) for t in pool.tasks])
        runtime.reset([("probe", "popen")])
        [ran] = runtime.call([("probe", ToolCall("ran"))])
    assert ran is False  # the scorer shares the sandbox's /tmp: nothing it loaded ran
    for task, score in zip(pool.tasks, scores, strict=True):
        named = REFUSED[task.task_id]
        assert score.unscored.startswith(
            f"state cannot be loaded (class {named}, task {task.task_id!r}): the state holds "
            f"{named}, which the scorer does not load"
        ), score.unscored
        assert score.reward == 0.0 and score.checks == (False, False)
    assert [score.unscored for score in again] == [score.unscored for score in scores]
    messages = [str(warning.message) for warning in warned]
    assert len(messages) == len(pool.tasks)  # once per task, not once per replay or check
    assert all(message.startswith("state cannot be loaded (class ") for message in messages)


def test_pool_check_reports_an_unloadable_state_once_per_task_not_as_failed_checks(
    tmp_path, capsys
):
    save_pool(refusal_pool(), tmp_path / "pool")
    code = main(["pool", "check", str(tmp_path / "pool"), "--no-progress", "--workers", "1"])
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 1
    assert len(summary["errors"]) == len(REFUSED)
    for kind, named in REFUSED.items():
        [error] = [e for e in summary["errors"] if f"task {kind!r}" in e]
        assert error.startswith(f"state cannot be loaded (class {named}, task {kind!r})")
        assert "failed checks" not in error


class _Reduces:
    def __init__(self, target, *args):
        self.target, self.args = target, args

    def __reduce__(self):
        return (self.target, self.args)


def _pickled(payload: object) -> bytes:
    return pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)


@pytest.mark.parametrize(
    ("data", "named"),
    [
        (_pickled(_Reduces(subprocess.Popen, ["true"])), "subprocess.Popen"),
        (_pickled(_Reduces(os.system, "true")), "posix.system"),
        (_pickled(_Reduces(getattr, int, "real")), "builtins.getattr"),
        (_pickled(_Reduces(type, "X", (), {})), "builtins.type"),
        (_pickled(_Reduces(random.SystemRandom)), "random.SystemRandom"),
        (b"ctypes\nCodeType\n.", "types.CodeType"),
        (b"ctypes\nFunctionType\n.", "types.FunctionType"),
        (b"ccollections\nOrderedDict.__class__\n.", "collections.OrderedDict.__class__"),
        (b"cre\ncompile\n.", "re.compile"),
    ],
)
def test_the_unpickler_refuses_what_is_not_on_its_lists(data, named):
    unpickler = StateUnpickler(data, "envsched_env_x", lambda: types.ModuleType("x"), frozenset())
    with pytest.raises(StateRefused) as refused:
        unpickler.load()
    assert refused.value.name == named


def test_through_the_environments_module_only_its_own_classes_load():
    module = types.ModuleType("envsched_env_x")
    exec(
        "import subprocess\nfrom collections import OrderedDict\n"
        "class Own:\n    class Inner:\n        pass\n",
        module.__dict__,
    )

    def resolve(name: str):
        unpickler = StateUnpickler(b"", "envsched_env_x", lambda: module, frozenset())
        return unpickler.find_class("envsched_env_x", name)

    assert resolve("Own") is module.Own and resolve("Own.Inner") is module.Own.Inner
    for name in ("subprocess.Popen", "OrderedDict", "Own.__class__", "Own.__init__"):
        with pytest.raises(StateRefused):
            resolve(name)
