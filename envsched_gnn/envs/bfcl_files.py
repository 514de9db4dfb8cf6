"""The files of the ``bfcl-eval`` package, read as data for ``pool import-bfcl``.

Nothing here imports or runs BFCL's code: modules are read as text and :mod:`ast`. A source is
a wheel or a folder holding ``bfcl_eval/``. :class:`ModuleSources` blanks out each import of a
sibling API module (the lines stay, so tracebacks point at the right line; the environment
gives the module those names), and keeps of a constants-only sibling (``long_context.py``,
190 KB) only the assignments needed.
"""

from __future__ import annotations

import ast
import json
import re
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from envsched_gnn.validation import UserError

CODE_DIR = "bfcl_eval/eval_checker/multi_turn_eval/func_source_code"
DATA_DIR = "bfcl_eval/data"
CODE_PACKAGE = CODE_DIR.replace("/", ".")


class BfclImportError(UserError, ValueError):
    """BFCL files that cannot be found, read or converted."""


class BfclFiles:
    """The files of a ``bfcl-eval`` package: a wheel, or a folder holding ``bfcl_eval/``."""

    def __init__(self, source: str | Path) -> None:
        source = Path(source)
        self._wheel: zipfile.ZipFile | None = None
        if source.is_file() and zipfile.is_zipfile(source):
            self._wheel = zipfile.ZipFile(source)
            names = self._wheel.namelist()
        elif source.is_dir():
            source = source.parent if source.name == "bfcl_eval" else source
            names = [
                path.relative_to(source).as_posix()
                for path in source.rglob("*")
                if path.is_file() and "__pycache__" not in path.parts
            ]
        else:
            raise BfclImportError(f"{source}: neither a bfcl-eval wheel nor a folder")
        self.source = source
        self._names = set(names)
        if not self.names(CODE_DIR, "*.py"):
            raise BfclImportError(f"{source}: holds no {CODE_DIR}/ (is it bfcl-eval?)")

    def names(self, folder: str, pattern: str = "*") -> list[str]:
        """The files directly in ``folder`` whose name matches ``pattern``, sorted."""
        paths = (PurePosixPath(name) for name in self._names)
        return sorted(
            p.as_posix() for p in paths if p.parent.as_posix() == folder and p.match(pattern)
        )

    def read(self, name: str) -> str:
        if name not in self._names:
            raise BfclImportError(f"{self.source}: has no {name}")
        if self._wheel is not None:
            return self._wheel.read(name).decode("utf-8")
        return (self.source / name).read_text(encoding="utf-8")

    def json_lines(self, name: str) -> list[dict]:
        """A BFCL data file: one JSON object per line."""
        items = []
        for number, line in enumerate(self.read(name).splitlines(), start=1):
            if line.strip():
                try:
                    items.append(json.loads(line))
                except json.JSONDecodeError as error:
                    raise BfclImportError(f"{name}: line {number}: not JSON: {error}") from None
        return items

    def version(self) -> str:
        """The package version, from its ``*.dist-info/METADATA`` (``"unknown"`` without)."""
        for name in sorted(self._names):
            if re.fullmatch(r"bfcl_eval-[^/]+\.dist-info/METADATA", name):
                found = re.search(r"^Version: (\S+)$", self.read(name), re.M)
                if found:
                    return found.group(1)
        return "unknown"


@dataclass(frozen=True)
class ModuleSource:
    """One module of CODE_DIR, ready to run as part of an environment's code."""

    source: str
    """Its text, sibling imports blanked out."""
    imports: list[tuple[str, list[str]]]
    """``(sibling module, names)`` of each blanked import."""
    tree: ast.Module
    """Its parsed text."""

    @property
    def classes(self) -> list[str]:
        return [node.name for node in self.tree.body if isinstance(node, ast.ClassDef)]


class ModuleSources:
    """The modules of CODE_DIR, each read and prepared once."""

    def __init__(self, files: BfclFiles) -> None:
        self.files = files
        self._modules: dict[str, ModuleSource] = {}
        self._constants: dict[tuple[str, frozenset[str]], str] = {}

    def module(self, name: str) -> ModuleSource:
        if name not in self._modules:
            self._modules[name] = _prepared(self.files.read(f"{CODE_DIR}/{name}.py"), name)
        return self._modules[name]

    def defining(self) -> dict[str, str]:
        """Class name -> the module that defines it at top level (modules that do not
        parse define nothing usable)."""
        found: dict[str, str] = {}
        for path in self.files.names(CODE_DIR, "*.py"):
            name = PurePosixPath(path).stem
            try:
                found.update(dict.fromkeys(self.module(name).classes, name))
            except (SyntaxError, BfclImportError):
                continue
        return found

    def bindings(self, name: str, names: Iterable[str]) -> str:
        """Of a sibling module of plain assignments, the assignments of ``names`` and of the
        names they use, verbatim; any other sibling module whole."""
        key = (name, frozenset(names))
        if key not in self._constants:
            module = self.module(name)
            if module.imports:
                raise BfclImportError(f"{CODE_DIR}/{name}.py: a sibling that imports siblings")
            self._constants[key] = _assignments(module, set(names))
        return self._constants[key]


def _prepared(source: str, name: str) -> ModuleSource:
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    imports = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(CODE_PACKAGE + "."):
            imports.append((node.module[len(CODE_PACKAGE) + 1 :], [a.name for a in node.names]))
            for number in range(node.lineno - 1, node.end_lineno):
                lines[number] = "\n"
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and any(
            (getattr(node, "module", None) or alias.name).split(".")[0] == "bfcl_eval"
            for alias in node.names
        ):
            raise BfclImportError(
                f"{CODE_DIR}/{name}.py: {ast.unparse(node)!r}: only imports of sibling modules "
                "of the multi-turn API classes are supported"
            )
    return ModuleSource("".join(lines), imports, tree)


def _assignments(module: ModuleSource, wanted: set[str]) -> str:
    body = module.tree.body
    if not all(isinstance(node, (ast.Assign, ast.AnnAssign, ast.Expr)) for node in body):
        return module.source
    lines = module.source.splitlines(keepends=True)
    while True:
        kept = [n for n in body if not isinstance(n, ast.Expr) and wanted & _names(n, ast.Store)]
        used = set().union(*(_names(node, ast.Load) for node in kept))
        if used <= wanted:
            return "\n".join("".join(lines[n.lineno - 1 : n.end_lineno]) for n in kept)
        wanted |= used


def _names(node: ast.AST, context: type) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, context)}
