"""Count the module visits a reader makes following ``config`` from ``experiment/driver.py:run_experiment``.

Static: every module under ``specharness/`` is parsed with :mod:`ast`; nothing is imported or run.

Method (the default reading; each ``--flag`` flips one part, see :class:`Variant`)
1. Each module's top-level functions, classes (methods, annotated fields, bases) and imports (``import a.b as c``,
   ``from a.b import f as g``, relative ones, those under ``if``/``try`` and those inside functions) are recorded,
   re-exports followed. A call resolves when it is a bare name (a function of the module or an imported function
   or class; a class call enters its ``__init__``, else its ``__post_init__``, else is ignored),
   ``module_alias.func``, ``ClassName.method``, or ``self.method``/``cls.method``/``super().method`` within a class
   (``--typed``: also ``obj.method`` where ``obj``'s class follows from an annotation or a constructor call).
   Other calls are skipped and counted by reason.
2. The walk starts in ``specharness/experiment/driver.py:run_experiment`` with its parameter ``config`` tracked.
3. In a function the tracked names are the tracked parameters plus locals assigned (plain ``=``, annotated,
   augmented, for-targets, with-as, walrus) from an expression that mentions a tracked name; once tracked, always
   tracked (``--untrack``: dropped when reassigned from an untracked value). ``--comprehensions`` also tracks
   comprehension targets; ``--nested`` walks nested defs and lambdas inline (by default they are not walked).
4. The body is walked in evaluation order (a call's arguments before the call). A call whose arguments mention a
   tracked name, or a method call whose receiver is tracked, is resolved; if it lands on a function in
   ``specharness/`` its arguments are mapped to the callee's parameters (a tracked receiver tracks ``self``) and the
   walk recurses there, depth first. Each (module, function) is entered once (``--repeats``: at every call, only
   cycles cut).
5. The module sequence gets the callee's module on entering a function, and the caller's module again when the
   caller makes another followed call after a callee returned (``--return-always``: at every return;
   ``--call-sites``: a followed call to a function already entered also appends its module). Consecutive equal
   entries are collapsed (``--no-collapse`` keeps them). visits = length of the sequence; files = distinct
   modules; returns = entries whose module appeared earlier; climbs = moves from a later room to an earlier one
   (traffic = engines = 0 < experiment 1 < analysis 2 < reporting 3 < history 4); modules directly in
   ``specharness/`` are the shared base (-1): moving into it is no climb and is counted on its own.

Calibration: the issue's figures at 350ca38 are 79 visits, 25 files, 54 returns, 17 climbs (51 visits and 37
returns "before step two"). This default gives 77 visits, 22 files, 55 returns, 17 climbs there (55 visits and 38
returns before run_experiment's last step, run_plan); no reading tried reproduced them exactly.

    .venv/bin/python scripts/diag/config_visits.py [--root DIR] [--all-variants] [--typed] [--nested] ...
"""

from __future__ import annotations

import argparse
import ast
import builtins
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path

PACKAGE = "specharness"
START = ("specharness.experiment.driver", "run_experiment", "config")
ROOMS = {"traffic": 0, "engines": 0, "experiment": 1, "analysis": 2, "reporting": 3, "history": 4}
BASE = -1
CONTEXT_WRAPPERS = {"Iterator", "Generator", "ContextManager", "AbstractContextManager", "Iterable", "AsyncIterator"}
FuncNode = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass
class FuncInfo:
    """A function or method definition."""

    module: str
    qualname: str
    node: FuncNode
    cls: ClassInfo | None = None
    kind: str = "function"  # function, method, static, classmethod
    imports: dict[str, tuple[str, str | None]] = field(default_factory=dict)


@dataclass
class ClassInfo:
    """A class: its methods, annotated fields and base expressions."""

    module: str
    name: str
    node: ast.ClassDef
    methods: dict[str, FuncInfo] = field(default_factory=dict)
    fields: dict[str, ast.expr] = field(default_factory=dict)


@dataclass
class ModuleInfo:
    """One parsed module."""

    name: str
    path: Path
    functions: dict[str, FuncInfo] = field(default_factory=dict)
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    imports: dict[str, tuple[str, str | None]] = field(default_factory=dict)


