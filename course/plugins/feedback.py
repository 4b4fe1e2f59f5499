"""Feedback that shows each test's result and diagnostic, but none of the hidden tests' code.

`nbgrader generate_feedback` renders the autograded notebook, whose test cells hold the hidden tests
again (nbgrader issue 917), and whose tracebacks quote the lines around the failure. HideHiddenTests,
listed in `GenerateFeedback.preprocessors` (nbgrader_config.py), removes both from every graded test cell.
WrapDiagnostics makes long diagnostics wrap; RequireHandGrading keeps feedback from going out while a
written answer waits for the formgrader; CsvExportWarningUngraded says so at `nbgrader export`;
StudentsChinese writes the page's Chinese in 繁體 for a student whose roster row asks for it.
"""
import csv
import logging
import os

import nbgrader
from nbconvert.exporters import HTMLExporter
from nbgrader.api import Gradebook
from nbgrader.plugins import CsvExportPlugin
from nbgrader.preprocessors import ClearHiddenTests, NbGraderPreprocessor
from nbgrader.utils import is_grade, is_solution
from traitlets import Bool, Unicode

from autograder.messages import message

from ..gradebook import waiting_for_a_person
from . import PagePreprocessor

# The feedback page's template (nbgrader_config.py): nbgrader's, without MathJax from a CDN. Setting
# extra_template_basedirs replaces nbgrader's default, so its own template folder is listed too.
TEMPLATE = "course_feedback"
TEMPLATE_BASEDIRS = [
    os.path.join(os.path.dirname(nbgrader.__file__), "server_extensions", "formgrader", "templates"),
    os.path.join(os.path.dirname(__file__), "templates"),
]


class HideHiddenTests(PagePreprocessor, ClearHiddenTests):
    """Replace hidden-test regions in test cells by a note, and tracebacks by the diagnostic alone.

    A ClearHiddenTests, so it removes exactly what `generate_assignment` removed, with the same
    (configurable) delimiters.
    """

    placeholder = Unicode(
        "# (hidden tests ran here: their result is shown below)\n# （隐藏测试已在此运行：结果见下方）",
        help="What a removed hidden-test region is replaced with (one line per language: code does not wrap).",
    ).tag(config=True)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and is_grade(cell) and not is_solution(cell):
            cell.source = self.without_hidden_tests(cell.source)
            for output in cell.get("outputs", []):
                if output.output_type == "error":
                    # the exception is the diagnostic; its traceback would quote the test code
                    output.traceback = [f"{output.ename}: {output.evalue}"]
        return cell, resources

    def without_hidden_tests(self, source: str) -> str:
        kept, hidden = [], False
        for line in source.split("\n"):
            if self.begin_test_delimeter in line:
                hidden = True
                indent = line[: len(line) - len(line.lstrip())]
                kept.extend(indent + note for note in self.placeholder.split("\n"))
            elif self.end_test_delimeter in line:
                hidden = False
            elif not hidden:
                kept.append(line)
        return "\n".join(kept)


class FeedbackExporter(HTMLExporter):
    """The HTML exporter of `nbgrader generate_feedback` (`GenerateFeedback.exporter_class`), so that its
    template can be configured without changing the formgrader's, which uses HTMLExporter too."""


class WrapDiagnostics(PagePreprocessor, NbGraderPreprocessor):
    """Long lines of outputs wrap instead of running past the right edge of the feedback page.

    A diagnostic is one line per language, ending with the fix (`x = x.to(device)`); nbconvert's page
    shows outputs in <pre> without wrapping. Runs after CSSHTMLHeaderPreprocessor, which sets the CSS.
    """

    # word-break: nbconvert's page sets break-all on <pre>, which splits code such as `Tensor.to` mid-word
    css = Unicode(
        ".output_area pre { white-space: pre-wrap; word-break: normal; overflow-wrap: break-word; }",
        help="CSS added to every feedback page.",
    ).tag(config=True)

    def preprocess(self, nb, resources):
        resources.setdefault("inlining", {}).setdefault("css", []).append(self.css)
        return nb, resources


ROSTER_CHINESE = "chinese"  # roster.csv's column of a student's Chinese form; nbgrader's import ignores it


