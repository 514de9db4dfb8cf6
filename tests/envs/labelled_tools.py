"""Hand-labelled tool sets of four kinds, executable, for the tool categoriser's tests.

Written for this suite in the style of real agent-benchmark environments (names, argument
shapes and descriptions as such pools ship them): retail customer support (tau-bench's retail
domain), airline travel booking (tau-bench's airline domain), a file system (BFCL's shell-like
tools) and vehicle control (BFCL's camelCase vehicle API). The vehicle set was written with
the others but kept out of the categoriser's development and scored once at the end.

Each tool has one *probe*: a call that succeeds on the environment's initial state, so that
replaying it shows what the call does to the state. :func:`labelled_pool` turns each probe
into a task whose reference solution is that one call (what ``pool check`` replays).

Labelling guide (what a call is *for*, as a reader of the tool's documentation and code):

- lookup: returns one record or value of the current state;
- list/filter: returns several records (a search, the records of an owner, a listing);
- identifier resolution: maps a human handle (name, email, name + zip) to an id;
- eligibility check: a read-only yes/no on whether an action is allowed or feasible;
- validate: a read-only check of a record or the state against rules, reporting problems;
- create: adds a new record (a booking, a file, a directory, a certificate);
- update: sets attributes or settings of an existing record or device to given values;
- status transition: a domain action that moves a record or device between the named states
  of its life cycle (cancel an order that stays on file, request a return, start an engine);
- delete: removes a record (it is gone from the state);
- relation replacement: re-points a record to other existing entities (exchange items for
  other items, pay with another card on file, rebook onto other flights, move a file into
  another folder);
- escalation: hands the conversation over to a human or another agent;
- computation: computes a value from its arguments alone (arithmetic, unit conversion);
- other operation: none of these (a note to self).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from envsched_gnn.envs.pool import Check, Environment, Pool, Task, ToolCall


@dataclass(frozen=True)
class LabelledTool:
    """A tool schema with its hand label and a probe call that succeeds."""

    schema: dict
    label: str
    probe: dict

    @property
    def name(self) -> str:
        return self.schema["function"]["name"]


def _tool(name: str, description: str, label: str, probe: dict, /, **params: str) -> LabelledTool:
    """``params``: argument name -> JSON type, or "type: description"."""
    properties = {}
    for arg, spec in params.items():
        kind, _, text = spec.partition(": ")
        properties[arg] = {"type": kind} | ({"description": text} if text else {})
        if kind == "array":
            properties[arg]["items"] = {"type": "string"}
    schema = {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": list(params)},
        },
    }
    return LabelledTool(schema, label, probe)


RETAIL_CODE = '''
class RetailSupport:
    """An online shop's back office: users, their orders, and the product catalogue."""

    def __init__(self, init_config=None):
        self.users = {}
        self.orders = {}
        self.products = {}
        self.log = []

    def calculate(self, expression):
        if not set(expression) <= set("0123456789+-*/(). "):
            return {"success": False, "error": "invalid characters in expression"}
        return {"success": True, "data": round(eval(expression, {"__builtins__": {}}), 2)}

    def find_user_id_by_email(self, email):
        for user_id, user in self.users.items():
            if user["email"] == email:
                return {"success": True, "data": user_id}
        return {"success": False, "error": "user not found"}

    def find_user_id_by_name_zip(self, first_name, last_name, zip):
        for user_id, user in self.users.items():
            name = user["name"]
            if (name["first_name"], name["last_name"], user["address"]["zip"]) == (
                first_name, last_name, zip
            ):
                return {"success": True, "data": user_id}
        return {"success": False, "error": "user not found"}

    def get_user_details(self, user_id):
        if user_id not in self.users:
            return {"success": False, "error": "user not found"}
        return {"success": True, "data": self.users[user_id]}

    def get_order_details(self, order_id):
        if order_id not in self.orders:
            return {"success": False, "error": "order not found"}
        return {"success": True, "data": self.orders[order_id]}

    def get_product_details(self, product_id):
        if product_id not in self.products:
            return {"success": False, "error": "product not found"}
        return {"success": True, "data": self.products[product_id]}

    def list_all_product_types(self):
        names = {p["name"]: product_id for product_id, p in self.products.items()}
        return {"success": True, "data": dict(sorted(names.items()))}

    def _variant(self, item_id):
        for product in self.products.values():
            if item_id in product["variants"]:
                return product["variants"][item_id]
        return None

    def cancel_pending_order(self, order_id, reason):
        order = self.orders.get(order_id)
        if order is None or order["status"] != "pending":
            return {"success": False, "error": "non-pending order cannot be cancelled"}
        if reason not in ("no longer needed", "ordered by mistake"):
            return {"success": False, "error": "invalid reason"}
        total = sum(item["price"] for item in order["items"])
        order["payment_history"].append(
            {"transaction_type": "refund", "amount": total,
             "payment_method_id": order["payment_history"][0]["payment_method_id"]}
        )
        order["status"] = "cancelled"
        order["cancel_reason"] = reason
        return {"success": True, "message": f"order {order_id} cancelled"}

    def modify_pending_order_address(self, order_id, address1, address2, city, state, country,
                                     zip):
        order = self.orders.get(order_id)
        if order is None or not order["status"].startswith("pending"):
            return {"success": False, "error": "non-pending order cannot be modified"}
        order["address"] = {"address1": address1, "address2": address2, "city": city,
                            "state": state, "country": country, "zip": zip}
        return {"success": True, "message": "address updated"}

    def modify_pending_order_items(self, order_id, item_ids, new_item_ids, payment_method_id):
        order = self.orders.get(order_id)
        if order is None or order["status"] != "pending":
            return {"success": False, "error": "non-pending order cannot be modified"}
        for item in order["items"]:
            if item["item_id"] in item_ids:
                new_id = new_item_ids[item_ids.index(item["item_id"])]
                variant = self._variant(new_id)
                if variant is None or not variant["available"]:
                    return {"success": False, "error": f"item {new_id} not available"}
                item["item_id"], item["price"] = new_id, variant["price"]
                item["options"] = dict(variant["options"])
        order["status"] = "pending (item modified)"
        return {"success": True, "message": "items modified"}

    def modify_pending_order_payment(self, order_id, payment_method_id):
        order = self.orders.get(order_id)
        user = self.users.get(order["user_id"]) if order else None
        if order is None or order["status"] != "pending":
            return {"success": False, "error": "non-pending order cannot be modified"}
        if payment_method_id not in user["payment_methods"]:
            return {"success": False, "error": "payment method not found"}
        order["payment_method_id"] = payment_method_id
        return {"success": True, "message": "payment method changed"}

    def modify_user_address(self, user_id, address1, address2, city, state, country, zip):
        if user_id not in self.users:
            return {"success": False, "error": "user not found"}
        self.users[user_id]["address"] = {"address1": address1, "address2": address2,
                                          "city": city, "state": state, "country": country,
                                          "zip": zip}
        return {"success": True, "message": "address updated"}

    def return_delivered_order_items(self, order_id, item_ids, payment_method_id):
        order = self.orders.get(order_id)
        if order is None or order["status"] != "delivered":
            return {"success": False, "error": "non-delivered order cannot be returned"}
        order["status"] = "return requested"
        order["return_items"] = sorted(item_ids)
        order["return_payment_method_id"] = payment_method_id
        return {"success": True, "message": "return requested"}

    def exchange_delivered_order_items(self, order_id, item_ids, new_item_ids,
                                       payment_method_id):
        order = self.orders.get(order_id)
        if order is None or order["status"] != "delivered":
            return {"success": False, "error": "non-delivered order cannot be exchanged"}
        for new_id in new_item_ids:
            variant = self._variant(new_id)
            if variant is None or not variant["available"]:
                return {"success": False, "error": f"item {new_id} not available"}
        order["status"] = "exchange requested"
        order["exchange_items"] = sorted(item_ids)
        order["exchange_new_items"] = sorted(new_item_ids)
        order["exchange_payment_method_id"] = payment_method_id
        return {"success": True, "message": "exchange requested"}

    def transfer_to_human_agents(self, summary):
        return {"success": True, "message": "Transfer successful"}

    def think(self, thought):
        return {"success": True, "message": ""}
