"""Untrusted submissions, graded in one class between two controls, by the real `nbgrader autograde` (one
submission at a time; the cases that wait out a time limit asleep in a second class with its own controls,
graded at the same time) and by `course grade` (several submissions at a time), each with the course's kernels,
forked from a warm fork server into a sandbox of their own (course/kernels/sandbox.py). A kernel started as a
new process (`--GradingKernelManager.fork_server=False`, or where the fork server cannot start) meets the same
probes of its sandbox in tests/system/test_sandbox.py, which runs each of them on both ways a kernel starts.

Tampering earns nothing from the point it happens and shows a bilingual note; crashes and time-outs
cost only what did not run; broken files get a clear error; the controls keep full marks; the class
finishes in bounded time. Attacks on what lies outside the notebook (the hidden tests, the gradebook,
other submissions, the course's code, the network, the grader's process, environment and home, other
kernels) all fail: the course files and other submissions are unchanged, nothing reached the network,
no process is left behind. The cases are data: course/corpus/untrusted.toml.
"""
import copy
import hashlib
import os
import re
import socket
import stat
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from dataclasses import dataclass

import nbformat
import pytest
from nbformat.v4 import new_code_cell

from course import classroom, settings
from course.plugins.autograde import NBGRADER_FILES
from course.terminal import CONTROL_BUT_LINES, OWN
from support.graders import each_grader_under_one_build
from support.messages import shows

ASSIGNMENT = "a1_tensor_to"
CASES = classroom.corpus("untrusted")["case"]
CONTROLS = ["aaa-control-first", "zzz-control-last"]
WRONG = {a.exercise: a for a in classroom.load_corpus(ASSIGNMENT) if a.id.endswith("forgot_assignment")}
# Shorter time limits than the defaults, so the slow cases stay quick (and bounded) in the suite, and each
# sandbox as a whole smaller. The memory limit of each process is the default (GradingKernelManager.memory_bytes).
TEST_LIMITS = """
c.Execute.timeout = 10
c.GradingKernelManager.cpu_seconds = 40
c.SafeExecute.notebook_timeout = 30
c.SafeExecute.grading_timeout = 100
c.Sandbox.memory_bytes = 1536 * 2**20
c.Sandbox.processes = 256
"""
# the whole class, on an idle machine: about 140 s with plain nbgrader on 2 cores, the sleepers graded beside it
# (each notebook's own budget is 30 s; 340 s when they were in the same class, each kernel a new process); other
# work on the same cores (CI runs two builds side by side) stretches it, and the limit with it
CLASS_TIME_LIMIT_S = 600 * max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))
# `course grade` with more jobs than cores, as tests/grading/test_parallel.py grades: the slowest cases here run out
# a time limit (holds-the-class its whole grading budget, sleeping; slow-notebook its notebook budget; the endless
# loops their cell limits), and with more jobs the rest of the class is graded beside them
JOBS = (os.cpu_count() or 1) + 2
CANARY = "COURSE_GRADER_CANARY"  # a variable in the grader's environment (the attacks look for "CANARY")
SUCCEEDED = "ATTACK SUCCEEDED"
ATTACKS = [c for c in CASES if c.get("attack")]
# cases that wait out a time limit asleep: plain nbgrader, which grades one submission at a time, grades them
# in a class of their own (with its own controls) at the same time as the rest, not after it
SLEEPERS = [c for c in CASES if c.get("sleeps")]
# how each grader names a submission it could not process
NOT_GRADED = {"nbgrader autograde": "for student '{}'", "course grade": "! {}: not graded"}


def index_of(notebook, grade_id):
    return next(i for i, c in enumerate(notebook.cells) if classroom.grade_id(c) == grade_id)


