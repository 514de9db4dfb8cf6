"""The independent world: checks tied to operations, categories from the abstracts."""

import numpy as np

from envsched_gnn.eval.simulator.config import SimulatorConfig
from envsched_gnn.eval.simulator.simulate import LearnerSimulator, build_world
from tests.envs.handmade_pool import handmade_pool
from tests.eval.simulator.test_simulate import make_pool


def test_world_ties_checks_to_operations():
    pool, cats = make_pool()
    world = build_world(pool, SimulatorConfig(world="independent"), lambda t: cats[t.task_id])
    assert np.allclose(world.need_weight.sum(axis=1), 1.0) and not world.has_rest
    i = world.index["env1/t3"]
    ops = world.slot_op[i, world.slot_mask[i], 0]
    assert [world.op_names[o] for o in ops] == cats["env1/t3"]
    assert world.test.sum() == 8


def test_free_form_abstracts_fall_back_to_the_reference_solution():
    pool = handmade_pool()
    world = build_world(pool, SimulatorConfig(world="independent"))
    assert "create" in world.op_names and world.slot_mask.any(axis=1).all()
    assert LearnerSimulator(pool, world=world).score() > 0.0
