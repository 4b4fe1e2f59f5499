"""Practice inside the lessons (autograder/practice.py): predict-then-run prompts and self-checked exercises.

Cell tags: `predict` on a prompt's two markdown cells (the question; a code cell to run follows, then
the explanation), `exercise` on the student's code cell, `solution` on the collapsed model solution.
"""
from pathlib import Path

import nbformat
import pytest

from autograder import checks
from autograder.messages import fingerprint
from autograder.practice import self_check

pytestmark = pytest.mark.unit  # `make test-fast`

ROOT = Path(__file__).resolve().parents[1]
LESSONS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def tags(cell):
    return set(cell.metadata.get("tags", []))


def printed(cell):
    return "".join(output.get("text", "") for output in cell.get("outputs", []))


@pytest.fixture(params=LESSONS, ids=lambda path: path.stem)
def lesson(request):
    return nbformat.read(request.param, as_version=4)


def test_a_correct_answer_prints_correct(capsys):
    self_check(lambda: checks.assert_device(__import__("torch").zeros(1), "cpu", "x"))
    assert fingerprint("practice_correct").en in capsys.readouterr().out


def test_a_wrong_answer_prints_the_graders_diagnostic_and_does_not_raise(capsys):
    import torch
    self_check(lambda: checks.assert_device(torch.zeros(1, device="meta"), torch.device("cpu"), "x"))
    out = capsys.readouterr().out
    assert fingerprint("practice_not_yet").zh in out and "x" in out and "meta" in out


def test_an_unanswered_exercise_says_so(capsys):
    def stub():
        raise NotImplementedError
    self_check(stub)
    assert fingerprint("practice_unanswered").en in capsys.readouterr().out


def test_every_lesson_has_two_to_four_predict_then_run_prompts(lesson):
    cells = lesson.cells
    prompts = [i for i, cell in enumerate(cells) if "predict" in tags(cell) and "lang-en" in tags(cell)]
    assert 2 <= len(prompts) <= 4, f"{len(prompts)} predict-then-run prompts"
    for i in prompts:
        assert {"predict", "lang-zh"} <= tags(cells[i + 1]), "the prompt's Chinese cell follows it"
        assert cells[i + 2].cell_type == "code", "a cell to run follows the prompt"
        after = next(cell for cell in cells[i + 2:] if cell.cell_type == "markdown")
        assert "predict" not in tags(after), "the explanation follows the run"


def test_every_lesson_exercise_is_checked_and_has_a_collapsed_solution_that_passes(lesson):
    cells = lesson.cells
    exercises = [i for i, cell in enumerate(cells) if "exercise" in tags(cell)]
    assert exercises, "at least one exercise"
    for start, end in zip(exercises, [*exercises[1:], len(cells)]):
        stub, following = cells[start], cells[start + 1:end]
        assert "NotImplementedError" in stub.source, "the exercise cell is a stub for the student"
        check = next(cell for cell in following if "self_check(" in cell.source)
        assert fingerprint("practice_unanswered").en in printed(check), "the stub's check says: not answered"
        solution = next(cell for cell in following if "solution" in tags(cell))
        assert solution.metadata.get("jupyter", {}).get("source_hidden") is True, "the solution is collapsed"
        assert "self_check(" in solution.source and fingerprint("practice_correct").en in printed(solution)