@dataclass(frozen=True)
class Variant:
    """A reading of the counting rule; the defaults are the one closest to the issue's figures at 350ca38."""

    repeats: bool = False  # enter a function at every call, cutting only cycles
    return_always: bool = False  # the caller's module goes back on the sequence at every return
    no_collapse: bool = False  # consecutive equal modules each count (default: once)
    call_sites: bool = False  # a followed call to a function already entered appends its module
    typed: bool = False  # obj.method resolved through annotations and constructor calls, not only self/cls
    nested: bool = False  # nested defs and lambdas walked inline with their enclosing function
    comprehensions: bool = False  # comprehension targets over a tracked iterable are tracked
    untrack: bool = False  # a tracked local reassigned from an untracked expression is dropped
    ignore_classes: bool = False  # a class call is not followed (default: into __init__ / __post_init__)

    def label(self) -> str:
        """The non-default readings, as their command-line flags."""
        flags = [f"--{f.name.replace('_', '-')}" for f in fields(self) if getattr(self, f.name) != f.default]
        return " ".join(flags) or "default"

    @classmethod
    def from_flags(cls, flags: list[str]) -> Variant:
        """The variant whose listed fields (``--name``) are flipped from their default."""
        names = {f.name for f in fields(cls)}
        flips = {name.removeprefix("--").replace("-", "_") for name in flags}
        if unknown := flips - names:
            raise ValueError(f"unknown reading: {sorted(unknown)}")
        return cls(**{f.name: not f.default for f in fields(cls) if f.name in flips})


@dataclass
class Entry:
    """One entry of the module sequence."""

    module: str
    function: str
    kind: str  # enter, back, site
    step: int  # index of the root's top-level call it belongs to (0 = the root itself)


@dataclass
class Totals:
    """The figures of one sequence."""

    visits: int
    files: int
    returns: int
    climbs: int
    into_base: int


@dataclass
class Result:
    """A walk's sequence and its side counts."""

    entries: list[Entry]
    sequence: list[Entry]
    totals: Totals
    entered: int
    skipped: Counter[str]
    steps: list[tuple[str, Totals]]


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def room(module: str) -> int:
    """The room's rank; modules directly in the package are the shared base."""
    parts = module.split(".")
    if len(parts) <= 2 and parts[-1] not in ROOMS:
        return BASE
    return ROOMS.get(parts[1], BASE)


def _imports(stmts: Iterator[ast.stmt] | list[ast.stmt], here: str, is_pkg: bool) -> dict[str, tuple[str, str | None]]:
    """Bindings made by the import statements among ``stmts`` (name -> (module, attribute or None))."""
    out: dict[str, tuple[str, str | None]] = {}
    for node in stmts:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    out[a.asname] = (a.name, None)
                else:
                    out[a.name.split(".")[0]] = (a.name.split(".")[0], None)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = here.split(".") if is_pkg else here.split(".")[:-1]
                pkg = pkg[: len(pkg) - node.level + 1]
                base = ".".join([*pkg, base] if base else pkg)
            for a in node.names:
                if a.name != "*":
                    out[a.asname or a.name] = (base, a.name)
    return out


