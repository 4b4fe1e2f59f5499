"""autograder/slicing.py: the verdict's caller runs a test cell's calls and what builds their arguments,
never what the checks compare against; the judge runs the whole cell, the caller's part as the caller does."""
import ast
import json
import re
import sys
import types
from pathlib import Path

import pytest

from autograder import slicing

ROOT = Path(__file__).resolve().parents[2]
TEST_CELLS = {cell["metadata"]["nbgrader"]["grade_id"]: "".join(cell["source"])
              for path in sorted(ROOT.glob("source/*/*.ipynb"))
              for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]
              if cell["metadata"].get("nbgrader", {}).get("grade") and not cell["metadata"]["nbgrader"].get("solution")}


def without_judge_only(source) -> str:
    """The judge's cell less every statement it runs inside `_judge_only_()`: what the caller must run."""
    class Drop(ast.NodeTransformer):
        def generic_visit(self, node):
            super().generic_visit(node)
            for field in ("body", "orelse", "finalbody"):
                statements = getattr(node, field, None)
                if isinstance(statements, list) and field in node._fields:
                    kept = [s for s in statements if not _guarded(s)]
                    setattr(node, field, kept or ([ast.Pass()] if field in ("body", "finalbody") and statements else []))
            return node

    return ast.unparse(Drop().visit(ast.parse(source)))


def _guarded(statement) -> bool:
    return isinstance(statement, ast.With) and ast.unparse(statement.items[0].context_expr) == f"{slicing.GUARD}()"


@pytest.mark.parametrize("source", TEST_CELLS.values(), ids=TEST_CELLS.keys())
def test_the_caller_runs_exactly_the_judges_cell_less_what_only_the_judge_runs(source):
    sides = slicing.split(source)
    compile(sides.caller, "<caller>", "exec")
    compile(sides.judge, "<judge>", "exec")
    assert without_judge_only(sides.judge) == sides.caller
    assert "checks.call(" in sides.caller


@pytest.mark.parametrize("source", TEST_CELLS.values(), ids=TEST_CELLS.keys())
def test_no_assignments_check_or_expected_value_reaches_the_caller(source):
    caller = slicing.split(source).caller
    checks = set(re.findall(r"checks\.(assert_\w+)\(", caller))
    assert checks <= slicing.crossing_checks()  # the checks that call the student's code themselves
    assert not re.search(r"^\s*assert\b", caller, re.MULTILINE)
    assert not re.search(r"\bexpected\w*", caller)


def test_the_checks_that_call_the_students_code_are_found_from_their_code():
    crossing = slicing.crossing_checks()
    assert {"call", "assert_raises", "sampled_indices", "assert_16_bit_forward"} <= crossing
    assert not {"assert_values", "assert_device", "assert_dtype", "assert_leaf"} & crossing


def test_a_check_that_calls_the_students_code_beside_or_inside_a_nested_function_is_found(monkeypatch):
    """Comprehensions and lambdas are code of their own inside a check's code: the check still counts."""
    module = types.ModuleType("autograder.checks.example")
    exec("def beside(f, values):\n    call('f()', f)\n    return [v for v in values if v]\n\n"
         "def inside(f, values):\n    return [call('f(v)', f, v) for v in values]\n\n"
         "def apart(values):\n    return [v for v in values if v]\n", module.__dict__)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    crossing = slicing.crossing_checks.__wrapped__()  # not the cached answer for the real checks
    assert {"beside", "inside"} <= crossing and "apart" not in crossing