'''

_ADDRESS = {
    "address1": "12 Elm St",
    "address2": "Apt 3",
    "city": "Austin",
    "state": "TX",
    "country": "USA",
    "zip": "78701",
}
_NEW_ADDRESS = {
    "address1": "9 Oak Ave",
    "address2": "",
    "city": "Denver",
    "state": "CO",
    "country": "USA",
    "zip": "80202",
}


def _order(user_id: str, status: str, item_id: str, price: float) -> dict:
    return {
        "user_id": user_id,
        "address": dict(_ADDRESS),
        "items": [
            {
                "name": "Desk Lamp",
                "product_id": "6817146515",
                "item_id": item_id,
                "price": price,
                "options": {"color": "black"},
            }
        ],
        "status": status,
        "payment_method_id": "credit_card_7815826",
        "payment_history": [
            {
                "transaction_type": "payment",
                "amount": price,
                "payment_method_id": "credit_card_7815826",
            }
        ],
    }


RETAIL_STATE = {
    "users": {
        "mia_garcia_4516": {
            "name": {"first_name": "Mia", "last_name": "Garcia"},
            "email": "mia.garcia@example.com",
            "address": dict(_ADDRESS),
            "payment_methods": {
                "credit_card_7815826": {"source": "credit_card", "last_four": "4321"},
                "gift_card_3491931": {"source": "gift_card", "balance": 80.0},
            },
            "orders": ["#W4817420", "#W2611340"],
        }
    },
    "orders": {
        "#W4817420": _order("mia_garcia_4516", "pending", "5320792178", 52.5),
        "#W2611340": _order("mia_garcia_4516", "delivered", "5320792178", 52.5),
    },
    "products": {
        "6817146515": {
            "name": "Desk Lamp",
            "variants": {
                "5320792178": {"options": {"color": "black"}, "available": True, "price": 52.5},
                "9083642334": {"options": {"color": "white"}, "available": True, "price": 54.0},
            },
        }
    },
}

_ADDRESS_ARGS = {
    "address1": "string",
    "address2": "string",
    "city": "string",
    "state": "string",
    "country": "string",
    "zip": "string",
}
RETAIL_TOOLS = [
    _tool(
        "calculate",
        "Calculate the result of a mathematical expression.",
        "computation",
        {"expression": "52.5 - 54.0"},
        expression="string: the expression, e.g. '2 + 2', with numbers, + - * / and brackets",
    ),
    _tool(
        "cancel_pending_order",
        "Cancel a pending order. If the order is already processed or delivered, it cannot be "
        "cancelled. The agent needs to explain the cancellation detail and ask for explicit "
        "user confirmation (yes) to proceed. If the user confirms, the order status will be "
        "changed to 'cancelled' and the payment will be refunded via the original payment "
        "method.",
        "status transition",
        {"order_id": "#W4817420", "reason": "no longer needed"},
        order_id="string: the order id, such as '#W0000000'",
        reason="string: 'no longer needed' or 'ordered by mistake'",
    ),
    _tool(
        "exchange_delivered_order_items",
        "Exchange items in a delivered order to new items of the same product type. For a "
        "delivered order, return or exchange can be only done once by the agent. The agent "
        "needs to explain the exchange detail and ask for explicit user confirmation (yes).",
        "relation replacement",
        {
            "order_id": "#W2611340",
            "item_ids": ["5320792178"],
            "new_item_ids": ["9083642334"],
            "payment_method_id": "gift_card_3491931",
        },
        order_id="string: the order id",
        item_ids="array: the item ids to be exchanged",
        new_item_ids="array: the item ids to be exchanged for, one per item id",
        payment_method_id="string: the payment method to pay or receive the price difference",
    ),
    _tool(
        "find_user_id_by_email",
        "Find user id by email. If the user is not found, the function will return an error "
        "message.",
        "identifier resolution",
        {"email": "mia.garcia@example.com"},
        email="string: the email of the user",
    ),
    _tool(
        "find_user_id_by_name_zip",
        "Find user id by first name, last name, and zip code. If the user is not found, the "
        "function will return an error message. By default, find user id by email, and only "
        "call this function if the user is not found by email or cannot remember email.",
        "identifier resolution",
        {"first_name": "Mia", "last_name": "Garcia", "zip": "78701"},
        first_name="string",
        last_name="string",
        zip="string",
    ),
    _tool(
        "get_order_details",
        "Get the status and details of an order.",
        "lookup",
        {"order_id": "#W4817420"},
        order_id="string: the order id",
    ),
    _tool(
        "get_product_details",
        "Get the inventory details of a product.",
        "lookup",
        {"product_id": "6817146515"},
        product_id="string: the product id, different from the item id",
    ),
    _tool(
        "get_user_details",
        "Get the details of a user, including their orders.",
        "lookup",
        {"user_id": "mia_garcia_4516"},
        user_id="string",
    ),
    _tool(
        "list_all_product_types",
        "List the name and product id of all product types. Each product type has a variety of "
        "different items with unique item ids and options, and there are only 50 product types "
        "in the store.",
        "list/filter",
        {},
    ),
    _tool(
        "modify_pending_order_address",
        "Modify the shipping address of a pending order. The agent needs to explain the "
        "modification detail and ask for explicit user confirmation (yes) to proceed.",
        "update",
        {"order_id": "#W4817420", **_NEW_ADDRESS},
        order_id="string",
        **_ADDRESS_ARGS,
    ),
    _tool(
        "modify_pending_order_items",
        "Modify items in a pending order to new items of the same product type. For a pending "
        "order, this function can only be called once.",
        "relation replacement",
        {
            "order_id": "#W4817420",
            "item_ids": ["5320792178"],
            "new_item_ids": ["9083642334"],
            "payment_method_id": "credit_card_7815826",
        },
        order_id="string",
        item_ids="array",
        new_item_ids="array",
        payment_method_id="string",
    ),
    _tool(
        "modify_pending_order_payment",
        "Modify the payment method of a pending order. The agent needs to explain the "
        "modification detail and ask for explicit user confirmation (yes) to proceed.",
        "relation replacement",
        {"order_id": "#W4817420", "payment_method_id": "gift_card_3491931"},
        order_id="string",
        payment_method_id="string: a payment method of the user, such as 'gift_card_0000000'",
    ),
    _tool(
        "modify_user_address",
        "Modify the default address of a user. The agent needs to explain the modification "
        "detail and ask for explicit user confirmation (yes) to proceed.",
        "update",
        {"user_id": "mia_garcia_4516", **_NEW_ADDRESS},
        user_id="string",
        **_ADDRESS_ARGS,
    ),
    _tool(
        "return_delivered_order_items",
        "Return some items of a delivered order. The order status will be changed to 'return "
        "requested'. The agent needs to explain the return detail and ask for explicit user "
        "confirmation (yes) to proceed. The user will receive follow-up email for how and "
        "where to return the item.",
        "status transition",
        {
            "order_id": "#W2611340",
            "item_ids": ["5320792178"],
            "payment_method_id": "gift_card_3491931",
        },
        order_id="string",
        item_ids="array",
        payment_method_id="string: the payment method to receive the refund",
    ),
    _tool(
        "transfer_to_human_agents",
        "Transfer the user to a human agent, with a summary of the user's issue. Only transfer "
        "if the user explicitly asks for a human agent, or if the user's issue cannot be "
        "resolved by the agent with the available tools.",
        "escalation",
        {"summary": "wants a refund to a new card"},
        summary="string: a summary of the user's issue",
    ),
    _tool(
        "think",
        "Use the tool to think about something. It will not obtain new information or change "
        "the database, but just append the thought to the log. Use it when complex reasoning "
        "is needed.",
        "other operation",
        {"thought": "the order is pending, so it can still be cancelled"},
        thought="string: a thought to think about",
    ),
]

AIRLINE_CODE = '''
class AirlineBooking:
    """An airline's reservation system: users, reservations, flights and airports."""

    def __init__(self, init_config=None):
        self.users = {}
        self.reservations = {}
        self.flights = {}
        self.airports = {}
        self.next_reservation_number = 1

    def calculate(self, expression):
        if not set(expression) <= set("0123456789+-*/(). "):
            return {"success": False, "error": "invalid characters in expression"}
        return {"success": True, "data": round(eval(expression, {"__builtins__": {}}), 2)}

    def get_user_details(self, user_id):
        if user_id not in self.users:
            return {"success": False, "error": "user not found"}
        return {"success": True, "data": self.users[user_id]}

    def get_reservation_details(self, reservation_id):
        if reservation_id not in self.reservations:
            return {"success": False, "error": "reservation not found"}
        return {"success": True, "data": self.reservations[reservation_id]}

    def list_all_airports(self):
        return {"success": True, "data": dict(sorted(self.airports.items()))}

    def search_direct_flight(self, origin, destination, date):
        hits = [
            dict(flight, flight_number=number)
            for number, flight in sorted(self.flights.items())
            if (flight["origin"], flight["destination"]) == (origin, destination)
            and date in flight["dates"]
        ]
        return {"success": True, "data": hits}

    def search_onestop_flight(self, origin, destination, date):
        hits = []
        for first, a in sorted(self.flights.items()):
            for second, b in sorted(self.flights.items()):
                if a["origin"] == origin and a["destination"] == b["origin"] and (
                    b["destination"] == destination and date in a["dates"]
                ):
                    hits.append([first, second])
        return {"success": True, "data": hits}

    def book_reservation(self, user_id, origin, destination, flight_type, cabin, flights,
                         passengers, payment_methods, total_baggages, insurance):
        user = self.users.get(user_id)
        if user is None:
            return {"success": False, "error": "user not found"}
        for payment in payment_methods:
            if payment["payment_id"] not in user["payment_methods"]:
                return {"success": False, "error": "payment method not found"}
        reservation_id = f"R{self.next_reservation_number:05d}"
        self.next_reservation_number += 1
        self.reservations[reservation_id] = {
            "user_id": user_id, "origin": origin, "destination": destination,
            "flight_type": flight_type, "cabin": cabin, "flights": flights,
            "passengers": passengers, "payment_history": payment_methods,
            "total_baggages": total_baggages, "insurance": insurance, "status": "booked",
        }
        user["reservations"].append(reservation_id)
        return {"success": True, "message": f"reservation {reservation_id} booked"}

    def cancel_reservation(self, reservation_id):
        reservation = self.reservations.get(reservation_id)
        if reservation is None or reservation["status"] == "cancelled":
            return {"success": False, "error": "reservation not found or already cancelled"}
        refunds = [
            {"payment_id": p["payment_id"], "amount": -p["amount"]}
            for p in reservation["payment_history"]
        ]
        reservation["payment_history"].extend(refunds)
        reservation["status"] = "cancelled"
        return {"success": True, "message": "reservation cancelled"}

    def send_certificate(self, user_id, amount):
        user = self.users.get(user_id)
        if user is None:
            return {"success": False, "error": "user not found"}
        number = len(user["payment_methods"]) + 1
        user["payment_methods"][f"certificate_{number:07d}"] = {
            "source": "certificate", "amount": amount,
        }
        return {"success": True, "message": f"certificate of {amount} sent"}

    def update_reservation_baggages(self, reservation_id, total_baggages, nonfree_baggages,
                                    payment_id):
        reservation = self.reservations.get(reservation_id)
        if reservation is None:
            return {"success": False, "error": "reservation not found"}
        reservation["total_baggages"] = total_baggages
        reservation["nonfree_baggages"] = nonfree_baggages
        return {"success": True, "message": "baggage updated"}

    def update_reservation_flights(self, reservation_id, cabin, flights, payment_id):
        reservation = self.reservations.get(reservation_id)
        if reservation is None:
            return {"success": False, "error": "reservation not found"}
        for flight in flights:
            if flight["flight_number"] not in self.flights:
                return {"success": False, "error": "flight not found"}
        reservation["cabin"] = cabin
        reservation["flights"] = flights
        return {"success": True, "message": "flights updated"}

    def update_reservation_passengers(self, reservation_id, passengers):
        reservation = self.reservations.get(reservation_id)
        if reservation is None or len(passengers) != len(reservation["passengers"]):
            return {"success": False, "error": "the number of passengers cannot change"}
        reservation["passengers"] = passengers
        return {"success": True, "message": "passengers updated"}

    def transfer_to_human_agents(self, summary):
        return {"success": True, "message": "Transfer successful"}

    def think(self, thought):
        return {"success": True, "message": ""}
