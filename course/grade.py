"""The work of `course grade` (its command: course/commands/grade.py): nbgrader's own autograde,
several submissions at a time, into one gradebook.

Each worker process runs `NbGraderAPI.autograde` (the same Autograde converter, preprocessors,
checksums and gradebook as `nbgrader autograde`) for one student at a time. Workers are forked from a
parent that has already imported nbgrader and the course's configuration, so no worker pays that
start-up again; every submission still gets its own fresh kernel in its own sandbox, forked from the
worker's fork server with torch already imported (course/kernels/forkserver.py, course/kernels/sandbox.py).
SQLite serialises the writes: the gradebook URL carries a busy timeout, so a worker waits for the lock
instead of failing with "database is locked".

A worker that dies (killed, out of memory, a crash in nbgrader) costs only the submission it was
grading: `run_jobs` sees its process end without an answer, reports that student as not graded, starts
a new worker and finishes the class. (multiprocessing.Pool would lose the task and wait for ever.)

Beyond one machine (README, "Beyond one machine"): `--shard I/N` grades only the students whose id
hashes to shard I of N, so N cluster jobs, each on its own copy of the course folder and all writing into
one PostgreSQL gradebook, grade every student exactly once; `merge` brings their autograded/ folders
back into one course folder for `nbgrader generate_feedback` (with each student's attempts/ record).
"""
import copy
import ctypes
import hashlib
import io
import json
import logging
import multiprocessing
import multiprocessing.connection
import re
import shutil
import signal
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from autograder.messages import Bilingual, text

from .kernels import forkserver
from .plugins.autograde import attempts_file
from .terminal import VisibleLogFormatter, quoted, visible

LOGS = "logs"  # the course folder's logs/ASSIGNMENT/STUDENT.log: each student's whole grading log
SHOWN_LINES = 12  # of one warning, on the terminal (the log file keeps all of it)
REGRADED = "] Removing existing assignment: "  # nbgrader's note when --force regrades
UNCHANGED = "] Skipping existing assignment: "  # nbgrader's note for a submission graded since it came in
_PR_SET_PDEATHSIG = 1
_api = None  # one NbGraderAPI per worker process


@dataclass
class Outcome:
    graded: list = field(default_factory=list)
    unchanged: list = field(default_factory=list)  # graded before, not submitted again: not regraded
    failed: dict = field(default_factory=dict)   # student → nbgrader's error line, or a Bilingual
    seconds: float = 0.0
    logs: Path | None = None  # the folder of the students' grading logs


def submitted_students(root: Path, assignment: str) -> list[str]:
    folder = root / "submitted"
    return sorted(p.name for p in folder.iterdir() if (p / assignment).is_dir()) if folder.is_dir() else []


