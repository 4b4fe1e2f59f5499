"""A test cell, split between the verdict's caller and its judge (autograder/verdict.py).

The caller runs the student's functions, so whatever its memory holds, the student's code can read: a
function body that walks up to the test's frame, or a hook the student's cells installed, would find what
the test computed to compare against. So the caller never runs a test cell as written. It runs the cell's
*calls*: each statement that calls the student's code (`checks.call`, the checks that use it, the cell's
own functions that do) and whatever builds what they are given, in the cell's order. What the checks
compare against (an expected value, a copy kept from before the call, a reference computed from the same
inputs) and the checks themselves run in the judge alone, which runs the whole cell.

Which statement goes where is read from the cell's syntax:

* a statement that calls the student's code runs on both sides; where a check (`checks.assert_…`, a bare
  `assert`) or an assignment holds such a call, the call is taken out first into a name of its own
  (`_crossing_0 = checks.call(...)`), which both sides bind; the rest stays in the judge;
* a check runs in the judge alone; so does `raise`;
* any other statement runs on both sides when what it binds is read there, or when it changes an object
  (`model.to(device)`, `p.grad = ...`) that may be one the caller holds, or state outside the cell
  (`torch.manual_seed(0)`); else in the judge alone. `break` and `continue` run on both sides, so that
  both make the same calls in the same order.

In the judge, each statement the caller skips runs inside `_judge_only_()` (boundary.judge_only): the random
number generators are kept, so both sides draw the same numbers for what they share, and a call of the
student's code there is the test cell's mistake, reported to the instructor. A test cell must therefore
not change, in a statement whose value only the checks read, anything a later call is given.
"""
import ast
import copy
import functools
import inspect
import itertools
import sys
import types
from dataclasses import dataclass

GUARD = "_judge_only_"  # the judge's context manager around what the caller skips (boundary.judge_only)
TEMPORARY = "_crossing_{}"
CHECKS = "checks"  # what test cells call the checks module (`from autograder import checks`)
_SHARED = (ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.Pass, ast.Break, ast.Continue)
_NOT_HOISTED = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.FunctionDef,
                ast.AsyncFunctionDef, ast.ClassDef)


class ChecksNamedOtherwise(ValueError):
    """A test cell that names the checks other than as `checks.NAME(...)` (an import of a check by its name, the
    module under another name, an alias of either): its checks, and what they compare against, could not be
    told from its calls, and would run in the caller. The instructor's error (verdict_test_cell_names_checks)."""


@dataclass(frozen=True)
class Split:
    caller: str  # what the caller runs
    judge: str  # what the judge runs: the whole cell


@functools.cache
def crossing_checks() -> frozenset:
    """The names of the checks that call the student's code: `call`, and every function of
    autograder.checks that uses it, directly or through another."""
    from . import checks  # noqa: F401: its submodules are in sys.modules after this

    functions = {}
    for name, module in list(sys.modules.items()):
        if name == checks.__name__ or name.startswith(checks.__name__ + "."):
            for attribute, value in vars(module).items():
                if isinstance(value, types.FunctionType):  # a decorated one read as written (functools.wraps)
                    functions.setdefault(attribute, set()).update(_code_names(inspect.unwrap(value).__code__))
    crossing, grown = {"call"}, True
    while grown:
        found = {name for name, used in functions.items() if used & crossing}
        grown = not found <= crossing
        crossing |= found
    return frozenset(crossing)


def _code_names(code) -> set:
    names = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            names |= _code_names(constant)
    return names


def split(source: str) -> Split:
    """The caller's and the judge's versions of a test cell (SyntaxError if it is not Python,
    ChecksNamedOtherwise if it names the checks other than as `checks.NAME(...)`)."""
    tree = ast.parse(source)
    named = _checks_named_otherwise(tree)
    if named:
        raise ChecksNamedOtherwise(named)
    crossing = _crossing_names(tree)
    body = _hoisted(tree.body, crossing, itertools.count())
    everything = list(ast.walk(ast.Module(body=body, type_ignores=[])))
    # a name an import binds holds a module or an object of one, never a fresh object of the cell: what is
    # done to it (`os.environ[...] = ...`, `torch.backends.cudnn.benchmark = ...`) is done on both sides
    imported = {name for node in everything if isinstance(node, (ast.Import, ast.ImportFrom)) for name in _binds(node)}
    assigned = {name for node in everything for name in _binds(node)} - imported
    needed = set()  # the names a shared statement reads
    while True:
        changed = needed | _aliases(body, needed)  # and those that may hold the same objects
        shared = _mark(body, crossing, needed, changed, assigned)
        grown = needed | _reads_of_shared(body, shared)
        if grown == needed:
            break
        needed = grown
    caller = ast.Module(body=_kept(body, shared), type_ignores=[])
    judge = ast.Module(body=_guarded(body, shared), type_ignores=[])
    return Split(caller=ast.unparse(ast.fix_missing_locations(caller)),
                 judge=ast.unparse(ast.fix_missing_locations(judge)))