'''

AIRLINE_STATE = {
    "users": {
        "omar_rossi_1241": {
            "name": {"first_name": "Omar", "last_name": "Rossi"},
            "payment_methods": {"credit_card_4579924": {"source": "credit_card"}},
            "reservations": ["FQ8APE"],
        }
    },
    "reservations": {
        "FQ8APE": {
            "user_id": "omar_rossi_1241",
            "origin": "EWR",
            "destination": "ORD",
            "flight_type": "one_way",
            "cabin": "economy",
            "flights": [{"flight_number": "HAT056", "date": "2024-05-25"}],
            "passengers": [{"first_name": "Omar", "last_name": "Rossi", "dob": "1970-06-06"}],
            "payment_history": [{"payment_id": "credit_card_4579924", "amount": 148}],
            "total_baggages": 1,
            "nonfree_baggages": 0,
            "insurance": "no",
            "status": "booked",
        }
    },
    "flights": {
        "HAT056": {"origin": "EWR", "destination": "ORD", "dates": ["2024-05-25", "2024-05-26"]},
        "HAT230": {"origin": "EWR", "destination": "ORD", "dates": ["2024-05-26"]},
        "HAT101": {"origin": "ORD", "destination": "SFO", "dates": ["2024-05-26"]},
    },
    "airports": {"EWR": "Newark", "ORD": "Chicago O'Hare", "SFO": "San Francisco"},
    "next_reservation_number": 1,
}

_FLIGHTS = "array: flights as objects with 'flight_number' and 'date'"
AIRLINE_TOOLS = [
    _tool(
        "book_reservation",
        "Book a reservation.",
        "create",
        {
            "user_id": "omar_rossi_1241",
            "origin": "EWR",
            "destination": "SFO",
            "flight_type": "one_way",
            "cabin": "economy",
            "flights": [
                {"flight_number": "HAT056", "date": "2024-05-26"},
                {"flight_number": "HAT101", "date": "2024-05-26"},
            ],
            "passengers": [{"first_name": "Omar", "last_name": "Rossi", "dob": "1970-06-06"}],
            "payment_methods": [{"payment_id": "credit_card_4579924", "amount": 310}],
            "total_baggages": 0,
            "insurance": "no",
        },
        user_id="string: the id of the user to book the reservation, such as 'sara_doe_496'",
        origin="string: the IATA code of the origin city",
        destination="string: the IATA code of the destination city",
        flight_type="string: 'one_way' or 'round_trip'",
        cabin="string: 'basic_economy', 'economy' or 'business'",
        flights=_FLIGHTS,
        passengers="array: passengers with first name, last name and date of birth",
        payment_methods="array: payment ids and amounts",
        total_baggages="integer",
        insurance="string: 'yes' or 'no'",
    ),
    _tool(
        "calculate",
        "Calculate the result of a mathematical expression.",
        "computation",
        {"expression": "148 * 2"},
        expression="string: the expression, with numbers, + - * / and brackets",
    ),
    _tool(
        "cancel_reservation",
        "Cancel the whole reservation.",
        "status transition",
        {"reservation_id": "FQ8APE"},
        reservation_id="string: the reservation id, such as 'ZFA04Y'",
    ),
    _tool(
        "get_reservation_details",
        "Get the details of a reservation.",
        "lookup",
        {"reservation_id": "FQ8APE"},
        reservation_id="string",
    ),
    _tool(
        "get_user_details",
        "Get the details of a user, including their reservations.",
        "lookup",
        {"user_id": "omar_rossi_1241"},
        user_id="string",
    ),
    _tool("list_all_airports", "List all airports and their cities.", "list/filter", {}),
    _tool(
        "search_direct_flight",
        "Search direct flights between two cities on a specific date.",
        "list/filter",
        {"origin": "EWR", "destination": "ORD", "date": "2024-05-26"},
        origin="string",
        destination="string",
        date="string: the date of the flight in the format 'YYYY-MM-DD'",
    ),
    _tool(
        "search_onestop_flight",
        "Search direct flights between two cities on a specific date.",
        "list/filter",
        {"origin": "EWR", "destination": "SFO", "date": "2024-05-26"},
        origin="string",
        destination="string",
        date="string",
    ),
    _tool(
        "send_certificate",
        "Send a certificate to a user. Be careful!",
        "create",
        {"user_id": "omar_rossi_1241", "amount": 100},
        user_id="string",
        amount="number: certificate amount to send",
    ),
    _tool(
        "think",
        "Use the tool to think about something. It will not obtain new information or change "
        "the database, but just append the thought to the log.",
        "other operation",
        {"thought": "basic economy cannot be modified"},
        thought="string",
    ),
    _tool(
        "transfer_to_human_agents",
        "Transfer the user to a human agent, with a summary of the user's issue. Only transfer "
        "if the user explicitly asks for a human agent, or if the user's issue cannot be "
        "resolved by the agent with the available tools.",
        "escalation",
        {"summary": "asks for compensation beyond policy"},
        summary="string",
    ),
    _tool(
        "update_reservation_baggages",
        "Update the baggage information of a reservation.",
        "update",
        {
            "reservation_id": "FQ8APE",
            "total_baggages": 2,
            "nonfree_baggages": 1,
            "payment_id": "credit_card_4579924",
        },
        reservation_id="string",
        total_baggages="integer",
        nonfree_baggages="integer",
        payment_id="string",
    ),
    _tool(
        "update_reservation_flights",
        "Update the flight information of a reservation.",
        "relation replacement",
        {
            "reservation_id": "FQ8APE",
            "cabin": "economy",
            "flights": [{"flight_number": "HAT230", "date": "2024-05-26"}],
            "payment_id": "credit_card_4579924",
        },
        reservation_id="string",
        cabin="string",
        flights=_FLIGHTS + ", all of them, even those that stay the same",
        payment_id="string",
    ),
    _tool(
        "update_reservation_passengers",
        "Update the passenger information of a reservation.",
        "update",
        {
            "reservation_id": "FQ8APE",
            "passengers": [{"first_name": "Omar", "last_name": "Rossi", "dob": "1970-06-07"}],
        },
        reservation_id="string",
        passengers="array: the passengers, as many as before",
    ),
]

FILES_CODE = '''
class FileSystem:
    """A small file system: a current directory, directories and files keyed by path."""

    def __init__(self, init_config=None):
        self.cwd = "/home/user"
        self.directories = ["/", "/home", "/home/user"]
        self.files = {}

    def _path(self, name):
        return name if name.startswith("/") else self.cwd.rstrip("/") + "/" + name

    def pwd(self):
        return {"success": True, "data": self.cwd}

    def ls(self, a=False):
        prefix = self.cwd.rstrip("/") + "/"
        names = [p[len(prefix):] for p in sorted(self.files) + self.directories
                 if p.startswith(prefix) and "/" not in p[len(prefix):]]
        return {"success": True, "data": [n for n in names if a or not n.startswith(".")]}

    def mkdir(self, dir_name):
        path = self._path(dir_name)
        if path in self.directories or path in self.files:
            return {"success": False, "error": f"{dir_name} exists"}
        self.directories.append(path)
        return {"success": True, "message": f"created {path}"}

    def touch(self, file_name):
        path = self._path(file_name)
        if path in self.files:
            return {"success": False, "error": f"{file_name} exists"}
        self.files[path] = {"content": "", "size": 0}
        return {"success": True, "message": f"created {path}"}

    def echo(self, content, file_name):
        path = self._path(file_name)
        if path not in self.files:
            return {"success": False, "error": f"no file {file_name}"}
        self.files[path] = {"content": content, "size": len(content)}
        return {"success": True, "message": f"wrote {len(content)} characters"}

    def cat(self, file_name):
        path = self._path(file_name)
        if path not in self.files:
            return {"success": False, "error": f"no file {file_name}"}
        return {"success": True, "data": self.files[path]["content"]}

    def find(self, path=".", name=None):
        root = self._path(path) if path != "." else self.cwd
        hits = [p for p in sorted(self.files) + sorted(self.directories)
                if p.startswith(root) and (name is None or name in p.rsplit("/", 1)[-1])]
        return {"success": True, "data": hits}

    def wc(self, file_name, mode="l"):
        path = self._path(file_name)
        if path not in self.files:
            return {"success": False, "error": f"no file {file_name}"}
        content = self.files[path]["content"]
        counts = {"l": len(content.splitlines()), "w": len(content.split()), "c": len(content)}
        return {"success": True, "data": counts[mode]}

    def grep(self, file_name, pattern):
        path = self._path(file_name)
        if path not in self.files:
            return {"success": False, "error": f"no file {file_name}"}
        lines = self.files[path]["content"].splitlines()
        return {"success": True, "data": [line for line in lines if pattern in line]}

    def du(self, human_readable=False):
        size = sum(f["size"] for p, f in self.files.items() if p.startswith(self.cwd))
        return {"success": True, "data": f"{size / 1024:.1f}K" if human_readable else size}

    def tail(self, file_name, lines=10):
        path = self._path(file_name)
        if path not in self.files:
            return {"success": False, "error": f"no file {file_name}"}
        return {"success": True, "data": self.files[path]["content"].splitlines()[-lines:]}

    def sort(self, file_name):
        path = self._path(file_name)
        if path not in self.files:
            return {"success": False, "error": f"no file {file_name}"}
        return {"success": True, "data": sorted(self.files[path]["content"].splitlines())}

    def mv(self, source, destination):
        src, dst = self._path(source), self._path(destination)
        if src not in self.files:
            return {"success": False, "error": f"no file {source}"}
        if dst in self.directories:
            dst = dst.rstrip("/") + "/" + src.rsplit("/", 1)[-1]
        self.files[dst] = self.files.pop(src)
        return {"success": True, "message": f"moved {src} to {dst}"}

    def cp(self, source, destination):
        src, dst = self._path(source), self._path(destination)
        if src not in self.files:
            return {"success": False, "error": f"no file {source}"}
        if dst in self.directories:
            dst = dst.rstrip("/") + "/" + src.rsplit("/", 1)[-1]
        self.files[dst] = dict(self.files[src])
        return {"success": True, "message": f"copied {src} to {dst}"}

    def rm(self, file_name):
        path = self._path(file_name)
        if path not in self.files:
            return {"success": False, "error": f"no file {file_name}"}
        del self.files[path]
        return {"success": True, "message": f"removed {path}"}

    def rmdir(self, dir_name):
        path = self._path(dir_name)
        if path not in self.directories or any(p.startswith(path + "/") for p in self.files):
            return {"success": False, "error": f"{dir_name} is not an empty directory"}
        self.directories.remove(path)
        return {"success": True, "message": f"removed {path}"}
