"""A learner's pending groups: trained in the selection's order, kept while pending, dropped
otherwise, and a selection naming a group not held refused with nothing changed."""

from __future__ import annotations

import pytest

from envsched_gnn.scheduler.groups import GroupSelection, PendingGroups


def test_groups_wait_for_their_update_in_the_selection_order():
    pending: PendingGroups[str] = PendingGroups()
    kept = GroupSelection((), ((0, "b"),))
    assert pending.settle(0, {"a": "a0", "b": "b0"}, kept) == []
    assert list(pending.groups) == [(0, "b")]  # a0 dropped
    # the same task again at step 1 is another group; the update takes them in its order
    selection = GroupSelection(((1, "b"), (0, "b")), ((1, "c"),))
    assert pending.settle(1, {"b": "b1", "c": "c1"}, selection) == ["b1", "b0"]
    assert pending.groups == {(1, "c"): "c1"}
    assert pending.settle(2, {"a": "a2"}, GroupSelection.every_group(2, ["a"])) == ["a2"]
    assert len(pending) == 0  # c1 was neither trained nor kept


def test_a_selection_of_groups_not_held_is_refused():
    pending: PendingGroups[str] = PendingGroups()
    pending.settle(0, {"a": "a0"}, GroupSelection((), ((0, "a"),)))
    with pytest.raises(KeyError, match=r"\(0, 'b'\)"):
        pending.settle(1, {"b": "b1"}, GroupSelection(((0, "b"),)))
    assert pending.groups == {(0, "a"): "a0"}