def _module_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements at module level, through if/try/with blocks but not into definitions."""
    for s in body:
        yield s
        if isinstance(s, ast.If | ast.Try | ast.With):
            for name in ("body", "orelse", "finalbody"):
                yield from _module_level(getattr(s, name, []))
            for h in getattr(s, "handlers", []):
                yield from _module_level(h.body)


def _decorators(node: FuncNode) -> set[str]:
    out = set()
    for d in node.decorator_list:
        d = d.func if isinstance(d, ast.Call) else d
        out.add(d.attr if isinstance(d, ast.Attribute) else d.id if isinstance(d, ast.Name) else "")
    return out


def load_package(root: Path) -> dict[str, ModuleInfo]:
    """Every module under ``root/specharness``, parsed."""
    index: dict[str, ModuleInfo] = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        name = module_name(root, path)
        tree = ast.parse(path.read_text(), filename=str(path))
        is_pkg = path.name == "__init__.py"
        mod = ModuleInfo(name, path.relative_to(root), imports=_imports(_module_level(tree.body), name, is_pkg))
        for s in _module_level(tree.body):
            if isinstance(s, FuncNode):
                local = _imports(ast.walk(s), name, is_pkg)  # type: ignore[arg-type]
                mod.functions[s.name] = FuncInfo(name, s.name, s, imports=local)
            elif isinstance(s, ast.ClassDef):
                cls = ClassInfo(name, s.name, s)
                for b in s.body:
                    if isinstance(b, FuncNode):
                        deco = _decorators(b)
                        kind = (
                            "static" if "staticmethod" in deco else "classmethod" if "classmethod" in deco else "method"
                        )
                        local = _imports(ast.walk(b), name, is_pkg)  # type: ignore[arg-type]
                        cls.methods[b.name] = FuncInfo(name, f"{s.name}.{b.name}", b, cls, kind, local)
                        if "property" in deco and b.returns is not None:
                            cls.fields[b.name] = b.returns
                    elif isinstance(b, ast.AnnAssign) and isinstance(b.target, ast.Name):
                        cls.fields[b.target.id] = b.annotation
                mod.classes[s.name] = cls
        index[name] = mod
    return index


Symbol = FuncInfo | ClassInfo | str  # a str is a module name


class Resolver:
    """Name, attribute, annotation and type resolution over the parsed package."""

    def __init__(self, index: dict[str, ModuleInfo]) -> None:
        self.index = index

    def symbol(self, module: str, name: str, local: dict[str, tuple[str, str | None]] | None = None) -> Symbol | None:
        return self._symbol(module, name, local or {}, 0)

    def _symbol(self, module: str, name: str, local: dict[str, tuple[str, str | None]], depth: int) -> Symbol | None:
        mod = self.index.get(module)
        if mod is None or depth > 20:
            return None
        if name in local:
            target = local[name]
        elif name in mod.functions:
            return mod.functions[name]
        elif name in mod.classes:
            return mod.classes[name]
        elif name in mod.imports:
            target = mod.imports[name]
        else:
            return f"{module}.{name}" if f"{module}.{name}" in self.index else None
        src, attr = target
        if attr is None:
            return src if src in self.index or src == PACKAGE else None
        if f"{src}.{attr}" in self.index:
            return f"{src}.{attr}"
        return self._symbol(src, attr, {}, depth + 1)

    def expr_symbol(self, expr: ast.expr, module: str, local: dict[str, tuple[str, str | None]]) -> Symbol | None:
        """A Name or dotted Attribute chain as a module, class or function of the package."""
        if isinstance(expr, ast.Name):
            return self.symbol(module, expr.id, local)
        if isinstance(expr, ast.Attribute):
            base = self.expr_symbol(expr.value, module, local)
            if isinstance(base, str):
                return self.symbol(base, expr.attr)
            if isinstance(base, ClassInfo):
                return self.method(base, expr.attr)
        return None

    def annotation(self, ann: ast.expr | None, module: str, local: dict | None = None) -> ClassInfo | None:
        """The package class an annotation names (``X | None``, ``Optional[X]``, strings)."""
        if ann is None:
            return None
        if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
            try:
                return self.annotation(ast.parse(ann.value, mode="eval").body, module, local)
            except SyntaxError:
                return None
        if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
            return self.annotation(ann.left, module, local) or self.annotation(ann.right, module, local)
        if isinstance(ann, ast.Subscript):
            head = ann.value.attr if isinstance(ann.value, ast.Attribute) else getattr(ann.value, "id", "")
            if head in ("Optional", "Annotated", "ClassVar", "Final"):
                inner = ann.slice.elts[0] if isinstance(ann.slice, ast.Tuple) else ann.slice
                return self.annotation(inner, module, local)
            return None
        sym = self.expr_symbol(ann, module, local or {})
        return sym if isinstance(sym, ClassInfo) else None

    def context_annotation(self, ann: ast.expr | None, module: str, local: dict) -> ClassInfo | None:
        """The yielded class of an ``Iterator[X]``-like return annotation (a @contextmanager)."""
        if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
            try:
                ann = ast.parse(ann.value, mode="eval").body
            except SyntaxError:
                return None
        if isinstance(ann, ast.Subscript):
            head = ann.value.attr if isinstance(ann.value, ast.Attribute) else getattr(ann.value, "id", "")
            if head in CONTEXT_WRAPPERS:
                inner = ann.slice.elts[0] if isinstance(ann.slice, ast.Tuple) else ann.slice
                return self.annotation(inner, module, local)
        return self.annotation(ann, module, local)

    def mro(self, cls: ClassInfo, seen: set[int] | None = None) -> Iterator[ClassInfo]:
        seen = seen if seen is not None else set()
        if id(cls) in seen:
            return
        seen.add(id(cls))
        yield cls
        for b in cls.node.bases:
            base = self.expr_symbol(b, cls.module, {})
            if isinstance(base, ClassInfo):
                yield from self.mro(base, seen)

    def method(self, cls: ClassInfo, name: str) -> FuncInfo | None:
        for c in self.mro(cls):
            if name in c.methods:
                return c.methods[name]
        return None

    def field_class(self, cls: ClassInfo, name: str) -> ClassInfo | None:
        for c in self.mro(cls):
            if name in c.fields:
                return self.annotation(c.fields[name], c.module)
        return None


def mentions(expr: ast.AST | None, tracked: set[str]) -> bool:
    """Whether ``expr`` contains a Name that is tracked."""
    return expr is not None and any(isinstance(n, ast.Name) and n.id in tracked for n in ast.walk(expr))


def target_names(target: ast.AST) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Tuple | ast.List):
        return [n for e in target.elts for n in target_names(e)]
    if isinstance(target, ast.Starred):
        return target_names(target.value)
    return []


def map_arguments(call: ast.Call, func: FuncInfo, skip_first: bool, tracked: set[str]) -> set[str]:
    """The callee's parameters that receive an argument mentioning a tracked name."""
    a = func.node.args
    positional = [p.arg for p in [*a.posonlyargs, *a.args]]
    if skip_first:
        positional = positional[1:]
    by_keyword = {p.arg for p in [*a.args, *a.kwonlyargs]}
    out: set[str] = set()
    for i, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred):
            if mentions(arg.value, tracked):
                out.update(positional[i:])
                if a.vararg:
                    out.add(a.vararg.arg)
            break
        if mentions(arg, tracked):
            if i < len(positional):
                out.add(positional[i])
            elif a.vararg:
                out.add(a.vararg.arg)
    for kw in call.keywords:
        if not mentions(kw.value, tracked):
            continue
        if kw.arg is None:
            out.update(by_keyword - {positional[0]} if skip_first and positional else by_keyword)
            if a.kwarg:
                out.add(a.kwarg.arg)
        elif kw.arg in by_keyword:
            out.add(kw.arg)
        elif a.kwarg:
            out.add(a.kwarg.arg)
    if skip_first:
        out.discard(([p.arg for p in [*a.posonlyargs, *a.args]] or [""])[0])
    return out


