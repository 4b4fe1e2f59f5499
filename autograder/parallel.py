"""`course grade`: nbgrader's own autograde, several submissions at a time, into one gradebook.

Each worker process runs `NbGraderAPI.autograde` (the same Autograde converter, preprocessors,
checksums and gradebook as `nbgrader autograde`) for one student at a time. Workers are forked from a
parent that has already imported nbgrader and the course's configuration, so no worker pays that
start-up again; every submission still gets its own fresh kernel, forked from the worker's fork server
with torch already imported (autograder/forkserver.py). SQLite serialises the writes: the
gradebook URL carries a busy timeout, so a worker waits for the lock instead of failing with
"database is locked".
"""
import multiprocessing
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import forkserver

BUSY_TIMEOUT_S = 300
PROVISIONER_VARIABLE = "JUPYTER_DEFAULT_PROVISIONER_NAME"  # read by jupyter_client
_api = None  # one NbGraderAPI per worker process


@dataclass
class Outcome:
    graded: list = field(default_factory=list)
    failed: dict = field(default_factory=dict)   # student → first line of nbgrader's error
    seconds: float = 0.0


def submitted_students(root: Path, assignment: str) -> list[str]:
    folder = root / "submitted"
    return sorted(p.name for p in folder.iterdir() if (p / assignment).is_dir()) if folder.is_dir() else []


def grade(root: Path, assignment: str, jobs: int, students=None, progress=print,
          fork_server=True) -> Outcome:
    root = Path(root).resolve()
    students = students or submitted_students(root, assignment)
    _configure(root)
    outcome, started = Outcome(), time.monotonic()
    context = multiprocessing.get_context("fork")
    with context.Pool(processes=max(1, min(jobs, len(students) or 1)),
                      initializer=_start_worker, initargs=(fork_server,)) as pool:
        for done, (student, success, error, seconds) in enumerate(
                pool.imap_unordered(_grade_one, [(assignment, s) for s in students]), start=1):
            (outcome.graded.append(student) if success else outcome.failed.__setitem__(student, error))
            progress(_bar(done, len(students)) + f" {student} ({seconds:.1f} s){'' if success else ' ✗'}")
    outcome.seconds = time.monotonic() - started
    return outcome


def _configure(root: Path):
    """Load nbgrader_config.py once, in the parent, so every forked worker inherits it."""
    global _api
    from nbgrader.apps import NbGraderAPI
    from nbgrader.api import Gradebook
    from traitlets.config.loader import PyFileConfigLoader

    os.chdir(root)
    config = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    config.CourseDirectory.root = str(root)
    configured = config.CourseDirectory.get("db_url", "")
    if not configured or configured.startswith("sqlite"):
        # the course's SQLite gradebook, with a busy timeout; another database (PostgreSQL for a
        # cluster, see the README) handles concurrent writers itself
        config.CourseDirectory.db_url = f"sqlite:///{root / 'gradebook.db'}?timeout={BUSY_TIMEOUT_S}"
    with Gradebook(config.CourseDirectory.db_url):
        pass  # create or upgrade the gradebook before any worker writes to it
    _api = NbGraderAPI(config=config)


def _start_worker(fork_server):
    if fork_server:
        # this worker forks its kernels from its own warm fork server (autograder/forkserver.py);
        # a provisioner the instructor chose in the environment wins
        os.environ.setdefault(PROVISIONER_VARIABLE, forkserver.NAME)


def _grade_one(job):
    assignment, student = job
    started = time.monotonic()
    result = _api.autograde(assignment, student, force=True, create=True)
    details = (result.get("log") or "") + "\n" + (result.get("error") or "")
    return student, result["success"], _cause(details), time.monotonic() - started


def _cause(error: str) -> str:
    """The line of nbgrader's traceback that names what went wrong (e.g. NotJSONError: ...)."""
    lines = [line.strip() for line in error.splitlines() if line.strip()]
    named = [line for line in lines if re.match(r"[\w.]+(Error|Exception): ", line)
             and "Please see the" not in line]
    return named[-1] if named else (lines[-1] if lines else "")


def _bar(done: int, total: int, width: int = 24) -> str:
    filled = round(width * done / total) if total else width
    return f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total}"
