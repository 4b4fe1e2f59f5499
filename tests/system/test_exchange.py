"""A class on one shared machine, through nbgrader's file-system exchange, as the README sets it up.

Two students, each a real Unix user with their own home, and the instructor (root, who also grades in
the sandbox) go through nbgrader's whole lifecycle with plain nbgrader commands and the shipped
deploy/exchange/ configuration: release → fetch → edit → submit → collect → autograde →
generate_feedback → release_feedback → fetch_feedback. No command names the course or the exchange:
the system-wide configuration that deploy/exchange/setup-exchange.sh installs supplies both.
"""
import html
import importlib.metadata
import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest

from course import classroom, settings
from course.authoring import student_bundle
from course.kernels import sandbox
from support import unix_users
from support.messages import shows
from support.paths import BIN, with_bin_on_path
from support.readme import readme_steps

pytestmark = pytest.mark.build_independent  # nbgrader's exchange moves files; no PyTorch build changes it: .ci/run runs it once

ROOT = classroom.ROOT
ASSIGNMENT = "a1_tensor_to"
COURSE = "torch-to"


@pytest.fixture(scope="module")
def shared_machine():
    """Two students, an exchange, the system-wide configuration, private homes and course folder, as
    setup-exchange.sh makes them, and the course's environment installed for everyone by install-shared.sh
    (`make shared-install`), which the students use from their login shells."""
    unix_users.require_root()
    top = unix_users.world_readable_folder("course-exchange-")
    try:
        (top / "homes").mkdir(mode=0o755)
        config_dir, exchange, course = top / "etc-jupyter", top / "exchange", top / "course"
        with unix_users.users(["alice", "bob"], top / "homes") as students:
            done = subprocess.run([ROOT / "deploy" / "exchange" / "setup-exchange.sh", "root", *students.values()],
                                  capture_output=True, text=True,
                                  env={**os.environ, "EXCHANGE_ROOT": str(exchange), "COURSE_DIR": str(course),
                                       "JUPYTER_SYSTEM_CONFIG": str(config_dir)})
            assert done.returncode == 0, f"setup-exchange.sh failed / 失败:\n{done.stdout}{done.stderr}"
            prefix, profile_d = top / "opt-torch-to", top / "profile.d"  # stand-ins for /opt and /etc/profile.d
            started, built_before = time.monotonic(), build_outputs_in_checkout()
            done = subprocess.run([ROOT / "deploy" / "exchange" / "install-shared.sh", prefix, GRADER_TORCH],
                                  capture_output=True, text=True, env={**os.environ, "PROFILE_D": str(profile_d)})
            # the end of pip's output says why (its start is a warning per configured package folder)
            assert done.returncode == 0, f"install-shared.sh failed / 失败:\n{last_lines(done.stdout + done.stderr)}"
            # root wrote nothing in the instructor's checkout, and so shares no build folder with a second install
            assert build_outputs_in_checkout() == built_before, "install-shared.sh built in the checkout / 在检出目录中构建"
            for user in students.values():  # what /etc/profile does with /etc/profile.d at each login
                login(user, f". {profile_d / 'torch-to.sh'}\n")
            machine = Machine(top, exchange, config_dir, students, prefix)
            machine.timings.append(("root", "install-shared.sh", time.monotonic() - started))
            yield machine
    finally:
        subprocess.run(["rm", "-rf", str(top)])


def build_outputs_in_checkout() -> dict:
    """What building the project in the checkout itself writes (setuptools' build/lib, build/bdist.*, the
    egg-info), each file with its modification time."""
    tops = [ROOT / "build" / "lib", *(ROOT / "build").glob("bdist.*"), *ROOT.glob("*.egg-info")]
    return {path: path.stat().st_mtime_ns for top in tops if top.exists() for path in [top, *top.rglob("*")]}


def last_lines(output: str, count: int = 40) -> str:
    return "\n".join(output.splitlines()[-count:])


GRADER_TORCH = f"torch=={importlib.metadata.version('torch').split('+')[0]}"  # as `make shared-install` pins it


def login(user, profile):
    home = unix_users.home_of(user)
    done = unix_users.run_as(user, ["sh", "-c", f"printf '%s' '{profile}' >> {home / '.profile'}"], cwd=home)
    assert done.returncode == 0, done.stderr


