"""The attacks of course/corpus/attacks-slicing.toml that got through the sliced verdict (issue 41), each as the
smallest failing check the lead can fix against: the verdict alone (DecideGrades().verdict, as test_verdict.py's
`decided` runs it, no kernel and no nbgrader) on the assignment's own cells, the solution filled in and the
attack's answer in place of one. Graded for real with both graders, each attack that got through earned what
the corpus's `zero` says it should not (measured there): xfail(strict=True) until the verdict holds; those that
held must go on holding.
"""
import functools
import re

import pytest

from autograder import diagnostics
from course import classroom
from course.plugins.autograde import DecideGrades, placed, solutions
from support.notebooks import hidden_lines, source_notebook, verdict_cells

ATTACKS = classroom.corpus("attacks-slicing")["attack"]


@functools.cache
def records_of(identifier) -> dict:
    """The verdict's records of one attack, once for both tests."""
    attack = next(attack for attack in ATTACKS if attack["id"] == identifier)
    source = source_notebook(attack["assignment"])
    return DecideGrades().verdict(placed(verdict_cells(attack), source), solutions(source))


def records(attack) -> dict:
    return records_of(attack["id"])


def cases(got_through, reason) -> list:
    """Every attack of the corpus; one that `got_through` this test's defence xfail(strict=True) with `reason`."""
    return [pytest.param(attack, id=attack["id"], marks=() if not got_through(attack) else
                         pytest.mark.xfail(strict=True, reason=f"issue 41: {reason} (attacks-slicing.toml)"))
            for attack in ATTACKS]


def kept_points(attack) -> bool:
    """An attack that leaks, or carries text out encoded (`carried`), gives up its cell's points."""
    return not attack["held"] and not attack["leaked"] and not attack.get("carried")


@pytest.mark.parametrize("attack", cases(kept_points, "it keeps points it should lose"))
def test_the_attack_earns_nothing_where_it_should_not(attack):
    decided = records(attack)
    zero = set(decided) if attack["zero"] == "all" else set(attack["zero"])
    assert {grade_id for grade_id in zero if decided[grade_id]["passed"]} == set()


@pytest.mark.parametrize("attack", [pytest.param(a, id=a["id"]) for a in ATTACKS if a.get("kept")])
def test_an_attack_that_finds_no_text_of_the_test_leaves_a_right_answer_its_points(attack):
    """The attack reads the test cell's text in the caller, which holds none since the judge sends each call as a
    request (autograder/calls.py): its answer, the solution otherwise, keeps its points."""
    decided = records(attack)
    assert {grade_id for grade_id in attack["kept"] if not decided[grade_id]["passed"]} == set()


def leaked(attack) -> bool:
    return not attack["held"] and bool(attack["leaked"])


@pytest.mark.parametrize("attack", cases(leaked, "a hidden line reaches the diagnostic"))
def test_no_hidden_line_reaches_the_diagnostic(attack):
    decided = records(attack)
    hidden = {line for line in hidden_lines(source_notebook(attack["assignment"]), regions=("HIDDEN TESTS",))
              if len(line) > 12}
    shown = "\n".join(record.get("message") or "" for record in decided.values())
    assert not attack["leaked"] or attack["leaked"] in hidden  # what the corpus says leaked is a hidden line
    assert not [line for line in hidden if re.sub(r"\s+", " ", line) in shown]


@pytest.mark.parametrize("attack", cases(lambda attack: False, ""))  # every attack, none open
def test_no_number_long_enough_to_spell_a_hidden_line_reaches_the_diagnostic(attack):
    """A number of hundreds of digits carried a hidden test's calls, compressed, out of a failed cell
    (loader-kwargs-sends-its-hidden-calls-out-as-one-large-number)."""
    shown = "\n".join(record.get("message") or "" for record in records(attack).values())
    assert not re.search(r"\d{%d}" % (diagnostics.NUMBER_DIGITS + 1), shown.replace(",", ""))