'''

FILES_STATE = {
    "cwd": "/home/user",
    "directories": ["/", "/home", "/home/user", "/home/user/archive", "/home/user/tmp"],
    "files": {
        "/home/user/notes.txt": {"content": "buy milk\ncall Ana\nbuy bread", "size": 27},
        "/home/user/report.md": {"content": "# Q3\nrevenue up", "size": 15},
    },
}

FILES_TOOLS = [
    _tool("pwd", "Return the current working directory path.", "lookup", {}),
    _tool(
        "ls",
        "List the contents of the current directory.",
        "list/filter",
        {"a": True},
        a="boolean: show hidden files and directories",
    ),
    _tool(
        "mkdir",
        "Create a new directory in the current directory.",
        "create",
        {"dir_name": "drafts"},
        dir_name="string: name of the new directory",
    ),
    _tool(
        "touch",
        "Create a new file of any extension in the current directory.",
        "create",
        {"file_name": "todo.txt"},
        file_name="string: the name of the new file",
    ),
    _tool(
        "echo",
        "Write content to a file in the current directory, replacing what it held.",
        "update",
        {"content": "revenue down", "file_name": "report.md"},
        content="string: the content to write",
        file_name="string: the file to write to",
    ),
    _tool(
        "cat",
        "Display the contents of a file of any extension from the current directory.",
        "lookup",
        {"file_name": "notes.txt"},
        file_name="string: the file to display",
    ),
    _tool(
        "find",
        "Find any file or directory under a path whose name contains the given text.",
        "list/filter",
        {"path": ".", "name": "re"},
        path="string: where to start",
        name="string: text the name must contain",
    ),
    _tool(
        "wc",
        "Count the number of lines, words or characters in a file of any extension from the "
        "current directory.",
        "lookup",
        {"file_name": "notes.txt", "mode": "w"},
        file_name="string",
        mode="string: 'l' for lines, 'w' for words, 'c' for characters",
    ),
    _tool(
        "grep",
        "Search for lines in a file of any extension in the current directory that contain "
        "the specified pattern.",
        "list/filter",
        {"file_name": "notes.txt", "pattern": "buy"},
        file_name="string",
        pattern="string",
    ),
    _tool(
        "du",
        "Estimate the disk usage of the current directory and its contents.",
        "lookup",
        {"human_readable": True},
        human_readable="boolean: sizes in K",
    ),
    _tool(
        "tail",
        "Display the last part of a file of any extension.",
        "lookup",
        {"file_name": "notes.txt", "lines": 2},
        file_name="string",
        lines="integer: how many lines",
    ),
    _tool(
        "sort",
        "Sort the contents of a file line by line and show them.",
        "lookup",
        {"file_name": "notes.txt"},
        file_name="string",
    ),
    _tool(
        "mv",
        "Move a file or directory from one location to another.",
        "relation replacement",
        {"source": "report.md", "destination": "archive"},
        source="string: the file to move",
        destination="string: the target directory or path",
    ),
    _tool(
        "cp",
        "Copy a file or directory from one location to another.",
        "create",
        {"source": "notes.txt", "destination": "tmp"},
        source="string",
        destination="string",
    ),
    _tool(
        "rm",
        "Remove a file from the current directory.",
        "delete",
        {"file_name": "notes.txt"},
        file_name="string",
    ),
    _tool(
        "rmdir",
        "Remove an empty directory from the current directory.",
        "delete",
        {"dir_name": "tmp"},
        dir_name="string",
    ),
]

VEHICLE_CODE = '''
class VehicleControl:
    """A car's control API: engine, doors, brakes, climate, lights, fuel and navigation."""

    def __init__(self, init_config=None):
        self.engineState = "stopped"
        self.doorStatus = {"driver": "unlocked", "passenger": "unlocked"}
        self.parkingBrakeStatus = "engaged"
        self.brakePedalPosition = 0.0
        self.fuelLevel = 10.0
        self.climate = {"temperature": 21.0, "unit": "celsius", "fanSpeed": 30, "mode": "auto"}
        self.headLightStatus = "off"
        self.cruise = {"active": False, "speed": 0.0, "distanceToNextVehicle": 0.0}
        self.destination = None
        self.speed = 0.0
        self.tirePressure = {"frontLeft": 32.0, "frontRight": 32.0, "rearLeft": 30.0,
                             "rearRight": 26.0}
        self.outsideTemperature = 12.5
        self.shops = {"Tire Express": 2.1, "Wheel Works": 5.4}

    def startEngine(self, ignitionMode):
        if ignitionMode != "START" or self.brakePedalPosition < 1.0:
            return {"success": False, "error": "press the brake pedal fully to start"}
        self.engineState = "running"
        return {"success": True, "message": "engine running"}

    def lockDoors(self, unlock, door):
        for name in door:
            self.doorStatus[name] = "unlocked" if unlock else "locked"
        return {"success": True, "message": "doors updated"}

    def adjustClimateControl(self, temperature, unit="celsius", fanSpeed=50, mode="auto"):
        self.climate = {"temperature": temperature, "unit": unit, "fanSpeed": fanSpeed,
                        "mode": mode}
        return {"success": True, "message": "climate adjusted"}

    def setHeadlights(self, mode):
        self.headLightStatus = mode
        return {"success": True, "message": f"headlights {mode}"}

    def displayCarStatus(self, option):
        values = {"fuel": self.fuelLevel, "engine": self.engineState,
                  "doors": self.doorStatus, "climate": self.climate}
        return {"success": True, "data": values[option]}

    def check_tire_pressure(self):
        healthy = all(28.0 <= p <= 35.0 for p in self.tirePressure.values())
        return {"success": True, "data": {"pressure": self.tirePressure, "healthy": healthy}}

    def find_nearest_tire_shop(self):
        name = min(self.shops, key=self.shops.get)
        return {"success": True, "data": {"shop": name, "distance_km": self.shops[name]}}

    def gallon_to_liter(self, gallon):
        return {"success": True, "data": round(gallon * 3.78541, 3)}

    def liter_to_gallon(self, liter):
        return {"success": True, "data": round(liter / 3.78541, 3)}

    def get_current_speed(self):
        return {"success": True, "data": self.speed}

    def activateParkingBrake(self, mode):
        self.parkingBrakeStatus = "engaged" if mode == "engage" else "released"
        return {"success": True, "message": f"parking brake {self.parkingBrakeStatus}"}

    def pressBrakePedal(self, pedalPosition):
        self.brakePedalPosition = pedalPosition
        return {"success": True, "message": "brake pressed"}

    def releaseBrakePedal(self):
        self.brakePedalPosition = 0.0
        return {"success": True, "message": "brake released"}

    def setCruiseControl(self, speed, activate, distanceToNextVehicle):
        self.cruise = {"active": activate, "speed": speed,
                       "distanceToNextVehicle": distanceToNextVehicle}
        return {"success": True, "message": "cruise control set"}

    def fillFuelTank(self, fuelAmount):
        if self.fuelLevel + fuelAmount > 50.0:
            return {"success": False, "error": "the tank holds 50 gallons"}
        self.fuelLevel += fuelAmount
        return {"success": True, "message": f"fuel level {self.fuelLevel}"}

    def estimate_drive_feasibility_by_mileage(self, distance):
        return {"success": True, "data": {"canDrive": self.fuelLevel * 30.0 >= distance}}

    def get_outside_temperature_from_google(self):
        return {"success": True, "data": self.outsideTemperature}

    def set_navigation(self, destination):
        self.destination = destination
        return {"success": True, "message": f"navigating to {destination}"}
