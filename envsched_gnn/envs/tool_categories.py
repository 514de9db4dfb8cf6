"""The operation category of a tool, from its name, description, parameters and effects.

The categories are docs/design.md §3's: reads (lookup, list/filter, identifier resolution,
eligibility check, state precondition, validate), changes (create, update, status transition,
delete, relation replacement) and neither (escalation, computation, other operation).
Evidence, in the order it is weighed:

1. the name's words (``snake_case``, ``camelCase``): hand-over to a human, computing or
   thinking; identifier resolution (``find_user_id_by_email``, ``*_by_name``); the leading
   verb (:data:`VERBS`, :data:`SHELL_COMMANDS`). A closing verb is a *delete* when the
   description says the record is removed, a *status transition* when it is marked; a
   generic verb is a *relation replacement* when the description re-points the record "to
   another / a new / a different" entity or a parameter names new ids (``new_item_ids``);
2. the description's leading verb (after "Use the tool to"), when the name has none;
3. the state diff of replayed calls (:mod:`envsched_gnn.envs.state_diff`), when known: a
   proposal it agrees with stays, otherwise its strongest kind decides (:data:`EFFECT_ORDER`);
   a generic verb whose calls re-point links is a relation replacement. A diff without change
   leaves the proposal: a replay cannot tell a read from a write that had nothing to do.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

LOOKUP = "lookup"
LIST = "list/filter"
RESOLVE = "identifier resolution"
ELIGIBILITY = "eligibility check"
PRECONDITION = "state precondition"
CREATE = "create"
UPDATE = "update"
TRANSITION = "status transition"
DELETE = "delete"
RELATION = "relation replacement"
VALIDATE = "validate"
ESCALATION = "escalation"
COMPUTATION = "computation"
OTHER = "other operation"

CATEGORIES = (
    LOOKUP,
    LIST,
    RESOLVE,
    ELIGIBILITY,
    PRECONDITION,
    CREATE,
    UPDATE,
    TRANSITION,
    DELETE,
    RELATION,
    VALIDATE,
    ESCALATION,
    COMPUTATION,
    OTHER,
)


def _lexicon(*groups: tuple[str, str]) -> dict[str, str]:
    words: dict[str, str] = {}
    for category, verbs in groups:
        for verb in verbs.split():
            words[verb] = category
    return words


VERBS = _lexicon(
    (LOOKUP, "get fetch lookup show view read retrieve describe find inspect display"),
    (LIST, "list search filter query browse"),
    (RESOLVE, "resolve identify"),
    (ELIGIBILITY, "check is can has eligible"),
    (PRECONDITION, "ensure require assert"),
    (CREATE, "create add register book open issue enroll schedule file place new make reserve"),
    (CREATE, "log record insert request apply post copy send"),
    (UPDATE, "update set change edit modify adjust rename flag hold waitlist mark note tag"),
    (UPDATE, "increase decrease extend suspend refer write"),
    (TRANSITION, "approve confirm activate complete fulfill fill ship dispatch publish sign"),
    (TRANSITION, "submit process settle accept start finish finalize release admit certify"),
    (TRANSITION, "launch authorize reject renew grant award return"),
    (DELETE, "delete remove cancel void withdraw revoke terminate drop archive close"),
    (DELETE, "discard retire discharge expire deactivate erase purge"),
    (RELATION, "reassign transfer replace move swap switch rebook reroute relocate assign"),
    (RELATION, "exchange"),
    (VALIDATE, "validate verify audit"),
    (COMPUTATION, "calculate compute convert evaluate"),
)
"""Leading verb of a tool name -> category."""

SHELL_COMMANDS = _lexicon(
    (LOOKUP, "cat head tail pwd du wc stat sort diff uniq"),
    (LIST, "ls find grep locate tree"),
    (CREATE, "mkdir touch cp ln"),
    (UPDATE, "echo chmod chown"),
    (DELETE, "rm rmdir unlink"),
    (RELATION, "mv"),
)
"""Tools named after a POSIX command (file-system environments name them so)."""

DESCRIPTION_VERBS = {**VERBS, "return": LOOKUP, "count": LOOKUP}
"""Leading verb of a description -> category ("Return the path" reads, unlike
``return_order``)."""

CLOSING_VERBS = frozenset(
    {
        *("cancel", "void", "withdraw", "revoke", "terminate", "drop", "archive", "close"),
        *("discard", "retire", "discharge", "expire", "deactivate"),
    }
)
"""Verbs that end a record's life: by removing it (delete) or marking it (status transition)."""
GENERIC_UPDATE_VERBS = frozenset({"update", "modify", "change", "edit", "set", "adjust", "alter"})
"""Verbs that say only that something changes: the description or the diff says what."""

