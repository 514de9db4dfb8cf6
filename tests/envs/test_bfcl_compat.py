"""The compatibility suite: BFCL's multi-turn API classes (real environment code nobody here
wrote: GorillaFileSystem's ``mkdir`` returns None, TravelAPI's ``list_all_airports`` a list,
MathAPI ``mpmath`` numbers, four classes keep a ``random.Random``) run in the sandbox as they
run outside it. Rewards are compared in ``test_runtime_agreement.py``."""

from __future__ import annotations

import ast
import base64
import copy
import csv
import hashlib
import importlib
import json
import shutil
import sys
import zipfile

import pytest

from envsched_gnn.cli import main
from envsched_gnn.envs.bfcl import convert
from envsched_gnn.envs.bfcl_files import CODE_PACKAGE, BfclFiles, BfclImportError
from envsched_gnn.envs.episode import ToolFault
from envsched_gnn.envs.pool_io import environment_to_dict, task_to_dict
from envsched_gnn.envs.runtime import EnvRuntime
from envsched_gnn.envs.runtime_config import RuntimeConfig
from envsched_gnn.envs.tool_results import encode_result
from tests.envs.bfcl_pool import VENDORED, write_bfcl_pool
from tests.envs.in_process import in_process_runs

MODULES = {
    "GorillaFileSystem": "gorilla_file_system",
    "MathAPI": "math_api",
    "MessageAPI": "message_api",
    "TwitterAPI": "posting_api",
    "TicketAPI": "ticket_api",
    "TradingBot": "trading_bot",
    "TravelAPI": "travel_booking",
    "VehicleControlAPI": "vehicle_control",
}
"""BFCL's CLASS_FILE_PATH_MAPPING (constants/executable_backend_config.py), multi-turn classes."""
STATELESS = {"MathAPI"}
"""BFCL's STATELESS_CLASSES: built with cls() alone, no _load_scenario."""


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    return write_bfcl_pool(tmp_path_factory.mktemp("bfcl") / "pool")


def test_the_vendored_files_are_the_wheels_unmodified():
    record_file = VENDORED / "bfcl_eval-2026.3.23.dist-info" / "RECORD"
    record = {row[0]: row[1] for row in csv.reader(record_file.read_text().splitlines())}
    vendored = [
        path
        for path in VENDORED.rglob("*")
        if path.is_file()
        and path.relative_to(VENDORED).parts[0].startswith("bfcl_eval")
        and "__pycache__" not in path.parts
    ]
    assert len(vendored) == 25  # 9 modules, 4 package files, 8 documents, 2 data, 2 metadata
    for path in vendored:
        name = path.relative_to(VENDORED).as_posix()
        if name.endswith("/RECORD"):
            continue
        digest = base64.urlsafe_b64encode(hashlib.sha256(path.read_bytes()).digest())
        assert record[name] == "sha256=" + digest.rstrip(b"=").decode(), name


def test_import_bfcl_converts_every_base_task_from_a_folder_or_the_wheel(tmp_path, capsys):
    assert main(["pool", "import-bfcl", str(VENDORED), "--out", str(tmp_path / "pool")]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "envs": 32,
        "tasks": 200,
        "out": str(tmp_path / "pool"),
    }
    wheel = tmp_path / "bfcl_eval-2026.3.23-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path in sorted(VENDORED.rglob("*")):
            if path.is_file() and path.relative_to(VENDORED).parts[0].startswith("bfcl_eval"):
                archive.write(path, path.relative_to(VENDORED).as_posix())
    from_folder, from_wheel = convert(BfclFiles(VENDORED)), convert(BfclFiles(wheel))
    assert [environment_to_dict(e) for e in from_wheel.envs.values()] == [
        environment_to_dict(e) for e in from_folder.envs.values()
    ]
    assert [task_to_dict(t) for t in from_wheel.tasks] == [
        task_to_dict(t) for t in from_folder.tasks
    ]
    task = from_folder.task("multi_turn_base_0")
    assert task.env_id == "bfcl-GorillaFileSystem-TwitterAPI-no-cp"
    assert "cp" not in from_folder.envs[task.env_id].tool_names
    assert task.reference_solution[5].arguments == {"file_name": "final_report.pdf"}  # sort(...)
    assert "2026.3.23" in from_folder.envs[task.env_id].env_class_code


