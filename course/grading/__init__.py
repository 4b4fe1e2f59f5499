"""The work of `course grade` (its command: course/commands/grade.py): nbgrader's own autograde,
several submissions at a time, into one gradebook.

Each worker process runs `NbGraderAPI.autograde` (the same Autograde converter, preprocessors,
checksums and gradebook as `nbgrader autograde`) for one student at a time. Workers are forked from a
parent that has already imported nbgrader and the course's configuration, so no worker pays that
start-up again; every submission still gets its own fresh kernel in its own sandbox, forked from the
worker's fork server with torch already imported (course/kernels/forkserver.py, course/kernels/sandbox.py).
SQLite serialises the writes: the gradebook URL carries a busy timeout, so a worker waits for the lock
instead of failing with "database is locked".

    pool.py    the workers: a worker that dies costs only the submission it was grading
    logs.py    each student's grading log, kept as log records; its warnings for the terminal
    shards.py  `--shard I/N` and `course merge`: grading beyond one machine
"""
import copy
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from autograder.messages import Bilingual, text

from ..kernels import forkserver
from ..terminal import quoted, visible
from .logs import UNCHANGED, GradingLog, error_line
from .pool import run_jobs
from .shards import in_shard

LOGS = "logs"  # the course folder's logs/ASSIGNMENT/STUDENT.log: each student's whole grading log
_api = None  # one NbGraderAPI per worker process


@dataclass
class Outcome:
    graded: list = field(default_factory=list)
    unchanged: list = field(default_factory=list)  # graded before, not submitted again: not regraded
    failed: dict = field(default_factory=dict)   # student → nbgrader's error line, or a Bilingual
    seconds: float = 0.0
    logs: Path | None = None  # the folder of the students' grading logs


class Graded(NamedTuple):
    """What a worker sends back for one submission (read from its GradingLog in the worker: a log
    record itself may hold what cannot cross a pipe)."""
    success: bool
    error: str | Bilingual  # the line that names what went wrong ("" when it succeeded)
    seconds: float
    log: str  # the whole grading log, formatted
    warnings: list  # its warnings and errors, shortened for the terminal
    unchanged: bool  # nbgrader left it as it was: graded since it came in


def submitted_students(root: Path, assignment: str) -> list[str]:
    folder = root / "submitted"
    return sorted(p.name for p in folder.iterdir() if (p / assignment).is_dir()) if folder.is_dir() else []


def grade(root: Path, assignment: str, jobs: int, config, students=None, progress=print,
          fork_server=True, shard: tuple[int, int] | None = None, force=False, quote=print) -> Outcome:
    """Autograde `assignment` for `students` (None: everyone in submitted/) with `config`, the course's
    settings (course/settings.py), in `jobs` worker processes. `progress` gets this function's own lines,
    `quote` the lines quoted from submissions' grading logs (course.terminal.quoted), each line once.

    As plain `nbgrader autograde`: a submission already graded and not submitted again since is left
    as it is (its hand grading too: nbgrader flags every hand-graded answer of a submission it regrades
    for review again); `force` regrades every one, as `nbgrader autograde --force`."""
    root = Path(root).resolve()
    students = submitted_students(root, assignment) if students is None else students
    if shard:
        total, students = len(students), in_shard(students, shard)
        shown = text("shard_selected", index=shard[0], count=shard[1], selected=len(students), total=total)
        progress(shown.en)
        progress(shown.zh)
    config = copy.deepcopy(config)
    config.GradingKernelManager.fork_server = fork_server
    _configure(config)
    outcome, started = Outcome(logs=root / LOGS / assignment), time.monotonic()
    outcome.logs.mkdir(parents=True, exist_ok=True)
    tasks = [(assignment, s, force) for s in students]
    budget = submission_budget(root, assignment, config)
    for done, ((_, student, _), (finished, result)) in enumerate(
            run_jobs(_grade_one, tasks, max(1, min(jobs, len(students) or 1)), initializer=_start_worker,
                     deadline_s=budget, overdue=text("worker_over_budget", seconds=budget)),
            start=1):
        graded = result if finished else Graded(False, text("worker_died", cause=result), 0.0, "", [], False)
        if not graded.success:
            outcome.failed[student], mark = graded.error, " ✗"
        elif graded.unchanged:
            outcome.unchanged.append(student)
            kept = text("grade_unchanged_mark")
            mark = f" {kept.en} / {kept.zh}"
        else:
            outcome.graded.append(student)
            mark = ""
        progress(_bar(done, len(students)) + f" {visible(student)} ({graded.seconds:.1f} s){mark}")
        (outcome.logs / f"{student}.log").write_text(graded.log, "utf-8", errors="backslashreplace")
        for warning in graded.warnings:
            quote(quoted(student, warning))
    outcome.seconds = time.monotonic() - started
    return outcome


def submission_budget(root: Path, assignment: str, config) -> int:
    """Seconds a worker may spend on one submission before `course grade` kills it: each notebook's grading
    budget (SafeExecute.grading_timeout, kernel and verdict together, which the worker itself keeps), and a
    margin for nbgrader's own work (a first kernel's imports, a wait for the gradebook's lock)."""
    from ..plugins.autograde import SafeExecute
    from ..settings import BUSY_TIMEOUT_S

    notebooks = len(list((root / "source" / assignment).glob("*.ipynb"))) or 1
    return SafeExecute(config=config).grading_timeout * notebooks + BUSY_TIMEOUT_S + 60


def _configure(config):
    """Create the gradebook and the NbGraderAPI once, in the parent, so every forked worker inherits them.
    Every kernel of a worker is forked from its fork server (GradingKernelManager.fork_server)."""
    global _api
    from nbgrader.apps import NbGraderAPI
    from nbgrader.api import Gradebook

    # create the gradebook before any worker writes to it; with the course's own id, as nbgrader opens
    # it (so that concurrent shards never race to add a course row of another name)
    with Gradebook(config.CourseDirectory.db_url, config.CourseDirectory.get("course_id", "default_course")):
        pass
    _api = NbGraderAPI(config=config)
    # nbgrader's gradebook links a new submission's rows before it adds them to the session, and
    # SQLAlchemy 2 warns about each (3-6 lines per class that hide real warnings): harmless, as nbgrader
    # adds them a line later. Only this warning, and only from nbgrader's gradebook, is silenced.
    warnings.filterwarnings("ignore", message=r"Object of type <Submitted\w+> not in session", module=r"nbgrader\.api")


def _start_worker():
    # this worker forks its kernels from its own warm fork server (course/kernels/forkserver.py), each
    # into its own sandbox; without it, every kernel is a new process in a new sandbox
    if _api.config.GradingKernelManager.fork_server:
        forkserver.prestart_for_autograde(_api.config)


def _grade_one(job) -> Graded:
    """Autograde one submission."""
    assignment, student, force = job
    started = time.monotonic()
    # like plain `nbgrader autograde`: a student missing from the gradebook is added unless the course
    # configuration says not to (nbgrader_config.py does, once a roster is registered)
    create = _api.config.Autograde.get("create_student", True)
    with GradingLog() as log:
        try:
            result = _api.autograde(assignment, student, force=force, create=create)
        except Exception:  # nbgrader's own errors come back in its result; anything else too
            result = {"success": False, "error": traceback.format_exc()}
    details = log.text() + visible(result.get("error") or "", keep_lines=True)
    return Graded(result["success"], error_line(details), time.monotonic() - started, details,
                  log.warnings(), log.noted(UNCHANGED))


def _bar(done: int, total: int, width: int = 24) -> str:
    filled = round(width * done / total) if total else width
    return f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total}"
