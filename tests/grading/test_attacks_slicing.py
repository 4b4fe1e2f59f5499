"""The attacks of course/corpus/attacks-slicing.toml that got through the sliced verdict (issue 41), each as the
smallest failing check the lead can fix against: the verdict alone (DecideGrades().verdict, as test_verdict.py's
`decided` runs it, no kernel and no nbgrader) on the assignment's own cells, the solution filled in and the
attack's answer in place of one. Graded for real with both graders, each attack earned what the corpus's
`zero` says it should not (measured there); these are xfail(strict=True) until the verdict holds.
"""
import re

import nbformat
import pytest
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import ClearSolutions

from course import classroom
from course.plugins.autograde import DecideGrades, placed, solutions, verdict_cell
from support.notebooks import hidden_lines

ATTACKS = classroom.corpus("attacks-slicing")["attack"]
GOT_THROUGH = [attack for attack in ATTACKS if attack["held"] is False]


def source_notebook(assignment):
    return nbformat.read(classroom.ROOT / "source" / assignment / f"{assignment}.ipynb", as_version=4)


def verdict_cells(attack) -> list[dict]:
    """The verdict's cells of the attack's submission: the source's code cells, each solution cell as the
    solution (`base = "solution"`) or as released (`"release"`), the attack's `replace` put in."""
    cells = []
    for cell in source_notebook(attack["assignment"]).cells:
        if cell.cell_type != "code":
            continue
        made = verdict_cell(cell)
        if made["kind"] == "student" and attack["base"] == "release":
            released = NotebookNode(cell_type="code", source=cell.source, metadata={})
            ClearSolutions()._replace_solution_region(released, "python")
            made["source"] = released.source
        made["source"] = attack.get("replace", {}).get(made["grade_id"], made["source"]).strip()
        cells.append(made)
    return cells


def records(attack) -> dict:
    source = source_notebook(attack["assignment"])
    return DecideGrades().verdict(placed(verdict_cells(attack), source), solutions(source))


@pytest.mark.xfail(strict=True, reason="issue 41: these attacks keep points they should lose (attacks-slicing.toml)")
@pytest.mark.parametrize("attack", [a for a in GOT_THROUGH if not a["leaked"]], ids=lambda a: a["id"])
def test_the_attack_earns_nothing_where_it_should_not(attack):
    decided = records(attack)
    assert {grade_id for grade_id in attack["zero"] if decided[grade_id]["passed"]} == set()


@pytest.mark.xfail(strict=True, reason="issue 41: a layer name the caller sends is shown in `what`, where every "
                                       "word of the whole cell may stand (attacks-slicing.toml)")
@pytest.mark.parametrize("attack", [a for a in GOT_THROUGH if a["leaked"]], ids=lambda a: a["id"])
def test_no_hidden_line_reaches_the_diagnostic(attack):
    decided = records(attack)
    hidden = {line for line in hidden_lines(source_notebook(attack["assignment"]), regions=("HIDDEN TESTS",))
              if len(line) > 12}
    shown = "\n".join(record.get("message") or "" for record in decided.values())
    assert attack["leaked"] in hidden  # what the corpus says leaked is a hidden line indeed
    assert not [line for line in hidden if re.sub(r"\s+", " ", line) in shown]