def test_what_cannot_be_converted_is_a_clear_error(tmp_path, capsys):
    with pytest.raises(BfclImportError, match="no call is made in a turn"):
        convert(BfclFiles(VENDORED), "miss_func")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    assert main(["pool", "import-bfcl", str(VENDORED), "--out", str(tmp_path / "full")]) == 1
    assert "exists and is not an empty folder" in capsys.readouterr().err
    copy_of = tmp_path / "bfcl"
    shutil.copytree(VENDORED, copy_of)
    answers = copy_of / "bfcl_eval/data/possible_answer/BFCL_v4_multi_turn_base.json"
    lines = answers.read_text().splitlines()
    first = json.loads(lines[0])
    first["ground_truth"][0][0] = "cd(folder=somewhere)"
    answers.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    with pytest.raises(BfclImportError, match="multi_turn_base_0.*cd.folder=somewhere.*literal"):
        convert(BfclFiles(copy_of))
    with pytest.raises(BfclImportError, match="neither a bfcl-eval wheel nor a folder"):
        BfclFiles(tmp_path / "missing.whl")


@pytest.fixture(scope="module")
def bfcl_classes():
    """BFCL's own classes, imported from the vendored package as BFCL's harness imports them."""
    sys.path.insert(0, str(VENDORED))
    writes_bytecode, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # keep data clean
    try:
        yield {
            name: getattr(importlib.import_module(f"{CODE_PACKAGE}.{module}"), name)
            for name, module in MODULES.items()
        }
    finally:
        sys.dont_write_bytecode = writes_bytecode
        sys.path.remove(str(VENDORED))
        for name in [m for m in sys.modules if m.split(".")[0] == "bfcl_eval"]:
            del sys.modules[name]


def _bfcl_text(result):
    """BFCL's rendering of a result (execute_multi_turn_func_call)."""
    if type(result) is str:
        return result
    if type(result) is dict:
        try:
            return json.dumps(result)
        except Exception:  # noqa: BLE001 - BFCL falls back to str on any failure
            return str(result)
    return str(result)


def _public(instance) -> dict:
    return {k: repr(v) for k, v in vars(instance).items() if not k.startswith("_")}


def test_converted_environments_behave_as_bfcls_own_classes(pool, bfcl_classes):
    """Each task's ground truth, run by BFCL's way on BFCL's classes (positional arguments as
    written), leaves every class in the state, and renders every result as, the converted
    environment running the reference solution."""
    answers = VENDORED / "bfcl_eval/data/possible_answer/BFCL_v4_multi_turn_base.json"
    truth = {json.loads(line)["id"]: json.loads(line)["ground_truth"] for line in answers.open()}
    questions = VENDORED / "bfcl_eval/data/BFCL_v4_multi_turn_base.json"
    namespaces: dict[str, dict] = {}
    for line in questions.open():
        entry = json.loads(line)
        instances = {}
        for name in entry["involved_classes"]:
            instances[name] = bfcl_classes[name]()
            if name not in STATELESS:
                scenario = copy.deepcopy(entry["initial_config"].get(name, {}))
                instances[name]._load_scenario(scenario, long_context=False)
        owner = {m: i for i in instances.values() for m in dir(i) if not m.startswith("_")}
        rendered = []
        for text in (call for turn in truth[entry["id"]] for call in turn):
            node = ast.parse(text, mode="eval").body
            args = [ast.literal_eval(a) for a in node.args]
            kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
            rendered.append(_bfcl_text(getattr(owner[node.func.id], node.func.id)(*args, **kwargs)))
        task = pool.task(entry["id"])
        namespace = namespaces.setdefault(task.env_id, {"__name__": "converted"})
        if len(namespace) == 1:
            exec(pool.envs[task.env_id].env_class_code, namespace)
        env = namespace[task.env_class_name](copy.deepcopy(task.init_config))
        for call in task.reference_solution:
            getattr(env, call.name)(**copy.deepcopy(call.arguments))
        assert env.responses == rendered, entry["id"]
        for name, instance in instances.items():
            assert _public(getattr(env, name)) == _public(instance), (entry["id"], name)


