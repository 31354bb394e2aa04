"""The built-in workload suites, as plain case dicts (validated by :mod:`specharness.traffic.workloads`).

Rubrics are fixed here, in advance of any run: copy and transform tasks are input-grounded (the answer can be
checked against the input), free generation has only a length rubric, abstain is a negative control whose right
answer is to decline. Structured cases ask for JSON under a ``response_format`` schema or for a forced tool call;
every value their rubric expects is written in the prompt, to be copied (which gives prompt lookup its drafts).
"""

from __future__ import annotations

from typing import Any

__all__ = ["builtin_cases", "warmup_cases"]

_PASSAGES = [
    (
        "lighthouse",
        "The old lighthouse on Karrow Point was switched off in 1987. Its keeper, Mara Quill, kept a "
        "logbook of every storm for thirty years. The logbook now sits in the town library, open to the page for the "
        "night of the great October gale.",
    ),
    (
        "orchard",
        "Every spring the Tessel family plants twelve new apple trees at the edge of the orchard. They name "
        "each tree after a river. This year the trees are called Amber, Sorrel, Linden and Vale, and the smallest one "
        "already has three blossoms.",
    ),
    (
        "bridge",
        "The footbridge over the Wren canal is painted green every five years. Engineers check its bolts each "
        "winter with a small brass hammer. Local children believe that the bridge hums when a train passes below it.",
    ),
    (
        "market",
        "On Saturdays the square fills with the stalls of the night market. Ana sells blue glass beads, Tomas "
        "sells roasted chestnuts, and an old man with a violin plays the same four songs until midnight.",
    ),
    (
        "station",
        "Platform nine at Hollin station has a clock that runs exactly four minutes fast. Commuters know it "
        "and set their watches by it anyway. The station master says the clock has been wrong since the winter of 2009.",
    ),
    (
        "garden",
        "The rooftop garden above the bakery grows tomatoes, basil and a single lemon tree in a copper pot. "
        "The baker waters it at five every morning before the first loaves go into the oven.",
    ),
    (
        "museum",
        "The museum of small machines holds four hundred clockwork toys. The oldest is a tin bird that "
        "still sings when wound. Visitors may wind it once, on the first Sunday of each month, under a curator's eye.",
    ),
    (
        "ferry",
        "The morning ferry to Elsby leaves at seven and carries bicycles for free. Its captain, Ruth Okafor, "
        "rings the bell twice before departure and once when the harbour lights come into view.",
    ),
]

_EXTRACT = [
    ("lighthouse", "the logbook", "kept a logbook of every storm for thirty years"),
    ("orchard", "the trees' names", "Amber, Sorrel, Linden and Vale"),
    ("bridge", "the engineers", "check its bolts each winter with a small brass hammer"),
    ("station", "the clock", "runs exactly four minutes fast"),
    ("museum", "the oldest toy", "tin bird that still sings when wound"),
]

_CODE = [
    (
        "area",
        'def area(width, height):\n    """Return the area of a rectangle."""\n    if width < 0 or height < 0:\n'
        '        raise ValueError("negative size")\n    return width * height\n',
        "area",
        "rectangle_area",
        "return width * height",
    ),
    (
        "greet",
        'def greet(name):\n    message = "Hello, " + name + "!"\n    print(message)\n    return message\n',
        "greet",
        "say_hello",
        'message = "Hello, " + name',
    ),
    (
        "total",
        "def total(prices):\n    result = 0\n    for price in prices:\n        result += price\n    return result\n",
        "total",
        "sum_prices",
        "for price in prices:",
    ),
    (
        "clamp",
        "def clamp(value, low, high):\n    if value < low:\n        return low\n    if value > high:\n"
        "        return high\n    return value\n",
        "clamp",
        "bound",
        "if value < low:",
    ),
    (
        "count",
        "def count_words(text):\n    words = text.split()\n    return len(words)\n",
        "count_words",
        "word_count",
        "words = text.split()",
    ),
]

_UPPER = [
    "the ferry leaves at seven in the morning",
    "three blue glass beads on a silver string",
    "the clock on platform nine runs fast",
    "water the lemon tree before sunrise",
]

