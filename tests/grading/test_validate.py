"""`nbgrader validate`, as a student runs it before submitting."""
import os
import re
import subprocess
from pathlib import Path

import nbformat
import pytest

from course import classroom
from support.paths import BIN

# `nbgrader validate` is the student's command: .ci/run runs it under the student's usual build, the CUDA one (a plain
# `make test` under either); what a right answer gets from autograde, the demo classes (each under one build) and the
# attack corpora's right answers (under both builds) check
pytestmark = pytest.mark.ci_cuda_build_only

ASSIGNMENT = "a1_tensor_to"


def validate(*paths: Path) -> str:
    """What `nbgrader validate PATH...` prints, its log and its results in the order they came."""
    nbgrader = BIN / "nbgrader"
    done = subprocess.run([str(nbgrader), "validate", *map(str, paths)], cwd=paths[0].parent, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=300 * len(paths),
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    return done.stdout


def validated(*paths: Path) -> dict[Path, str]:
    """One `nbgrader validate` for many notebooks (one start-up, not one each): path → what it printed for it."""
    parts = re.split(r"^.*Validating '(.*)'$", validate(*paths), flags=re.MULTILINE)
    return {Path(path): shown for path, shown in zip(parts[1::2], parts[2::2])}


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
    paths = {}
    for student, answers in students.items():
        if student.startswith("styles-"):
            paths[student] = tmp_path / student / f"{assignment}.ipynb"
            paths[student].parent.mkdir()
            nbformat.write(classroom.solved_notebook(classroom.ROOT, assignment, answers), paths[student])
    shown = validated(*paths.values())
    assert set(shown) == set(paths.values()), shown
    for student, path in paths.items():
        assert "Success! Your notebook passes all the tests." in shown[path], f"{student}:\n{shown[path][-3000:]}"
