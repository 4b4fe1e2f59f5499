"""`course grade --jobs N` gives the same gradebook as plain `nbgrader autograde`, with more jobs than cores."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder import classroom

ASSIGNMENT = "a1_tensor_to"
JOBS = (os.cpu_count() or 1) + 2  # more jobs than cores: the SQLite gradebook must still take every grade


def build_class(root: Path):
    classroom.prepare_course(root, ASSIGNMENT)
    corpus = classroom.load_corpus(ASSIGNMENT)
    wrong = [a for a in corpus if not a.correct]
    submissions = {"solution": [], "styles": [a for a in corpus if a.correct][:3],
                   "mistake-a": wrong[:1], "mistake-b": wrong[5:7], "mistake-c": wrong[9:10]}
    for student, answers in submissions.items():
        classroom.submit(root, ASSIGNMENT, student, classroom.solved_notebook(root, ASSIGNMENT, answers))
    classroom.submit(root, ASSIGNMENT, "untouched", raw=classroom.notebook_path(root, "release", ASSIGNMENT).read_bytes())
    classroom.submit(root, ASSIGNMENT, "broken", raw=b"not a notebook")


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    plain, parallel = tmp_path_factory.mktemp("plain"), tmp_path_factory.mktemp("parallel")
    build_class(plain)
    build_class(parallel)
    classroom.nbgrader(plain, "autograde", ASSIGNMENT, check=False)
    course = Path(sys.executable).parent / "course"
    done = subprocess.run([str(course), "grade", ASSIGNMENT, "--jobs", str(JOBS), "--root", str(parallel)],
                          capture_output=True, text=True, timeout=600)
    return plain, parallel, done


def test_same_grades_as_plain_nbgrader(both):
    plain, parallel, done = both
    assert done.returncode == 0, done.stdout + done.stderr
    expected = classroom.scores(plain, ASSIGNMENT)
    assert len(expected) == 6
    assert classroom.scores(parallel, ASSIGNMENT) == expected


def test_progress_and_failures_are_reported(both):
    _, _, done = both
    assert "[########################] 7/7" in done.stdout
    assert "! broken: not graded: nbformat.reader.NotJSONError" in done.stdout
    assert "! broken：未评分：" in done.stdout
    assert "database is locked" not in done.stdout + done.stderr


def test_one_student_only(both):
    _, parallel, _ = both
    course = Path(sys.executable).parent / "course"
    done = subprocess.run([str(course), "grade", ASSIGNMENT, "--student", "solution", "--root", str(parallel)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "1/1 solution" in done.stdout


def test_not_a_course_folder_is_an_error(tmp_path):
    course = Path(sys.executable).parent / "course"
    done = subprocess.run([str(course), "grade", ASSIGNMENT, "--root", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 2 and "is not a course folder" in done.stdout and "不是包含" in done.stdout