def edited(notebook, case):
    """The solved notebook with the case's edit applied (see the corpus file for the vocabulary)."""
    cells, edit = notebook.cells, case["edit"]
    where = next((i for i, c in enumerate(cells) if classroom.grade_id(c) == case["cell"]), None)
    if "also_wrong" in case:
        cells[index_of(notebook, case["also_wrong"])].source = WRONG[case["also_wrong"]].code.strip()
    if edit == "replace":
        cells[where].source = case["code"].strip()
    elif edit == "insert":
        for _ in range(case.get("copies", 1)):
            cells.insert(where + 1, new_code_cell(case["code"].strip()))
        if "then_code" in case:
            after = max(index_of(notebook, case["then_after"]), where + 1)
            cells.insert(after + 1, new_code_cell(case["then_code"].strip()))
    elif edit == "delete":
        del cells[where]
    elif edit == "empty":
        cells[where].source = ""
    elif edit == "strip":
        del cells[where].metadata["nbgrader"]
    elif edit == "forge":
        forged = new_code_cell(case["code"], metadata={"nbgrader": {
            "grade": True, "grade_id": case["cell"], "locked": True, "points": 100, "schema_version": 3,
            "solution": False, "task": False}})
        cells.append(forged)
    elif edit == "duplicate":
        twin = copy.deepcopy(cells[where])
        twin.id = f"{twin.id}-copy"  # Jupyter gives a pasted cell its own id
        cells.insert(where + 1, twin)
    elif edit == "to_end":
        cells.append(cells.pop(where))
    elif edit == "flags":
        cells[where].metadata["nbgrader"].update(case["flags"])
    elif edit == "prefill":
        for cell in cells:
            if cell.metadata.get("nbgrader", {}).get("grade") and cell.cell_type == "code":
                cell.outputs = [nbformat.v4.new_output("stream", text="tests passed / 测试通过\n")]
                cell.execution_count = 1
    else:
        raise ValueError(f"unknown edit {edit!r}")
    return notebook


# `course grade` here under the CPU build in CI, plain nbgrader under the CUDA build (test_verdict.py the other way)
@pytest.fixture(scope="module", params=each_grader_under_one_build(under_the_cpu_build="course grade"))
def grader(request):
    return request.param


@dataclass
class Graded:
    roots: list           # the course folders graded: the class's, and with plain nbgrader the sleepers' (SLEEPERS)
    scores: dict          # student → points per test cell (a control's: in the class's folder; every folder's: controls)
    controls: list        # (folder, student, points) for the controls of every folder
    log: str              # what the grader printed, for every folder
    elapsed: float        # seconds until every folder was graded
    before: dict          # the course files (but what nbgrader writes) before grading: path → hash
    after: dict           # the same, after
    connections: list     # what reached the TCP listener on 127.0.0.1
    left_behind: list     # processes of this class still running once the grader has exited

    def root_of(self, student: str) -> Path:
        """The course folder this student was graded in."""
        return next(root for root in self.roots if (root / "submitted" / student).exists())


class Listener:
    """A TCP listener on 127.0.0.1 that records every connection (the network attack's target)."""

    def __init__(self):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.2)
        self.port, self.connections, self.stopped = self.server.getsockname()[1], [], False
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while not self.stopped:
            try:
                connection, address = self.server.accept()
            except TimeoutError:
                continue
            with connection:
                connection.settimeout(2)
                try:
                    self.connections.append((address, connection.recv(4096)))
                except OSError:
                    self.connections.append((address, b""))

    def stop(self):
        self.stopped = True
        self.thread.join()
        self.server.close()


