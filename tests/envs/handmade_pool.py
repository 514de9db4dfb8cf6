"""A pool written by hand: two environments, six tasks, reference solutions (not generated).

Reusable by any test: ``handmade_pool()`` builds the :class:`Pool` in memory,
``write_handmade_pool(directory)`` writes it in the EnvScaler layout (``tools`` of one
environment and ``init_config`` of some tasks as JSON strings, as EnvScaler ships them).
Every reference solution scores 1.0; the empty trajectory scores below 1.0 on every task.
"""

from __future__ import annotations

import json
from pathlib import Path

from envsched_gnn.envs.pool import Check, Environment, Pool, Task, ToolCall

LIBRARY_CODE = '''
class LibrarySystem:
    """A lending library: members borrow books; an inactive member cannot borrow."""

    def __init__(self, init_config: dict):
        self.members = {}
        self.books = {}
        self.loans = {}
        self.max_loans = 2
        self.last_loan_number = 0

    def find_member(self, name: str) -> dict:
        for member_id, member in self.members.items():
            if member["name"] == name:
                return {"success": True, "data": dict(member, member_id=member_id)}
        return {"success": False, "error": f"no member named {name!r}"}

    def search_books(self, title: str) -> dict:
        hits = [
            dict(book, book_id=book_id)
            for book_id, book in sorted(self.books.items())
            if title.lower() in book["title"].lower()
        ]
        return {"success": True, "data": hits}

    def checkout_book(self, member_id: str, book_id: str) -> dict:
        member = self.members.get(member_id)
        if member is None:
            return {"success": False, "error": f"unknown member {member_id!r}"}
        if not member["active"]:
            return {"success": False, "error": f"member {member_id} is inactive"}
        book = self.books.get(book_id)
        if book is None:
            return {"success": False, "error": f"unknown book {book_id!r}"}
        if not book["available"]:
            return {"success": False, "error": f"book {book_id} is on loan"}
        held = sum(1 for loan in self.loans.values() if loan["member_id"] == member_id)
        if held >= self.max_loans:
            return {"success": False, "error": f"member {member_id} holds {held} loans"}
        self.last_loan_number += 1
        loan_id = f"L{self.last_loan_number}"
        self.loans[loan_id] = {"member_id": member_id, "book_id": book_id}
        book["available"] = False
        return {"success": True, "message": f"loan {loan_id} created"}

    def return_book(self, book_id: str) -> dict:
        for loan_id, loan in list(self.loans.items()):
            if loan["book_id"] == book_id:
                del self.loans[loan_id]
                self.books[book_id]["available"] = True
                return {"success": True, "message": f"loan {loan_id} closed"}
        return {"success": False, "error": f"book {book_id!r} is not on loan"}
'''

CLINIC_CODE = '''
class ClinicScheduler:
    """Appointments of patients in doctors' time slots."""

    def __init__(self):
        self.patients = {}
        self.slots = {}
        self.appointments = {}
        self.last_appointment_number = 0

    def find_patient(self, name: str) -> dict:
        for patient_id, patient in self.patients.items():
            if patient["name"] == name:
                return {"success": True, "data": {"patient_id": patient_id, **patient}}
        return {"success": False, "error": f"no patient named {name!r}"}

    def list_open_slots(self, doctor: str) -> dict:
        slots = [
            {"slot_id": slot_id, "time": slot["time"]}
            for slot_id, slot in sorted(self.slots.items(), key=lambda item: item[1]["time"])
            if slot["doctor"] == doctor and slot["booked_by"] is None
        ]
        return {"success": True, "data": slots}

    def book_appointment(self, patient_id: str, slot_id: str) -> dict:
        if patient_id not in self.patients:
            return {"success": False, "error": f"unknown patient {patient_id!r}"}
        slot = self.slots.get(slot_id)
        if slot is None or slot["booked_by"] is not None:
            return {"success": False, "error": f"slot {slot_id!r} is not open"}
        self.last_appointment_number += 1
        appointment_id = f"A{self.last_appointment_number}"
        self.appointments[appointment_id] = {"patient_id": patient_id, "slot_id": slot_id}
        slot["booked_by"] = patient_id
        return {"success": True, "message": f"appointment {appointment_id} booked"}

    def cancel_appointment(self, appointment_id: str) -> dict:
        appointment = self.appointments.pop(appointment_id, None)
        if appointment is None:
            return {"success": False, "error": f"unknown appointment {appointment_id!r}"}
        self.slots[appointment["slot_id"]]["booked_by"] = None
        return {"success": True, "message": f"appointment {appointment_id} cancelled"}
'''


