"""The instructor's typical slips with `course grade`, `course status` and `course insights`: each gets one
bilingual line that says what is wrong and what there is instead, and exit status 2, never a traceback
(issue 43). The commands run as the instructor types them (`course ...`, a process of its own)."""
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from nbgrader.api import Gradebook

from course import classroom, settings
from support.messages import shows
from support.paths import with_bin_on_path

COMMANDS = ["grade", "status", "insights"]
# what the commands print about a course folder; no PyTorch build changes it: .ci/run runs it once
pytestmark = pytest.mark.build_independent


@pytest.fixture
def course_folder(tmp_path) -> Path:
    """A course folder as `course setup` leaves it, without a class: nbgrader_config.py and two assignments."""
    (tmp_path / "nbgrader_config.py").write_text((classroom.ROOT / "nbgrader_config.py").read_text("utf-8"))
    for name in ("a1_tensor_to", "a2_module_to"):
        (tmp_path / "source" / name).mkdir(parents=True)
    return tmp_path


def course(*words, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(["course", *map(str, words)], cwd=cwd, env=with_bin_on_path(),
                          capture_output=True, text=True, timeout=120)


def assert_one_clear_line(done, key):
    shown = done.stdout + done.stderr
    assert done.returncode == 2, shown
    assert shows(done.stdout, key), shown
    assert "Traceback" not in shown, shown
    assert len(done.stdout.strip().splitlines()) == 2, shown  # one line in each language


@pytest.mark.parametrize("command", COMMANDS)
def test_a_wrong_assignment_name_lists_the_assignments_there_are(course_folder, command):
    done = course(command, "a1", cwd=course_folder)
    assert_one_clear_line(done, "unknown_assignment")
    assert "a1_tensor_to, a2_module_to" in done.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_the_wrong_folder_says_where_to_run(tmp_path, command):
    elsewhere = tmp_path / "home"
    elsewhere.mkdir()
    done = course(command, "a1_tensor_to", cwd=elsewhere)
    assert_one_clear_line(done, "not_a_course_folder")
    assert str(elsewhere) in done.stdout and f"course {command}" in done.stdout


@pytest.mark.parametrize("command", ["status", "insights"])
def test_an_assignment_not_in_the_gradebook_says_to_run_setup(course_folder, command):
    done = course(command, "a1_tensor_to", cwd=course_folder)
    assert_one_clear_line(done, "not_registered")


def test_students_off_the_roster_are_named_once_and_not_sent_to_nbgrader(course_folder, monkeypatch, capsys):
    """nbgrader refuses an unknown student with a 25-line traceback (create_student is off once a roster is
    registered): `course grade` names them once and grades the others."""
    from course import cli, grading
    from course import gradebook as queries
    from course.kernels import sandbox

    monkeypatch.setenv("PATH", with_bin_on_path()["PATH"])  # nbgrader's gradebook runs alembic
    (course_folder / "roster.csv").write_text("id\nann\nbob\n", encoding="utf-8")
    with Gradebook(settings.gradebook_url(settings.load(course_folder))) as gradebook:
        for student in ("ann", "bob"):
            gradebook.add_student(student)
    for student in ("ann", "mallory", "bob", "trudy"):
        (course_folder / "submitted" / student / "a1_tensor_to").mkdir(parents=True)
    asked = []

    def graded(root, assignment, jobs, config, students, **kwargs):
        asked.append(students)
        return SimpleNamespace(graded=students, seconds=0.0, unchanged=[], failed={}, logs=course_folder)

    monkeypatch.setattr(grading, "grade", graded)
    monkeypatch.setattr(queries, "registered", lambda *a: True)
    monkeypatch.setattr(queries, "print_hand_grading", lambda *a: None)
    monkeypatch.setattr(queries, "print_late", lambda *a: None)
    monkeypatch.setattr(sandbox, "problem", lambda *a: None)
    assert cli.main(["grade", "a1_tensor_to", "--root", str(course_folder)]) == 0
    assert asked == [["ann", "bob"]]
    shown = capsys.readouterr().out
    assert shows(shown, "not_on_roster") and shown.count("mallory, trudy") == 2, shown  # English, Chinese

    asked.clear()
    assert cli.main(["grade", "a1_tensor_to", "--root", str(course_folder), "--student", "mallory"]) == 1
    assert asked == [[]]  # nobody to grade: not everyone