def course_files(roots: list[Path]) -> dict:
    """Every file, folder and link under the course folders (.pyc included), except what the graders
    themselves write there while grading (autograded/, the gradebook, `course grade`'s logs/, each graded
    submission's diagnoses in attempts/)."""
    found = {}
    for root in roots:
        for path in sorted(root.rglob("*")):
            relative = path.relative_to(root)
            if relative.parts[0] in ("autograded", "logs", "attempts") or relative.parts[0].startswith("gradebook.db"):
                continue
            key = f"{root}: {relative}"
            if path.is_symlink():
                found[key] = f"link to {os.readlink(path)}"
            elif path.is_dir():
                found[key] = "folder"
            else:
                found[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def processes_of(roots: list[Path], tag: str) -> list[str]:
    """Processes that carry this class's attack tag, name a course folder, or work inside one."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            works_in = os.readlink(entry / "cwd")
        except OSError:
            continue  # gone, or another user's
        if tag in command or any(str(root) in command or works_in.startswith(str(root)) for root in roots):
            found.append(f"{entry.name}: {command[:200]} (in {works_in})")
    return found


def submit_class(root: Path, cases: list, listener: Listener, tag: str):
    """The controls, first and last by name, and each case's submission, each with the two files `nbgrader submit`
    writes beside the notebook (nbgrader copies them into the kernel's folder, and feedback names itself by them)."""
    for student in CONTROLS:
        classroom.submit(root, ASSIGNMENT, student, classroom.solved_notebook(root, ASSIGNMENT))
    for student in [*CONTROLS, *(case["id"] for case in cases)]:
        folder = classroom.notebook_path(root, "submitted", ASSIGNMENT, student).parent
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "timestamp.txt").write_text("2026-12-07 12:00:00.000000 UTC")
        (folder / "submission_secret.txt").write_text(uuid.uuid4().hex)
    for case in cases:
        student = case["id"]
        if "raw" in case:
            classroom.submit(root, ASSIGNMENT, student, raw=case["raw"].encode())
            continue
        notebook = classroom.solved_notebook(root, ASSIGNMENT)
        if "edit" in case:
            case = {**case, "code": case.get("code", "").replace("LISTENER_PORT", str(listener.port))
                    .replace("ATTACK_TAG", tag)}
            notebook = edited(notebook, case)
        classroom.submit(root, ASSIGNMENT, student, notebook)
        for name, text in case.get("extra_files", {}).items():
            extra = classroom.notebook_path(root, "submitted", ASSIGNMENT, student).parent / name
            extra.parent.mkdir(parents=True, exist_ok=True)
            extra.write_text(text, "utf-8")
        if "filename" in case:
            path = classroom.notebook_path(root, "submitted", ASSIGNMENT, student)
            path.rename(path.with_name(case["filename"]))


def autograde(root: Path) -> str:
    # the course's kernels, forked as `course grade`'s are (nbgrader_config.py): new processes, each importing
    # PyTorch again, cost this class about a minute of CPU, and test_sandbox.py probes them apart
    return classroom.nbgrader(root, "autograde", ASSIGNMENT, check=False)[1]


@pytest.fixture(scope="module")
def graded(grader, course, course_folder, tmp_path_factory):
    listener, tag = Listener(), f"course-attack-{uuid.uuid4().hex[:12]}"
    if grader == "nbgrader autograde":  # one submission at a time: the sleepers in a class of their own beside
        classes = {course_folder(ASSIGNMENT, "untrusted", config=TEST_LIMITS): [c for c in CASES if c not in SLEEPERS],
                   course_folder(ASSIGNMENT, "untrusted-sleepers", config=TEST_LIMITS): SLEEPERS}
    else:
        classes = {course_folder(ASSIGNMENT, "untrusted", config=TEST_LIMITS): CASES}
    for root, cases in classes.items():
        submit_class(root, cases, listener, tag)
    roots = list(classes)
    # secrets of the grader that no kernel may see: a variable and a file in its home folder
    home = tmp_path_factory.mktemp("grader-home")
    (home / "canary-private-key").write_text("secret")
    before = course_files(roots)
    started = time.monotonic()
    try:
        with pytest.MonkeyPatch.context() as grader_environment:  # module scope: no monkeypatch fixture
            grader_environment.setenv("HOME", str(home))
            grader_environment.setenv(CANARY, "the grader's secret")
            if grader == "nbgrader autograde":
                with ThreadPoolExecutor(len(roots)) as graders:
                    log = "".join(graders.map(autograde, roots))
            else:
                done = course("grade", ASSIGNMENT, "--root", roots[0], "--jobs", JOBS, timeout=int(CLASS_TIME_LIMIT_S))
                log = done.stdout + done.stderr
    finally:
        listener.stop()
    elapsed = time.monotonic() - started
    left_behind = processes_of(roots, tag)
    scores = {root: classroom.scores(root, ASSIGNMENT) for root in roots}
    controls = [(root, student, scores[root].get(student)) for root in roots for student in CONTROLS]
    # every student's points from the folder they were graded in; a control's from the class's (the first)
    merged = {student: points for root in reversed(roots) for student, points in scores[root].items()}
    return Graded(roots, merged, controls, log, elapsed, before, course_files(roots), listener.connections,
                  left_behind)


def why_graded(graded: Graded, student: str) -> str:
    """What a failed grade needs to be understood: the errors its test cells showed, its grading log."""
    course = graded.root_of(student)
    log = course / "logs" / ASSIGNMENT / f"{student}.log"  # `course grade` keeps one per student
    return (f"errors shown: {classroom.diagnostics(course, ASSIGNMENT, student)}\n"
            + (f"grading log:\n{log.read_text('utf-8')[-3000:]}" if log.exists() else ""))


@pytest.mark.parametrize("student", CONTROLS)
def test_control_students_keep_full_marks(graded, student):
    for course, control, points in graded.controls:
        if control == student:
            assert points == classroom.max_points(ASSIGNMENT), f"{course}: {classroom.diagnostics(course, ASSIGNMENT, student)}"


@pytest.mark.parametrize("case", [c for c in CASES if c.get("graded", True)], ids=lambda c: c["id"])
def test_each_case_earns_exactly_what_it_should(graded, case):
    scores = graded.scores
    assert case["id"] in scores, f"{case['id']} was not graded:\n{graded.log[-3000:]}"
    full = classroom.max_points(ASSIGNMENT)
    expected = {cell: 0 if cell in case["zero"] else points for cell, points in full.items()}
    assert scores[case["id"]] == expected, why_graded(graded, case["id"])


@pytest.mark.parametrize("case", [c for c in CASES if "shows" in c], ids=lambda c: c["id"])
def test_each_case_shows_its_bilingual_note(graded, case):
    shown = classroom.diagnostics(graded.root_of(case["id"]), ASSIGNMENT, case["id"])
    for cell in case["zero"]:
        assert shows(shown.get(cell, ""), case["shows"]), f"{case['id']} · {cell}: {shown.get(cell)}"


@pytest.mark.parametrize("case", [c for c in CASES if not c.get("graded", True)], ids=lambda c: c["id"])
def test_broken_files_are_reported_and_earn_nothing(graded, grader, case):
    assert case["id"] not in graded.scores
    assert NOT_GRADED[grader].format(case["id"]) in graded.log


@pytest.mark.parametrize("case", [c for c in CASES if "reported" in c], ids=lambda c: c["id"])
def test_a_submission_past_its_grading_budget_is_not_graded_and_says_so(graded, case):
    """One student cannot hold the class: the grading process stops a submission whose kernel and verdict
    together pass its budget, and tells the instructor so in both languages. It has no grade and no graded
    notebook (so no feedback page with a zero); every other student of the same class is graded right
    (test_control_students_keep_full_marks, test_each_case_earns_exactly_what_it_should) in bounded time."""
    assert case["id"] not in graded.scores
    assert shows(graded.log, case["reported"]), graded.log[-3000:]
    assert not classroom.notebook_path(graded.root_of(case["id"]), "autograded", ASSIGNMENT, case["id"]).exists()


@pytest.mark.parametrize("case", [c for c in CASES if "noted" in c], ids=lambda c: c["id"])
def test_what_the_grader_did_to_a_graded_submission_is_said_in_both_languages(graded, case):
    """Extra files in a submission folder are left out of grading, with a note for the instructor naming them;
    the kernel's folder then held only the assignment's files (its own check, test_no_attack_reaches...)."""
    assert shows(graded.log, case["noted"]), graded.log[-3000:]
    autograded = classroom.notebook_path(graded.root_of(case["id"]), "autograded", ASSIGNMENT, case["id"]).parent
    assert {path.name for path in autograded.iterdir()} - NBGRADER_FILES == {f"{ASSIGNMENT}.ipynb"}


def test_nothing_a_submission_writes_reaches_the_terminal_raw(graded, grader):
    """The terminal-escapes cases write the instructor's clipboard (OSC 52), clear the screen, reorder text
    and forge lines of both graders, in a file name and in what the kernel prints. Each grader shows them
    visibly (`\\x1b`), obeys none, and with `course grade` every line is either its own (it starts with
    OWN) or quoted after a student's name, so a forged line cannot pass for one of its own."""
    log = graded.log
    assert not CONTROL_BUT_LINES.search(log), sorted({repr(found) for found in CONTROL_BUT_LINES.findall(log)})
    assert "x\\x1b]52;c;cm0gLXJmIH4K\\x07" in log  # the file name, shown
    if grader == "course grade":
        students = "|".join(re.escape(c["id"]) for c in CASES + [{"id": s} for s in CONTROLS])
        foreign = [line for line in log.splitlines()
                   if line and not line.startswith(OWN) and not re.match(f"    ({students}): ", line)]
        assert foreign == [], foreign[:10]
        # What the kernel wrote before it ended itself reaches the log only where the sandbox logs it, which it
        # does not when Jupyter has killed the dead kernel first (course/kernels/sandbox.py: no news); either
        # way no line of it is raw (above) or unquoted (here).


CHECKSUM_CHANGED = "[AutogradeApp | WARNING] Attribute 'checksum' for cell test_to_device has changed!"


def test_a_tampered_test_cell_is_reported_on_the_terminal_and_in_the_students_log(graded, grader):
    """nbgrader's warning about a changed test cell reaches the instructor under both graders; `course
    grade` also keeps each student's whole log, and names the student on the terminal."""
    course, log = graded.root_of("emptied-test-cell"), graded.log
    if grader == "nbgrader autograde":
        assert CHECKSUM_CHANGED in log
        return
    assert f"    emptied-test-cell: {CHECKSUM_CHANGED}" in log
    logs = course / "logs" / ASSIGNMENT
    assert shows(log, "grading_logs") and str(logs) in log
    assert CHECKSUM_CHANGED in (logs / "emptied-test-cell.log").read_text("utf-8")
    control = (logs / f"{CONTROLS[0]}.log").read_text("utf-8")
    assert "Verdict of 5 test cells" in control and "checksum" not in control
    # a kernel that crashed: the sandbox's lines reach the student's log too (traitlets' own logger)
    assert "DeadKernelError in cell" in (logs / "segfault.log").read_text("utf-8")


def test_the_memory_bomb_asks_for_more_than_the_configured_limit():
    """The memory-bomb case holds at the limit instructors really get, not at a lowered one."""
    from course import settings
    from course.kernels.manager import GradingKernelManager

    configured = GradingKernelManager(config=settings.load(classroom.ROOT)).memory_bytes
    bomb = next(c for c in CASES if c["id"] == "memory-bomb")
    asked = eval(re.search(r"bytearray\((.+?)\)", bomb["code"]).group(1))
    assert configured < asked < 24 * 2**30  # more than a kernel may take, less than this machine has


def test_huge_output_is_truncated(graded):
    autograded = classroom.notebook_path(graded.root_of("huge-print"), "autograded", ASSIGNMENT, "huge-print")
    assert autograded.stat().st_size < 2_000_000


def test_the_class_finishes_in_bounded_time_with_a_consistent_gradebook(graded):
    assert graded.elapsed < CLASS_TIME_LIMIT_S
    graded_cases = {c["id"] for c in CASES if c.get("graded", True)}
    assert set(graded.scores) == graded_cases | set(CONTROLS)
    assert all(points is not None for _, _, points in graded.controls)
    from nbgrader.api import Gradebook

    for course in graded.roots:
        scores = classroom.scores(course, ASSIGNMENT)
        with Gradebook(settings.gradebook_url(settings.load(course))) as gradebook:
            for student in scores:
                submission = gradebook.find_submission(ASSIGNMENT, student)
                assert submission.score == pytest.approx(sum(scores[student].values()))


@pytest.mark.parametrize("case", ATTACKS, ids=lambda c: c["id"])
def test_no_attack_reaches_anything_outside_its_kernel(graded, case):
    """What the attack printed (its feedback): it never reached its target."""
    autograded = classroom.notebook_path(graded.root_of(case["id"]), "autograded", ASSIGNMENT, case["id"])
    shown = autograded.read_text("utf-8")
    assert SUCCEEDED not in shown, [line for line in shown.splitlines() if SUCCEEDED in line]


def test_no_graded_notebook_was_written_by_an_attack(graded):
    """A process left behind would write into the notebooks of students graded after it."""
    for notebook in (path for root in graded.roots for path in (root / "autograded").rglob("*.ipynb")):
        assert SUCCEEDED not in notebook.read_text("utf-8", errors="replace"), notebook


def test_course_files_and_other_submissions_are_unchanged(graded):
    changed = {path for path in graded.before.keys() | graded.after.keys()
               if graded.before.get(path) != graded.after.get(path)}
    assert not changed, sorted(changed)


def test_nothing_reaches_the_network(graded):
    assert graded.connections == []


def test_no_process_is_left_behind(graded):
    assert graded.left_behind == []


def test_nothing_is_left_for_the_grader_to_trip_on(graded):
    """No link (nbgrader writes the graded notebook through it), pipe, socket or set-user-ID file in
    autograded/, where the grader and feedback read and write after the kernel."""
    for path in (path for root in graded.roots for path in (root / "autograded").rglob("*")):
        mode = path.lstat().st_mode
        assert stat.S_ISDIR(mode) or stat.S_ISREG(mode), path
        assert not mode & (stat.S_ISUID | stat.S_ISGID), path


def test_a_graded_folder_holds_what_was_submitted_and_the_graded_notebook(graded):
    """What a kernel wrote in its folder stays in its sandbox: beside the graded notebook, each student's folder in
    autograded/ holds the submitted files, unchanged (a kernel rewrote its submission_secret.txt, which
    release_feedback then failed to read for the rest of the class; another filled the grader's disk from there)."""
    for root in graded.roots:
        for folder in (root / "autograded").glob(f"*/{ASSIGNMENT}"):
            submitted = root / "submitted" / folder.parent.name / ASSIGNMENT
            given = {path.relative_to(submitted): path.read_bytes() for path in submitted.rglob("*") if path.is_file()}
            kept = {path.relative_to(folder): path.read_bytes() for path in folder.rglob("*")
                    if path.is_file() and path.suffix != ".ipynb"}
            assert [name for name, data in kept.items() if given.get(name) != data] == [], folder
            assert not [path for path in folder.rglob("*") if path.is_dir()], folder
