"""Each student's grading log in `course grade`: every record one autograde logs, kept as a LogRecord,
so that its warnings and nbgrader's notes are read from the records (their level, the code that logged
them, their message), never re-parsed from the formatted text, which quotes what a submission printed."""
import logging
import re
from pathlib import Path

import nbgrader

from autograder.messages import Bilingual, text

from ..terminal import FewOfAKind, VisibleLogFormatter, visible

SHOWN_LINES = 12  # of one warning, on the terminal (the log file keeps all of it)
REGRADED = "Removing existing assignment: "  # nbgrader's note when --force regrades
UNCHANGED = "Skipping existing assignment: "  # nbgrader's note for a submission graded since it came in
NBGRADER = Path(nbgrader.__file__).parent  # the code whose records are nbgrader's own notes


class GradingLog(logging.Handler):
    """Everything one autograde logs, in order, as `nbgrader autograde` prints it: its application's
    log, and what classes without a parent application log through traitlets' own logger (the kernel
    manager and its provisioner: the sandbox's `kernel>` lines, a dead kernel). Outside an nbgrader
    command that logger has no handler, and those lines would be lost. Python's warnings too (nbformat's
    about a crafted notebook, say): they belong to the student's log, not raw on the terminal. Formatted
    as nbgrader's console is (nbgrader_config.py): control characters visible, a record's later lines
    indented. Use it as `with GradingLog() as log:` around one autograde."""
    FORMAT = "[AutogradeApp | %(levelname)s] %(message)s"

    def __init__(self):
        super().__init__()
        self.records: list[logging.LogRecord] = []
        self.setFormatter(VisibleLogFormatter(self.FORMAT, color=False))
        self.addFilter(FewOfAKind(counting=True))  # one student's notebook: a few records of each kind

    def emit(self, record: logging.LogRecord):
        self.records.append(record)

    def __enter__(self) -> "GradingLog":
        from traitlets.log import get_logger

        self.loggers = [logging.getLogger("AutogradeApp"), get_logger(), logging.getLogger("py.warnings")]
        for logger in self.loggers:
            logger.addHandler(self)
        logging.captureWarnings(True)
        return self

    def __exit__(self, *exc):
        logging.captureWarnings(False)
        for logger in self.loggers:
            logger.removeHandler(self)

    def text(self) -> str:
        return "".join(f"{self.format(record)}\n" for record in self.records)

    def noted(self, note: str) -> bool:
        """Whether nbgrader's own code logged a message that starts with `note` (UNCHANGED, say): not a
        line that a kernel printed, which the sandbox logs inside a record of its own."""
        return any(is_note(record, note) for record in self.records)

    def warnings(self) -> list[str]:
        """The warnings and errors, each formatted, with at most SHOWN_LINES lines. That `--force`
        regrades is what the instructor asked for: nbgrader's note says so, no news."""
        return [shortened(self.format(record)) for record in self.records
                if record.levelno >= logging.WARNING
                and not is_note(record, REGRADED)]


def is_note(record: logging.LogRecord, note: str) -> bool:
    return Path(record.pathname).is_relative_to(NBGRADER) and record.getMessage().startswith(note)


def shortened(record: str) -> str:
    lines = record.rstrip().splitlines()
    shown = lines[:SHOWN_LINES] + ([f"      … ({len(lines) - SHOWN_LINES} more)"] if len(lines) > SHOWN_LINES else [])
    return visible("\n".join(shown), keep_lines=True)  # already so by the formatter: defence in depth


def error_line(error: str) -> str | Bilingual:
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
