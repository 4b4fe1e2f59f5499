"""The real `nbgrader autograde`, run by `course demo` on a class built from the mistake corpus.

Wrong answers must lose exactly their own exercise's points and show the diagnostic in both languages;
right answers in other styles keep every point; the untouched release earns nothing; a broken file is
reported while the rest of the class is graded.
"""
import subprocess
import sys
from collections import Counter
from pathlib import Path

import nbformat
import pytest

from autograder import classroom
from autograder.messages import shows

ASSIGNMENT = "a1_tensor_to"
CORPUS = classroom.load_corpus(ASSIGNMENT)
STUDENTS = classroom.students_from_corpus(CORPUS)


def max_points(assignment):
    source = nbformat.read(classroom.notebook_path(classroom.ROOT, "source", assignment), as_version=4)
    return {c.metadata.nbgrader["grade_id"]: c.metadata.nbgrader["points"] for c in source.cells
            if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")}


POINTS = max_points(ASSIGNMENT)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """`course demo` run once, as an instructor would: its output, and the course folder it graded."""
    root = tmp_path_factory.mktemp("demo")
    course = Path(sys.executable).parent / "course"
    run = subprocess.run([str(course), "demo", "--root", str(root), "--assignment", ASSIGNMENT],
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout, root, classroom.scores(root, ASSIGNMENT)


def test_corpus_covers_every_exercise_with_three_mistakes_and_two_styles():
    exercises = {cell.removeprefix("test_") for cell in POINTS}
    wrong = Counter(a.exercise for a in CORPUS if not a.correct)
    right = Counter(a.exercise for a in CORPUS if a.correct)
    assert set(wrong) == set(right) == exercises
    assert min(wrong.values()) >= 3 and min(right.values()) >= 2
    assert len({a.id for a in CORPUS}) == len(CORPUS)
    assert all(a.diagnostic for a in CORPUS if not a.correct)


def test_solution_earns_every_point(demo):
    _, _, scores = demo
    assert scores["solution"] == POINTS


def test_untouched_release_earns_nothing(demo):
    _, root, scores = demo
    assert scores["untouched"] == dict.fromkeys(POINTS, 0)
    assert all(shows(shown, "not_answered") for shown in classroom.diagnostics(root, ASSIGNMENT, "untouched").values())


@pytest.mark.parametrize("student", [s for s in STUDENTS if s != "solution"])
def test_each_answer_loses_exactly_its_own_points(demo, student):
    _, _, scores = demo
    wrong = {f"test_{a.exercise}" for a in STUDENTS[student] if not a.correct}
    expected = {cell: 0 if cell in wrong else points for cell, points in POINTS.items()}
    assert scores[student] == expected


@pytest.mark.parametrize("answer", [a for a in CORPUS if not a.correct], ids=lambda a: a.id)
def test_each_mistake_shows_its_bilingual_diagnostic(demo, answer):
    _, root, _ = demo
    student = next(s for s, answers in STUDENTS.items() if answer in answers)
    shown = classroom.diagnostics(root, ASSIGNMENT, student).get(f"test_{answer.exercise}", "")
    assert shows(shown, answer.diagnostic), f"{answer.id}: expected {answer.diagnostic!r}, shown:\n{shown}"
    assert "Traceback" not in shown.splitlines()[0]


def test_broken_file_is_reported_and_the_rest_is_graded(demo):
    output, root, scores = demo
    assert "broken-json" not in scores
    assert "! broken-json: not graded" in output and "! broken-json：未评分" in output
    assert set(scores) == set(STUDENTS) | {"untouched"}


def test_demo_writes_grades_feedback_and_table(demo):
    output, root, scores = demo
    grades = (root / "grades.csv").read_text("utf-8").splitlines()
    assert grades[0].startswith("assignment,duedate,timestamp,student_id")
    assert len(grades) - 1 == len(scores) + 1  # nbgrader exports the broken submission too, with no score
    for student in scores:
        assert (root / "feedback" / student / ASSIGNMENT / f"{ASSIGNMENT}.html").exists(), student
    header = next(line for line in output.splitlines() if line.startswith("student"))
    assert header.split() == ["student", *(c.removeprefix("test_") for c in sorted(POINTS)), "total"]
    assert f"[{len(STUDENTS) + 2}/{len(STUDENTS) + 2}]" in output
