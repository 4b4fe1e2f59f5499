"""The README's instructor steps, run line by line as written, in a fresh copy of the course folder.

The commands come from the README itself (the bash block of "Instructors", the same in both languages),
so the README and this test cannot drift apart. The exchange lives in a temporary folder
(`--Exchange.root`), and one student submits with nbgrader's own `submit`, as the current user.
"""
import getpass
import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import nbformat
import pytest
from conftest import with_bin_on_path
from nbgrader.api import Gradebook

from autograder.messages import shows
from course import classroom

ASSIGNMENT = "a1_tensor_to"
EXCHANGE_COMMANDS = ("release_assignment", "collect", "submit", "fetch_assignment")


def readme_steps(heading: str) -> list[str]:
    """The commands of the first bash block under `heading` in the README, comments dropped."""
    readme = (classroom.ROOT / "README.md").read_text("utf-8")
    section = readme.split(f"\n{heading}\n", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, flags=re.DOTALL).group(1)
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.split("#", 1)[0].strip()]


def test_readme_gives_the_same_instructor_steps_in_both_languages():
    english, chinese = readme_steps("### Instructors"), readme_steps("### 教师")
    assert english == chinese
    assert english[1:] == ["course setup", f"nbgrader release_assignment {ASSIGNMENT}", f"nbgrader collect {ASSIGNMENT}",
                           f"course grade {ASSIGNMENT}", f"course status {ASSIGNMENT}",
                           f"nbgrader generate_feedback {ASSIGNMENT}", "nbgrader export"]


@pytest.fixture(scope="module")
def fresh_course(tmp_path_factory) -> Path:
    """What a `git clone` of this checkout holds: its tracked and not-ignored files, nothing built."""
    copy = tmp_path_factory.mktemp("clone") / "course"
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=classroom.ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = classroom.ROOT / name
        if source.is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    return copy


def run(line: str, cwd: Path, exchange: Path) -> subprocess.CompletedProcess:
    """One line of the README as the instructor types it, in the project's environment."""
    words = shlex.split(line)
    if words[0] == "source":  # activating the environment: PATH below does that
        return subprocess.CompletedProcess(words, 0, "", "")
    if words[0] == "nbgrader" and words[1] in EXCHANGE_COMMANDS:
        words += [f"--Exchange.root={exchange}", "--course=torch-to"]
    env = with_bin_on_path()
    started = time.monotonic()
    done = subprocess.run(words, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    print(f"{time.monotonic() - started:6.1f} s  {line}")  # the lifecycle's timings (pytest -s shows them)
    return done


def test_readme_instructor_steps_take_a_submission_from_release_to_grades(fresh_course, tmp_path):
    exchange, student_home = tmp_path / "exchange", tmp_path / "student"
    exchange.mkdir()
    student_home.mkdir()
    shown = run(f"course grade {ASSIGNMENT}", fresh_course, exchange)
    assert shown.returncode != 0 and shows(shown.stdout, "not_registered"), shown.stdout + shown.stderr

    for line in readme_steps("### Instructors"):
        if line.startswith("nbgrader collect"):
            # meanwhile a student fills in the released notebook (written answer too) and submits it
            (student_home / ASSIGNMENT).mkdir()
            nbformat.write(classroom.solved_notebook(fresh_course, ASSIGNMENT),
                           student_home / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
            submitted = run(f"nbgrader submit {ASSIGNMENT}", student_home, exchange)
            assert submitted.returncode == 0, submitted.stdout + submitted.stderr
        done = run(line, fresh_course, exchange)
        output = done.stdout + done.stderr
        if line.startswith("nbgrader generate_feedback"):
            # the written answer is not graded yet: no feedback that shows it as 0
            assert done.returncode != 0 and shows(output, "feedback_ungraded"), output
        else:
            assert done.returncode == 0, f"{line}:\n{output}"
        if line == "course setup":
            for assignment in ("a1_tensor_to", "a2_module_to", "a3_precision_transfers"):
                assert shows(output, "setup_registered") and assignment in output
            assert_release_unchanged(fresh_course)
            nothing = run(f"course grade {ASSIGNMENT}", fresh_course, exchange)  # before collect
            assert nothing.returncode == 1 and shows(nothing.stdout, "nothing_graded"), nothing.stdout
        if line.startswith(("course grade", "course status")):
            assert shows(output, "status_waiting") and "written_to_vs_module" in output, output
        if line.startswith("course grade"):
            assert "Graded 1 submission(s)" in output, output
        if line == "nbgrader export":
            assert shows(output, "export_ungraded"), output

    student = getpass.getuser()
    assert (fresh_course / "submitted" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").exists()
    page = fresh_course / "feedback" / student / ASSIGNMENT / f"{ASSIGNMENT}.html"
    assert not page.exists()
    rows = [row.split(",") for row in (fresh_course / "grades.csv").read_text("utf-8").splitlines()[1:]]
    assert [row[3] for row in rows if row[0] == ASSIGNMENT] == [student]

    # what the formgrader does when the instructor types 2 points (tests/system/test_formgrader.py clicks it)
    with Gradebook(f"sqlite:///{fresh_course / 'gradebook.db'}") as gradebook:
        grade = gradebook.find_grade("written_to_vs_module", ASSIGNMENT, ASSIGNMENT, student)
        grade.manual_score, grade.needs_manual_grade = grade.max_score, False
        gradebook.db.commit()
        assert gradebook.find_submission(ASSIGNMENT, student).score == sum(classroom.max_points(ASSIGNMENT).values()) + 2
    again = run(f"course status {ASSIGNMENT}", fresh_course, exchange)
    assert shows(again.stdout, "status_done") and not shows(again.stdout, "status_waiting"), again.stdout
    assert shows(again.stdout, "status_all_graded") and not shows(again.stdout, "status_summary"), again.stdout
    feedback = run(f"nbgrader generate_feedback {ASSIGNMENT}", fresh_course, exchange)
    assert feedback.returncode == 0, feedback.stdout + feedback.stderr
    assert page.exists()


def assert_release_unchanged(course: Path):
    """`course setup` regenerates release/ from source/: byte for byte what is committed."""
    for path in (classroom.ROOT / "release").rglob("*.ipynb"):
        copy = course / path.relative_to(classroom.ROOT)
        assert copy.read_bytes() == path.read_bytes(), f"course setup changed {path.relative_to(classroom.ROOT)}"