def self_name(func: FuncInfo) -> str | None:
    params = [*func.node.args.posonlyargs, *func.node.args.args]
    return params[0].arg if func.kind == "method" and params else None


class Walker:
    """The depth-first walk of one variant."""

    def __init__(self, index: dict[str, ModuleInfo], variant: Variant) -> None:
        self.index = index
        self.res = Resolver(index)
        self.variant = variant
        self.entered: set[tuple[str, str]] = set()
        self.stack: list[tuple[str, str]] = []
        self.entries: list[Entry] = []
        self.skipped: Counter[str] = Counter()
        self.step = 0
        self.step_starts: list[tuple[str, int]] = []
        self.budget = 200_000

    def run(self, module: str, function: str, param: str) -> None:
        func = self.index[module].functions[function]
        self._enter(func, {param}, caller=None)

    def _enter(self, func: FuncInfo, tracked: set[str], caller: FuncInfo | None) -> None:
        key = (func.module, func.qualname)
        self.entered.add(key)
        self.stack.append(key)
        self.entries.append(Entry(func.module, func.qualname, "enter", self.step))
        _Scope(self, func, tracked).walk()
        self.stack.pop()
        if caller is not None and self.variant.return_always:
            self.entries.append(Entry(caller.module, caller.qualname, "back", self.step))

    def follow(self, caller: FuncInfo, callee: FuncInfo, tracked: set[str], made_call: list[bool]) -> None:
        """Enter ``callee`` from ``caller`` (its module goes back on the sequence first if a callee returned)."""
        key = (callee.module, callee.qualname)
        again = key in self.stack if self.variant.repeats else key in self.entered
        if again or self.budget <= 0:
            self.skipped["already entered" if not self.variant.repeats else "cycle cut"] += 1
            if self.variant.call_sites:
                self._back(caller, made_call)
                self.entries.append(Entry(callee.module, callee.qualname, "site", self.step))
                made_call[0] = True
            return
        self.budget -= 1
        if len(self.stack) == 1:
            self.step += 1
            self.step_starts.append((callee.qualname, len(self.entries)))
        self._back(caller, made_call)
        self._enter(callee, tracked, caller)
        made_call[0] = True

    def _back(self, caller: FuncInfo, made_call: list[bool]) -> None:
        if made_call[0] and not self.variant.return_always:
            self.entries.append(Entry(caller.module, caller.qualname, "back", self.step))

    def result(self) -> Result:
        seq = collapse(self.entries) if not self.variant.no_collapse else list(self.entries)
        steps = []
        for name, start in self.step_starts:
            before = self.entries[:start]
            steps.append((name, totals(collapse(before) if not self.variant.no_collapse else before)))
        return Result(self.entries, seq, totals(seq), len(self.entered), self.skipped, steps)