class Machine:
    def __init__(self, top, exchange, config_dir, students, prefix):
        self.top, self.exchange, self.config_dir, self.students, self.prefix = top, exchange, config_dir, students, prefix
        self.course = top / "course"   # the instructor's course folder
        self.timings = []              # (who, command, seconds): the lifecycle's cost, shown with -s

    def env(self):
        # stands in for /etc/jupyter, which a test must not write (jupyter reads JUPYTER_CONFIG_PATH too)
        return {"JUPYTER_CONFIG_PATH": str(self.config_dir)}

    def instructor(self, *args):
        env = with_bin_on_path({**os.environ, **self.env()})
        if sandbox.problem():  # prefer the real sandbox; without it the grading kernels run unsandboxed
            env["COURSE_NO_SANDBOX"] = "1"
        start = time.monotonic()
        done = subprocess.run([BIN / "nbgrader", *args], cwd=self.course, env=env,
                              capture_output=True, text=True, timeout=300)
        self.timings.append(("instructor", f"nbgrader {args[0]}", time.monotonic() - start))
        assert done.returncode == 0, f"nbgrader {args[0]} (instructor / 教师) failed / 失败:\n{done.stdout}{done.stderr}"
        return done.stdout + done.stderr

    def student(self, name, *args):
        """`nbgrader ARGS` as the student types it: in a login shell, found on the PATH it sets."""
        user = self.students[name]
        start = time.monotonic()
        done = unix_users.run_as(user, ["sh", "-lc", 'exec nbgrader "$@"', "nbgrader", *args],
                                 cwd=unix_users.home_of(user), env=self.env())
        self.timings.append((name, f"nbgrader {args[0]}", time.monotonic() - start))
        assert done.returncode == 0, f"nbgrader {args[0]} ({name}) failed / 失败:\n{done.stdout}{done.stderr}"
        return done.stdout + done.stderr

    def can_list(self, name, folder) -> bool:
        return unix_users.run_as(self.students[name], ["ls", folder], cwd=Path("/")).returncode == 0

    def can_read(self, name, path) -> bool:
        return unix_users.run_as(self.students[name], ["cat", path], cwd=Path("/")).returncode == 0


@pytest.fixture(scope="module")
def wrong_answer():
    """Bob's one mistake: the corpus's first wrong answer."""
    return next(a for a in classroom.load_corpus(ASSIGNMENT) if not a.correct)


