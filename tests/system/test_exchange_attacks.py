"""A student who turns nbgrader's exchange against the course, as real Unix users on one shared machine.

The exchange is set up as the README says (deploy/exchange/setup-exchange.sh): every user may create
folders in inbound/. Two attacks of one student, mallory, on the instructor's `nbgrader collect`
(course/plugins/exchange.py):
- links: after `nbgrader submit`, mallory puts symbolic links in her submission to files only the
  instructor can read (her notebook becomes a link to the source notebook, with the solutions and hidden
  tests; another to the gradebook), and a pipe that would block a reader;
- impersonation: `nbgrader submit --CourseDirectory.student_id=ALICE` makes a submission named after alice,
  newer than alice's own;
- lateness: mallory rewrites her submission's `timestamp.txt` to a time before the due date;
- feedback: her `submission_secret.txt` becomes a folder (`release_feedback` read each student's in turn).
Collect copies the regular files of each submission's owner and nothing else, refuses the forged one with a
bilingual error, and collects alice's own submission for alice.
"""
import datetime
import os
import subprocess
from pathlib import Path

import nbformat
import pytest

from nbgrader.utils import parse_utc

from course import classroom
from course.plugins import exchange
from support import unix_users
from support.messages import shows
from support.paths import BIN, with_bin_on_path

pytestmark = pytest.mark.build_independent  # release, submit and collect move files and run no kernel; no PyTorch
# build changes them: .ci/run runs it once

ROOT = classroom.ROOT
ASSIGNMENT = "a1_tensor_to"
NOTEBOOK = f"{ASSIGNMENT}.ipynb"
COURSE = "torch-to"


class Exchange:
    def __init__(self, top, students, python):
        self.top, self.students = top, students
        self.course, self.exchange, self.config = top / "course", top / "exchange", top / "etc-jupyter"
        self.nbgrader = python.parent / "nbgrader"

    def instructor(self, *args) -> str:
        done = subprocess.run([BIN / "nbgrader", *args], cwd=self.course, capture_output=True, text=True,
                              timeout=300, env=with_bin_on_path({**os.environ, "JUPYTER_CONFIG_PATH": str(self.config)}))
        assert done.returncode == 0, f"nbgrader {args[0]} failed / 失败:\n{done.stdout}{done.stderr}"
        return done.stdout + done.stderr

    def student(self, name, *command) -> str:
        user = self.students[name]
        done = unix_users.run_as(user, command, cwd=unix_users.home_of(user), timeout=300,
                                 env={"JUPYTER_CONFIG_PATH": str(self.config)})
        assert done.returncode == 0, f"{command} ({name}) failed / 失败:\n{done.stdout}{done.stderr}"
        return done.stdout + done.stderr

    def submit(self, name, answer, *options):
        """`name` writes `answer` into their fetched notebook, as themselves, and submits it."""
        home = unix_users.home_of(self.students[name])
        notebook = nbformat.read(home / ASSIGNMENT / NOTEBOOK, as_version=4)
        notebook.cells.append(nbformat.v4.new_markdown_cell(answer))
        draft = self.top / f"{name}-draft.ipynb"
        nbformat.write(notebook, draft)
        draft.chmod(0o644)
        self.student(name, "cp", draft, home / ASSIGNMENT / NOTEBOOK)
        self.student(name, self.nbgrader, "submit", ASSIGNMENT, *options)

    def inbound(self, claimed) -> list[Path]:
        """The submissions in inbound/ named after `claimed`'s user, oldest first (found as root: a student
        reads the name from their own nbgrader cache)."""
        return sorted((self.exchange / COURSE / "inbound").glob(f"{self.students[claimed]}+{ASSIGNMENT}+*"),
                      key=lambda path: path.name.split("+")[2])

    def submitted(self, name) -> Path:
        return self.course / "submitted" / self.students[name] / ASSIGNMENT


