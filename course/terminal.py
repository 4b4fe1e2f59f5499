"""Text from a submission on the instructor's terminal: shown, never obeyed.

A file name, a student id (a folder's name), an output line or an error message can carry escape sequences
(OSC 52 writes the clipboard, others move the cursor, retitle the window or hide what follows) and
characters that reorder or break what is shown. `visible` writes each of them as its Python escape
(`\\x1b`, `\\u202e`), so the instructor sees it and the terminal does nothing. VisibleLogFormatter does
the same for every log line of nbgrader's commands; `course grade` starts each line of its own with OWN.
"""
import collections
import logging
import re
import weakref

from tornado.log import LogFormatter

# what a terminal acts on instead of showing: C0 controls (tab and newline too, unless lines are kept),
# DEL, C1 controls, the Unicode line and paragraph separators, and the bidirectional embeddings,
# overrides and isolates that reorder what follows them; and the lone surrogates a file name that is not UTF-8
# decodes to, which no UTF-8 stream can write (one such name in a student's folder stopped `course grade`'s log)
_CONTROL = "\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff"
CONTROL = re.compile(f"[\t\n{_CONTROL}]")
CONTROL_BUT_LINES = re.compile(f"[{_CONTROL}]")


def visible(text, keep_lines: bool = False) -> str:
    """`text` with every control character written as its escape; `keep_lines` keeps newlines and tabs."""
    pattern = CONTROL_BUT_LINES if keep_lines else CONTROL
    return pattern.sub(lambda found: found.group().encode("unicode_escape").decode("ascii"), str(text))


class VisibleLogFormatter(LogFormatter):
    """nbgrader's log formatter (tornado's: its colours, and every line after a record's first indented,
    so that no line of a message starts like a record), with the control characters of each record's
    message and traceback made visible. nbgrader_config.py makes it the console formatter of every nbgrader
    command (`Application.logging_config`); `course grade` formats each student's log with it too."""

    def format(self, record: logging.LogRecord) -> str:
        shown = logging.makeLogRecord(record.__dict__)  # other handlers still get the record as it was
        shown.msg, shown.args = visible(_cut(record.getMessage()), keep_lines=True), None
        if getattr(record, "course_first_not_shown", False):  # FewOfAKind: in its place, that the rest are not shown
            shown.msg = visible(NOT_SHOWN.format(kind=_cut(str(record.msg))[:200]))
        if record.exc_info:
            shown.exc_text = record.exc_text or self.formatException(record.exc_info)
            shown.exc_info = None
        if shown.exc_text:
            shown.exc_text = visible(_cut(shown.exc_text), keep_lines=True)
        if record.stack_info:
            shown.stack_info = visible(_cut(record.stack_info), keep_lines=True)
        return super().format(shown)


# the characters of a record's message (and of its traceback) shown at most: an error whose text is the repr of what a
# kernel sent was 20 MB in the instructor's terminal and the student's log, at every regrade
LONGEST_RECORD = 20_000


def _cut(text: str) -> str:
    if len(text) <= LONGEST_RECORD:
        return text
    return f"{text[:LONGEST_RECORD // 2]} … [{len(text) - LONGEST_RECORD:,} characters not shown] … {text[-LONGEST_RECORD // 2:]}"


class FewOfAKind(logging.Filter):
    """Passes at most SHOWN_OF_A_KIND records of one kind (one logger, one message before its arguments) for each
    notebook graded, and in place of the next, that the rest are not shown. A submission decides how many cells a
    warning is logged for, by the course's preprocessors and by nbgrader's (DeduplicateIds warns of each copy of a
    cell): 20,000 cells of malformed metadata made 20,000 lines on the instructor's terminal and in the student's log
    (the twenty-second session's attacker). nbgrader_config.py puts it on the console of every nbgrader command,
    where it counts from the first notebook autograded on (the first preprocessor of each, DropMalformedMetadata,
    calls `new_notebook`: other commands, `collect` say, log a line per student and show them all); `course grade`
    puts one on each student's log (`counting`: one notebook)."""

    instances = weakref.WeakSet()

    def __init__(self, name="", counting=False):
        super().__init__(name)
        self.seen, self.counting = collections.Counter(), counting
        FewOfAKind.instances.add(self)

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.counting:
            return True
        kind = (record.name, str(record.msg)[:1000])
        self.seen[kind] += 1
        if self.seen[kind] == SHOWN_OF_A_KIND + 1:
            record.course_first_not_shown = True  # VisibleLogFormatter shows that the rest are not shown
        return self.seen[kind] <= SHOWN_OF_A_KIND + 1

    @classmethod
    def new_notebook(cls):
        for instance in list(cls.instances):
            instance.seen.clear()
            instance.counting = True


SHOWN_OF_A_KIND = 20
NOT_SHOWN = ("more records like “{kind}” are not shown for this notebook / "
             "此 notebook 中与“{kind}”同类的记录不再显示")


# What starts every line `course grade` writes itself (its progress, its summary, its messages): a line of
# a submission is always quoted after its student's name and an indent (`quoted`), so none starts with it.
OWN = "course> "


class OwnLines:
    """A text stream that writes OWN at the start of every line written to it, onto `stream`."""

    def __init__(self, stream):
        self.stream, self.at_line_start = stream, True

    def write(self, text: str) -> int:
        for piece in re.split(r"(?<=\n)", text):
            if piece and self.at_line_start:
                self.stream.write(OWN)
            if piece:
                self.stream.write(piece)
                self.at_line_start = piece.endswith("\n")
        return len(text)

    def flush(self):
        self.stream.flush()


def quoted(student: str, text: str) -> str:
    """`text` from `student`'s submission (a warning of their grading log, say), one line per line, each
    indented after the student's name: a line no submission can make look like one of `course grade`."""
    return "\n".join(f"    {visible(student)}: {visible(line)}" for line in str(text).split("\n"))