def _checks_named_otherwise(tree) -> str | None:
    """The first statement that names the checks other than as `checks.NAME(...)`, as written; None if none."""
    called = {id(node.func.value) for node in ast.walk(tree)
              if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            for alias in node.names:
                if module.startswith(f"autograder.{CHECKS}") or (module == "autograder" and alias.name == CHECKS
                                                                 and alias.asname not in (None, CHECKS)):
                    return ast.unparse(node)
        if isinstance(node, ast.Import) and any(alias.name.startswith(f"autograder.{CHECKS}") for alias in node.names):
            return ast.unparse(node)
        if isinstance(node, ast.Name) and node.id == CHECKS and id(node) not in called:
            return f"`{CHECKS}` not as `{CHECKS}.NAME(...)`"
    return None


# ------------------------------------------------------------------ what calls the student's code

def _crossing_names(tree) -> set:
    """The checks that call the student's code, and the cell's own functions and classes that call one."""
    names = set(crossing_checks())
    definitions = [node for node in ast.walk(tree)
                   if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    grown = True
    while grown:
        found = {node.name for node in definitions if node.name not in names and _calls(node, names, nested=True)}
        grown = bool(found)
        names |= found
    return names


def _is_crossing_call(node, names) -> bool:
    if not isinstance(node, ast.Call):
        return False
    function = node.func
    if isinstance(function, ast.Attribute):
        return function.attr in names and isinstance(function.value, ast.Name) and function.value.id == CHECKS
    return isinstance(function, ast.Name) and function.id in names


def _calls(node, names, nested=False) -> bool:
    """Whether `node` calls the student's code (in a function or class it defines, too, if `nested`)."""
    for child in _walk(node, into_definitions=nested):
        if _is_crossing_call(child, names):
            return True
    return False


def _walk(node, into_definitions=False):
    yield node
    for child in ast.iter_child_nodes(node):
        if not into_definitions and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                                       ast.Lambda)):
            # a definition's body runs where it is called; its decorators, defaults and bases run here
            for part in [*getattr(child, "decorator_list", []), *getattr(child, "bases", []),
                         *_defaults(child)]:
                yield from _walk(part, into_definitions)
            continue
        yield from _walk(child, into_definitions)


def _defaults(node) -> list:
    arguments = getattr(node, "args", None)
    if not isinstance(arguments, ast.arguments):
        return []
    return [*arguments.defaults, *filter(None, arguments.kw_defaults)]


# ------------------------------------------------------------------ calls out of checks

def _hoisted(body, crossing, counter) -> list:
    """`body` with each call of the student's code that a check, an assert or an assignment holds taken
    out, in the order Python evaluates them, into an assignment of its own before it."""
    result = []
    for statement in body:
        if _children(statement) is not None:
            result.append(_rebuilt(statement, lambda block, field: _hoisted(block, crossing, counter)))
            continue
        hoistable = _is_check(statement, crossing) or isinstance(statement, ast.Assert) \
            or isinstance(statement, ast.Assign) and all(isinstance(t, ast.Name) for t in statement.targets)
        if hoistable and _calls(statement, crossing):
            taken = []
            if _only_hoistable_calls(statement, crossing):
                statement = _TakeOut(crossing, counter, taken).visit(statement)
            elif _is_check(statement, crossing):  # a call in a comprehension: its whole argument, once
                check = statement.value
                check.args = [_taken(arg, crossing, counter, taken) for arg in check.args]
                for keyword in check.keywords:
                    keyword.value = _taken(keyword.value, crossing, counter, taken)
            result += taken
        result.append(statement)
    return result