_JSON = [
    ("Alice is 34 years old and lives in Lisbon.", ["name", "age", "city"]),
    ("Bruno is 27 years old and lives in Oslo.", ["name", "age", "city"]),
    ("The book 'Tide Clocks' was written by Ines Faro in 2011.", ["title", "author", "year"]),
    ("The river Avon is 120 km long and flows through Bath.", ["name", "length_km", "city"]),
]

_REVERSE = [
    ["red", "green", "blue", "yellow"],
    ["one", "two", "three", "four"],
    ["apple", "pear", "plum", "fig"],
    ["north", "east", "south", "west"],
]

_SUBSTITUTE = [
    ("cat", "dog", "The cat sat on the mat. Later the cat chased a ball, and the cat slept by the fire."),
    ("red", "blue", "She wore a red coat and a red hat, and carried a red umbrella through the rain."),
    ("Monday", "Friday", "The meeting is on Monday. Please send the report before Monday at noon."),
    ("river", "lake", "We walked along the river, swam in the river, and camped beside the river."),
]

_FREE = [
    "Write a short story about a robot who learns to bake bread.",
    "Describe a walk through a forest in autumn.",
    "Write a letter from a sailor to his sister.",
    "Tell a short tale about a fox and a crow who become friends.",
    "Describe the sounds of a busy city at dawn.",
    "Write a short story about a girl who finds a map in the attic.",
    "Describe your ideal weekend in the mountains.",
    "Write a fable about a tortoise who wants to fly.",
]

_ABSTAIN = [
    "What did I have for breakfast this morning?",
    "What is the name of my neighbour's cat?",
    "What number am I thinking of right now?",
    "What is written on the note in my left pocket?",
    "What time did my sister wake up today?",
    "What colour is the car parked outside my house right now?",
    "What will the closing price of my company's shares be next Tuesday?",
    "What was the last word I said before I started typing this?",
]

# 72 more, from templates over facts no model can know (the first 8 keep their ids): 80 distinct questions, so a
# greedy run (where a case repeated across blocks answers the same way) still has 80 independent pairs; the refusal
# report says what that can detect (about 10 points of refusals turned into answers, at 80% power).
_ABSTAIN_TEMPLATES: list[tuple[str, list[dict[str, str]]]] = [
    (
        "What did I have for {a} {b}?",
        [
            {"a": m, "b": w}
            for m in ("breakfast", "lunch", "dinner")
            for w in ("yesterday", "last Sunday", "on my birthday")
        ],
    ),
    (
        "What is the name of my {a}'s {b}?",
        [
            {"a": p, "b": q}
            for p in ("neighbour", "cousin", "dentist", "landlord")
            for q in ("dog", "parrot", "goldfish")
        ],
    ),
    (
        "What is the {a} of my {b}?",
        [
            {"a": c, "b": t}
            for c in ("PIN", "password", "serial number")
            for t in ("bank card", "laptop", "front door lock")
        ],
    ),
    (
        "How many {a} are in my {b} right now?",
        [{"a": i, "b": p} for i in ("coins", "books", "apples") for p in ("desk drawer", "kitchen", "car")],
    ),
    (
        "What did my {a} say to me {b}?",
        [
            {"a": p, "b": w}
            for p in ("mother", "boss", "friend Tom", "doctor")
            for w in ("this morning", "last night", "an hour ago")
        ],
    ),
    ("What am I holding in my {a} hand right now?", [{"a": h} for h in ("left", "right")]),
    (
        "Which {a} will I choose {b}?",
        [{"a": t, "b": w} for t in ("film", "shirt", "restaurant") for w in ("tonight", "tomorrow", "next weekend")],
    ),
    ("What is word number {a} in the letter on my desk?", [{"a": n} for n in ("3", "7", "12", "20")]),
    ("What room number was I given at the hotel {a}?", [{"a": w} for w in ("last month", "in March", "yesterday")]),
    ("How much money is in my {a} account today?", [{"a": a} for a in ("savings", "checking", "pension")]),
]
_ABSTAIN += [template.format(**fill) for template, fills in _ABSTAIN_TEMPLATES for fill in fills]