@pytest.fixture(scope="module")
def collected():
    unix_users.require_root()
    top = unix_users.world_readable_folder("course-exchange-attacks-")
    try:
        (top / "homes").mkdir(mode=0o755)
        with unix_users.users(["alice", "mallory"], top / "homes") as students:
            python = unix_users.shared_python(top)
            m = Exchange(top, students, python)
            done = subprocess.run([ROOT / "deploy" / "exchange" / "setup-exchange.sh", "root", *students.values()],
                                  capture_output=True, text=True,
                                  env={**os.environ, "EXCHANGE_ROOT": str(m.exchange), "COURSE_DIR": str(m.course),
                                       "JUPYTER_SYSTEM_CONFIG": str(m.config)})
            assert done.returncode == 0, f"setup-exchange.sh failed / 失败:\n{done.stdout}{done.stderr}"
            (m.course / "source").mkdir()
            (m.course / "nbgrader_config.py").write_bytes((ROOT / "nbgrader_config.py").read_bytes())
            subprocess.run(["cp", "-R", ROOT / "source" / ASSIGNMENT, m.course / "source"], check=True)
            m.instructor("generate_assignment", ASSIGNMENT, "--force")
            m.instructor("release_assignment", ASSIGNMENT)
            for name in students:
                m.student(name, m.nbgrader, "fetch_assignment", ASSIGNMENT)
            m.submit("alice", "alice's own answer")
            m.submit("mallory", "mallory's answer")
            (own,) = m.inbound("mallory")
            source = m.course / "source" / ASSIGNMENT / NOTEBOOK
            m.submitted_after = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
            m.student("mallory", "sh", "-c", 'cd "$1" && echo my notes > notes.txt && mkdir extra && '
                      'ln -sf "$2" "$3" && ln -s "$4/gradebook.db" extra/grades.db && ln -s "$4" course && '
                      'mkfifo extra/pipe && printf "2025-12-31 23:00:00.000000 UTC" > timestamp.txt && '
                      'rm submission_secret.txt && mkdir submission_secret.txt',
                      "sh", own, source, NOTEBOOK, m.course)
            m.submit("mallory", "mallory pretending to be alice", f"--CourseDirectory.student_id={students['alice']}")
            m.log = m.instructor("collect", ASSIGNMENT)
            yield m
    finally:
        subprocess.run(["rm", "-rf", str(top)])


def test_the_attacks_were_in_the_exchange(collected):
    """What collect met: mallory's links, and a submission named after alice that mallory owns, newer than
    alice's own (otherwise the tests below prove nothing)."""
    m = collected
    mallory_uid = unix_users.home_of(m.students["mallory"]).stat().st_uid
    (links,) = m.inbound("mallory")
    assert (links / NOTEBOOK).is_symlink() and (links / "extra" / "grades.db").is_symlink()
    alice_own, forged = m.inbound("alice")
    assert forged.stat().st_uid == mallory_uid != alice_own.stat().st_uid


def test_no_link_is_followed_or_copied_and_the_rest_is_collected(collected):
    m = collected
    folder = m.submitted("mallory")
    found = sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))
    assert found == ["extra", "notes.txt", "submission_secret.txt", "timestamp.txt"], found
    assert (folder / "notes.txt").read_text() == "my notes\n"


def test_each_link_and_the_pipe_is_named_in_a_bilingual_note(collected):
    log = collected.log
    assert shows(log, "collect_not_regular"), log
    for path in (NOTEBOOK, "course", "extra/grades.db", "extra/pipe"):
        assert f": {path} " in log, f"{path} not named / 未指明 {path}:\n{log}"


def test_a_submission_claiming_another_student_is_refused_and_theirs_stands(collected):
    m = collected
    assert shows(m.log, "collect_not_owner"), m.log
    assert f"Unix user {m.students['mallory']}" in m.log
    notebook = (m.submitted("alice") / NOTEBOOK).read_text("utf-8")
    assert "alice's own answer" in notebook and "pretending" not in notebook


def test_a_submission_time_the_exchange_did_not_see_is_replaced_by_the_one_it_saw(collected):
    """mallory wrote that she submitted before the due date: the time recorded is when the exchange last saw her
    submission change, and the note says so in both languages; alice's own time stands."""
    m = collected
    assert parse_utc((m.submitted("mallory") / "timestamp.txt").read_text()) >= m.submitted_after
    assert shows(m.log, "collect_time_of_the_exchange"), m.log
    alice_own = m.inbound("alice")[0] / "timestamp.txt"
    assert (m.submitted("alice") / "timestamp.txt").read_text() == alice_own.read_text()


def test_a_secret_release_feedback_could_not_read_is_replaced_and_theirs_stands(collected):
    m = collected
    assert exchange.SECRET.fullmatch((m.submitted("mallory") / "submission_secret.txt").read_text())
    assert shows(m.log, "collect_secret_replaced"), m.log
    alice_own = m.inbound("alice")[0] / "submission_secret.txt"
    assert (m.submitted("alice") / "submission_secret.txt").read_text() == alice_own.read_text()
