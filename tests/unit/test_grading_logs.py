"""Each student's grading log in `course grade` (course/grading/logs.py): its warnings come from the log
records' levels, nbgrader's notes from nbgrader's own records, never from text a kernel printed."""
import logging

import pytest
from traitlets.log import get_logger

from course.grading.logs import NBGRADER, SHOWN_LINES, UNCHANGED, GradingLog

CONVERTER = str(NBGRADER / "converters" / "base.py")  # where nbgrader logs its notes


class Logs:
    """The logger a `course grade` worker's autograde logs through (traitlets', no nbgrader application
    running), with what nbgrader's converter logs and what the course's code (the sandbox) logs."""

    def __init__(self, logger):
        self.logger = logger

    def nbgrader(self, level, message):
        self.logger.handle(logging.LogRecord(self.logger.name, level, CONVERTER, 250, message, None, None))

    def course(self, level, message):
        self.logger.handle(logging.LogRecord(self.logger.name, level, __file__, 1, message, None, None))


@pytest.fixture
def application():
    return Logs(get_logger())


def test_the_terminal_gets_each_warning_of_a_log_shortened_with_escape_sequences_shown(application):
    kernel_lines = "\n".join(f"kernel> line {i}" for i in range(30))
    with GradingLog() as log:
        application.nbgrader(logging.INFO, "Converting notebook a.ipynb")
        application.nbgrader(logging.WARNING, "Removing existing assignment: /course/autograded/s/a1")
        application.nbgrader(logging.WARNING, "Attribute 'checksum' for cell test_x has changed!")
        application.course(logging.WARNING, f"Kernel output (sandbox /s, exit status 1):\n{kernel_lines}")
        application.course(logging.ERROR, "Kernel died \x1b]52;c;cGF5bG9hZA==\x07while waiting")
        application.nbgrader(logging.INFO, "Writing 100 bytes")
    shown = log.warnings()
    assert [w.splitlines()[0] for w in shown] == [
        "[AutogradeApp | WARNING] Attribute 'checksum' for cell test_x has changed!",
        "[AutogradeApp | WARNING] Kernel output (sandbox /s, exit status 1):",
        "[AutogradeApp | ERROR] Kernel died \\x1b]52;c;cGF5bG9hZA==\\x07while waiting"]  # a regrade's removal: no news
    kernel = shown[1].splitlines()
    assert len(kernel) == SHOWN_LINES + 1 and kernel[-1].strip() == f"… ({31 - SHOWN_LINES} more)"
    assert log.text().count("\n") == 6 + 30  # every record, in order, the kernel's lines indented under theirs
    assert log.text().splitlines()[0] == "[AutogradeApp | INFO] Converting notebook a.ipynb"


def test_a_submission_left_as_it_was_is_nbgraders_note_not_a_line_a_kernel_printed(application):
    printed = f"[AutogradeApp | INFO] {UNCHANGED}/course/autograded/s/a1"
    with GradingLog() as forged:
        application.course(logging.WARNING, f"Kernel output (sandbox /s, exit status 0):\n{printed}")
        application.course(logging.INFO, f"{UNCHANGED}/course/autograded/s/a1")  # not nbgrader's code
    assert not forged.noted(UNCHANGED)
    with GradingLog() as kept:
        application.nbgrader(logging.INFO, f"{UNCHANGED}/course/autograded/s/a1")
    assert kept.noted(UNCHANGED)


def test_a_regrades_note_is_no_news_but_a_kernel_line_that_says_so_is_shown(application):
    with GradingLog() as log:
        application.course(logging.WARNING, "Removing existing assignment: forged by a kernel")
    assert len(log.warnings()) == 1


def test_the_log_stops_listening_when_the_submission_is_done(application):
    with GradingLog() as log:
        application.course(logging.WARNING, "during")
    application.course(logging.WARNING, "after")
    assert [record.getMessage() for record in log.records] == ["during"]
