"""Each student's grading log in `course grade` (course/grading/logs.py): its warnings come from the log
records' levels, nbgrader's notes from its application's own records, never from text a kernel printed."""
import logging

import pytest

from course.grading.logs import SHOWN_LINES, UNCHANGED, GradingLog


@pytest.fixture
def application():
    """nbgrader's AutogradeApp logger, at INFO as an nbgrader command sets it."""
    logger = logging.getLogger(GradingLog.APPLICATION)
    level = logger.level
    logger.setLevel(logging.INFO)
    yield logger
    logger.setLevel(level)


def test_the_terminal_gets_each_warning_of_a_log_shortened_with_escape_sequences_shown(application):
    kernel_lines = "\n".join(f"kernel> line {i}" for i in range(30))
    with GradingLog() as log:
        application.info("Converting notebook a.ipynb")
        application.warning("Removing existing assignment: /course/autograded/s/a1")
        application.warning("Attribute 'checksum' for cell test_x has changed!")
        application.warning(f"Kernel output (sandbox /s, exit status 1):\n{kernel_lines}")
        application.error("Kernel died \x1b]52;c;cGF5bG9hZA==\x07while waiting")
        application.info("Writing 100 bytes")
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
        application.warning(f"Kernel output (sandbox /s, exit status 0):\n{printed}")
        logging.getLogger("traitlets").info(f"{UNCHANGED}/course/autograded/s/a1")  # not nbgrader's application
    assert not forged.noted(UNCHANGED)
    with GradingLog() as kept:
        application.info(f"{UNCHANGED}/course/autograded/s/a1")
    assert kept.noted(UNCHANGED)


def test_the_log_stops_listening_when_the_submission_is_done(application):
    with GradingLog() as log:
        application.warning("during")
    application.warning("after")
    assert [record.getMessage() for record in log.records] == ["during"]
