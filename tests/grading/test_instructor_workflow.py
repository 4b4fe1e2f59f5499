"""The README's instructor steps, run line by line as written, in a fresh copy of the course folder.

The commands come from the README itself (the bash block of "Instructors", the same in both languages),
so the README and this test cannot drift apart. The exchange lives in a temporary folder
(`--Exchange.root`), and one student submits with nbgrader's own `submit`, as the current user.
"""
import datetime
import getpass
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from course import classroom, settings
from course.terminal import OWN
from support.messages import shows
from support.paths import with_bin_on_path
from support.readme import readme_steps

# the README's steps move files through the exchange and the gradebook; the grades each build gives are
# test_grading.py's and test_parallel.py's, under both builds: .ci/run runs this once, under the CUDA build,
# whose run is the shorter of the two without it (the CPU build runs the other build_independent files)
pytestmark = pytest.mark.ci_cuda_build_only

ASSIGNMENT = "a1_tensor_to"
EXCHANGE_COMMANDS = ("release_assignment", "collect", "submit", "fetch_assignment", "release_feedback")


def test_readme_gives_the_same_instructor_steps_in_both_languages():
    """No `source .venv/bin/activate` in the block: on a shared machine there is no .venv (issue 43), and
    the environment is on every login shell's PATH; the prose says what to do in a checkout."""
    english, chinese = readme_steps("### Instructors"), readme_steps("### 教师")
    assert english == chinese
    assert english == ["course setup", f"nbgrader release_assignment {ASSIGNMENT}", f"nbgrader collect --update {ASSIGNMENT}",
                       f"course grade {ASSIGNMENT}", f"course status {ASSIGNMENT}",
                       f"nbgrader generate_feedback {ASSIGNMENT}", f"nbgrader release_feedback {ASSIGNMENT}",
                       "nbgrader export"]
    late = readme_steps("### Late work and regrades")
    assert late == readme_steps("### 迟交与重新评分")
    assert f"nbgrader collect --update {ASSIGNMENT}" in late and f"nbgrader release_feedback {ASSIGNMENT}" in late


@pytest.fixture(scope="module")
def fresh_course(tmp_path_factory) -> Path:
    return clone(tmp_path_factory.mktemp("clone") / "course")


def clone(copy: Path) -> Path:
    """What a `git clone` of this checkout holds: its tracked and not-ignored files, nothing built."""
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
    with Gradebook(settings.gradebook_url(settings.load(fresh_course))) as gradebook:
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


def approve_hand_grades(course: Path, points: dict):
    """What the formgrader does when the instructor types each student's points for the written answer."""
    with Gradebook(settings.gradebook_url(settings.load(course))) as gradebook:
        for student, given in points.items():
            grade = gradebook.find_grade("written_to_vs_module", ASSIGNMENT, ASSIGNMENT, student)
            grade.manual_score, grade.needs_manual_grade = given, False
        gradebook.db.commit()


def hand_grade(course: Path, student: str):
    with Gradebook(settings.gradebook_url(settings.load(course))) as gradebook:
        grade = gradebook.find_grade("written_to_vs_module", ASSIGNMENT, ASSIGNMENT, student)
        return grade.manual_score, grade.needs_manual_grade