def tool(name: str, description: str, /, **parameters: str) -> dict:
    """An OpenAI function schema whose parameters are all required strings."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {
                    key: {"type": "string", "description": text} for key, text in parameters.items()
                },
                "required": list(parameters),
            },
        },
    }


LIBRARY_TOOLS = [
    tool("find_member", "Find a member by full name.", name="full name"),
    tool("search_books", "Books whose title contains the text.", title="part of a title"),
    tool("checkout_book", "Lend a book to a member.", member_id="member id", book_id="book id"),
    tool("return_book", "Close the loan of a book.", book_id="book id"),
]

CLINIC_TOOLS = [
    tool("find_patient", "Find a patient by full name.", name="full name"),
    tool("list_open_slots", "Open slots of a doctor, earliest first.", doctor="doctor name"),
    tool("book_appointment", "Book a slot.", patient_id="patient id", slot_id="slot id"),
    tool("cancel_appointment", "Cancel an appointment.", appointment_id="appointment id"),
]

LIBRARY_INIT = {
    "members": {
        "M1": {"name": "Ada Lovelace", "active": True},
        "M2": {"name": "Alan Turing", "active": False},
        "M3": {"name": "Grace Hopper", "active": True},
    },
    "books": {
        "B1": {"title": "Dune", "available": True},
        "B2": {"title": "Emma", "available": False},
        "B3": {"title": "Ulysses", "available": True},
    },
    "loans": {"L1": {"member_id": "M3", "book_id": "B2"}},
    "last_loan_number": 1,
}

CLINIC_INIT = {
    "patients": {"P1": {"name": "Mia Wong"}, "P2": {"name": "Omar Haddad"}},
    "slots": {
        "S1": {"doctor": "Dr. Lee", "time": "09:00", "booked_by": None},
        "S2": {"doctor": "Dr. Lee", "time": "10:00", "booked_by": "P2"},
        "S3": {"doctor": "Dr. Kim", "time": "11:00", "booked_by": None},
    },
    "appointments": {"A1": {"patient_id": "P2", "slot_id": "S2"}},
    "last_appointment_number": 1,
}


def check(item: str, body: str) -> Check:
    """A check whose ``check_func`` returns the expression ``body``."""
    return Check(check_item=item, check_func=f"def check_func(final_state):\n    return {body}\n")


def call(name: str, /, **arguments: str) -> ToolCall:
    return ToolCall(name=name, arguments=arguments)


def _tasks() -> list[Task]:
    library = {"env_id": "library", "env_class_name": "LibrarySystem", "init_config": LIBRARY_INIT}
    clinic = {"env_id": "clinic", "env_class_name": "ClinicScheduler", "init_config": CLINIC_INIT}
    loan_m1_b1 = "{'member_id': 'M1', 'book_id': 'B1'} in final_state['loans'].values()"
    return [
        Task(
            task_id="library-checkout",
            task="Check out 'Dune' for Ada Lovelace.",
            checklist_with_func=[
                check("Ada Lovelace has a loan of Dune", loan_m1_b1),
                check("Dune is no longer available", "not final_state['books']['B1']['available']"),
                check(
                    "exactly one loan was added",
                    "len(final_state['loans']) == len(initial_state['loans']) + 1",
                ),
            ],
            reference_solution=[
                call("find_member", name="Ada Lovelace"),
                call("search_books", title="Dune"),
                call("checkout_book", member_id="M1", book_id="B1"),
            ],
            abstract="resolve(name->id); resolve(title->id); create(relation)",
            **library,
        ),
        Task(
            task_id="library-swap",
            task="Grace Hopper returns 'Emma' and then borrows 'Ulysses'.",
            checklist_with_func=[
                check("loan L1 is closed", "'L1' not in final_state['loans']"),
                check("Emma is available", "final_state['books']['B2']['available']"),
                check(
                    "Grace Hopper has a loan of Ulysses",
                    "{'member_id': 'M3', 'book_id': 'B3'} in final_state['loans'].values()",
                ),
                check("Ulysses is not available", "not final_state['books']['B3']['available']"),
            ],
            reference_solution=[
                call("return_book", book_id="B2"),
                call("checkout_book", member_id="M3", book_id="B3"),
            ],
            abstract="delete(relation); create(relation)",
            **library,
        ),
        Task(
            task_id="library-gated",
            task=(
                "Alan Turing asks for 'Dune'. If his membership is inactive, lend it to "
                "Ada Lovelace instead."
            ),
            checklist_with_func=[
                check(
                    "Alan Turing has no loan",
                    "all(loan['member_id'] != 'M2' for loan in final_state['loans'].values())",
                ),
                check("Ada Lovelace has a loan of Dune", loan_m1_b1),
            ],
            reference_solution=[
                call("find_member", name="Alan Turing"),
                call("find_member", name="Ada Lovelace"),
                call("checkout_book", member_id="M1", book_id="B1"),
            ],
            abstract="resolve(name->id); gate(eligibility); create(relation)",
            split="test",
            **library,
        ),
        Task(
            task_id="clinic-book",
            task="Book Mia Wong into Dr. Lee's earliest open slot.",
            checklist_with_func=[
                check(
                    "slot S1 is booked by Mia Wong",
                    "final_state['slots']['S1']['booked_by'] == 'P1'",
                ),
                check(
                    "an appointment of Mia Wong in S1 exists",
                    "{'patient_id': 'P1', 'slot_id': 'S1'} in final_state['appointments'].values()",
                ),
            ],
            reference_solution=[
                call("find_patient", name="Mia Wong"),
                call("list_open_slots", doctor="Dr. Lee"),
                call("book_appointment", patient_id="P1", slot_id="S1"),
            ],
            abstract="resolve(name->id); lookup(list); create(relation)",
            **clinic,
        ),
        Task(
            task_id="clinic-move",
            task="Move Omar Haddad's appointment with Dr. Lee to Dr. Kim's open slot.",
            checklist_with_func=[
                check("appointment A1 is cancelled", "'A1' not in final_state['appointments']"),
                check("slot S2 is free", "final_state['slots']['S2']['booked_by'] is None"),
                check(
                    "slot S3 is booked by Omar", "final_state['slots']['S3']['booked_by'] == 'P2'"
                ),
                check(
                    "the number of appointments is unchanged",
                    "len(final_state['appointments']) == len(initial_state['appointments'])",
                ),
            ],
            reference_solution=[
                call("find_patient", name="Omar Haddad"),
                call("cancel_appointment", appointment_id="A1"),
                call("list_open_slots", doctor="Dr. Kim"),
                call("book_appointment", patient_id="P2", slot_id="S3"),
            ],
            abstract="resolve(name->id); replace(relation)",
            **clinic,
        ),
        Task(
            task_id="clinic-cancel",
            task="Cancel Omar Haddad's appointment.",
            checklist_with_func=[
                check("appointment A1 is cancelled", "'A1' not in final_state['appointments']"),
                check("slot S2 is free", "final_state['slots']['S2']['booked_by'] is None"),
            ],
            reference_solution=[call("cancel_appointment", appointment_id="A1")],
            abstract="delete(relation)",
            split="test",
            **clinic,
        ),
    ]


def handmade_pool() -> Pool:
    """The hand-written pool, in memory."""
    envs = {
        "library": Environment(
            env_id="library",
            env_class_code=LIBRARY_CODE,
            tools=LIBRARY_TOOLS,
            environment_introduction="A lending library with members, books and loans.",
            constraints_rules="Inactive members cannot borrow; at most 2 loans per member.",
        ),
        "clinic": Environment(
            env_id="clinic",
            env_class_code=CLINIC_CODE,
            tools=CLINIC_TOOLS,
            environment_summary="Doctors' time slots booked by patients.",
        ),
    }
    return Pool(envs=envs, tasks=_tasks())


def write_handmade_pool(directory: str | Path) -> Path:
    """Writes the hand-written pool in the EnvScaler layout; returns the folder."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    pool = handmade_pool()
    envs = {}
    for env_id, env in pool.envs.items():
        item = {
            "env_class_code": env.env_class_code,
            # EnvScaler ships tools as a JSON string; keep one environment that way
            "tools": json.dumps(env.tools) if env_id == "clinic" else env.tools,
        }
        for name in ("environment_introduction", "environment_summary", "constraints_rules"):
            if getattr(env, name):
                item[name] = getattr(env, name)
        envs[env_id] = item
    tasks = []
    for index, task in enumerate(pool.tasks):
        tasks.append(
            {
                "task_id": task.task_id,
                "env_id": task.env_id,
                "env_class_name": task.env_class_name,
                "init_config": json.dumps(task.init_config) if index % 2 else task.init_config,
                "task": task.task,
                "checklist_with_func": [
                    {"check_item": c.check_item, "check_func": c.check_func}
                    for c in task.checklist_with_func
                ],
                "reference_solution": [
                    {"name": c.name, "arguments": c.arguments} for c in task.reference_solution
                ],
                "abstract": task.abstract,
                "split": task.split,
            }
        )
    (directory / "envs.json").write_text(json.dumps(envs, indent=1))
    (directory / "tasks.json").write_text(json.dumps(tasks, indent=1))
    return directory