class _Scope:
    """One function's body walked in evaluation order, growing its tracked names."""

    def __init__(self, walker: Walker, func: FuncInfo, tracked: set[str]) -> None:
        self.w = walker
        self.func = func
        self.tracked = set(tracked)
        self.types: dict[str, ClassInfo] = {}
        self.made_call = [False]
        res = walker.res
        self.infer = walker.variant.typed
        for p in [*func.node.args.posonlyargs, *func.node.args.args, *func.node.args.kwonlyargs]:
            if not self.infer:
                break
            cls = res.annotation(p.annotation, func.module, func.imports)
            if cls is not None:
                self.types[p.arg] = cls
        if func.cls is not None and func.kind in ("method", "classmethod"):
            first = self_name(func) or ([p.arg for p in func.node.args.args] or [""])[0]
            self.types[first] = func.cls

    def walk(self) -> None:
        node = self.func.node
        for s in node.body:
            self.visit(s)

    def bind(self, target: ast.AST, value: ast.expr | None, cls: ClassInfo | None = None) -> None:
        self.visit_target(target)
        names = target_names(target)
        if value is not None and mentions(value, self.tracked):
            self.tracked.update(names)
        elif self.w.variant.untrack and value is not None and isinstance(target, ast.Name):
            self.tracked.discard(target.id)
        if isinstance(target, ast.Name) and self.infer:
            cls = cls or (self.expr_class(value) if value is not None else None)
            if cls is not None:
                self.types[target.id] = cls

    def visit_target(self, target: ast.AST) -> None:
        if isinstance(target, ast.Attribute | ast.Subscript):
            self.visit(target)

    def visit(self, node: ast.AST) -> None:
        match node:
            case ast.Assign(targets=targets, value=value):
                self.visit(value)
                for t in targets:
                    self.bind(t, value)
            case ast.AnnAssign(target=target, annotation=ann, value=value):
                if value is not None:
                    self.visit(value)
                cls = self.w.res.annotation(ann, self.func.module, self.func.imports)
                self.bind(target, value, cls)
            case ast.AugAssign(target=target, value=value):
                self.visit(value)
                self.bind(target, value)
            case ast.NamedExpr(target=target, value=value):
                self.visit(value)
                self.bind(target, value)
            case ast.For(target=target, iter=it) | ast.AsyncFor(target=target, iter=it):
                self.visit(it)
                self.bind(target, it, cls=None)
                if isinstance(target, ast.Name):
                    self.types.pop(target.id, None)
                for s in [*node.body, *node.orelse]:  # type: ignore[attr-defined]
                    self.visit(s)
            case ast.With(items=items, body=body) | ast.AsyncWith(items=items, body=body):
                for item in items:
                    self.visit(item.context_expr)
                    if item.optional_vars is not None:
                        self.bind(item.optional_vars, item.context_expr, self.with_class(item.context_expr))
                for s in body:
                    self.visit(s)
            case ast.ListComp() | ast.SetComp() | ast.GeneratorExp() | ast.DictComp():
                for gen in node.generators:  # type: ignore[attr-defined]
                    self.visit(gen.iter)
                    if self.w.variant.comprehensions:
                        self.bind(gen.target, gen.iter)
                    for cond in gen.ifs:
                        self.visit(cond)
                for name in ("key", "value", "elt"):
                    if hasattr(node, name):
                        self.visit(getattr(node, name))
            case ast.FunctionDef() | ast.AsyncFunctionDef() | ast.Lambda() if not self.w.variant.nested:
                pass
            case ast.FunctionDef() | ast.AsyncFunctionDef():
                for d in [*node.decorator_list, *node.args.defaults, *node.args.kw_defaults]:
                    if d is not None:
                        self.visit(d)
                for s in node.body:
                    self.visit(s)
            case ast.Lambda(body=body):
                self.visit(body)
            case ast.Call():
                self.visit(node.func)
                for a in node.args:
                    self.visit(a)
                for kw in node.keywords:
                    self.visit(kw.value)
                self.call(node)
            case _:
                for child in ast.iter_child_nodes(node):
                    self.visit(child)

    def with_class(self, expr: ast.expr) -> ClassInfo | None:
        res = self.w.res
        if isinstance(expr, ast.Call):
            target = self.callee(expr)
            if (
                target is not None
                and not isinstance(target[0].cls, type(None))
                and target[0].qualname.endswith(("__init__", "__post_init__"))
            ):
                return target[0].cls
            if target is not None:
                return res.context_annotation(target[0].node.returns, target[0].module, target[0].imports)
        cls = self.expr_class(expr)
        if cls is not None:
            enter = res.method(cls, "__enter__")
            if enter is not None:
                ret = enter.node.returns
                if isinstance(ret, ast.Name | ast.Constant) and getattr(ret, "id", getattr(ret, "value", "")) == "Self":
                    return cls
                return res.annotation(ret, enter.module, enter.imports) or cls
        return cls

    def expr_class(self, expr: ast.expr | None) -> ClassInfo | None:
        """The package class of an expression's value, where simple to tell."""
        res = self.w.res
        if isinstance(expr, ast.Name):
            return self.types.get(expr.id)
        if not self.infer:
            return None
        if isinstance(expr, ast.Attribute):
            base = self.expr_class(expr.value)
            return res.field_class(base, expr.attr) if base is not None else None
        if isinstance(expr, ast.Call):
            if isinstance(expr.func, ast.Name) and expr.func.id == "replace" and expr.args:
                return self.expr_class(expr.args[0])
            sym = self.symbol_of(expr.func)
            if isinstance(sym, ClassInfo):
                return sym
            if isinstance(sym, FuncInfo):
                return res.annotation(sym.node.returns, sym.module, sym.imports)
        return None

    def symbol_of(self, func: ast.expr) -> Symbol | None:
        """The definition a call's function expression names."""
        res = self.w.res
        if isinstance(func, ast.Name):
            return res.symbol(self.func.module, func.id, self.func.imports)
        if isinstance(func, ast.Attribute):
            if isinstance(func.value, ast.Call) and getattr(func.value.func, "id", "") == "super":
                if self.func.cls is None:
                    return None
                for base in list(res.mro(self.func.cls))[1:]:
                    if func.attr in base.methods:
                        return base.methods[func.attr]
                return None
            if isinstance(func.value, ast.Name) and func.value.id in self.types:
                return res.method(self.types[func.value.id], func.attr)
            sym = res.expr_symbol(func, self.func.module, self.func.imports)
            if sym is not None:
                return sym
            cls = self.expr_class(func.value)
            if cls is not None:
                return res.method(cls, func.attr)
        return None

    def callee(self, call: ast.Call) -> tuple[FuncInfo, bool] | None:
        """The function a call enters and whether its first parameter is bound (self/cls)."""
        sym = self.symbol_of(call.func)
        if isinstance(sym, ClassInfo):
            if self.w.variant.ignore_classes:
                return None
            init = self.w.res.method(sym, "__init__")
            if init is not None:
                return init, True
            post = self.w.res.method(sym, "__post_init__")
            return (post, True) if post is not None else None
        if isinstance(sym, FuncInfo):
            if sym.kind == "static":
                return sym, False
            if sym.kind == "classmethod":
                return sym, True
            if sym.kind == "method":
                # called on an instance (bound) unless called on the class itself
                on_class = isinstance(call.func, ast.Attribute) and isinstance(
                    self.w.res.expr_symbol(call.func.value, self.func.module, self.func.imports), ClassInfo
                )
                return sym, not on_class
            return sym, False
        return None

    def call(self, call: ast.Call) -> None:
        tracked = self.tracked
        receiver = isinstance(call.func, ast.Attribute) and mentions(call.func.value, tracked)
        args = any(mentions(a, tracked) for a in call.args) or any(mentions(k.value, tracked) for k in call.keywords)
        if not (receiver or args):
            return
        target = self.callee(call)
        if target is None:
            self.w.skipped[self.skip_reason(call)] += 1
            return
        func, bound = target
        params = map_arguments(call, func, bound, tracked)
        if receiver and bound and func.kind == "method" and not func.qualname.endswith("__init__"):
            params.add(self_name(func) or "self")
        if func.qualname.endswith("__post_init__") and args:
            params.add(self_name(func) or "self")
        if not params:
            self.w.skipped["no tracked parameter"] += 1
            return
        self.w.follow(self.func, func, params, self.made_call)

    def skip_reason(self, call: ast.Call) -> str:
        f = call.func
        if isinstance(f, ast.Name):
            if f.id in vars(builtins):
                return "builtin"
            src = self.func.imports.get(f.id) or self.w.index[self.func.module].imports.get(f.id)
            if src is not None and not src[0].startswith(PACKAGE):
                return "outside the package"
            if src is not None or f.id in self.w.index[self.func.module].classes:
                return "class without __init__/__post_init__"
            return "unresolved name (local callable)"
        return "unresolved attribute call"