@pytest.fixture(scope="module")
def lifecycle(shared_machine, wrong_answer):
    """The whole lifecycle, once; the tests below read what it left."""
    m = shared_machine
    (m.course / "source").mkdir()
    (m.course / "nbgrader_config.py").write_bytes((ROOT / "nbgrader_config.py").read_bytes())
    subprocess.run(["cp", "-R", ROOT / "source" / ASSIGNMENT, m.course / "source"], check=True)
    m.instructor("generate_assignment", ASSIGNMENT, "--force")
    m.instructor("release_assignment", ASSIGNMENT)
    answers = {"alice": [], "bob": [wrong_answer]}

    def work(name):  # what each student does, both at the same time as in a real class
        m.student(name, "fetch_assignment", ASSIGNMENT)
        # the student's edit: their answers, saved over the fetched notebook by that student
        edited = m.top / f"{name}.ipynb"
        nbformat.write(classroom.solved_notebook(m.course, ASSIGNMENT, answers[name]), edited)
        edited.chmod(0o644)
        home = unix_users.home_of(m.students[name])
        done = unix_users.run_as(m.students[name], ["cp", edited, home / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"], cwd=home)
        assert done.returncode == 0, done.stderr
        m.student(name, "submit", ASSIGNMENT)

    with ThreadPoolExecutor() as pool:
        list(pool.map(work, answers))
    m.instructor("collect", ASSIGNMENT)
    m.instructor("autograde", ASSIGNMENT)
    grade_written_answers_by_hand(m.course)
    m.instructor("generate_feedback", ASSIGNMENT)
    m.instructor("release_feedback", ASSIGNMENT)
    with ThreadPoolExecutor() as pool:
        list(pool.map(lambda name: m.student(name, "fetch_feedback", ASSIGNMENT), answers))
    print("".join(f"\n{who:>10} {command:<29} {seconds:6.1f} s" for who, command, seconds in m.timings))
    return m


def grade_written_answers_by_hand(course: Path):
    """What the formgrader does when the instructor gives every written answer its points."""
    from nbgrader.api import Gradebook

    with Gradebook(settings.gradebook_url(settings.load(course))) as gradebook:
        for submission in gradebook.assignment_submissions(ASSIGNMENT):
            for notebook in submission.notebooks:
                for grade in notebook.grades:
                    if grade.needs_manual_grade:
                        grade.manual_score, grade.needs_manual_grade = grade.max_score, False
        gradebook.db.commit()


def test_each_submission_is_graded_as_its_own_students(lifecycle, wrong_answer):
    m = lifecycle
    full = classroom.max_points(ASSIGNMENT)
    graded = classroom.scores(m.course, ASSIGNMENT)
    alice, bob = m.students["alice"], m.students["bob"]
    assert set(graded) == {alice, bob}, f"graded / 已评分: {sorted(graded)}"
    assert graded[alice] == full, f"alice's right answers lost points / alice 的正确答案被扣分: {graded[alice]}"
    lost = f"test_{wrong_answer.exercise}"
    assert graded[bob] == {**full, lost: 0}, (
        f"bob should lose exactly {lost} / bob 应当只失去 {lost} 的分数: {graded[bob]}")


def test_each_student_fetches_only_their_own_feedback(lifecycle, wrong_answer):
    m = lifecycle
    for name, user in m.students.items():
        home = unix_users.home_of(user)
        pages = list((home / ASSIGNMENT / "feedback").glob(f"*/{ASSIGNMENT}.html"))
        assert len(pages) == 1, f"{name} fetched / 取回了 {pages}"
        assert pages[0].stat().st_uid == home.stat().st_uid, "fetched as the student / 应以学生身份取回"
        own = classroom.notebook_path(m.course, "feedback", ASSIGNMENT, user).with_suffix(".html")
        assert pages[0].read_bytes() == own.read_bytes(), (
            f"{name} received feedback that is not theirs / {name} 收到的不是自己的反馈")
        page = html.unescape(pages[0].read_text("utf-8"))
        assert shows(page, wrong_answer.diagnostic) == (name == "bob"), (
            f"{name}: the diagnostic {wrong_answer.diagnostic} belongs in bob's feedback only / "
            f"诊断信息 {wrong_answer.diagnostic} 只应出现在 bob 的反馈中")


def test_students_cannot_read_other_submissions_or_feedback(lifecycle):
    m = lifecycle
    course = m.exchange / COURSE
    assert m.can_list("alice", course / "outbound"), "students must see released assignments / 学生必须能看到已发布的作业"
    for folder in ("inbound", "feedback"):
        assert not m.can_list("alice", course / folder), (
            f"a student can list the exchange's {folder}/ / 学生可以列出交换目录的 {folder}/")


def test_a_student_finds_nbgrader_on_the_path_of_a_plain_login_shell(lifecycle):
    listed = lifecycle.student("alice", "list")
    assert ASSIGNMENT in listed and COURSE in listed, listed


def test_the_shared_install_is_a_copy_that_holds_no_solution_and_no_test(lifecycle):
    m = lifecycle
    user = m.students["alice"]
    done = unix_users.run_as(user, ["sh", "-lc", 'python -c "import autograder; print(autograder.__file__)"'],
                             cwd=unix_users.home_of(user))
    assert done.returncode == 0 and done.stdout.startswith(str(m.prefix)), done.stdout + done.stderr
    package = Path(done.stdout.strip()).parent
    course_files = {f"{assignment}{suffix}" for assignment in student_bundle.assignments() for suffix in (".ipynb", ".toml")}
    copies = [path for path in m.prefix.rglob("*") if path.name in course_files]
    assert not copies, f"the shared install holds the assignments or the corpus / 共享安装中有作业或语料库: {copies}"
    (record,) = package.parent.glob("torch_to_course-*.dist-info/RECORD")  # every file pip installed for it
    installed = [line.split(",")[0] for line in record.read_text("utf-8").splitlines() if line]
    others = [path for path in installed
              if not path.startswith(("autograder/", "course/", record.parent.name + "/", "../../../bin/"))]
    assert {"autograder/checks/core.py", "course/cli.py"} <= set(installed) and not others, f"installed beyond the package / 包以外的文件: {others}"
    # what the hub of deploy/jupyterhub/ runs from there: its own command, and the servers' configuration
    shared = m.prefix / "share" / "torch-to"
    assert (m.prefix / "bin" / "jupyterhub").exists()
    assert m.can_read("alice", shared / "student-jupyter" / "jupyter_server_config.d" / "zz-course-students.json")
    assert not (package / "tests").exists() and not list(m.prefix.rglob("__editable__*")), "an editable install / 可编辑安装"


def test_students_cannot_read_the_course_folder_or_a_classmates_home(lifecycle):
    m = lifecycle
    bob_home = unix_users.home_of(m.students["bob"])
    for path in [m.course / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", m.course / "gradebook.db",
                 bob_home / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"]:
        assert path.exists(), path
        assert not m.can_read("alice", path), f"alice can read / alice 可以读取 {path}"
    for folder in [m.course, m.course / "submitted", bob_home]:
        assert not m.can_list("alice", folder), f"alice can list / alice 可以列出 {folder}"


def test_the_set_up_makes_the_instructors_home_private(tmp_path):
    """A new user's home is 0755 on most distributions: before issue 43 every student could read what the
    instructor kept there (a checkout with the solutions, exported grades). Checked as the users."""
    unix_users.require_root()
    top = unix_users.world_readable_folder("course-homes-")
    try:
        (top / "homes").mkdir(mode=0o755)
        with unix_users.users(["teacher", "alice"], top / "homes") as users:
            home = unix_users.home_of(users["teacher"])
            home.chmod(0o755)
            kept = home / "grades.csv"
            kept.write_text("alice,12\n")
            kept.chmod(0o644)
            done = subprocess.run([ROOT / "deploy" / "exchange" / "setup-exchange.sh", users["teacher"], users["alice"]],
                                  capture_output=True, text=True,
                                  env={**os.environ, "EXCHANGE_ROOT": str(top / "exchange"),
                                       "JUPYTER_SYSTEM_CONFIG": str(top / "etc-jupyter")})
            assert done.returncode == 0, done.stdout + done.stderr
            assert home.stat().st_mode & 0o777 == 0o700
            read = unix_users.run_as(users["alice"], ["cat", kept], cwd=Path("/"))
            assert read.returncode != 0 and "alice,12" not in read.stdout, read.stdout
            mine = unix_users.run_as(users["teacher"], ["cat", kept], cwd=Path("/"))
            assert mine.returncode == 0 and "alice,12" in mine.stdout, mine.stderr
    finally:
        subprocess.run(["rm", "-rf", str(top)])


def test_the_instructors_readme_commands_run_from_the_shared_install_with_nothing_to_activate(lifecycle):
    """On the shared machine there is no .venv (issue 43: the README's block began by activating one): the
    instructor's `course` and `nbgrader` come from the shared install, on a login shell's PATH, in the
    course folder."""
    m = lifecycle
    steps = readme_steps("### Instructors")
    assert not any(line.startswith(("source", "make", ".")) for line in steps), steps
    profile = m.top / "profile.d" / "torch-to.sh"  # what a login shell reads from /etc/profile.d
    for line in [f"course status {ASSIGNMENT}", f"course grade {ASSIGNMENT}", "nbgrader export"]:
        assert line in steps
        done = subprocess.run(["sh", "-c", f'. "{profile}"; command -v {line.split()[0]}; exec {line}'],
                              cwd=m.course, capture_output=True, text=True, timeout=600,
                              env={"HOME": os.environ.get("HOME", "/root"), "PATH": "/usr/bin:/bin",
                                   "JUPYTER_CONFIG_PATH": str(m.config_dir),
                                   **({"COURSE_NO_SANDBOX": "1"} if sandbox.problem() else {})})
        output = done.stdout + done.stderr
        assert done.returncode == 0, f"{line}:\n{output}"
        assert output.startswith(str(m.prefix / "bin")), output  # the shared install's command, not the checkout's