'''

VEHICLE_TOOLS = [
    _tool(
        "startEngine",
        "Starts the engine of the vehicle.",
        "status transition",
        {"ignitionMode": "START"},
        ignitionMode="string: the ignition mode, 'START' or 'STOP'",
    ),
    _tool(
        "lockDoors",
        "Locks or unlocks the doors of the vehicle.",
        "status transition",
        {"unlock": False, "door": ["driver", "passenger"]},
        unlock="boolean: true to unlock the doors, false to lock them",
        door="array: the doors, 'driver' or 'passenger'",
    ),
    _tool(
        "adjustClimateControl",
        "Adjusts the climate control of the vehicle.",
        "update",
        {"temperature": 19.0, "unit": "celsius", "fanSpeed": 40, "mode": "cool"},
        temperature="number",
        unit="string: 'celsius' or 'fahrenheit'",
        fanSpeed="integer: 0 to 100",
        mode="string: 'auto', 'cool', 'heat' or 'defrost'",
    ),
    _tool(
        "setHeadlights",
        "Sets the headlights of the vehicle.",
        "update",
        {"mode": "on"},
        mode="string: 'on', 'off' or 'auto'",
    ),
    _tool(
        "displayCarStatus",
        "Displays the status of the vehicle based on the provided display option.",
        "lookup",
        {"option": "fuel"},
        option="string: 'fuel', 'engine', 'doors' or 'climate'",
    ),
    _tool(
        "check_tire_pressure",
        "Checks the tire pressure of the vehicle and whether it is within the healthy range.",
        "validate",
        {},
    ),
    _tool(
        "find_nearest_tire_shop",
        "Finds the nearest tire shop and its distance.",
        "lookup",
        {},
    ),
    _tool(
        "gallon_to_liter",
        "Converts gallons to liters.",
        "computation",
        {"gallon": 12.0},
        gallon="number: the amount in gallons",
    ),
    _tool(
        "liter_to_gallon",
        "Converts liters to gallons.",
        "computation",
        {"liter": 40.0},
        liter="number: the amount in liters",
    ),
    _tool("get_current_speed", "Gets the current speed of the vehicle.", "lookup", {}),
    _tool(
        "activateParkingBrake",
        "Activates or releases the parking brake of the vehicle.",
        "status transition",
        {"mode": "release"},
        mode="string: 'engage' or 'release'",
    ),
    _tool(
        "pressBrakePedal",
        "Presses the brake pedal based on the pedal position. The brake pedal stays pressed "
        "until released.",
        "update",
        {"pedalPosition": 0.5},
        pedalPosition="number: 0 (not pressed) to 1 (fully pressed)",
    ),
    _tool("releaseBrakePedal", "Releases the brake pedal of the vehicle.", "update", {}),
    _tool(
        "setCruiseControl",
        "Sets the cruise control of the vehicle.",
        "update",
        {"speed": 65.0, "activate": True, "distanceToNextVehicle": 100.0},
        speed="number",
        activate="boolean",
        distanceToNextVehicle="number",
    ),
    _tool(
        "fillFuelTank",
        "Fills the fuel tank of the vehicle. The fuel tank can hold up to 50 gallons.",
        "update",
        {"fuelAmount": 20.0},
        fuelAmount="number: gallons to add",
    ),
    _tool(
        "estimate_drive_feasibility_by_mileage",
        "Estimates whether the vehicle can drive a given distance with its current fuel.",
        "eligibility check",
        {"distance": 250.0},
        distance="number: miles",
    ),
    _tool(
        "get_outside_temperature_from_google",
        "Gets the outside temperature.",
        "lookup",
        {},
    ),
    _tool(
        "set_navigation",
        "Navigates to the destination.",
        "update",
        {"destination": "221 Baker Street, London"},
        destination="string: the address",
    ),
]

VEHICLE_STATE = {"brakePedalPosition": 1.0}
"""The engine start needs the brake pressed."""

TOOL_SETS: dict[str, tuple[str, str, dict, list[LabelledTool]]] = {
    "retail": ("RetailSupport", RETAIL_CODE, RETAIL_STATE, RETAIL_TOOLS),
    "airline": ("AirlineBooking", AIRLINE_CODE, AIRLINE_STATE, AIRLINE_TOOLS),
    "files": ("FileSystem", FILES_CODE, FILES_STATE, FILES_TOOLS),
    "vehicle": ("VehicleControl", VEHICLE_CODE, VEHICLE_STATE, VEHICLE_TOOLS),
}
DEVELOPMENT_SETS = ("retail", "airline", "files")
HELD_OUT_SETS = ("vehicle",)


def labelled_environment(kind: str) -> Environment:
    class_name, code, _, tools = TOOL_SETS[kind]
    return Environment(
        env_id=kind,
        env_class_code=code,
        tools=[tool.schema for tool in tools],
        environment_introduction=f"{class_name}: hand-labelled tool set ({kind}).",
    )


def labels(kind: str) -> dict[str, str]:
    """Tool name -> hand label."""
    return {tool.name: tool.label for tool in TOOL_SETS[kind][3]}


def labelled_pool() -> Pool:
    """Every tool set as an environment; one task per tool whose reference is its probe."""
    envs, tasks = {}, []
    for kind, (class_name, _, state, tools) in TOOL_SETS.items():
        envs[kind] = labelled_environment(kind)
        for tool in tools:
            always = "def check_func(final_state):\n    return isinstance(final_state, dict)\n"
            never = "def check_func(final_state):\n    return False\n"
            tasks.append(
                Task(
                    task_id=f"{kind}-{tool.name}",
                    env_id=kind,
                    env_class_name=class_name,
                    init_config=copy.deepcopy(state),
                    task=f"Call {tool.name}.",
                    checklist_with_func=[Check("state readable", always), Check("open", never)],
                    reference_solution=[ToolCall(tool.name, copy.deepcopy(tool.probe))],
                )
            )
    return Pool(envs, tasks)
