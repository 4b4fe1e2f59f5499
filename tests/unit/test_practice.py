"""Practice inside the lessons (autograder/practice.py): predict-then-run prompts and self-checked exercises.

Cell tags: `predict` on a prompt's two markdown cells (the question), `prediction` on the cell where the
student writes the guess (a code cell to run follows, then the explanation), `exercise` on the student's
code cell, `solution` on the model solution's two markdown cells (folded in `<details>`, so it never runs).
"""
from pathlib import Path

import nbformat
import pytest

from autograder import checks
from autograder.practice import self_check
from course.authoring import monolingual
from support.lessons import defined_names, exercises, printed, prose_words, solution_code, tags
from support.messages import fingerprint


ROOT = Path(__file__).resolve().parents[2]
LESSONS = sorted((ROOT / "notebooks").glob("*.ipynb"))


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


def test_an_unanswered_exercise_called_through_checks_call_says_so(capsys):
    """A check calls the student's function through `checks.call`, which turns the stub's bare
    NotImplementedError into a diagnostic: the student still reads "not answered yet", not "not yet"."""
    def stub():
        raise NotImplementedError

    self_check(lambda: checks.call("stub()", stub))
    out = capsys.readouterr().out
    assert fingerprint("practice_unanswered").en in out and fingerprint("practice_not_yet").en not in out


def test_every_lesson_has_two_to_four_predict_then_run_prompts(lesson):
    cells = lesson.cells
    prompts = [i for i, cell in enumerate(cells) if "predict" in tags(cell) and "lang-en" in tags(cell)]
    assert 2 <= len(prompts) <= 4, f"{len(prompts)} predict-then-run prompts"
    for i in prompts:
        assert {"predict", "lang-zh"} <= tags(cells[i + 1]), "the prompt's Chinese cell follows it"
        assert "prediction" in tags(cells[i + 2]), "a cell for the student's prediction follows the prompt"
        assert cells[i + 3].cell_type == "code", "a cell to run follows the prediction"
        after = next(cell for cell in cells[i + 3:] if cell.cell_type == "markdown")
        assert "predict" not in tags(after), "the explanation follows the run"


def test_students_get_no_answer_printed_under_a_prompt(lesson):
    """The instructor's copy keeps every output (nbval compares it); the students' copy keeps none between
    a prompt and its explanation, and every other output as it is."""
    answers = monolingual.answers_to_prompts(lesson)
    assert any(cell.outputs for cell in answers), "the instructor's copy shows the runs"
    student = monolingual.for_students(lesson)
    answer_ids = {cell.id for cell in answers}
    for kept, given in zip(lesson.cells, student.cells, strict=True):
        assert given.source == kept.source
        if kept.id in answer_ids:
            assert given.outputs == [] and given.execution_count is None, kept.source[:80]
        elif kept.cell_type == "code":
            assert given.outputs == kept.outputs


def test_every_lesson_is_under_about_two_thousand_words_of_english_prose(lesson):
    """One sitting each (issue 22 §5): a lesson that grows past this is split, as lessons 7–12 were."""
    assert 500 < prose_words(lesson) <= 2000, f"{prose_words(lesson)} words of English prose"


def test_every_lesson_exercise_is_checked_and_has_a_folded_solution(lesson):
    found = list(exercises(lesson))
    assert found, "at least one exercise"
    for start, names, check, solution in found:
        assert "NotImplementedError" in lesson.cells[start].source, "the exercise cell is a stub for the student"
        assert [tags(cell) for cell in solution] == [{"solution", "lang-en"}, {"solution", "lang-zh"}]
        assert all(cell.cell_type == "markdown" and "<details>" in cell.source for cell in solution)
        english, chinese = map(solution_code, solution)
        assert english == chinese and defined_names(english) == names, "both show the same answer"


def test_run_all_on_an_untouched_lesson_reports_every_exercise_not_answered(lesson):
    """The stored outputs come from a clean top-to-bottom run (nbval checks them), so they are what a
    student sees after Run All: each check says "not answered", and no code cell after the exercise
    defines its answer (a model solution that ran would print "correct" under an unanswered exercise)."""
    for start, names, check, _ in exercises(lesson):
        assert fingerprint("practice_unanswered").en in printed(check)
        later = [cell for cell in lesson.cells[start + 1:] if cell.cell_type == "code"]
        assert not any(names & defined_names(cell.source) for cell in later), names


def test_a_recipe_a_later_lesson_imports_is_the_code_its_lesson_teaches():
    """Lesson 10 imports lesson 9's `amp_dtype_for` from autograder.recipes: it is lesson 9's cell, statement
    for statement, so that what lesson 10 runs is what lesson 9 taught."""
    import ast
    import inspect

    from autograder import recipes

    taught = [node for cell in nbformat.read(ROOT / "notebooks" / "09_mixed_precision.ipynb", as_version=4).cells
              if cell.cell_type == "code" for node in ast.parse(cell.source).body
              if isinstance(node, ast.FunctionDef) and node.name == "amp_dtype_for"]
    assert len(taught) == 1, "lesson 9 defines amp_dtype_for once"
    assert ast.dump(taught[0]) == ast.dump(ast.parse(inspect.getsource(recipes.amp_dtype_for)).body[0])


def test_a_failed_ddp_run_raises_with_the_end_of_its_errors(tmp_path):
    """`run_ddp` (lessons 11 and 12) never lets a broken run pass for a good one."""
    from autograder.recipes import run_ddp

    script = tmp_path / "broken.py"
    script.write_text("import os, sys\nif os.environ['RANK'] == '1':\n    sys.exit('rank 1 gave up')\nprint('rank 0 done')\n")
    with pytest.raises(RuntimeError, match="rank 1 gave up"):
        run_ddp(script)
    # each rank writes its line in one write: the ranks share one pipe, and print's pieces can interleave
    script.write_text("import os\nos.write(1, f\"rank {os.environ['RANK']} of {os.environ['WORLD_SIZE']}\\n\".encode())\n")
    assert sorted(run_ddp(script).splitlines()) == ["rank 0 of 2", "rank 1 of 2"]


def test_a_ddp_run_leaves_nothing_in_the_temporary_folder(tmp_path, monkeypatch):
    """torchrun makes a log folder (torchelastic_*) in the temporary folder at each run and never removes
    it: a student who runs lessons 11 and 12 again and again would fill their /tmp."""
    import tempfile

    from autograder.recipes import run_ddp

    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setenv("TMPDIR", str(temporary))
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    script = tmp_path / "ranks.py"
    script.write_text("import os\nos.write(1, f\"rank {os.environ['RANK']}\\n\".encode())\n")
    assert sorted(run_ddp(script).splitlines()) == ["rank 0", "rank 1"]
    assert list(temporary.iterdir()) == []


def test_pytorch_says_gives_the_words_of_this_pytorch_on_one_line_after_its_version():
    import torch

    from autograder.practice import pytorch_says

    version = torch.__version__.split("+")[0]
    assert pytorch_says(RuntimeError("first line\nsecond line")) == f"PyTorch {version} says: first line second line"