def chinese_of(roster: str, student: str) -> str:
    """The Chinese form `student` reads ("zh-hant" for 繁體; "zh", the default, for 简体), from roster.csv."""
    if not os.path.exists(roster):
        return "zh"
    with open(roster, newline="", encoding="utf-8") as rows:
        for row in csv.DictReader(rows):
            if row.get("id") == student:
                return "zh-hant" if (row.get(ROSTER_CHINESE) or "").strip().lower() == "zh-hant" else "zh"
    return "zh"


class StudentsChinese(PagePreprocessor, NbGraderPreprocessor):
    """The feedback page in 繁體 for a student who reads it, where the course can know it: the `chinese`
    column of roster.csv (`zh-hant`) beside nbgrader_config.py. Her kernels know it from COURSE_CHINESE, but the
    grader's messages were written in the grader's process, in 简体. The instructor's prose, the test cells'
    comments and the grader's outputs are converted as `course view --lang zh-hant` converts a lesson; her own
    answers stay exactly as she submitted them. After HideHiddenTests, whose note it converts too."""


    def preprocess(self, nb, resources):
        from nbgrader.coursedir import CourseDirectory

        from ..authoring.monolingual import code_to_traditional, to_traditional

        roster = os.path.join(CourseDirectory(config=self.config).root, "roster.csv")
        if chinese_of(roster, resources["nbgrader"]["student"]) != "zh-hant":
            return nb, resources
        for cell in nb.cells:
            if is_solution(cell):
                continue  # her answer, as she wrote it
            if cell.cell_type == "markdown":
                cell.source = to_traditional(cell.source)
            elif cell.cell_type == "code":
                cell.source = code_to_traditional(cell.source)
                for output in cell.get("outputs", []):
                    if "text" in output:
                        output.text = to_traditional(output.text)
                    if output.get("output_type") == "error":
                        output.evalue = to_traditional(output.evalue)
                        output.traceback = [to_traditional(line) for line in output.traceback]
        return nb, resources


class HandGradingPending(RuntimeError):
    """Feedback held back on purpose: the written answers of this submission wait for a person."""


class ReasonWithoutTraceback(logging.Filter):
    """nbgrader logs the whole traceback of an error in a preprocessor (40 lines per student); for
    feedback held back on purpose the reason alone is the news."""

    def filter(self, record):
        shown = record.getMessage()
        marker = f"{HandGradingPending.__name__}: "
        if shown.startswith("Traceback") and marker in shown:
            record.msg, record.args = shown.split(marker, 1)[1].rstrip(), ()
        return True


class RequireHandGrading(PagePreprocessor, NbGraderPreprocessor):
    """No feedback for a submission whose written answers are not graded yet (they would show 0).

    `nbgrader generate_feedback` then writes feedback for every other student, names the ones waiting
    for the formgrader and exits non-zero. `--RequireHandGrading.allow_ungraded=True` sends the feedback
    anyway, with a warning in the log.
    """

    allow_ungraded = Bool(False, help="Generate feedback even while answers wait for manual grading.").tag(config=True)

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        waiting = needs_hand_grading(info["db_url"], info["assignment"], info["student"])
        if waiting:
            if not self.allow_ungraded:
                if not any(isinstance(f, ReasonWithoutTraceback) for f in self.log.filters):
                    self.log.addFilter(ReasonWithoutTraceback())
                raise HandGradingPending(message("feedback_ungraded", student=info["student"], cells=", ".join(waiting)))
            self.log.warning(message("feedback_shows_ungraded", student=info["student"], cells=", ".join(waiting)))
        return nb, resources


def needs_hand_grading(db_url, assignment, student) -> list[str]:
    """The grade cells of one submission that wait for a person (course.gradebook's one rule)."""
    with Gradebook(db_url) as gradebook:
        return waiting_for_a_person(gradebook.find_submission(assignment, student))


class CsvExportWarningUngraded(CsvExportPlugin):
    """nbgrader's grades.csv, and a warning for every submission still waiting for manual grading
    (its score counts those answers as 0)."""

    def export(self, gradebook):
        for assignment in gradebook.assignments:
            for submission in gradebook.assignment_submissions(assignment.name):
                if waiting_for_a_person(submission):
                    self.log.warning(message("export_ungraded", assignment=assignment.name,
                                             student=submission.student_id))
        super().export(gradebook)