# source, what the caller must run (each a line of its cell), what it must not (a regular expression; None: nothing)
CASES = {
    "an expected value made before the call": (
        "x = torch.randn(3)\nexpected = 2 * x\ndoubled = checks.call('double(x)', double, x)\n"
        "checks.assert_values(doubled, expected, 'double(x)')",
        ["x = torch.randn(3)", "_crossing_0 = checks.call('double(x)', double, x)"], r"expected|assert_values"),
    "a copy kept from before the call": (
        "before = {n: p.detach().clone() for n, p in model.named_parameters()}\n"
        "checks.call('step(model)', step, model)\nchecks.assert_updated(before, model, 'step(model)')",
        ["checks.call('step(model)', step, model)"], r"before|assert_updated"),
    "a call inside a check": (
        "checks.assert_values(checks.call('f(x)', f, x), x @ w.T + b, 'f(x)', atol=1e-6)",
        ["_crossing_0 = checks.call('f(x)', f, x)"], r"x @ w|assert_values"),
    "a call inside a bare assert": (
        "assert checks.call('double(2)', double, 2) == 4",
        ["_crossing_0 = checks.call('double(2)', double, 2)"], r"== 4|assert"),
    "a change to what a loop hands out changes the model": (
        "model = nn.Linear(2, 2)\nfor p in model.parameters():\n    p.grad = torch.full_like(p, 100.0)\n"
        "checks.call('step(model)', step, model)",
        ["model = nn.Linear(2, 2)", "for p in model.parameters():", "p.grad = torch.full_like(p, 100.0)"], None),
    "a method call on what a call is given": (
        "model = nn.Linear(2, 2)\nmodel.eval()\nchecks.call('f(model)', f, model)",
        ["model.eval()"], None),
    "global state and printing": (
        "torch.manual_seed(1)\nx = torch.randn(2)\nchecks.call('f(x)', f, x)\nprint('done')",
        ["torch.manual_seed(1)", "print('done')"], None),
    "a measurement that runs where the result was made": (
        "def grad_of(result, w):\n    return w.grad\nw = torch.ones(2, requires_grad=True)\n"
        "grad = checks.call('f(w)', f, w, then=grad_of)\nchecks.assert_values(grad, 2 * w, 'f(w)')",
        ["def grad_of(result, w):", "_crossing_0 = checks.call('f(w)', f, w, then=grad_of)"], r"2 \* w"),
    "a function of the cell that calls the student's code": (
        "def shard(rank):\n    return checks.call('f(rank)', f, rank)\nexpected = [0, 1]\n"
        "checks.assert_values({r: shard(r) for r in range(2)}, expected, 'f')",
        ["def shard(rank):", "_crossing_0 = {r: shard(r) for r in range(2)}"], r"expected|assert_values"),
    "a break the judge takes, the caller takes too": (
        "for rank in [1, 0]:\n    try:\n        checks.call('f(rank)', f, rank)\n    except AssertionError as failure:\n"
        "        if 'meta' in str(failure.__cause__):\n            break\n        raise",
        ["break"], r"raise"),
    "what only the checks read, drawn at random": (
        "noise = torch.randn(100)\nx = torch.randn(3)\nchecks.assert_values(checks.call('f(x)', f, x), x, 'f(x)')",
        ["x = torch.randn(3)"], r"noise"),
    "an expected value changed in place before the check": (
        "expected = torch.zeros(2)\nexpected[0] = 1.0\nexpected.mul_(2)\nexpected\n"
        "checks.assert_values(checks.call('f(x)', f, x), expected, 'f(x)')",
        ["_crossing_0 = checks.call('f(x)', f, x)"], r"expected"),
    "a call in the branch of a conditional expression, run only when taken": (
        "checks.assert_values(checks.call('f(x)', f, x) if cuda else None, x, 'f(x)')",
        ["_crossing_0 = checks.call('f(x)', f, x) if cuda else None"], r"assert_values"),
    "a call in the other branch of a conditional expression": (
        "checks.assert_values(None if cuda else checks.call('f(x)', f, x), x, 'f(x)')",
        ["_crossing_0 = None if cuda else checks.call('f(x)', f, x)"], r"assert_values"),
    "a call after `and`, run only when what comes before holds": (
        "checks.assert_values(cuda and checks.call('f(x)', f, x), x, 'f(x)')",
        ["_crossing_0 = cuda and checks.call('f(x)', f, x)"], r"assert_values"),
    "a loop over what the student's code returned": (
        "for batch in checks.call('batches()', batches):\n    checks.assert_device(batch, device, 'batches()')",
        ["for batch in checks.call('batches()', batches):", "pass"], r"assert_device"),
    "a with around what the student's code returned": (
        "with checks.call('opened()', opened) as handle:\n    checks.assert_values(handle, 1, 'opened()')",
        ["with checks.call('opened()', opened) as handle:", "pass"], r"assert_values"),
    "the errors a try catches, named before it": (
        "errors = (ValueError, RuntimeError)\nexpected = 1\ntry:\n    checks.call('f(x)', f, x)\nexcept errors:\n"
        "    checks.assert_values(x, expected, 'f(x)')",
        ["errors = (ValueError, RuntimeError)", "except errors:", "pass"], r"expected"),
    "an else only the judge runs": (
        "if cuda:\n    checks.call('f(x)', f, x)\nelse:\n    expected = 0\n    checks.assert_values(x, expected, 'x')",
        ["if cuda:"], r"expected|else"),
    "a branch the caller keeps nothing of": (
        "if cuda:\n    expected = 0\nelse:\n    checks.call('f(x)', f, x)",
        ["if cuda:", "pass", "else:", "checks.call('f(x)', f, x)"], r"expected"),
    "a finally only the judge runs": (
        "try:\n    checks.call('f(x)', f, x)\nfinally:\n    expected = 1\n    checks.assert_values(x, expected, 'x')",
        ["try:", "finally:", "pass"], r"expected"),
    "a default value that calls the student's code, run where the lambda is made": (
        "report = lambda made=checks.call('make()', make): made",
        ["report = lambda made=checks.call('make()', make): made"], None),
    "a decorator that calls the student's code, run where the class is made": (
        "class Probe(nn.Module):\n\n    @checks.call('wrapper()', wrapper)\n    def forward(self, x):\n        return x",
        ["class Probe(nn.Module):", "@checks.call('wrapper()', wrapper)"], None),
    "a base that calls the student's code, run where the class is made": (
        "class Outer:\n\n    class Inner(checks.call('base()', base)):\n        pass",
        ["class Outer:", "class Inner(checks.call('base()', base)):"], None),
    "a call beside a lambda": (
        "checks.assert_values(list(map(lambda v: v, [checks.call('f()', f)])), [1], 'f()')",
        ["_crossing_0 = checks.call('f()', f)"], r"assert_values"),
    "a call inside a lambda inside the cell's function": (
        "def shard(rank):\n    return run(lambda: checks.call('f(rank)', f, rank))\n"
        "checks.assert_values(shard(0), 0, 'f(0)')",
        ["def shard(rank):", "_crossing_0 = shard(0)"], r"assert_values"),
    "a function of the cell that calls the student's code through another": (
        "def one(rank):\n    return checks.call('f(rank)', f, rank)\n\ndef both():\n    return [one(0), one(1)]\n"
        "checks.assert_values(both(), [0, 1], 'f')",
        ["def one(rank):", "def both():", "_crossing_0 = both()"], r"assert_values"),
    "a call in a comprehension given by keyword": (
        "checks.assert_values(x, x, 'f', atol=max((checks.call('f(i)', f, i) for i in range(2))))",
        ["_crossing_0 = max((checks.call('f(i)', f, i) for i in range(2)))"], r"assert_values"),
    "a call in a comprehension unpacked into the check, which then runs on both sides": (
        "checks.assert_values(*[checks.call('f(i)', f, i) for i in range(2)], 'f')",
        ["checks.assert_values(*[checks.call('f(i)', f, i) for i in range(2)], 'f')"], None),
    "each of several names that hold the arguments' objects": (
        "model = nn.Linear(2, 2)\nfirst = model.weight\nlast = model.bias\nfirst.data.fill_(1.0)\n"
        "checks.call('f(model)', f, model)",
        ["first = model.weight", "first.data.fill_(1.0)"], None),
    "a del of what a call is given, and of what only the checks read": (
        "model = nn.Linear(2, 2)\nmodel.hidden = 1\nexpected = [1]\ndel model.hidden\ndel expected[0]\n"
        "checks.call('f(model)', f, model)",
        ["del model.hidden"], r"expected"),
    "an augmented assignment on both sides and on the judge's alone": (
        "x = torch.ones(2)\nx += 1\nexpected = 1\nexpected += 1\nchecks.call('f(x)', f, x)",
        ["x += 1"], r"expected"),
    "a match the caller runs as written": (
        "model = nn.Linear(2, 2)\nmatch mode:\n    case 'eval':\n        model.eval()\nchecks.call('f(model)', f, model)",
        ["match mode:", "model.eval()"], None),
    "what each of several calls is given": (
        "a = torch.ones(1)\nchecks.call('g(a)', g, a)\nbatches = [torch.ones(1)]\nfor batch in batches:\n"
        "    checks.call('f(batch)', f, batch)",
        ["a = torch.ones(1)", "batches = [torch.ones(1)]", "for batch in batches:"], None),
    "a change to a module the cell imports, made on both sides": (
        "import os\nos.environ['TEST_MODE'] = 'x'\nchecks.call('f()', f)",
        ["import os", "os.environ['TEST_MODE'] = 'x'"], None),
    "a change to an object the cell imports by name, made on both sides": (
        "from torch.backends import cudnn\ncudnn.benchmark = False\nexpected = 1\nchecks.call('f()', f)",
        ["cudnn.benchmark = False"], r"expected"),
    "a seed through a module the cell imports again": (
        "import torch\ntorch.manual_seed(1)\nx = torch.randn(2)\nchecks.call('f(x)', f, x)",
        ["torch.manual_seed(1)"], None),
    "an imported name bound again by the cell, still changed on both sides": (
        "import math as state\nstate = {}\nstate['n'] = 1\nchecks.call('f()', f)",
        ["state['n'] = 1"], None),
    "what is unpacked for the checks alone": (
        "expected, *others = [1, 2, 3]\nfirst, state['n'] = (1, 2)\nchecks.call('f()', f)",
        ["first, state['n'] = (1, 2)"], r"expected"),
}