@pytest.mark.slow  # the BFCL pool checked in the sandbox
def test_pool_check_of_the_bfcl_pool_passes(tmp_path, capsys):
    write_bfcl_pool(tmp_path / "pool")
    code = main(["pool", "check", str(tmp_path / "pool"), "--no-progress", "--workers", "2"])
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0, summary["errors"][:3]
    assert (summary["envs"], summary["tasks"], summary["errors"]) == (32, 200, [])
    assert summary["reference_min_reward"] == 1.0
    assert summary["empty_max_reward"] < 1.0


@pytest.mark.slow  # every reference call of the BFCL pool in the sandbox
def test_the_policy_sees_every_result_a_successful_call_returns(pool):
    """Call by call, the sandbox answers what the tool returned in plain Python, encoded by the
    spec's rule (None, lists, mpmath numbers included), and never an error."""
    runs = [(t.task_id, t.reference_solution) for t in pool.tasks]
    expected = [run.results for run in in_process_runs(pool, runs)]
    assert not [r for results in expected for r in results if isinstance(r, Exception)]
    kinds = {type(r).__name__ for results in expected for r in results}
    assert {"NoneType", "list", "dict"} <= kinds
    values = [v for results in expected for r in results if isinstance(r, dict) for v in r.values()]
    assert "mpf" in {type(value).__name__ for value in values}
    episodes = [f"e{n}" for n in range(len(runs))]
    seen: list[list] = [[] for _ in runs]
    with EnvRuntime(pool, RuntimeConfig(workers=2)) as runtime:
        runtime.reset([(e, task_id) for e, (task_id, _) in zip(episodes, runs, strict=True)])
        for k in range(max(len(calls) for _, calls in runs)):
            active = [n for n, (_, calls) in enumerate(runs) if len(calls) > k]
            answers = runtime.call([(episodes[n], runs[n][1][k]) for n in active])
            for n, answer in zip(active, answers, strict=True):
                seen[n].append(answer)
    for (task_id, _), answers, results in zip(runs, seen, expected, strict=True):
        assert not [a for a in answers if isinstance(a, ToolFault)], task_id
        assert answers == [json.loads(encode_result(r)) for r in results], task_id


@pytest.mark.slow  # every task's reference and empty trajectory in the sandbox
def test_under_the_success_reward_the_pool_scores_as_bfcls_own_checker(pool):
    """BFCL scores a multi-turn entry valid (1) or not (0): its ``multi_turn_checker`` refuses
    an empty model response for any turn whose ground truth holds a call
    (``multi_turn:empty_turn_model_response``), then checks state and responses turn by turn;
    the ground truth itself passes. Under ``--reward success`` the converted pool agrees on
    both ends: each reference scores 1, each empty trajectory 0 (under the fraction it gets
    partial credit from the checks it leaves true)."""
    answers = VENDORED / "bfcl_eval" / "data" / "possible_answer" / "BFCL_v4_multi_turn_base.json"
    ground_truth = {
        row["id"]: row["ground_truth"]
        for row in map(json.loads, answers.read_text(encoding="utf-8").splitlines())
    }
    empty_is_valid = {task_id: not any(turns) for task_id, turns in ground_truth.items()}
    references = [(t.task_id, t.reference_solution) for t in pool.tasks]
    empties = [(t.task_id, []) for t in pool.tasks]
    assert {task_id for task_id, _ in references} == set(ground_truth)
    with EnvRuntime(pool, RuntimeConfig(workers=2, reward="success")) as runtime:
        reference = runtime.replay(references)
        empty = runtime.replay(empties)
    assert [s.reward for s in reference] == [1.0] * len(pool.tasks)
    assert [s.reward for s in empty] == [float(empty_is_valid[t]) for t, _ in empties]
    assert not any(empty_is_valid.values())
    partial = [sum(s.checks) / len(s.checks) for s in empty]
    assert sum(0.0 < r < 1.0 for r in partial) == 57  # fraction credit BFCL never gives
