"""`course grade --jobs N` gives the same gradebook as plain `nbgrader autograde`, with more jobs than cores."""
import os
import shutil
import sys

import nbformat
import pytest

from autograder import classroom

ASSIGNMENT = "a1_tensor_to"
JOBS = (os.cpu_count() or 1) + 2  # more jobs than cores: the SQLite gradebook must still take every grade


@pytest.fixture(scope="module")
def parallel(demo, course, tmp_path_factory):
    """The demo class (graded by plain `nbgrader autograde`) graded again by `course grade` in a new folder."""
    plain = demo(ASSIGNMENT).graded
    root = tmp_path_factory.mktemp("parallel")
    classroom.prepare_course(root, ASSIGNMENT)
    shutil.copytree(plain.root / "submitted", root / "submitted")
    done = course("grade", ASSIGNMENT, "--jobs", JOBS, "--root", root, timeout=600)
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


def test_one_student_only(parallel, course):
    _, root, _ = parallel
    done = course("grade", ASSIGNMENT, "--student", "solution", "--root", root, timeout=300)
    assert done.returncode == 0 and "1/1 solution" in done.stdout


@pytest.fixture(scope="module")
def probe_class(tmp_path_factory):
    """A course with one submission whose first cell prints how its kernel was started."""
    root = tmp_path_factory.mktemp("probe")
    classroom.prepare_course(root, ASSIGNMENT)
    notebook = classroom.solved_notebook(root, ASSIGNMENT)
    notebook.cells.insert(0, nbformat.v4.new_code_cell(
        'print(open("/proc/self/cmdline").read().replace("\\0", " "))'))
    classroom.submit(root, ASSIGNMENT, "probe", notebook)
    return root


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork server is Linux-only")
@pytest.mark.parametrize("flags, forked", [([], True), (["--no-fork-server"], False)])
def test_kernels_come_from_the_fork_server_unless_told_otherwise(probe_class, course, flags, forked):
    done = course("grade", ASSIGNMENT, "--root", probe_class, *flags, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    autograded = nbformat.read(classroom.notebook_path(probe_class, "autograded", ASSIGNMENT, "probe"), as_version=4)
    command_line = autograded.cells[0].outputs[0]["text"]
    assert ("-m autograder.forkserver" in command_line) is forked
    assert ("-m ipykernel_launcher" in command_line) is not forked
    assert classroom.scores(probe_class, ASSIGNMENT)["probe"] == classroom.max_points(ASSIGNMENT)


def test_not_a_course_folder_is_an_error(tmp_path, course):
    done = course("grade", ASSIGNMENT, "--root", tmp_path)
    assert done.returncode == 2 and "is not a course folder" in done.stdout and "不是包含" in done.stdout