@pytest.mark.parametrize("source, kept, dropped", CASES.values(), ids=CASES.keys())
def test_the_caller_keeps_the_calls_and_what_they_need_and_nothing_the_checks_alone_read(source, kept, dropped):
    sides = slicing.split(source)
    compile(sides.caller, "<caller>", "exec")
    compile(sides.judge, "<judge>", "exec")
    lines = [line.strip() for line in sides.caller.splitlines()]
    for line in kept:
        assert line in lines
    assert dropped is None or not [line for line in lines if re.search(dropped, line)]
    assert without_judge_only(sides.judge) == sides.caller


def test_a_direct_call_of_the_students_function_stays_on_the_judges_side():
    """Not `checks.call`: the judge then refuses the call (boundary.JudgeOnlyCall), so the instructor hears of
    the test cell's mistake (tests/grading/test_verdict.py)."""
    sides = slicing.split("result = checks.call('f(1)', f, 1)\nexpected = f(1)\nchecks.assert_values(result, expected, 'f(1)')")
    assert "expected" not in sides.caller
    assert f"with {slicing.GUARD}():\n    expected = f(1)" in sides.judge


CHECKS_NAMED_OTHERWISE = {
    "a-check-imported-by-name": "from autograder.checks import assert_values\nassert_values(call_result, expected, 'f')",
    "from-a-checks-submodule": "from autograder.checks.tensors import assert_values",
    "the-module-under-another-name": "from autograder import checks as c\nc.assert_values(result, expected, 'f')",
    "the-module-by-its-dotted-name": "import autograder.checks\nautograder.checks.assert_values(result, expected, 'f')",
    "an-alias-of-the-module": "from autograder import checks\nc = checks\nc.assert_values(result, expected, 'f')",
    "an-alias-of-a-check": "from autograder import checks\nsame = checks.assert_values\nsame(result, expected, 'f')",
    "the-module-passed-along": "from autograder import checks\nrun_checks(checks, result, expected)",
}


@pytest.mark.parametrize("source", CHECKS_NAMED_OTHERWISE.values(), ids=CHECKS_NAMED_OTHERWISE.keys())
def test_a_cell_that_names_the_checks_otherwise_is_refused_not_split(source):
    """Its checks could not be told from its calls, and would run in the caller with what they compare against:
    the verdict reports the test cell to the instructor (verdict_test_cell_names_checks)."""
    with pytest.raises(slicing.ChecksNamedOtherwise):
        slicing.split(source)


def test_other_names_of_the_course_package_are_a_cells_own():
    sides = slicing.split("from autograder import checks, grading_devices\nfrom autograder import has_data as h\n"
                          "checks.assert_values(checks.call('f(1)', f, 1), 2, 'f(1)')")
    assert "checks.call('f(1)', f, 1)" in sides.caller
