"""The built-in workload suites, as plain case dicts (validated by :mod:`specharness.traffic.workloads`).

Rubrics are fixed here, in advance of any run: copy and transform tasks are input-grounded (the answer can be
checked against the input), free generation has only a length rubric, abstain is a negative control whose right
answer is to decline.
"""

from __future__ import annotations

from typing import Any

__all__ = ["builtin_cases", "warmup_cases"]

_PASSAGES = [
    ("lighthouse", "The old lighthouse on Karrow Point was switched off in 1987. Its keeper, Mara Quill, kept a "
     "logbook of every storm for thirty years. The logbook now sits in the town library, open to the page for the "
     "night of the great October gale."),
    ("orchard", "Every spring the Tessel family plants twelve new apple trees at the edge of the orchard. They name "
     "each tree after a river. This year the trees are called Amber, Sorrel, Linden and Vale, and the smallest one "
     "already has three blossoms."),
    ("bridge", "The footbridge over the Wren canal is painted green every five years. Engineers check its bolts each "
     "winter with a small brass hammer. Local children believe that the bridge hums when a train passes below it."),
    ("market", "On Saturdays the square fills with the stalls of the night market. Ana sells blue glass beads, Tomas "
     "sells roasted chestnuts, and an old man with a violin plays the same four songs until midnight."),
    ("station", "Platform nine at Hollin station has a clock that runs exactly four minutes fast. Commuters know it "
     "and set their watches by it anyway. The station master says the clock has been wrong since the winter of 2009."),
    ("garden", "The rooftop garden above the bakery grows tomatoes, basil and a single lemon tree in a copper pot. "
     "The baker waters it at five every morning before the first loaves go into the oven."),
    ("museum", "The museum of small machines holds four hundred clockwork toys. The oldest is a tin bird that "
     "still sings when wound. Visitors may wind it once, on the first Sunday of each month, under a curator's eye."),
    ("ferry", "The morning ferry to Elsby leaves at seven and carries bicycles for free. Its captain, Ruth Okafor, "
     "rings the bell twice before departure and once when the harbour lights come into view."),
]

_EXTRACT = [
    ("lighthouse", "the logbook", "kept a logbook of every storm for thirty years"),
    ("orchard", "the trees' names", "Amber, Sorrel, Linden and Vale"),
    ("bridge", "the engineers", "check its bolts each winter with a small brass hammer"),
    ("station", "the clock", "runs exactly four minutes fast"),
    ("museum", "the oldest toy", "tin bird that still sings when wound"),
]

_CODE = [
    ("area", "def area(width, height):\n    \"\"\"Return the area of a rectangle.\"\"\"\n    if width < 0 or height < 0:\n"
     "        raise ValueError(\"negative size\")\n    return width * height\n", "area", "rectangle_area",
     "return width * height"),
    ("greet", "def greet(name):\n    message = \"Hello, \" + name + \"!\"\n    print(message)\n    return message\n",
     "greet", "say_hello", "message = \"Hello, \" + name"),
    ("total", "def total(prices):\n    result = 0\n    for price in prices:\n        result += price\n    return result\n",
     "total", "sum_prices", "for price in prices:"),
    ("clamp", "def clamp(value, low, high):\n    if value < low:\n        return low\n    if value > high:\n"
     "        return high\n    return value\n", "clamp", "bound", "if value < low:"),
    ("count", "def count_words(text):\n    words = text.split()\n    return len(words)\n", "count_words",
     "word_count", "words = text.split()"),
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

_ABSTAIN_SYSTEM = "You are a careful assistant. If you cannot know the answer, say that you don't know."


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def _copy() -> list[dict[str, Any]]:
    passages = dict(_PASSAGES)
    cases: list[dict[str, Any]] = []
    for key, text in _PASSAGES[:6]:
        span = " ".join(text.split(". ")[1].split()[:7])
        cases.append({"id": f"repeat-{key}", "group": "repeat", "max_tokens": 128,
                      "messages": _user(f"Repeat the following passage exactly, word for word. Output only the "
                                        f"passage.\n\n{text}"),
                      "check": {"type": "contains", "values": [span]}})
    for key, topic, span in _EXTRACT:
        cases.append({"id": f"extract-{key}", "group": "extract", "max_tokens": 64,
                      "messages": _user(f"Copy, word for word, the sentence about {topic} from this passage. Output "
                                        f"only that sentence.\n\n{passages[key]}"),
                      "check": {"type": "contains", "values": [span]}})
    for key, code, old, new, kept in _CODE:
        cases.append({"id": f"code-{key}", "group": "code-edit", "max_tokens": 128,
                      "messages": _user(f"Rename the function `{old}` to `{new}`. Output the complete updated code "
                                        f"and nothing else.\n\n```python\n{code}```"),
                      "check": {"type": "contains", "values": [f"def {new}(", kept], "case_sensitive": True}})
    return cases


def _transform() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    for i, sentence in enumerate(_UPPER):
        cases.append({"id": f"upper-{i}", "group": "case", "max_tokens": 48,
                      "messages": _user(f"Rewrite this sentence in capital letters only:\n\n{sentence}"),
                      "check": {"type": "contains", "values": [sentence.upper()], "case_sensitive": True}})
    for i, (fact, keys) in enumerate(_JSON):
        cases.append({"id": f"json-{i}", "group": "json", "max_tokens": 96,
                      "messages": _user(f"Convert this sentence to a JSON object with the keys {', '.join(keys)}. "
                                        f"Output only the JSON.\n\n{fact}"),
                      "check": {"type": "json_keys", "keys": keys}})
    for i, words in enumerate(_REVERSE):
        cases.append({"id": f"reverse-{i}", "group": "reorder", "max_tokens": 32,
                      "messages": _user(f"Write these words in reverse order, separated by commas: {', '.join(words)}"),
                      "check": {"type": "regex", "pattern": r"\W*".join(reversed(words))}})
    for i, (old, new, text) in enumerate(_SUBSTITUTE):
        cases.append({"id": f"substitute-{i}", "group": "substitute", "max_tokens": 64,
                      "messages": _user(f"Replace every '{old}' with '{new}' in the text below and output the "
                                        f"whole new text.\n\n{text}"),
                      "check": {"type": "contains", "values": [new]}})
    return cases


def _free() -> list[dict[str, Any]]:
    return [{"id": f"free-{i}", "group": "open", "max_tokens": 128, "messages": _user(prompt),
             "check": {"type": "regex", "pattern": r"(\w+\W+){30,}"}} for i, prompt in enumerate(_FREE)]


def _abstain() -> list[dict[str, Any]]:
    return [{"id": f"abstain-{i}", "group": "unanswerable", "max_tokens": 48,
             "messages": [{"role": "system", "content": _ABSTAIN_SYSTEM}, {"role": "user", "content": q}],
             "check": {"type": "abstains"}} for i, q in enumerate(_ABSTAIN)]


_BUILDERS = {"copy": _copy, "transform": _transform, "free": _free, "abstain": _abstain}


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
    return [{"id": f"warmup-{i}", "group": "warmup", "max_tokens": 32, "messages": _user(text)}
            for i, text in enumerate(_WARMUP)]  # fmt: skip
