"""`nbgrader validate`, as a student runs it before submitting."""
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course import classroom

ASSIGNMENT = "a1_tensor_to"


def validate(path: Path) -> str:
    nbgrader = Path(sys.executable).parent / "nbgrader"
    done = subprocess.run([str(nbgrader), "validate", str(path)], cwd=path.parent, capture_output=True, text=True,
                          timeout=300)
    return done.stdout + done.stderr


@pytest.fixture
def student_folder(tmp_path):
    return tmp_path


def test_release_filled_with_the_solution_validates(student_folder):
    path = student_folder / f"{ASSIGNMENT}.ipynb"
    nbformat.write(classroom.solved_notebook(classroom.ROOT, ASSIGNMENT), path)
    assert "Success! Your notebook passes all the tests." in validate(path)


def test_a_solved_notebook_viewed_in_traditional_chinese_validates(student_folder):
    """The 繁體 view converts the text of tracked cells; a cell still as released gets the checksum of its new text
    (validate does not take the test cells for changed ones), an answered one keeps the released checksum
    (validate still sees the answer)."""
    from course.authoring.monolingual import monolingual

    path = student_folder / f"{ASSIGNMENT}.ipynb"
    nbformat.write(monolingual(classroom.solved_notebook(classroom.ROOT, ASSIGNMENT), "zh-hant"), path)
    shown = validate(path)
    assert "Success! Your notebook passes all the tests." in shown and "CHANGED" not in shown, shown[-3000:]


def test_untouched_release_fails_validation_with_a_clear_bilingual_message(student_folder):
    path = student_folder / f"{ASSIGNMENT}.ipynb"
    path.write_bytes(classroom.notebook_path(classroom.ROOT, "release", ASSIGNMENT).read_bytes())
    shown = validate(path)
    assert "VALIDATION FAILED ON" in shown and "Success!" not in shown
    # nbgrader wraps long lines, so look for the start of each language's message
    assert "not answered yet" in shown and "尚未作答" in shown


@pytest.mark.parametrize("assignment", sorted(path.name for path in (classroom.ROOT / "source").iterdir() if path.is_dir()))
def test_what_autograde_gives_full_marks_validate_passes(assignment, tmp_path):
    """Issue 41: the right answers of every corpus (each `styles-k` student, whom the grading tests require
    to keep every point under both graders) pass `nbgrader validate` too, as the student saw it."""
    students = classroom.students_from_corpus(classroom.load_corpus(assignment))
    for student, answers in students.items():
        if not student.startswith("styles-"):
            continue
        path = tmp_path / student / f"{assignment}.ipynb"
        path.parent.mkdir()
        nbformat.write(classroom.solved_notebook(classroom.ROOT, assignment, answers), path)
        shown = validate(path)
        assert "Success! Your notebook passes all the tests." in shown, f"{student}:\n{shown[-3000:]}"
