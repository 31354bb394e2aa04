"""The package follows the data one way: no module imports a room downstream of its own (and so no cycle)."""

from __future__ import annotations

import ast
from pathlib import Path

import specharness

ROOT = Path(specharness.__file__).parent
# rank of each room; a module may import rooms of lower or equal rank only (engines sit beside experiment's inputs)
RANK = {
    "_errors": 0,
    "records": 0,
    "numbers": 0,
    "console": 0,
    "traffic": 1,
    "engines": 1,
    "experiment": 2,
    "analysis": 3,
    "reporting": 4,
    "history": 5,
    "matrix": 6,  # drives runs and files them, as the commands do
    "cli": 6,
    "commands": 6,
    "__main__": 7,
    "__init__": 7,
}


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("specharness"):
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("specharness")]
    return found


def test_no_module_imports_downstream() -> None:
    bad = []
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).with_suffix("")
        here = rel.parts[0]
        for target in _imports(path):
            there = _room(target)
            if there == "__init__" or here == there:
                continue
            if (here == "traffic" and there == "engines") or (here == "engines" and there == "traffic"):
                bad.append(f"{rel} imports {target} (traffic and engines are side by side)")
            elif RANK[there] > RANK.get(here, 7):
                bad.append(f"{rel} imports {target}")
    assert not bad, bad


def test_rooms_are_packages() -> None:
    rooms = {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith("__")}
    assert rooms == {"traffic", "engines", "experiment", "analysis", "reporting", "history", "matrix"}
    assert not [
        p.name
        for p in ROOT.glob("*.py")
        if p.stem not in ("__init__", "__main__", "cli", "_errors", "records", "numbers", "console", "commands")
    ]


def _string_constants(path: Path) -> set[str]:
    nodes = ast.walk(ast.parse(path.read_text()))
    return {n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def _modules_spelling(text: str) -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py") if text in _string_constants(p))


def test_each_format_has_one_owner() -> None:
    """The run folder's file names live in experiment/rundir.py, the journal's ``kind`` field in records.py and the
    journal reader, the served-model-name rule in engines/model.py: a second spelling is a second owner."""
    for name in ("journal.jsonl", "journal.jsonl.xz", "manifest.json"):
        assert _modules_spelling(name) == ["experiment/rundir.py"], name
    assert _modules_spelling("kind") == ["experiment/journal.py", "records.py"]
    assert _modules_spelling("embedded-default") == ["engines/model.py"]
    assert _modules_spelling("smollm2") == ["engines/model.py"]


def test_no_step_of_a_run_reaches_up_into_the_driver() -> None:
    """The driver calls its steps (run folder, engines, cells, sending, peak probe, looks); none imports it back,
    and nothing imports a private name of another experiment module."""
    bad = []
    for path in (ROOT / "experiment").glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("specharness.experiment"):
                if node.module == "specharness.experiment.driver" and path.stem != "driver":
                    bad.append(f"{path.stem} imports the driver")
                bad += [f"{path.stem} imports {node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
    assert not bad, bad


HISTORY_RANK = {"asv": 0, "review": 1, "site": 2}  # ASV plumbing -> release review -> the site, one way


def test_history_rooms_follow_one_way() -> None:
    """history/ is grouped by concern; a sub-room imports only sub-rooms at or before its own (so no circle)."""
    bad = []
    history = ROOT / "history"
    for path in history.rglob("*.py"):
        rel = path.relative_to(history)
        if len(rel.parts) < 2:
            continue
        here = rel.parts[0]
        for target in _imports(path):
            parts = target.split(".")
            if (
                parts[:2] == ["specharness", "history"]
                and len(parts) > 2
                and HISTORY_RANK[parts[2]] > HISTORY_RANK[here]
            ):
                bad.append(f"history/{rel} imports {target}")
    assert not bad, bad
    assert {p.name for p in history.iterdir() if p.is_dir() and not p.name.startswith("__")} == set(HISTORY_RANK)


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    name = ".".join(rel.parts)
    return name.removesuffix(".__init__")


def _import_edges(path: Path, modules: set[str]) -> tuple[set[str], list[int]]:
    """(the modules of this package ``path`` imports, anywhere but under ``if TYPE_CHECKING:``; the lines of those
    imports that sit inside a function or class)."""
    tree = ast.parse(path.read_text())
    typing_only = {
        id(n)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for n in ast.walk(block)
    }
    top = {id(n) for n in tree.body}
    edges: set[str] = set()
    nested: list[int] = []
    for node in ast.walk(tree):
        if id(node) in typing_only or not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.ImportFrom):
            if not (node.module or "").startswith("specharness"):
                continue
            names = [f"{node.module}.{a.name}" for a in node.names]
            targets = {n for n in names if n in modules} or {str(node.module)}
        else:
            targets = {a.name for a in node.names if a.name.startswith("specharness")}
            if not targets:
                continue
        edges |= {t for t in targets if t in modules}
        if id(node) not in top:
            nested.append(node.lineno)
    return edges, nested


def test_no_import_cycle_and_no_import_hidden_in_a_function() -> None:
    """Issue 37: no cycle between modules, counting imports inside functions (the way a cycle used to be hidden),
    and no package import inside a function at all except in the commands behind the CLI (each loads its
    modules when it runs). Fails on the first cycle or nested import, naming it."""
    paths = {_module_name(p): p for p in ROOT.rglob("*.py")}
    modules = set(paths)
    graph: dict[str, set[str]] = {}
    nested_found = []
    for name, path in paths.items():
        edges, nested = _import_edges(path, modules)
        # importing a.b.c runs the package a.b's __init__ first: an edge to every package above a target, except the
        # top package and the packages this module sits in (a submodule and its own __init__ are one package)
        ancestors = {name.rsplit(".", k)[0] for k in range(1, name.count(".") + 1)}
        parents = {t.rsplit(".", k)[0] for t in edges for k in range(1, t.count(".") + 1)}
        graph[name] = (edges | {p for p in parents if p in modules and p not in ancestors}) - {name, "specharness"}
        if nested and name not in ("specharness.cli", "specharness.commands"):
            nested_found += [f"{path.relative_to(ROOT)}:{line}" for line in nested]
    assert nested_found == [], nested_found
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            cycle = visit(start)
            assert cycle is None, " -> ".join(cycle)
