"""A trivially learnable pool for GRPO's learning smoke test: one environment, two buttons.

Every task says "Press the button." The *warm-up* pool accepts either button and its
reference solutions press red on half the tasks and blue on the other half, so SFT on it
teaches the call format and leaves the choice at about even odds. The *graded* pool has the
same tasks with one check, "red was pressed and blue was not": a policy starts near reward
0.5 there, and GRPO must find that red pays.
"""

from __future__ import annotations

from dataclasses import replace

from envsched_gnn.envs.pool import Check, Environment, Pool, Task, ToolCall

BUTTONS_CODE = '''
class Buttons:
    """Two buttons; the state records which were pressed."""

    def __init__(self, init_config: dict):
        self.pressed = []

    def press_red(self) -> dict:
        self.pressed.append("red")
        return {"success": True, "message": "red pressed"}

    def press_blue(self) -> dict:
        self.pressed.append("blue")
        return {"success": True, "message": "blue pressed"}
'''


def _tool(name: str, description: str) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": {}, "required": []},
        },
    }


ENV = Environment(
    env_id="buttons",
    env_class_code=BUTTONS_CODE,
    tools=[
        _tool("press_red", "Press the red button."),
        _tool("press_blue", "Press the blue button."),
    ],
    environment_introduction="A panel with two buttons.",
)


def _check(item: str, body: str) -> Check:
    return Check(check_item=item, check_func=f"def check_func(final_state):\n    return {body}\n")


def _tasks(train: int, test: int) -> list[Task]:
    tasks = []
    for i in range(train + test):
        colour = "red" if i % 2 == 0 else "blue"
        tasks.append(
            Task(
                task_id=f"press-{i:02d}",
                env_id="buttons",
                env_class_name="Buttons",
                init_config={},
                task="Press the button.",
                checklist_with_func=[
                    _check("one button was pressed", "len(final_state['pressed']) == 1")
                ],
                reference_solution=[ToolCall(f"press_{colour}")],
                abstract="update(state)",
                split="train" if i < train else "test",
            )
        )
    return tasks


def warmup_pool(train: int = 16, test: int = 8) -> Pool:
    """Either button passes; references press red and blue alternately."""
    return Pool(envs={"buttons": ENV}, tasks=_tasks(train, test))


def graded_pool(train: int = 16, test: int = 8) -> Pool:
    """The same tasks graded "red only"."""
    red_only = _check(
        "red was pressed and blue was not",
        "'red' in final_state['pressed'] and 'blue' not in final_state['pressed']",
    )
    return Pool(
        envs={"buttons": ENV},
        tasks=[replace(t, checklist_with_func=[red_only]) for t in _tasks(train, test)],
    )
