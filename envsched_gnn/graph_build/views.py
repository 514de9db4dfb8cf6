"""The six TF-IDF views of a task and the within-environment similarity (spec section 3).

    sim_within(i, j) = (1/6) sum_{v=1..6} cos(x_v(i), x_v(j))

TF-IDF fitted per environment; the six views are listed in docs/design.md §3.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np

from envsched_gnn.envs.pool import Task

IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]*")
CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
CODE_TOKENS = r"(?u)[A-Za-z_][A-Za-z0-9_]*|<[a-z]+>|\d+"


def instruction_text(task: Task) -> str:
    return task.task


def verifier_text(task: Task) -> str:
    return "\n".join(f"{c.check_item}\n{c.check_func}" for c in task.checklist_with_func)


def _structure_tokens(node: ast.AST) -> list[str]:
    """A syntax tree as tokens: node types, operators and names; literals become ``<type>``.

    String literals that look like field names (lower-case identifiers) are kept, since
    which state fields a check reads is part of its shape; other literals are values.
    """
    tokens: list[str] = []
    for child in ast.walk(node):
        tokens.append(type(child).__name__)
        if isinstance(child, ast.Constant):
            value = child.value
            if isinstance(value, str) and IDENTIFIER.fullmatch(value):
                tokens.append(value)
            else:
                tokens.append(f"<{type(value).__name__.lower()}>")
        elif isinstance(child, ast.Name):
            tokens.append(child.id)
        elif isinstance(child, ast.Attribute):
            tokens.append(child.attr)
    return tokens


LITERAL = re.compile(r"""([A-Za-z0-9_]*)(?:'([^'\\\n]*)'|"([^"\\\n]*)")|\b[0-9]+\b""")
"""Left to right: a one-line string literal without escapes, with whatever word characters
stand before it (a prefix such as ``f``), or a run of digits."""
UNSAFE_SOURCE = re.compile(r"""#|\\|'''|\"\"\"""")
"""What :data:`LITERAL` could misread: comments, escapes, triple quotes."""


def _shape_of(source: str) -> str | None:
    """``source`` with every literal replaced by its shape: an identifier-like string kept,
    any other string one non-identifier string, a run of digits ``0`` (so ``1.5`` stays a
    float); None when a literal cannot be read this way (a prefixed string, a comment...)."""
    if UNSAFE_SOURCE.search(source):
        return None
    prefixed = False

    def shape(match: re.Match) -> str:
        nonlocal prefixed
        if match.group(1):
            prefixed = True
        text = match.group(2) if match.group(2) is not None else match.group(3)
        if text is None:
            return "0"
        return repr(text) if IDENTIFIER.fullmatch(text) else "'-'"

    shaped = LITERAL.sub(shape, source)
    return None if prefixed else shaped


def source_structure_text(source: str) -> str:
    """A check source's syntax tree as :func:`_structure_tokens`, or ``<unparsable>``."""
    try:
        return " ".join(_structure_tokens(ast.parse(source)))
    except SyntaxError:
        return "<unparsable>"


_shape_structure = lru_cache(maxsize=4096)(source_structure_text)


def check_structure_text(source: str) -> str:
    """One check's syntax tree as :func:`_structure_tokens`, or ``<unparsable>``; computed once
    per literal shape (:func:`_shape_of`), since checks repeat in shape.
    """
    shape = _shape_of(source)
    return source_structure_text(source) if shape is None else _shape_structure(shape)


def verifier_structure_text(task: Task) -> str:
    return "\n".join(check_structure_text(check.check_func) for check in task.checklist_with_func)


def initial_context_text(task: Task) -> str:
    return json.dumps(task.init_config, sort_keys=True, default=str)


def _words_of_name(name: str) -> str:
    return " ".join(CAMEL.sub(" ", name).replace("_", " ").split())


def operation_text(task: Task) -> str:
    """The reference solution in words (``call get user with user id U1``), else the check items."""
    if not task.reference_solution:
        return "\n".join(c.check_item for c in task.checklist_with_func)
    steps = []
    for n, call in enumerate(task.reference_solution, start=1):
        arguments = " ".join(
            f"{_words_of_name(key)} {json.dumps(value, sort_keys=True, default=str)}"
            for key, value in sorted(call.arguments.items())
        )
        steps.append(f"step {n} call {_words_of_name(call.name)} with {arguments}".strip())
    return "\n".join(steps)


VIEWS: tuple[tuple[str, Callable[[Task], str], dict], ...] = (
    ("instruction_words", instruction_text, {"analyzer": "word", "ngram_range": (1, 2)}),
    ("instruction_chars", instruction_text, {"analyzer": "char_wb", "ngram_range": (3, 5)}),
    ("verifier_text", verifier_text, {"analyzer": "word", "token_pattern": CODE_TOKENS}),
    (
        "verifier_structure",
        verifier_structure_text,
        {
            "analyzer": "word",
            "token_pattern": CODE_TOKENS,
            "ngram_range": (1, 3),
            "lowercase": False,
        },
    ),
    ("initial_context", initial_context_text, {"analyzer": "word", "token_pattern": CODE_TOKENS}),
    ("operation", operation_text, {"analyzer": "word", "ngram_range": (1, 2)}),
)


def view_cosines(texts: Sequence[str], options: dict) -> np.ndarray:
    """Cosine matrix ``(n, n)`` float64 of one TF-IDF view fitted on ``texts``; zeros if empty."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    try:
        x = TfidfVectorizer(dtype=np.float64, **options).fit_transform(texts)
    except ValueError:  # empty vocabulary: no document has a token of this view
        return np.zeros((len(texts), len(texts)))
    return (x @ x.T).toarray()


def within_similarity(tasks: Sequence[Task]) -> np.ndarray:
    """Mean of the six view cosines over the tasks of ONE environment, ``(n, n)`` float64."""
    total = np.zeros((len(tasks), len(tasks)))
    for _, text_of, options in VIEWS:
        total += view_cosines([text_of(task) for task in tasks], options)
    return total / len(VIEWS)
