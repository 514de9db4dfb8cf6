"""Which classes the scorer loads from a state's pickle, and why that is safe (stdlib only).

The scorer (:mod:`~envsched_gnn.envs.worker`, which imports this file by its bare name) gets
states pickled by the tool process, which runs untrusted code driven by the policy. A pickle
is a program: each global it names is looked up by :meth:`StateUnpickler.find_class`, and
may then be called (``REDUCE``), instantiated (``NEWOBJ``), given a state (``BUILD``:
``__setstate__`` or ``__dict__.update``), hashed and compared. One callable that runs code
(``subprocess.Popen``, ``os.system``, ``builtins.getattr``, ``types.FunctionType`` with
``types.CodeType``) is enough to run anything in the scorer. So it resolves exactly:

1. **The environment's own classes**: defined by its code (``cls.__module__`` is the
   environment's module), reached through classes only (``Outer.Inner``), no dunder name.
   That code is the pool's, and the scorer runs it anyway to build those objects; what it
   *imports* (``envsched_env_x.subprocess.Popen``, ``Popen`` imported by name) is not loaded.
2. **The reviewed standard-library list** :data:`STATE_CLASSES`: data classes whose
   construction, ``__setstate__``, hash and comparison only set and read their own data
   (checked by reading their source), plus two reconstructors (``re._compile``,
   ``array._array_reconstructor``). Nothing else of those modules: not ``types.FunctionType``,
   not ``random.SystemRandom`` (unpicklable anyway), not ``zoneinfo.ZoneInfo`` (reads files),
   not ``copyreg`` (protocol 2 and later never need it).
3. **Classes of the sandbox's packages** (``SandboxConfig.packages``, ``mpmath`` by default):
   classes only, no dunder name. ``--sandbox-package`` trusts a package's classes to be safe
   to build from a state: add only packages whose classes are data.

Not "classes of any module the environment imports": that is any module (``subprocess``,
``os``, ``socket``), and whether a class runs code when built, hashed or compared
(``__new__``, ``__init__``, ``__setstate__``, ``__setattr__``, ``__getattr__``, ``__hash__``,
``__eq__``, its metaclass's ``__call__``) cannot be decided without reading it. Anything else
is refused with :class:`StateRefused`, reported once as "state cannot be loaded (class X,
task Y)", never as a failed check.
"""

from __future__ import annotations

import io
import pickle
import sys
import types
from collections.abc import Callable

_PATH_CLASSES = frozenset(
    {"PurePath", "PurePosixPath", "PureWindowsPath", "Path", "PosixPath", "WindowsPath"}
)
_DECIMAL_SIGNALS = frozenset(
    {"Clamped", "DivisionByZero", "FloatOperation", "Inexact", "InvalidOperation"}
    | {"Overflow", "Rounded", "Subnormal", "Underflow"}
)
STATE_CLASSES: dict[str, frozenset[str]] = {
    "builtins": frozenset(
        {"set", "frozenset", "bytearray", "bytes", "complex", "range", "slice"}
        | {"list", "dict", "tuple", "str", "int", "float", "bool", "object"}
    ),
    "collections": frozenset(
        {"OrderedDict", "defaultdict", "deque", "Counter", "ChainMap"}
        | {"UserDict", "UserList", "UserString"}
    ),
    "datetime": frozenset({"date", "time", "datetime", "timedelta", "timezone", "tzinfo"}),
    # Context is pickled with its flags and traps, which name the signal classes
    "decimal": frozenset({"Decimal", "Context", "DecimalTuple"}) | _DECIMAL_SIGNALS,
    "fractions": frozenset({"Fraction"}),
    "uuid": frozenset({"UUID", "SafeUUID"}),
    "array": frozenset({"array", "_array_reconstructor"}),
    "ipaddress": frozenset(
        {"IPv4Address", "IPv6Address", "IPv4Network", "IPv6Network"}
        | {"IPv4Interface", "IPv6Interface"}
    ),
    "random": frozenset({"Random"}),
    "re": frozenset({"_compile"}),  # a compiled pattern pickles as re._compile(pattern, flags)
    "string": frozenset({"Template", "Formatter"}),
    "pathlib": _PATH_CLASSES,
    "pathlib._local": _PATH_CLASSES,  # where Python 3.13 defines them
    "time": frozenset({"struct_time"}),
    "types": frozenset({"SimpleNamespace"}),
}
"""The reviewed standard-library globals a state may name: module -> names (see above)."""


class StateRefused(pickle.UnpicklingError):
    """A state names a global the scorer does not load; ``name`` is ``module.qualname``."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(
            f"the state holds {name}, which the scorer does not load (it loads the "
            "environment's own classes, the reviewed standard-library data classes and the "
            "classes of the sandbox's packages)"
        )


class StateUnpickler(pickle.Unpickler):
    """Loads one pickled state, resolving globals by the three rules of the module docstring.

    ``env_module`` returns the environment's module (executing its code the first time a
    state needs one of its classes); ``own_module`` is that module's name; ``packages`` are
    the sandbox's packages. :attr:`last_global` is the last global resolved (or refused), so
    a failure while building an object can name the class it was building.
    """

    def __init__(
        self,
        payload: bytes,
        own_module: str,
        env_module: Callable[[], types.ModuleType],
        packages: frozenset[str],
    ) -> None:
        super().__init__(io.BytesIO(payload))
        self.own_module = own_module
        self.env_module = env_module
        self.packages = packages
        self.last_global = ""

    def find_class(self, module: str, name: str) -> object:
        self.last_global = f"{module}.{name}"
        if module == self.own_module:
            found = _own_class(self.env_module(), name)
        elif name in STATE_CLASSES.get(module, ()):
            found = getattr(_imported(module), name, None)
        elif module.split(".")[0] in self.packages:
            found = _class_at(_imported(module), name)
        else:
            found = None
        if found is None:
            raise StateRefused(self.last_global)
        return found


def _imported(module: str) -> types.ModuleType:
    __import__(module)
    return sys.modules[module]


def _class_at(module: types.ModuleType, qualname: str) -> type | None:
    """The class at ``qualname`` in ``module``, reached through classes, no dunder part."""
    found: object = module
    for part in qualname.split("."):
        if part.startswith("__") or not (found is module or isinstance(found, type)):
            return None
        found = getattr(found, part, None)
    return found if isinstance(found, type) else None


def _own_class(module: types.ModuleType, qualname: str) -> type | None:
    """A class the environment's code defines (not one it imports)."""
    found = _class_at(module, qualname)
    return found if found is not None and found.__module__ == module.__name__ else None