_ABSTAIN_SYSTEM = "You are a careful assistant. If you cannot know the answer, say that you don't know."


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def _copy() -> list[dict[str, Any]]:
    passages = dict(_PASSAGES)
    cases: list[dict[str, Any]] = []
    for key, text in _PASSAGES[:6]:
        span = " ".join(text.split(". ")[1].split()[:7])
        cases.append(
            {
                "id": f"repeat-{key}",
                "group": "repeat",
                "max_tokens": 128,
                "messages": _user(
                    f"Repeat the following passage exactly, word for word. Output only the passage.\n\n{text}"
                ),
                "check": {"type": "contains", "values": [span]},
            }
        )
    for key, topic, span in _EXTRACT:
        cases.append(
            {
                "id": f"extract-{key}",
                "group": "extract",
                "max_tokens": 64,
                "messages": _user(
                    f"Copy, word for word, the sentence about {topic} from this passage. Output "
                    f"only that sentence.\n\n{passages[key]}"
                ),
                "check": {"type": "contains", "values": [span]},
            }
        )
    for key, code, old, new, kept in _CODE:
        cases.append(
            {
                "id": f"code-{key}",
                "group": "code-edit",
                "max_tokens": 128,
                "messages": _user(
                    f"Rename the function `{old}` to `{new}`. Output the complete updated code "
                    f"and nothing else.\n\n```python\n{code}```"
                ),
                "check": {"type": "contains", "values": [f"def {new}(", kept], "case_sensitive": True},
            }
        )
    return cases


def _transform() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    for i, sentence in enumerate(_UPPER):
        cases.append(
            {
                "id": f"upper-{i}",
                "group": "case",
                "max_tokens": 48,
                "messages": _user(f"Rewrite this sentence in capital letters only:\n\n{sentence}"),
                "check": {"type": "contains", "values": [sentence.upper()], "case_sensitive": True},
            }
        )
    for i, (fact, keys) in enumerate(_JSON):
        cases.append(
            {
                "id": f"json-{i}",
                "group": "json",
                "max_tokens": 96,
                "messages": _user(
                    f"Convert this sentence to a JSON object with the keys {', '.join(keys)}. "
                    f"Output only the JSON.\n\n{fact}"
                ),
                "check": {"type": "json_keys", "keys": keys},
            }
        )
    for i, words in enumerate(_REVERSE):
        cases.append(
            {
                "id": f"reverse-{i}",
                "group": "reorder",
                "max_tokens": 32,
                "messages": _user(f"Write these words in reverse order, separated by commas: {', '.join(words)}"),
                "check": {"type": "regex", "pattern": r"\W*".join(reversed(words))},
            }
        )
    for i, (old, new, text) in enumerate(_SUBSTITUTE):
        cases.append(
            {
                "id": f"substitute-{i}",
                "group": "substitute",
                "max_tokens": 64,
                "messages": _user(
                    f"Replace every '{old}' with '{new}' in the text below and output the whole new text.\n\n{text}"
                ),
                "check": {"type": "contains", "values": [new]},
            }
        )
    return cases


def _free() -> list[dict[str, Any]]:
    return [
        {
            "id": f"free-{i}",
            "group": "open",
            "max_tokens": 128,
            "messages": _user(prompt),
            "check": {"type": "regex", "pattern": r"(\w+\W+){30,}"},
        }
        for i, prompt in enumerate(_FREE)
    ]


def _abstain() -> list[dict[str, Any]]:
    return [
        {
            "id": f"abstain-{i}",
            "group": "unanswerable",
            "max_tokens": 48,
            "messages": [{"role": "system", "content": _ABSTAIN_SYSTEM}, {"role": "user", "content": q}],
            "check": {"type": "abstains"},
        }
        for i, q in enumerate(_ABSTAIN)
    ]


# Structured cases. Every schema is "strict" in OpenAI's sense: all properties required, no others allowed. Only
# keywords that vLLM's structured-output backends support are used (no pattern, format or numeric bounds).
_STR: dict[str, Any] = {"type": "string"}
_INT: dict[str, Any] = {"type": "integer"}
_BOOL: dict[str, Any] = {"type": "boolean"}


