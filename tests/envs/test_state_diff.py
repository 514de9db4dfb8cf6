"""State diffs: each kind of change on hand-made states, and the typical effects of a tool."""

import pytest

from envsched_gnn.envs.state_diff import ObservedEffect, known_ids, state_effects

ORDERS = {
    "orders": {
        "#W1": {
            "status": "pending",
            "item_ids": ["I1"],
            "payment": {"method_id": "card_1"},
            "history": [{"kind": "payment", "amount": 5}],
            "address": {"city": "Austin"},
        }
    },
    "items": {"I1": {"price": 5}, "I2": {"price": 6}},
    "counter": 1,
}


def changed(**edits) -> dict:
    import copy

    state = copy.deepcopy(ORDERS)
    for path, value in edits.items():
        *keys, last = path.split("__")
        target = state
        for key in keys:
            target = target[key]
        if value is KeyError:
            del target[last]
        else:
            target[last] = value
    return state


@pytest.mark.parametrize(
    ("after", "kinds"),
    [
        (changed(), set()),
        (changed(orders__W2={"status": "pending"}), {"added"}),
        (changed(items__I2=KeyError), {"removed"}),
        (changed(**{"orders__#W1__status": "cancelled"}), {"status"}),
        (changed(**{"orders__#W1__payment__method_id": "card_2"}), {"link"}),
        (changed(**{"orders__#W1__item_ids": ["I2"]}), {"link"}),
        (changed(**{"orders__#W1__address__city": "Denver"}), {"field"}),
        (changed(**{"orders__#W1__new_items": ["I2"]}), {"link"}),
        (changed(**{"orders__#W1__note": "gift"}), {"field"}),
        (
            changed(**{"orders__#W1__history": [{"kind": "payment", "amount": 5}] * 2}),
            {"nested_added"},
        ),
        (changed(counter=2), {"field"}),
        (changed(counter=KeyError), {"field"}),
    ],
)
def test_each_kind_of_change(after, kinds):
    assert state_effects(ORDERS, after) == kinds


def test_a_record_under_a_new_key_is_moved_and_a_copy_added():
    before = {"files": {"/a/x": {"size": 1}, "/a/y": {"size": 2}}, "dirs": ["/", "/a"]}
    moved = {"files": {"/b/x": {"size": 1}, "/a/y": {"size": 2}}, "dirs": ["/", "/a"]}
    copied = {"files": {**before["files"], "/b/x": {"size": 1}}, "dirs": ["/", "/a"]}
    assert state_effects(before, moved) == {"moved"}
    assert state_effects(before, copied) == {"added"}
    assert state_effects(before, {**before, "dirs": ["/", "/a", "/b"]}) == {"added"}
    assert state_effects(before, {**before, "dirs": ["/"]}) == {"removed"}


def test_status_keys_at_any_level_and_in_camel_case():
    assert state_effects({"engineState": "off"}, {"engineState": "on"}) == {"status"}
    before = {"doorStatus": {"driver": "unlocked"}}
    assert state_effects(before, {"doorStatus": {"driver": "locked"}}) == {"status"}
    assert state_effects({"estate": "a"}, {"estate": "b"}) == {"field"}


def test_known_ids_are_the_keys_of_collections_anywhere():
    assert known_ids(ORDERS) == {"#W1", "I1", "I2"}


def test_typical_effects_of_a_tool():
    effect = ObservedEffect()
    for kinds in ({"status", "nested_added"}, {"status"}, {"status", "field"}):
        effect.add(frozenset(kinds))
    assert effect.typical() == {"status"}
    assert ObservedEffect.from_json(effect.to_json(), "x") == effect
    reads = ObservedEffect()
    for kinds in (set(), set(), {"field"}):
        reads.add(frozenset(kinds))
    assert reads.typical() == frozenset()
    with pytest.raises(ValueError, match="unknown effect kind"):
        ObservedEffect.from_json({"calls": 1, "unchanged": 0, "kinds": {"teleported": 1}}, "x")