def test_readme_late_work_and_regrade_steps_refresh_only_what_changed(tmp_path_factory, tmp_path):
    """Week 3 of a term (issue 43): a late resubmission is collected with --update and graded alone (the other
    student keeps their hand grade and their released feedback), and a regrade with --force leaves no
    stale feedback for release_feedback to send: generate_feedback writes it anew."""
    course = clone(tmp_path_factory.mktemp("late") / "course")
    exchange, home = tmp_path / "exchange", tmp_path / "student"
    exchange.mkdir()
    (home / ASSIGNMENT).mkdir(parents=True)
    on_time, late = getpass.getuser(), "latecomer"

    def one_user(line):
        """One Unix user plays both students here, so collect's ownership rule (issue 42: a folder must be
        owned by the student it names) is turned off with nbgrader's own switch, as for such an exchange."""
        if line.startswith("nbgrader collect"):
            line += " --ExchangeCollect.check_owner=False"
        return run(line, course, exchange)

    def ok(line):
        done = one_user(line)
        assert done.returncode == 0, f"{line}:\n{done.stdout}{done.stderr}"
        return done.stdout + done.stderr

    def submit(student, answers=()):
        nbformat.write(classroom.solved_notebook(course, ASSIGNMENT, answers), home / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
        done = run(f"nbgrader submit {ASSIGNMENT} --student={student}", home, exchange)
        assert done.returncode == 0, done.stdout + done.stderr

    def page(student):
        return course / "feedback" / student / ASSIGNMENT / f"{ASSIGNMENT}.html"

    ok("course setup")
    ok(f"nbgrader release_assignment {ASSIGNMENT}")
    for student in (on_time, late):
        submit(student)
    ok(f"nbgrader collect {ASSIGNMENT}")
    ok(f"course grade {ASSIGNMENT}")
    approve_hand_grades(course, {on_time: 1, late: 2})
    ok(f"nbgrader generate_feedback {ASSIGNMENT}")
    released = page(on_time).read_bytes()
    assert page(late).exists()

    due = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    ok(f'nbgrader db assignment add {ASSIGNMENT} --duedate="{due}"')  # as the README says, with today's date
    time.sleep(1.5)
    wrong = next(a for a in classroom.load_corpus(ASSIGNMENT) if a.id == "to_device_forgot_assignment")
    submit(late, [wrong])
    skipped = ok(f"nbgrader collect {ASSIGNMENT}")  # what the README used to say: the resubmission stays out
    assert "--update" in skipped, skipped

    for line in readme_steps("### Late work and regrades"):
        done = one_user(line)
        output = done.stdout + done.stderr
        if line.startswith("nbgrader generate_feedback"):
            # the late student's written answer waits for review again: their feedback only is held back
            assert done.returncode != 0 and shows(output, "feedback_ungraded") and late in output, output
            continue
        assert done.returncode == 0, f"{line}:\n{output}"
        if line.startswith("course grade"):
            assert "Graded 1 submission(s)" in output, output
            assert shows(output, "grade_unchanged"), output
        if line.startswith(("course grade", "course status")):
            late_lines = [shown.removeprefix(OWN) for shown in output.splitlines() if "min after its due date" in shown]
            assert shows(output, "status_late") and len(late_lines) == 1 and late_lines[0].startswith(late), output
    assert classroom.scores(course, ASSIGNMENT)[late]["test_to_device"] == 0
    assert classroom.scores(course, ASSIGNMENT)[on_time]["test_to_device"] > 0
    assert hand_grade(course, on_time) == (1, False)  # kept, as the formgrader left it
    assert page(on_time).read_bytes() == released and not page(late).exists()

    approve_hand_grades(course, {late: 2})
    ok(f"nbgrader generate_feedback {ASSIGNMENT}")
    assert page(late).exists() and page(on_time).read_bytes() == released

    # a regrade after changing the tests: no old page survives it
    graded = ok(f"course grade {ASSIGNMENT} --force")
    assert "Graded 2 submission(s)" in graded, graded
    assert not page(on_time).exists() and not page(late).exists()
    approve_hand_grades(course, {on_time: 1, late: 2})
    ok(f"nbgrader generate_feedback {ASSIGNMENT}")
    assert page(on_time).exists() and page(late).exists()


def assert_release_unchanged(course: Path):
    """`course setup` regenerates release/ from source/: byte for byte what is committed."""
    for path in (classroom.ROOT / "release").rglob("*.ipynb"):
        copy = course / path.relative_to(classroom.ROOT)
        assert copy.read_bytes() == path.read_bytes(), f"course setup changed {path.relative_to(classroom.ROOT)}"