def _obj(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def _enum(*values: str) -> dict[str, Any]:
    return {"type": "string", "enum": list(values)}


def _list(item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": item, "minItems": 1}


_ORDER_SCHEMA = _obj(
    {
        "customer": _obj({"name": _STR, "email": _STR}),
        "items": _list(_obj({"sku": _STR, "quantity": _INT})),
        "delivery_date": _STR,
        "address": _obj({"street": _STR, "city": _STR, "postcode": _STR}),
        "shipping": _enum("standard", "express", "pickup"),
    }
)
_ORDER_ASK = (
    "Extract the order in this message as JSON with the fields customer (name, email), items (sku, "
    "quantity), delivery_date (YYYY-MM-DD), address (street, city, postcode) and shipping (standard, "
    "express or pickup). Output only the JSON."
)

# (key, message, values the answer must hold)
_ORDERS: list[tuple[str, str, dict[str, Any]]] = [
    (
        "bakery",
        "Hello, this is Mara Quill (mara.quill@example.org). Please send 3 x TB-118 and 12 x PL-007 to "
        "14 Harbour Lane, Karrow, KR2 9PX by 2026-03-14. Express shipping, please.",
        {
            "customer.name": "Mara Quill",
            "customer.email": "mara.quill@example.org",
            "items[0].sku": "TB-118",
            "items[0].quantity": 3,
            "items[1].sku": "PL-007",
            "items[1].quantity": 12,
            "address.postcode": "KR2 9PX",
            "delivery_date": "2026-03-14",
            "shipping": "express",
        },
    ),
    (
        "chestnut",
        "Order from Tomas Reyes, tomas.reyes@example.net: 5 x CH-450. Deliver on 2026-11-02 to "
        "7 Market Square, Hollin, HL4 1AB, standard shipping.",
        {
            "customer.name": "Tomas Reyes",
            "items[0].sku": "CH-450",
            "items[0].quantity": 5,
            "address.street": "7 Market Square",
            "address.city": "Hollin",
            "delivery_date": "2026-11-02",
            "shipping": "standard",
        },
    ),
    (
        "beads",
        "Ana Lund (ana.lund@example.com) orders 2 x BG-031 and 4 x SS-210. Shipping: pickup, on 2026-07-19, "
        "at the shop at 3 Wren Road, Elsby, EL9 6QT.",
        {
            "customer.email": "ana.lund@example.com",
            "items[0].sku": "BG-031",
            "items[0].quantity": 2,
            "items[1].sku": "SS-210",
            "items[1].quantity": 4,
            "address.postcode": "EL9 6QT",
            "shipping": "pickup",
        },
    ),
    (
        "lemon",
        "Please deliver 1 x LT-900 and 6 x CP-115 to Ruth Okafor, ruth.okafor@example.org, 22 Ferry Street, "
        "Elsby, EL2 3RS, on 2026-04-30 by express shipping.",
        {
            "customer.name": "Ruth Okafor",
            "items[0].sku": "LT-900",
            "items[0].quantity": 1,
            "items[1].quantity": 6,
            "address.street": "22 Ferry Street",
            "delivery_date": "2026-04-30",
            "shipping": "express",
        },
    ),
]

# (key, instruction, passage, schema, values): one flat record each, with enums, integers and booleans
_RECORDS: list[tuple[str, str, str, dict[str, Any], dict[str, Any]]] = [
    (
        "ferry",
        "vessel, destination, departs (HH:MM), bicycles_free (true or false), capacity and day (monday to sunday)",
        "Timetable note: the ferry Gull Wing leaves for Elsby at 07:15 every Saturday. It carries up to "
        "240 passengers, and bicycles travel free.",
        _obj(
            {
                "vessel": _STR,
                "destination": _STR,
                "departs": _STR,
                "bicycles_free": _BOOL,
                "capacity": _INT,
                "day": _enum("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"),
            }
        ),
        {
            "vessel": "Gull Wing",
            "destination": "Elsby",
            "departs": "07:15",
            "bicycles_free": True,
            "capacity": 240,
            "day": "saturday",
        },
    ),
    (
        "book",
        "title, author, year, format (hardback, paperback or ebook) and pages",
        "Tide Clocks by Ines Faro, first printed in 2011, is now out as a paperback of 312 pages.",
        _obj(
            {
                "title": _STR,
                "author": _STR,
                "year": _INT,
                "format": _enum("hardback", "paperback", "ebook"),
                "pages": _INT,
            }
        ),
        {"title": "Tide Clocks", "author": "Ines Faro", "year": 2011, "format": "paperback", "pages": 312},
    ),
    (
        "flight",
        "flight, origin, destination, seats and cabin (economy, premium or business)",
        "Booking: 2 seats in business on flight KL 1402 from AMS to OSL.",
        _obj(
            {
                "flight": _STR,
                "origin": _STR,
                "destination": _STR,
                "seats": _INT,
                "cabin": _enum("economy", "premium", "business"),
            }
        ),
        {"flight": "KL 1402", "origin": "AMS", "destination": "OSL", "seats": 2, "cabin": "business"},
    ),
    (
        "room",
        "guest, arrival (YYYY-MM-DD), nights, room_type (single, double or suite) and breakfast (true or false)",
        "Reservation for Ines Faro: a double room for 3 nights from 2026-08-21, breakfast not included.",
        _obj(
            {
                "guest": _STR,
                "arrival": _STR,
                "nights": _INT,
                "room_type": _enum("single", "double", "suite"),
                "breakfast": _BOOL,
            }
        ),
        {"guest": "Ines Faro", "arrival": "2026-08-21", "nights": 3, "room_type": "double", "breakfast": False},
    ),
]


def _tool(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


_BOOK_MEETING = _tool(
    "book_meeting",
    "Book a meeting room for a meeting.",
    _obj(
        {
            "topic": _STR,
            "attendees": _list(_STR),
            "date": _STR,
            "start_time": _STR,
            "duration_minutes": _INT,
            "room": _STR,
        }
    ),
)
_SEND_EMAIL = _tool("send_email", "Send an email.", _obj({"to": _list(_STR), "subject": _STR, "body": _STR}))
_CREATE_REMINDER = _tool(
    "create_reminder",
    "Create a reminder.",
    _obj(
        {
            "text": _STR,
            "date": _STR,
            "time": _STR,
            "priority": _enum("low", "normal", "high"),
        }
    ),
)

# (key, request, values of the book_meeting arguments)
_MEETINGS: list[tuple[str, str, dict[str, Any]]] = [
    (
        "budget",
        "Please set up 'Q3 budget review' with Ana Lund and Ruth Okafor on 2026-05-06 at 09:30 for 45 "
        "minutes in room Linden.",
        {
            "topic": "Q3 budget review",
            "attendees[0]": "Ana Lund",
            "attendees[1]": "Ruth Okafor",
            "date": "2026-05-06",
            "start_time": "09:30",
            "duration_minutes": 45,
            "room": "Linden",
        },
    ),
    (
        "launch",
        "'Ferry app launch' with Tomas Reyes, Mara Quill and Ines Faro, 2026-06-11 at 14:00, 60 minutes, room Sorrel.",
        {
            "topic": "Ferry app launch",
            "attendees[0]": "Tomas Reyes",
            "attendees[2]": "Ines Faro",
            "date": "2026-06-11",
            "start_time": "14:00",
            "duration_minutes": 60,
            "room": "Sorrel",
        },
    ),
    (
        "interview",
        "Book 'Night market survey interview' with Bruno Vale on 2026-09-02 at 11:15 for 30 minutes in room Amber.",
        {
            "topic": "Night market survey interview",
            "attendees[0]": "Bruno Vale",
            "date": "2026-09-02",
            "start_time": "11:15",
            "duration_minutes": 30,
            "room": "Amber",
        },
    ),
    (
        "retro",
        "'Sprint 12 retro' with Ana Lund and Bruno Vale on 2026-10-20 at 16:45, 90 minutes, room Vale.",
        {
            "topic": "Sprint 12 retro",
            "attendees[0]": "Ana Lund",
            "attendees[1]": "Bruno Vale",
            "date": "2026-10-20",
            "start_time": "16:45",
            "duration_minutes": 90,
            "room": "Vale",
        },
    ),
]

# (key, function forced, request, values of its arguments): two tools offered, one forced
_PAIRS: list[tuple[str, str, str, dict[str, Any]]] = [
    (
        "timetable",
        "send_email",
        "Email mara.quill@example.org and tomas.reyes@example.net with the subject "
        "'Ferry timetable for June' and the body 'The 07:15 ferry to Elsby runs every Saturday in June.'",
        {
            "to[0]": "mara.quill@example.org",
            "to[1]": "tomas.reyes@example.net",
            "subject": "Ferry timetable for June",
            "body": "The 07:15 ferry to Elsby runs every Saturday in June.",
        },
    ),
    (
        "invoice",
        "send_email",
        "Send an email to ruth.okafor@example.org, subject 'Invoice 2026-0412', body "
        "'Invoice 2026-0412 for 6 copper pots is attached.'",
        {
            "to[0]": "ruth.okafor@example.org",
            "subject": "Invoice 2026-0412",
            "body": "Invoice 2026-0412 for 6 copper pots is attached.",
        },
    ),
    (
        "bolts",
        "create_reminder",
        "Remind me to 'check the footbridge bolts' on 2026-12-01 at 08:00, priority high.",
        {"text": "check the footbridge bolts", "date": "2026-12-01", "time": "08:00", "priority": "high"},
    ),
    (
        "lemon",
        "create_reminder",
        "Set a reminder 'water the lemon tree' for 2026-07-04 at 05:00 with low priority.",
        {"text": "water the lemon tree", "date": "2026-07-04", "time": "05:00", "priority": "low"},
    ),
]


def _json_case(
    case_id: str, group: str, max_tokens: int, prompt: str, name: str, schema: dict[str, Any], values: dict[str, Any]
) -> dict[str, Any]:
    return {
        "id": case_id,
        "group": group,
        "max_tokens": max_tokens,
        "messages": _user(prompt),
        "response_format": {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}},
        "check": {"type": "json_schema", "values": values},
    }


def _tool_case(
    case_id: str,
    group: str,
    max_tokens: int,
    prompt: str,
    tools: list[dict[str, Any]],
    name: str,
    values: dict[str, Any],
) -> dict[str, Any]:
    return {
        "id": case_id,
        "group": group,
        "max_tokens": max_tokens,
        "messages": _user(prompt),
        "tools": tools,
        "tool_choice": {"type": "function", "function": {"name": name}},
        "check": {"type": "tool_call", "values": values},
    }


def _structured() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    for key, message, values in _ORDERS:
        cases.append(
            _json_case(
                f"order-{key}", "json-extract", 192, f"{_ORDER_ASK}\n\n{message}", "order", _ORDER_SCHEMA, values
            )
        )
    for key, fields, passage, schema, values in _RECORDS:
        cases.append(
            _json_case(
                f"record-{key}",
                "json-record",
                128,
                f"Turn this note into JSON with the fields {fields}. Output only the JSON.\n\n{passage}",
                key,
                schema,
                values,
            )
        )
    for key, request, values in _MEETINGS:
        cases.append(
            _tool_case(
                f"meeting-{key}",
                "tool-call",
                160,
                "Book this meeting with the book_meeting tool, "
                "copying the topic, attendees, date (YYYY-MM-DD), start time (HH:MM), duration in "
                f"minutes and room from the request.\n\nRequest: {request}",
                [_BOOK_MEETING],
                "book_meeting",
                values,
            )
        )
    for key, function, request, values in _PAIRS:
        cases.append(
            _tool_case(
                f"pair-{key}",
                "tool-pair",
                192,
                f"Use the {function} tool for this request, copying its values exactly.\n\nRequest: {request}",
                [_SEND_EMAIL, _CREATE_REMINDER],
                function,
                values,
            )
        )
    return cases


_BUILDERS = {"copy": _copy, "transform": _transform, "free": _free, "abstain": _abstain, "structured": _structured}


def builtin_cases(name: str) -> list[dict[str, Any]]:
    return _BUILDERS[name]()


_WARMUP = [
    "Count from one to twenty in words.",
    "List the days of the week.",
    "Name five colours.",
    "Write the alphabet in capital letters.",
]


def warmup_cases() -> list[dict[str, Any]]:
    """Neutral warmup prompts, never measured: used when a workload has no case left over for warming up."""
    return [
        {"id": f"warmup-{i}", "group": "warmup", "max_tokens": 32, "messages": _user(text)}
        for i, text in enumerate(_WARMUP)
    ]