def shard_of(student: str, shards: int) -> int:
    """The shard (1 to `shards`) that grades `student`: from a hash of the id alone, so it never changes
    when other students are added or removed, and is the same on every machine (unlike `hash()`)."""
    digest = hashlib.sha256(student.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % shards + 1


def in_shard(students, shard: tuple[int, int]) -> list[str]:
    index, count = shard
    return [student for student in students if shard_of(student, count) == index]


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
        if finished:
            success, error, seconds, log = result
        else:
            success, error, seconds, log = False, text("worker_died", cause=result), 0.0, ""
        if not success:
            outcome.failed[student], mark = error, " ✗"
        elif UNCHANGED in log:
            outcome.unchanged.append(student)
            kept = text("grade_unchanged_mark")
            mark = f" {kept.en} / {kept.zh}"
        else:
            outcome.graded.append(student)
            mark = ""
        progress(_bar(done, len(students)) + f" {visible(student)} ({seconds:.1f} s){mark}")
        (outcome.logs / f"{student}.log").write_text(log, "utf-8")
        for warning in warnings_in(log):
            quote(quoted(student, warning))
    outcome.seconds = time.monotonic() - started
    return outcome


def submission_budget(root: Path, assignment: str, config) -> int:
    """Seconds a worker may spend on one submission before `course grade` kills it: each notebook's grading
    budget (SafeExecute.grading_timeout, kernel and verdict together, which the worker itself keeps), and a
    margin for nbgrader's own work (a first kernel's imports, a wait for the gradebook's lock)."""
    from .plugins.autograde import SafeExecute
    from .settings import BUSY_TIMEOUT_S

    notebooks = len(list((root / "source" / assignment).glob("*.ipynb"))) or 1
    return SafeExecute(config=config).grading_timeout * notebooks + BUSY_TIMEOUT_S + 60


def run_jobs(function, tasks, workers, initializer=None, initargs=(), deadline_s=None, overdue=None):
    """Yield (task, (True, function(task))) for every task, as they finish, from `workers` forked
    worker processes; a task whose worker died yields (task, (False, cause)), with the cause as a
    Bilingual, and a new worker takes its place. A task still running `deadline_s` seconds after it
    started yields (task, (False, overdue)): this process, which no submission's code can signal,
    kills its worker (the worker's sandboxes die with it) and the class goes on."""
    context = multiprocessing.get_context("fork")
    pending, idle, busy = list(reversed(tasks)), [], {}  # busy: connection → (process, task)
    started = {}  # connection → when its task was sent
    try:
        while pending or busy:
            while pending and len(busy) < workers:
                process, connection = idle.pop() if idle else _start(context, function, initializer, initargs)
                try:
                    connection.send(pending[-1])
                except OSError:  # it died while idle: another one takes the task
                    process.join(5)
                    connection.close()
                    continue
                busy[connection] = (process, pending.pop())
                started[connection] = time.monotonic()
            for connection in [c for c in busy if deadline_s is not None
                               and time.monotonic() - started[c] >= deadline_s]:
                process, task = busy.pop(connection)
                process.kill()
                process.join(30)
                connection.close()
                yield task, (False, overdue)
            if not busy:
                continue
            sentinels = {process.sentinel: connection for connection, (process, _) in busy.items()}
            first_due = None if deadline_s is None else max(0.0, min(started[c] for c in busy) + deadline_s - time.monotonic())
            for ready in multiprocessing.connection.wait([*busy, *sentinels], first_due):
                connection = sentinels.get(ready, ready)
                if connection not in busy:
                    continue  # its answer and its end were both ready: handled already
                process, task = busy.pop(connection)
                try:
                    result = connection.recv() if connection.poll() else None
                except (EOFError, OSError):
                    result = None
                if result is not None:
                    idle.append((process, connection))
                    yield task, (True, result)
                else:
                    process.join(5)
                    connection.close()
                    yield task, (False, _cause(process.exitcode))
    finally:
        stopping = [process for process, _ in idle]
        for process, connection in idle:
            try:
                connection.send(None)
            except OSError:
                pass
        for process, _ in busy.values():  # only when the caller stopped early (Ctrl-C, an error)
            process.kill()
            stopping.append(process)
        for process in stopping:
            process.join(30)
        for connection in [*(c for _, c in idle), *busy]:
            connection.close()


def _start(context, function, initializer, initargs):
    ours, theirs = context.Pipe()
    process = context.Process(target=_work, args=(theirs, function, initializer, initargs), daemon=True)
    process.start()
    theirs.close()
    return process, ours


def _work(connection, function, initializer, initargs):
    # a worker never outlives `course grade` (its sandboxes then die with it: --die-with-parent)
    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if initializer:
        initializer(*initargs)
    while (task := connection.recv()) is not None:
        try:
            result = function(task)
        except Exception:  # nbgrader's own errors come back in its result; anything else too
            result = (False, traceback.format_exc().strip().splitlines()[-1], 0.0, traceback.format_exc())
        connection.send(result)


def _cause(exitcode) -> Bilingual:
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = str(-exitcode)
        return Bilingual(f"killed by {name}", f"被信号 {name} 终止")
    return Bilingual(f"exit status {exitcode}", f"退出状态 {exitcode}")


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


def _grade_one(job):
    """Autograde one submission; (success, the error line, seconds, the whole log)."""
    assignment, student, force = job
    started = time.monotonic()
    # like plain `nbgrader autograde`: a student missing from the gradebook is added unless the course
    # configuration says not to (nbgrader_config.py does, once a roster is registered)
    create = _api.config.Autograde.get("create_student", True)
    with _whole_log() as log:
        result = _api.autograde(assignment, student, force=force, create=create)
    details = log.getvalue() + visible(result.get("error") or "", keep_lines=True)
    return result["success"], _error_line(details), time.monotonic() - started, details


class _whole_log:
    """Everything one autograde logs, in order, as `nbgrader autograde` prints it: its application's
    log, and what classes without a parent application log through traitlets' own logger (the kernel
    manager and its provisioner: the sandbox's `kernel>` lines, a dead kernel). Outside an nbgrader
    command that logger has no handler, and those lines would be lost. Python's warnings too (nbformat's
    about a crafted notebook, say): they belong to the student's log, not raw on the terminal. Formatted
    as nbgrader's console is (nbgrader_config.py): control characters visible, a record's later lines
    indented."""
    FORMAT = "[AutogradeApp | %(levelname)s] %(message)s"

    def __enter__(self) -> io.StringIO:
        from traitlets.log import get_logger

        self.buffer, self.handler = io.StringIO(), logging.StreamHandler()
        self.handler.setStream(self.buffer)
        self.handler.setFormatter(VisibleLogFormatter(self.FORMAT, color=False))
        self.loggers = [logging.getLogger("AutogradeApp"), get_logger(), logging.getLogger("py.warnings")]
        for logger in self.loggers:
            logger.addHandler(self.handler)
        logging.captureWarnings(True)
        return self.buffer

    def __exit__(self, *exc):
        logging.captureWarnings(False)
        for logger in self.loggers:
            logger.removeHandler(self.handler)


def warnings_in(log: str) -> list[str]:
    """The warnings and errors of a grading log (as _whole_log writes it: a record's later lines are
    indented, so only nbgrader starts a record), each with at most SHOWN_LINES lines."""
    records = re.split(r"^(?=\[[\w.]+ \| [A-Z]+\] )", log, flags=re.M)
    found = []
    for record in records:
        # that `--force` regrades is what the instructor asked for: nbgrader's note says so, no news
        if re.match(r"\[[\w.]+ \| (WARNING|ERROR|CRITICAL)\] ", record) and REGRADED not in record:
            lines = record.rstrip().splitlines()
            shown = lines[:SHOWN_LINES] + ([f"      … ({len(lines) - SHOWN_LINES} more)"] if len(lines) > SHOWN_LINES else [])
            found.append(visible("\n".join(shown), keep_lines=True))  # already so in _whole_log's: defence in depth
    return found


def _error_line(error: str) -> str | Bilingual:
    """The line of nbgrader's traceback that names what went wrong (e.g. NotJSONError: ...), with the Chinese
    line after it when the error is one of the course's bilingual messages (VerdictUnavailable). One line
    per language, control characters visible: it may quote the submission (a crafted notebook's text)."""
    if "RecursionError" in error and "JSON" in error:
        return text("crafted_notebook")
    lines = [line.strip() for line in error.splitlines() if line.strip()]
    named = [i for i, line in enumerate(lines) if re.match(r"[\w.]+(Error|Exception|Unavailable|OverBudget): ", line)
             and "Please see the" not in line]
    if not named:
        return _shown(lines[-1] if lines else "")
    at = named[-1]
    chinese = at + 1 < len(lines) and re.search(r"[\u4e00-\u9fff]", lines[at + 1]) and not re.search(r"[\u4e00-\u9fff]", lines[at])
    return Bilingual(_shown(lines[at]), _shown(lines[at + 1])) if chinese else _shown(lines[at])


def _shown(line: str, limit: int = 500) -> str:
    return visible(line if len(line) <= limit else line[:limit] + " …")


def _bar(done: int, total: int, width: int = 24) -> str:
    filled = round(width * done / total) if total else width
    return f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total}"


