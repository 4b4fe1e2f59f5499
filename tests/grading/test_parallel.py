"""`course grade --jobs N` gives the same gradebook as plain `nbgrader autograde`, with more jobs than cores,
and a worker that dies costs only the submission it was grading."""
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from autograder.messages import Bilingual, text
from course import classroom, settings
from course.grading.pool import run_jobs
from support.messages import fingerprint, shows
from support.paths import BIN

# the worker pool, the gradebook's locking, rosters, late work and where kernels come from: `course grade` uses the
# same kernels and verdict as plain nbgrader, whose grades under each build the demo classes check (test_grading.py)
pytestmark = pytest.mark.build_independent

ASSIGNMENT = "a1_tensor_to"
JOBS = (os.cpu_count() or 1) + 2  # more jobs than cores: the SQLite gradebook must still take every grade


@pytest.fixture(scope="module")
def parallel(demo, course, course_folder):
    """The demo class (graded by plain `nbgrader autograde`) graded again by `course grade` in a new folder."""
    plain = demo(ASSIGNMENT).graded
    root = course_folder(ASSIGNMENT, "parallel")
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
    assert "SAWarning" not in done.stderr, done.stderr  # nbgrader's harmless gradebook warning, once per row


def test_status_tells_a_submission_autograde_could_not_grade_from_one_waiting_for_a_person(parallel, course):
    plain, root, _ = parallel
    done = course("status", ASSIGNMENT, "--root", root, timeout=120)
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and shows(done.stdout, "status_not_autograded"), done.stdout + done.stderr
    assert [line for line in lines if line.startswith(f"{classroom.BROKEN}: ")] == [
        text("status_not_autograded", student=classroom.BROKEN, assignment=ASSIGNMENT).en], done.stdout
    assert shows(done.stdout, "status_summary") and not shows(done.stdout, "status_all_graded"), done.stdout


def test_one_student_only(parallel, course):
    _, root, _ = parallel
    done = course("grade", ASSIGNMENT, "--student", "solution", "--force", "--root", root, timeout=300)
    assert done.returncode == 0 and "1/1 solution" in done.stdout and "Graded 1 submission(s)" in done.stdout


