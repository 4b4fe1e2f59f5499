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
COURSE = Path(sys.executable).parent / "course"


@pytest.fixture(scope="module")
def parallel(demo, tmp_path_factory):
    """The demo class (graded by plain `nbgrader autograde`) graded again by `course grade` in a new folder."""
    plain = demo(ASSIGNMENT).graded
    root = tmp_path_factory.mktemp("parallel")
    classroom.prepare_course(root, ASSIGNMENT)
    shutil.copytree(plain.root / "submitted", root / "submitted")
    done = subprocess.run([str(COURSE), "grade", ASSIGNMENT, "--jobs", str(JOBS), "--root", str(root)],
                          capture_output=True, text=True, timeout=600)
    return plain, root, done


def test_same_grades_as_plain_nbgrader(parallel):
    plain, root, done = parallel
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(plain.scores) >= 6
    assert classroom.scores(root, ASSIGNMENT) == plain.scores


def test_progress_and_failures_are_reported(parallel):
    plain, _, done = parallel
    total = len(plain.students) + 2  # the corpus students, the untouched release and the broken file
    assert f"[########################] {total}/{total}" in done.stdout
    assert f"! {classroom.BROKEN}: not graded: nbformat.reader.NotJSONError" in done.stdout
    assert f"! {classroom.BROKEN}：未评分：" in done.stdout
    assert "database is locked" not in done.stdout + done.stderr


def test_one_student_only_with_ordinary_kernels(parallel):
    plain, root, _ = parallel
    done = subprocess.run([str(COURSE), "grade", ASSIGNMENT, "--student", "solution", "--no-fork-server",
                           "--root", str(root)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "1/1 solution" in done.stdout
    assert classroom.scores(root, ASSIGNMENT)["solution"] == plain.scores["solution"]


def test_not_a_course_folder_is_an_error(tmp_path):
    done = subprocess.run([str(COURSE), "grade", ASSIGNMENT, "--root", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 2 and "is not a course folder" in done.stdout and "不是包含" in done.stdout