def merge(root: Path, assignment: str, shard_roots) -> dict[str, Path]:
    """Copy every student's autograded/STUDENT/ASSIGNMENT folder from the shards' course folders into
    `root`'s, replacing what `root` had for that student. Returns student → the shard folder it came
    from; a student graded in two shard folders is an error (ValueError, bilingual): which grading is in
    the gradebook is then unknown, so nothing is copied."""
    root = Path(root).resolve()
    found = {}
    for shard_root in map(Path, shard_roots):
        folder = shard_root.resolve() / "autograded"
        for graded in sorted(folder.glob(f"*/{assignment}")) if folder.is_dir() else []:
            student = graded.parent.name
            if student in found:
                raise ValueError(text("merge_twice", student=student, first=found[student], second=shard_root))
            found[student] = shard_root
    for student, shard_root in found.items():
        target = root / "autograded" / student / assignment
        if target.resolve() == (Path(shard_root).resolve() / "autograded" / student / assignment):
            continue  # the course folder is one of the shards
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(Path(shard_root) / "autograded" / student / assignment, target)
        merge_attempts(Path(attempts_file(shard_root, assignment, student)), Path(attempts_file(root, assignment, student)))
    return found


def merge_attempts(shard: Path, course: Path):
    """The shard's record of a student's graded submissions joins the course folder's (attempts/, for
    `course insights`' first attempts): the shard's entry wins for a submission graded in both."""
    if not shard.exists():
        return
    recorded = json.loads(course.read_text("utf-8")) if course.exists() else {}
    recorded.update(json.loads(shard.read_text("utf-8")))
    course.parent.mkdir(parents=True, exist_ok=True)
    course.write_text(json.dumps(recorded, indent=1, sort_keys=True), "utf-8")