_HANDOFF_VERBS = frozenset({"transfer", "escalate", "handoff", "hand", "route", "connect"})
_HUMAN_WORDS = frozenset({"human", "humans", "operator", "supervisor", "representative"})
_NOOP_NAMES = frozenset({"think", "reflect", "reason"})
_REMOVAL = re.compile(r"\b(removes?|removed|deletes?|deleted|erases?|erased|purges?)\b")
_MARKING = re.compile(
    r"\bstatus\b[^.]{0,40}\b(changed|set|moved|becomes?)\b|\bmarks? (it|them|the \w+)\b"
    r"|\b(it|the \w+) becomes?\b"
)
_REPOINT = re.compile(r"\bto (a |an )?(new|another|other|different)\b|\bre-?assign")
_NEW_IDS = re.compile(r"^new_\w*ids?$")
_DESCRIPTION_LEAD = re.compile(r"^\s*(use (the|this) (tool|function) to|this (tool|function))\s+")
_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")

EFFECT_ORDER = (
    ("removed", DELETE),
    ("added", CREATE),
    ("status", TRANSITION),
    ("link", RELATION),
    ("nested_added", CREATE),
    ("nested_removed", DELETE),
    ("moved", RELATION),
    ("field", UPDATE),
)
"""Kinds of change of a state diff, strongest first, and the category each one implies."""
_AGREES = {
    DELETE: {"removed", "nested_removed"},
    CREATE: {"added", "nested_added"},
    TRANSITION: {"status"},
    RELATION: {"link", "moved"},
    UPDATE: {"field", "status", "link", "moved", "nested_added", "nested_removed"},
}


def name_words(name: str) -> list[str]:
    """``cancel_pending_order`` -> [cancel, pending, order]; ``startEngine`` -> [start, engine]."""
    return [word.lower() for word in _WORDS.findall(name)]


def _description_words(description: str) -> list[str]:
    text = _DESCRIPTION_LEAD.sub("", description.lower())
    return re.findall(r"[a-z]+", text)


def _lemma(word: str, lexicon: Mapping[str, str]) -> str | None:
    """``Presses`` / ``Converts`` -> their verb when the lexicon knows it."""
    for candidate in (word, word[:-1] if word.endswith("s") else "", word[:-2]):
        if candidate and candidate in lexicon:
            return candidate
    return None


def _parameter_names(parameters: Mapping | None) -> list[str]:
    properties = (parameters or {}).get("properties", {}) if isinstance(parameters, Mapping) else {}
    return [str(key) for key in properties] if isinstance(properties, Mapping) else []


def propose(name: str, description: str = "", parameters: Mapping | None = None) -> str:
    """The category that name, description and parameters give (module docstring, 1-2)."""
    words = name_words(name)
    lowered = name.lower()
    text = description.lower()
    params = _parameter_names(parameters)
    if (
        words
        and words[0] in _HANDOFF_VERBS
        and (_HUMAN_WORDS & set(words) or ("agent" in words[1:] and "human" in text))
    ):
        return ESCALATION
    if words and words[0] in _NOOP_NAMES:
        return OTHER
    if len(words) == 1 and words[0] in SHELL_COMMANDS:
        return SHELL_COMMANDS[words[0]]
    if "by_name" in lowered or re.search(r"_id_(by|for|of)_", lowered):
        return RESOLVE
    verb = words[0] if words else ""
    if verb in CLOSING_VERBS:
        if _REMOVAL.search(text):
            return DELETE
        return TRANSITION if _MARKING.search(text) else DELETE
    if verb in GENERIC_UPDATE_VERBS:
        if _REPOINT.search(text) or any(_NEW_IDS.match(p) for p in params):
            return RELATION
        return UPDATE
    if verb in VERBS:
        return VERBS[verb]
    lead = _description_words(description)
    if lead:
        found = _lemma(lead[0], DESCRIPTION_VERBS)
        if found is not None:
            return DESCRIPTION_VERBS[found]
    return OTHER


def classify_tool(
    name: str,
    description: str = "",
    parameters: Mapping | None = None,
    effects: frozenset[str] | None = None,
) -> str:
    """The category of a tool (module docstring). ``effects``: the kinds of change its calls
    typically show (:meth:`ObservedEffect.typical`), or None when no call was replayed."""
    proposed = propose(name, description, parameters)
    if not effects:
        return proposed
    words = name_words(name)
    if words and words[0] in GENERIC_UPDATE_VERBS and proposed == UPDATE and "link" in effects:
        return RELATION
    if effects & _AGREES.get(proposed, set()):
        return proposed
    return next(category for kind, category in EFFECT_ORDER if kind in effects)
