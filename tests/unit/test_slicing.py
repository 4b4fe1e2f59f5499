"""autograder/slicing.py: the verdict's caller runs a test cell's calls and what builds their arguments,
never what the checks compare against; the judge runs the whole cell, the caller's part as the caller does."""
import ast
import json
import re
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
                    setattr(node, field, kept or ([ast.Pass()] if field == "body" and statements else []))
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
}


@pytest.mark.parametrize("source, kept, dropped", CASES.values(), ids=CASES.keys())
def test_the_caller_keeps_the_calls_and_what_they_need_and_nothing_the_checks_alone_read(source, kept, dropped):
    sides = slicing.split(source)
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