def collapse(entries: list[Entry]) -> list[Entry]:
    out: list[Entry] = []
    for e in entries:
        if not out or out[-1].module != e.module:
            out.append(e)
    return out


def totals(seq: list[Entry]) -> Totals:
    seen: set[str] = set()
    returns = climbs = into_base = 0
    prev: str | None = None
    for e in seq:
        if e.module in seen:
            returns += 1
        seen.add(e.module)
        if prev is not None and prev != e.module:
            a, b = room(prev), room(e.module)
            if b == BASE:
                into_base += 1
            elif a > b:
                climbs += 1
        prev = e.module
    return Totals(len(seq), len(seen), returns, climbs, into_base)


def walk(index: dict[str, ModuleInfo], variant: Variant, start: tuple[str, str, str] = START) -> Result:
    """Walk the tracked parameter from ``start`` (module, function, parameter) over a parsed package."""
    walker = Walker(index, variant)
    walker.run(*start)
    return walker.result()


def measure(root: Path, variant: Variant | None = None, start: tuple[str, str, str] = START) -> Result:
    """Walk ``config`` from the driver's ``run_experiment`` in the repository at ``root``."""
    return walk(load_package(root), variant or Variant(), start)


def _fmt(t: Totals) -> str:
    return f"{t.visits} visits, {t.files} files, {t.returns} returns, {t.climbs} climbs, {t.into_base} into the base"