def _taken(argument, crossing, counter, taken):
    """A check's argument that calls the student's code, evaluated into a name of its own."""
    if isinstance(argument, ast.Starred) or not _calls(argument, crossing, nested=True):
        return argument
    name = TEMPORARY.format(next(counter))
    taken.append(ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=argument))
    return ast.Name(id=name, ctx=ast.Load())


def _only_hoistable_calls(statement, crossing) -> bool:
    """No call of the student's code sits where Python may skip it or run it many times (a comprehension,
    a lambda, a conditional expression's branch, a later operand of `and`/`or`)."""
    for node in ast.walk(statement):
        if isinstance(node, _NOT_HOISTED) and _calls(node, crossing, nested=True):
            return False
        if isinstance(node, ast.IfExp) and (_calls(node.body, crossing) or _calls(node.orelse, crossing)):
            return False
        if isinstance(node, ast.BoolOp) and any(_calls(value, crossing) for value in node.values[1:]):
            return False
    return True


class _TakeOut(ast.NodeTransformer):
    def __init__(self, crossing, counter, taken):
        self.crossing, self.counter, self.taken = crossing, counter, taken

    def visit_Call(self, node):
        if _is_crossing_call(node, self.crossing):
            name = TEMPORARY.format(next(self.counter))
            self.taken.append(ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=node))
            return ast.Name(id=name, ctx=ast.Load())
        return self.generic_visit(node)


# ------------------------------------------------------------------ which side runs what

def _is_check(statement, crossing) -> bool:
    """A check's call as a statement of its own: `checks.assert_values(...)` (any of the checks that does
    not call the student's code)."""
    if not isinstance(statement, ast.Expr) or not isinstance(statement.value, ast.Call):
        return False
    function = statement.value.func
    return isinstance(function, ast.Attribute) and isinstance(function.value, ast.Name) \
        and function.value.id == CHECKS and function.attr not in crossing


def _mark(body, crossing, needed, changed, assigned) -> dict:
    """id of each statement → whether the caller runs it too. `needed`: the names a shared statement
    reads; `changed`: those and the names that may hold the same objects; `assigned`: the cell's names."""
    shared = {}
    for statement in body:
        _mark_one(statement, crossing, needed, changed, assigned, shared)
    return shared


def _mark_one(statement, crossing, needed, changed, assigned, shared) -> bool:
    children = _children(statement)
    if children is not None:  # for, while, if, with, try: shared when something inside is
        inside = [_mark_one(child, crossing, needed, changed, assigned, shared) for child in children]
        result = any(inside) or _calls(_header(statement), crossing)
    elif isinstance(statement, _SHARED):
        result = True
    elif isinstance(statement, ast.Raise) or _is_check(statement, crossing) or isinstance(statement, ast.Assert):
        result = _calls(statement, crossing)  # a check that still holds a call (in a comprehension) runs on both sides
    elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        result = statement.name in needed or _calls(statement, crossing)
    elif _calls(statement, crossing):
        result = True
    elif isinstance(statement, ast.Delete):
        result = any(_base(target) in changed or _base(target) not in assigned for target in statement.targets)
    elif isinstance(statement, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        result = any(_changes_shared(target, needed, changed, assigned) for target in targets)
    elif isinstance(statement, ast.Expr):
        result = _changes_shared(statement.value, needed, changed, assigned)
    else:
        result = True  # anything else (match, type aliases): as written, on both sides
    shared[id(statement)] = result
    return result


def _changes_shared(node, needed, changed, assigned) -> bool:
    """Whether binding `node` (a target) or evaluating it (an expression statement) may change what the
    caller holds: a name a shared statement reads, or an object that may be one it holds, or one bound
    outside the cell, or what a call does (`print`, `torch.manual_seed`, a function of the cell)."""
    if isinstance(node, ast.Name):
        return node.id in needed
    if isinstance(node, (ast.Tuple, ast.List)):
        return any(_changes_shared(element, needed, changed, assigned) for element in node.elts)
    if isinstance(node, ast.Starred):
        return _changes_shared(node.value, needed, changed, assigned)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return True  # a function's effects are not known here
    base = _base(node)
    return base is None or base in changed or base not in assigned


def _base(node) -> str | None:
    """The name an attribute, item or method call starts from (`model` in `model.fc.weight.grad`)."""
    while True:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        elif isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Starred):
            node = node.value
        else:
            return None


