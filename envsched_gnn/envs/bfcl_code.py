"""The Python that ``pool import-bfcl`` writes: one environment's code, and its checks.

The environment code (:func:`environment_code`) keeps the modules of a task's BFCL API
classes verbatim, each run in a namespace of its own (their module-level names clash:
``DEFAULT_STATE`` in seven, ``datetime`` a module in one and a class in another), and adds a
class holding an instance of each, built as BFCL's harness builds them, that delegates every
tool and records each result as BFCL renders it (``responses``). The checks
(:func:`state_check`, :func:`response_check`) replay the ground truth on the initial state
inside the check, as BFCL's checker does next to the model's calls.
"""

from __future__ import annotations

import pprint

LICENSE_LINE = (
    "the Berkeley Function Calling Leaderboard (bfcl-eval {version}, Apache License 2.0, "
    "https://github.com/ShishirPatil/gorilla/tree/main/berkeley-function-call-leaderboard)"
)

_ENVIRONMENT = '''"""BFCL multi-turn APIs {classes} as one environment.

Converted by `envsched-gnn pool import-bfcl` from {origin}. The modules {modules} are kept
verbatim in _BFCL_SOURCES (an import from a sibling module is blanked out; the module gets
those names instead) and each runs in a namespace of its own, as in its package, so that
their module-level names do not clash; their classes become this module's.

{class_name} holds one instance of each API class, in the attribute named after it, built as
BFCL's harness builds it: cls(), then, for every class but the stateless ones,
_load_scenario(copy.deepcopy(initial_config.get(name, {{}})), long_context=...). Each tool is
its class's method; `responses` lists each call's result as BFCL's harness renders it (a
string as it is, a dict as JSON, anything else by str), which the response checks compare.
"""

import copy
import json

_BFCL_SOURCES = {sources}
_BFCL_IMPORTS = {imports}
_BFCL_CLASSES = {module_classes}
_BFCL_STATEFUL = {stateful}
_BFCL_TOOLS = {tools}


def _bfcl_modules():
    namespaces = {{}}
    for module, source in _BFCL_SOURCES.items():
        namespace = {{"__name__": __name__, "__builtins__": __builtins__}}
        for sibling, names in _BFCL_IMPORTS.get(module, []):
            namespace.update({{name: namespaces[sibling][name] for name in names}})
        exec(compile(source, f"<bfcl_eval {{module}}>", "exec", dont_inherit=True), namespace)
        namespaces[module] = namespace
    return namespaces


for _module, _namespace in _bfcl_modules().items():
    globals().update({{name: _namespace[name] for name in _BFCL_CLASSES.get(_module, [])}})


def _bfcl_text(result):
    """A call's result as BFCL's harness (execute_multi_turn_func_call) renders it."""
    if type(result) == str:
        return result
    if type(result) == dict:
        try:
            return json.dumps(result)
        except Exception:
            return str(result)
    return str(result)


class {class_name}:
    """{classes}: one instance of each, and the rendered result of every call."""

    def __init__(self, init_config):
        initial_config = init_config.get("initial_config", {{}})
        for name in _BFCL_TOOLS:
            instance = globals()[name]()
            if name in _BFCL_STATEFUL:
                instance._load_scenario(
                    copy.deepcopy(initial_config.get(name, {{}})),
                    long_context=init_config.get("long_context", False),
                )
            setattr(self, name, instance)
        self.responses = []

    def _bfcl_call(self, owner, tool, args, kwargs):
        result = getattr(getattr(self, owner), tool)(*args, **kwargs)
        self.responses.append(_bfcl_text(result))
        return result


def _bfcl_tool(owner, tool):
    method = getattr(globals()[owner], tool)

    def call(self, *args, **kwargs):
        return self._bfcl_call(owner, tool, args, kwargs)

    call.__name__ = tool
    call.__qualname__ = "{class_name}." + tool
    call.__doc__ = method.__doc__
    call.__wrapped__ = method  # inspect.signature shows the tool's own parameters
    return call


for _owner, _names in _BFCL_TOOLS.items():
    for _tool in _names:
        setattr({class_name}, _tool, _bfcl_tool(_owner, _tool))
'''

_STATE_CHECK = """GROUND_TRUTH = {calls}


def check_func(final_state):
    expected = initial_state[{owner!r}]
    for tool, arguments in GROUND_TRUTH:
        try:
            getattr(expected, tool)(**arguments)
        except Exception:
            pass
    actual = final_state[{owner!r}]
    return all(
        hasattr(actual, name) and getattr(actual, name) == value
        for name, value in vars(expected).items()
        if not name.startswith("_")
    )
"""

_RESPONSE_CHECK = """GROUND_TRUTH = {calls}


def check_func(final_state):
    import json

    def text(result):
        if type(result) == str:
            return result
        if type(result) == dict:
            try:
                return json.dumps(result)
            except Exception:
                return str(result)
        return str(result)

    instances = {{name: initial_state[name] for name in {owners!r}}}
    expected = []
    for turn, owner, tool, arguments in GROUND_TRUTH:
        try:
            result = text(getattr(instances[owner], tool)(**arguments))
        except Exception as error:
            result = f"Error during execution: {{error}}"
        if turn == {turn}:
            expected.append(result)
    remaining = list(final_state["responses"])
    for result in expected:
        if result not in remaining:
            return False
        remaining.remove(result)
    return True
"""


def environment_code(
    class_name: str,
    origin: str,
    sources: dict[str, str],
    imports: dict[str, list[tuple[str, list[str]]]],
    module_classes: dict[str, list[str]],
    stateful: list[str],
    tools: dict[str, list[str]],
) -> str:
    """The environment's code: ``sources`` (module -> verbatim source) run in order, each
    with the names ``imports`` gives it from earlier modules; the classes ``module_classes``
    lists become the environment module's; ``tools`` (API class -> its tools, in the order
    the classes are built) are delegated by ``class_name``."""
    return _ENVIRONMENT.format(
        classes=", ".join(tools),
        origin=origin,
        modules=", ".join(sources),
        class_name=class_name,
        sources=_literal(sources),
        imports=_literal(imports),
        module_classes=_literal(module_classes),
        stateful=_literal(stateful),
        tools=_literal(tools),
    )


def state_check(owner: str, calls: list[tuple[str, dict]]) -> str:
    """BFCL's state check of one API class: after the episode, every public attribute of
    ``owner`` equals its value after the ground-truth ``calls`` (``(tool, arguments)`` of that
    class, in order) on the initial state."""
    return _STATE_CHECK.format(owner=owner, calls=_literal(calls))


def response_check(owners: list[str], calls: list[tuple[int, str, str, dict]], turn: int) -> str:
    """BFCL's response check of one turn: the rendered results of turn ``turn``'s ground-truth
    calls, replayed on the initial state after the earlier turns' (``calls``: ``(turn, class,
    tool, arguments)`` up to that turn), are all among the episode's ``responses`` (as a
    multiset, in any order)."""
    return _RESPONSE_CHECK.format(owners=owners, calls=_literal(calls), turn=turn)


def _literal(value: object) -> str:
    """A Python literal of ``value`` (JSON-like data), wrapped to a readable width."""
    return pprint.pformat(value, width=96, sort_dicts=False)