def report(result: Result, variant: Variant, verbose: bool = True) -> str:
    lines = [f"[{variant.label()}] {_fmt(result.totals)}; {result.entered} functions entered"]
    if not verbose:
        return "\n".join(lines)
    lines.append(
        "skipped calls mentioning a tracked name: " + ", ".join(f"{k} {v}" for k, v in result.skipped.most_common())
    )
    lines.append("before each top-level call of run_experiment (collapsed sequence so far):")
    lines += [f"  step {i} {name}: {_fmt(t)}" for i, (name, t) in enumerate(result.steps, 1)]
    lines.append(
        "most visited modules: "
        + ", ".join(f"{m} {n}" for m, n in Counter(e.module for e in result.sequence).most_common(10))
    )
    lines.append("sequence (entries kept after collapsing; ^ = a return, < = a climb, _ = into the base):")
    seen: set[str] = set()
    prev = None
    for i, e in enumerate(result.sequence, 1):
        mark = "^" if e.module in seen else " "
        if prev is not None:
            a, b = room(prev), room(e.module)
            mark += "_" if b == BASE and prev != e.module else "<" if a > b != BASE else " "
        else:
            mark += " "
        seen.add(e.module)
        prev = e.module
        path = e.module.replace(".", "/")
        lines.append(f"{i:4} {mark} {e.kind:5} step{e.step:<2} {path}:{e.function}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[2], help="repository root")
    for f in fields(Variant):
        flag = f"--{f.name.replace('_', '-')}"
        parser.add_argument(flag, action="store_true", dest=f.name, help="a reading (see Variant)")
    parser.add_argument("--all-variants", action="store_true", help="the totals with each reading flipped alone")
    args = parser.parse_args(argv)
    if args.all_variants:
        index = load_package(args.root)
        for flips in [[], *([f.name] for f in fields(Variant))]:
            v = Variant.from_flags(flips)
            print(report(walk(index, v), v, verbose=False))
        return 0
    v = Variant.from_flags([f.name for f in fields(Variant) if getattr(args, f.name)])
    print(report(walk(load_package(args.root), v), v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