def _children(statement) -> list | None:
    if isinstance(statement, (ast.For, ast.AsyncFor, ast.While, ast.If)):
        return [*statement.body, *statement.orelse]
    if isinstance(statement, (ast.With, ast.AsyncWith)):
        return list(statement.body)
    if isinstance(statement, ast.Try):
        return [*statement.body, *(s for h in statement.handlers for s in h.body), *statement.orelse,
                *statement.finalbody]
    return None


def _header(statement):
    """What a compound statement evaluates itself (the loop's iterable, the condition, the contexts)."""
    if isinstance(statement, (ast.For, ast.AsyncFor)):
        return ast.Tuple(elts=[statement.target, statement.iter], ctx=ast.Load())
    if isinstance(statement, (ast.While, ast.If)):
        return statement.test
    if isinstance(statement, (ast.With, ast.AsyncWith)):
        return ast.Tuple(elts=[item.context_expr for item in statement.items], ctx=ast.Load())
    if isinstance(statement, ast.Try):
        return ast.Tuple(elts=[h.type for h in statement.handlers if h.type is not None], ctx=ast.Load())
    return ast.Pass()


def _binds(node) -> set:
    """The names a node binds in the cell."""
    if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        return {node.id}
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, ast.ExceptHandler) and node.name:
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return set()


def _reads(node) -> set:
    """Every name `node` reads, in the functions and classes it defines too (they run where called)."""
    return {child.id for child in ast.walk(node) if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Load)}


def _reads_of_shared(body, shared) -> set:
    names = set()
    for statement in body:
        if not shared.get(id(statement)):
            continue
        children = _children(statement)
        if children is None:
            names |= _reads(statement)
            if isinstance(statement, (ast.Assign, ast.AugAssign, ast.AnnAssign)):  # `x.y = …` reads x
                targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                names |= {_base(t) for t in targets if not isinstance(t, ast.Name)} - {None}
        else:
            names |= _reads(_header(statement))
            names |= _reads_of_shared(children, shared)
    return names


def _aliases(body, needed) -> set:
    """Names that may hold an object a needed name holds: bound by an assignment, a loop or a `with` that
    reads a needed name (`for p in model.parameters()`: a change to `p` is a change to `model`)."""
    found = set()
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(node, ast.Assign):
            pairs = [(target, node.value) for target in node.targets]
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            pairs = [(node.target, node.iter)]
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            pairs = [(item.optional_vars, item.context_expr) for item in node.items if item.optional_vars]
        else:
            continue
        for target, value in pairs:
            if _reads(value) & needed:
                found |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    return found


# ------------------------------------------------------------------ the two cells

def _kept(body, shared) -> list:
    """The caller's statements: the shared ones, each compound one holding only its shared parts."""
    return [_rebuilt(statement, lambda block, field: _filled(_kept(block, shared), field))
            if _children(statement) is not None else statement
            for statement in body if shared.get(id(statement))]


def _guarded(body, shared) -> list:
    """The judge's statements: all of them, each one the caller skips inside `with _judge_only_():`."""
    guarded = []
    for statement in body:
        if not shared.get(id(statement)):
            guard = ast.Call(func=ast.Name(id=GUARD, ctx=ast.Load()), args=[], keywords=[])
            statement = ast.With(items=[ast.withitem(context_expr=guard)], body=[statement])
        elif _children(statement) is not None:
            statement = _rebuilt(statement, lambda block, field: _guarded(block, shared))
        guarded.append(statement)
    return guarded


def _rebuilt(statement, blocks):
    """A copy of a compound statement (`_children`) whose every block of statements is `blocks(block, field)`
    (a block the statement lacks, an `else:` or `finally:` not written, stays empty)."""
    statement = copy.copy(statement)
    for field in ("body", "orelse", "finalbody"):
        if getattr(statement, field, None):
            setattr(statement, field, blocks(getattr(statement, field), field))
    if isinstance(statement, ast.Try):
        statement.handlers = [copy.copy(handler) for handler in statement.handlers]
        for handler in statement.handlers:
            handler.body = blocks(handler.body, "body")
    return statement


def _filled(statements, field) -> list:
    """A block Python needs non-empty holds `pass` where the caller keeps nothing of it: a body, and a
    `finally:` (a `try:` with no `except:` needs it)."""
    return statements or ([ast.Pass()] if field in ("body", "finalbody") else [])