def test_a_late_submission_is_graded_alone_and_hand_grading_elsewhere_is_kept(parallel, course):
    """nbgrader's rule, as plain `nbgrader autograde`: only a submission newer than its grading is graded
    again. So one late submission leaves every other student's hand-graded answers as the grader left
    them (regrading flags each of them for review again, and holds their feedback back); `--force`
    regrades everyone."""
    _, root, _ = parallel
    graded_by_hand, late = "solution", next(s for s in classroom.scores(root, ASSIGNMENT) if s != "solution")
    with Gradebook(settings.gradebook_url(settings.load(root))) as book:
        [written] = [g for g in book.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, graded_by_hand).grades if g.cell.cell_type == "markdown"]
        written.manual_score, written.needs_manual_grade = written.max_score, False
        book.db.commit()
        name, full = written.name, written.max_score
    for student, stamp in [(graded_by_hand, "2026-01-01 10:00:00.000000 UTC"), (late, "2026-01-01 10:00:00.000000 UTC")]:
        for folder in ("submitted", "autograded"):  # as `nbgrader collect` and autograde leave them
            (root / folder / student / ASSIGNMENT / "timestamp.txt").write_text(stamp)
    (root / "submitted" / late / ASSIGNMENT / "timestamp.txt").write_text("2026-01-02 09:00:00.000000 UTC")

    done = course("grade", ASSIGNMENT, "--student", graded_by_hand, "--student", late, "--root", root, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Graded 1 submission(s)" in done.stdout and shows(done.stdout, "grade_unchanged"), done.stdout
    assert f"{graded_by_hand} (" in done.stdout and "unchanged, kept / 未变，保留" in done.stdout

    def hand_grade():
        with Gradebook(settings.gradebook_url(settings.load(root))) as book:
            grade = book.find_grade(name, ASSIGNMENT, ASSIGNMENT, graded_by_hand)
            return grade.manual_score, grade.needs_manual_grade

    assert hand_grade() == (full, False)
    forced = course("grade", ASSIGNMENT, "--student", graded_by_hand, "--force", "--root", root, timeout=300)
    assert forced.returncode == 0 and "Graded 1 submission(s)" in forced.stdout, forced.stdout + forced.stderr
    assert hand_grade() == (full, True)  # nbgrader asks for a review of what it regraded


def test_the_course_configuration_is_loaded_once_and_names_one_gradebook(parallel, course):
    """`course grade` reads nbgrader_config.py once (workers and kernels inherit what it loaded) and every
    part of it uses the same gradebook URL, the course's SQLite file with its busy timeout."""
    _, root, _ = parallel
    config_file, loads = root / "nbgrader_config.py", root / "config-loads.txt"
    original = config_file.read_text("utf-8")
    config_file.write_text(original + f"\nopen({str(loads)!r}, 'a').write('loaded\\n')\n", "utf-8")
    try:
        done = course("grade", ASSIGNMENT, "--student", "solution", "--root", root, timeout=300)
    finally:
        config_file.write_text(original, "utf-8")
    assert done.returncode == 0, done.stdout + done.stderr
    assert loads.read_text().splitlines() == ["loaded"]
    url = settings.gradebook_url(settings.load(root))
    assert url == f"sqlite:///{root.resolve() / 'gradebook.db'}?timeout={settings.BUSY_TIMEOUT_S}"


def test_with_a_roster_a_student_not_on_it_is_not_graded(course, course_folder):
    """As plain `nbgrader autograde` with the course's roster: a submission from someone else is reported,
    not silently added to the gradebook as a new student."""
    root = course_folder(ASSIGNMENT)
    for student in ["solution", "mallory"]:
        classroom.submit(root, ASSIGNMENT, student, classroom.solved_notebook(root, ASSIGNMENT))
    (root / "roster.csv").write_text("id\nsolution\n", encoding="utf-8")
    classroom.nbgrader(root, "db", "student", "import", "roster.csv")
    done = course("grade", ASSIGNMENT, "--root", root, timeout=300)
    assert fingerprint("not_on_roster").en in done.stdout and fingerprint("not_on_roster").zh in done.stdout
    # named once, and never sent to nbgrader, which would refuse it with a traceback (issue 43)
    assert done.stdout.count("mallory") == 2 and "Traceback" not in done.stdout, done.stdout
    assert set(classroom.scores(root, ASSIGNMENT)) == {"solution"}


@pytest.fixture(scope="module")
def probe_class(course_folder):
    """A course with one submission whose first cell prints how its kernel was started."""
    root = course_folder(ASSIGNMENT, "probe")
    notebook = classroom.solved_notebook(root, ASSIGNMENT)
    notebook.cells.insert(0, nbformat.v4.new_code_cell(
        'print(open("/proc/self/cmdline").read().replace("\\0", " "))'))
    classroom.submit(root, ASSIGNMENT, "probe", notebook)
    return root


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork server is Linux-only")
@pytest.mark.parametrize("flags, forked", [([], True), (["--no-fork-server"], False)])
def test_kernels_come_from_the_fork_server_unless_told_otherwise(probe_class, course, flags, forked):
    done = course("grade", ASSIGNMENT, "--root", probe_class, "--force", *flags, timeout=300)  # the same class twice
    assert done.returncode == 0, done.stdout + done.stderr
    autograded = nbformat.read(classroom.notebook_path(probe_class, "autograded", ASSIGNMENT, "probe"), as_version=4)
    command_line = autograded.cells[0].outputs[0]["text"]
    assert ("-m course.kernels.forkserver" in command_line) is forked
    assert ("-m ipykernel_launcher" in command_line) is not forked
    assert classroom.scores(probe_class, ASSIGNMENT)["probe"] == classroom.max_points(ASSIGNMENT)


def test_not_a_course_folder_is_an_error(tmp_path, course):
    done = course("grade", ASSIGNMENT, "--root", tmp_path)
    assert done.returncode == 2 and shows(done.stdout, "not_a_course_folder"), done.stdout


def _job(task):
    if task == "dies":
        os.kill(os.getpid(), signal.SIGKILL)
    if task == "hangs":
        time.sleep(3600)
    return task.upper()


def test_a_task_past_its_deadline_costs_only_itself():
    """A worker held past the submission's budget is killed by the grading process (which no submission can
    signal): that task is reported overdue, the others finish, nobody waits for the hung one."""
    started = time.monotonic()
    results = dict(run_jobs(_job, ["a", "hangs", "b", "c"], 2, deadline_s=3, overdue=Bilingual("late", "迟")))
    assert time.monotonic() - started < 30
    assert results.pop("hangs") == (False, Bilingual("late", "迟"))
    assert results == {"a": (True, "A"), "b": (True, "B"), "c": (True, "C")}


def test_a_dead_worker_costs_only_its_task():
    """multiprocessing.Pool loses the task of a worker that dies, and waits for ever."""
    started = time.monotonic()
    results = dict(run_jobs(_job, ["a", "dies", "b", "c", "d"], 2))
    assert time.monotonic() - started < 60
    assert results.pop("dies") == (False, Bilingual("killed by SIGKILL", "被信号 SIGKILL 终止"))
    assert results == {"a": (True, "A"), "b": (True, "B"), "c": (True, "C"), "d": (True, "D")}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork server is Linux-only")
def test_a_killed_worker_never_hangs_the_class(course_folder):
    """The worker grading a slow submission is killed from outside: that student is reported as not
    graded, in both languages, and the rest of the class is graded."""
    root = course_folder(ASSIGNMENT)
    classroom.submit(root, ASSIGNMENT, "honest", classroom.solved_notebook(root, ASSIGNMENT))
    slow = classroom.solved_notebook(root, ASSIGNMENT)
    slow.cells.insert(0, nbformat.v4.new_code_cell("import time\ntime.sleep(100)"))
    classroom.submit(root, ASSIGNMENT, "slow", slow)
    grading = subprocess.Popen([str(BIN / "course"), "grade", ASSIGNMENT, "--jobs", "2",
                                "--root", str(root)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        worker = wait_for_worker_of(root / "autograded" / "slow", grading.pid, timeout=240)
        left_by_worker = descendants(worker)  # its fork server, its sandboxes, the slow kernel
        os.kill(worker, signal.SIGKILL)  # the worker that adopted the slow student's kernel
        output, _ = grading.communicate(timeout=240)
    finally:
        grading.kill()
    assert grading.returncode == 0, output
    assert "! slow: not graded: the grading worker stopped (killed by SIGKILL)" in output
    assert "! slow：未评分：评分工作进程在为这份提交评分时停止了（被信号 SIGKILL 终止）" in output
    assert classroom.scores(root, ASSIGNMENT) == {"honest": classroom.max_points(ASSIGNMENT)}
    # nothing of the killed worker is left: its sandboxes died with it (--die-with-parent), its fork server too
    deadline = time.monotonic() + 20
    while still_running(left_by_worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left_by_worker and not still_running(left_by_worker)


def wait_for_worker_of(folder: Path, grader: int, timeout) -> int:
    """The `course grade` worker (a child of `grader`) that adopted the kernel running in `folder`.

    Other processes of the fork server (the one that joins the sandbox, the server itself) also run
    there for a moment; only the kernel is a grandchild of the grading process.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            try:
                if entry.name.isdigit() and os.readlink(entry / "cwd").startswith(str(folder)) \
                        and b"forkserver" in (entry / "cmdline").read_bytes():
                    worker = parent_of(int(entry.name))
                    if parent_of(worker) == grader:
                        return worker
            except OSError:
                pass
        time.sleep(0.2)
    raise TimeoutError(f"no kernel in {folder}")


def descendants(pid) -> dict[int, bytes]:
    """Every process below `pid`, with its command line (to tell it from a later process of that number)."""
    children = {}
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit():
                children.setdefault(parent_of(int(entry.name)), []).append(int(entry.name))
        except OSError:
            pass
    found, todo = {}, list(children.get(pid, []))
    while todo:
        child = todo.pop()
        try:
            found[child] = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        todo += children.get(child, [])
    return found


def still_running(processes: dict[int, bytes]) -> list[int]:
    alive = []
    for pid, command in processes.items():
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes() == command and parent_of(pid) != 0:
                alive.append(pid)
        except (OSError, StopIteration):
            pass
    return alive


def parent_of(pid) -> int:
    with open(f"/proc/{pid}/status") as status:
        return int(next(line for line in status if line.startswith("PPid:")).split()[1])
