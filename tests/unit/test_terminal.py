"""What the graders print from a submission (course/terminal.py): control characters shown as escapes,
never obeyed; a log record's later lines indented; `course grade`'s own lines marked, quoted lines not."""
import io
import logging

import pytest

from course.terminal import (LONGEST_RECORD, NOT_SHOWN, OWN, SHOWN_OF_A_KIND, FewOfAKind, OwnLines,
                             VisibleLogFormatter, quoted, visible)

OSC52 = "\x1b]52;c;cm0gLXJmIH4K\x07"  # writes the terminal's clipboard


@pytest.mark.parametrize("raw, shown", [
    (OSC52, "\\x1b]52;c;cm0gLXJmIH4K\\x07"),
    ("a\rb\x9b31m\x7f", "a\\rb\\x9b31m\\x7f"),
    ("right\u202eto left\u2066", "right\\u202eto left\\u2066"),
    ("line\nnext\ttab", "line\\nnext\\ttab"),
    ("学生 ✓ plain", "学生 ✓ plain"),
    (b"notes-\xff\xfe.txt".decode("utf-8", "surrogateescape"), "notes-\\udcff\\udcfe.txt"),  # a name not UTF-8
])
def test_control_characters_are_shown_as_escapes(raw, shown):
    assert visible(raw) == shown
    assert visible(raw).encode("utf-8")  # every log is UTF-8: a name that is not stopped `course grade` for the class


def test_lines_and_tabs_can_be_kept():
    assert visible(f"one\n\ttwo{OSC52}", keep_lines=True) == "one\n\ttwo\\x1b]52;c;cm0gLXJmIH4K\\x07"


def formatted(record_message, *args, exc_info=None):
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(VisibleLogFormatter("[AutogradeApp | %(levelname)s] %(message)s", color=False))
    logger = logging.getLogger(f"test-terminal-{id(stream)}")
    logger.propagate = False
    logger.addHandler(handler)
    logger.warning(record_message, *args, exc_info=exc_info)
    return stream.getvalue()


def test_a_log_record_shows_its_messages_control_characters_and_indents_its_later_lines():
    shown = formatted("Skipping unknown notebook: %s", f"x{OSC52}\n[AutogradeApp | WARNING] forged.ipynb")
    assert shown == ("[AutogradeApp | WARNING] Skipping unknown notebook: x\\x1b]52;c;cm0gLXJmIH4K\\x07\n"
                     "    [AutogradeApp | WARNING] forged.ipynb\n")


def test_a_traceback_is_shown_too_and_the_record_stays_as_it_was_for_other_handlers():
    try:
        raise ValueError(f"crafted {OSC52}")
    except ValueError:
        shown = formatted("Error", exc_info=True)
    assert "ValueError: crafted \\x1b]52;" in shown and "\x1b" not in shown
    record = logging.LogRecord("x", logging.WARNING, __file__, 1, "%s", (OSC52,), None)
    VisibleLogFormatter("%(message)s", color=False).format(record)
    assert record.getMessage() == OSC52


def test_a_record_of_megabytes_is_shown_cut_with_both_ends():
    """An error whose text is the repr of what a kernel sent was 20 MB in the terminal and the student's log."""
    try:
        raise ValueError("E" * 5_000_000 + " the end")
    except ValueError:
        shown = formatted("sent %s", "S" * 5_000_000 + " last", exc_info=True)
    assert len(shown) < 3 * LONGEST_RECORD and "characters not shown" in shown
    assert "sent SSS" in shown and "S last" in shown and "E the end" in shown


def test_course_grade_marks_each_of_its_own_lines_and_quotes_a_submissions_lines_after_its_student():
    terminal = io.StringIO()
    own = OwnLines(terminal)
    print("[####] 1/2 alice (1.0 s)\nGraded 2", file=own)
    terminal.write(quoted(f"bob{OSC52}", "[AutogradeApp | WARNING] one\n[####] 2/2 forged") + "\n")
    own.write("partial ")
    own.write("line\n")
    lines = terminal.getvalue().splitlines()
    assert lines == [f"{OWN}[####] 1/2 alice (1.0 s)", f"{OWN}Graded 2",
                     "    bob\\x1b]52;c;cm0gLXJmIH4K\\x07: [AutogradeApp | WARNING] one",
                     "    bob\\x1b]52;c;cm0gLXJmIH4K\\x07: [####] 2/2 forged",
                     f"{OWN}partial line"]


def test_a_python_warning_while_a_student_is_graded_goes_to_their_log_not_the_terminal(capsys):
    import warnings

    from course.grading.logs import GradingLog

    with GradingLog() as log, warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn(f"Cell is missing an id field {OSC52}")
    assert "UserWarning: Cell is missing an id field \\x1b]52;" in log.text()
    assert capsys.readouterr().err == ""


def test_a_notebook_logs_a_few_records_of_each_kind_and_says_the_rest_are_not_shown():
    """A submission decides how many cells a warning is logged for: 20,000 cells of malformed metadata made 20,000
    lines in the instructor's terminal and the student's log (the twenty-second session)."""
    from course.grading.logs import GradingLog

    with GradingLog() as log:
        logger = logging.getLogger("AutogradeApp")
        for index in range(500):
            logger.warning("Cell %d has malformed nbgrader metadata", index)
        logger.warning("another kind")
        FewOfAKind.new_notebook()  # the next notebook's
        logger.warning("Cell %d has malformed nbgrader metadata", 0)
    shown = log.text().splitlines()
    assert len(shown) == SHOWN_OF_A_KIND + 3
    assert shown[SHOWN_OF_A_KIND - 1].endswith(f"Cell {SHOWN_OF_A_KIND - 1} has malformed nbgrader metadata")
    assert shown[SHOWN_OF_A_KIND] == ("[AutogradeApp | WARNING] "
                                      + NOT_SHOWN.format(kind="Cell %d has malformed nbgrader metadata"))
    assert shown[-2:] == ["[AutogradeApp | WARNING] another kind",
                          "[AutogradeApp | WARNING] Cell 0 has malformed nbgrader metadata"]


def test_every_nbgrader_commands_console_keeps_a_few_records_of_each_kind():
    """nbgrader_config.py's logging configuration, as traitlets applies it to an nbgrader command's console."""
    from traitlets.config import Application

    from course import settings
    from course.classroom import ROOT

    app = Application(config=settings.load(ROOT))
    console = next(handler for handler in app.log.handlers if handler.get_name() == "console")
    assert any(isinstance(kept, FewOfAKind) for kept in console.filters)
    assert isinstance(console.formatter, VisibleLogFormatter)


def test_a_command_that_grades_no_notebook_shows_every_line():
    """`nbgrader collect` logs a line per student: a class of 300 shows 300 (FewOfAKind counts from autograde's first
    notebook on)."""
    shown = FewOfAKind()
    record = logging.makeLogRecord({"name": "CollectApp", "msg": "Collecting submission: %s", "args": ("s",)})
    assert all(shown.filter(record) for _ in range(300))
