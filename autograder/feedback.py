"""Feedback that shows each test's result and diagnostic, but none of the hidden tests' code.

`nbgrader generate_feedback` renders the autograded notebook, whose test cells hold the hidden tests
again (nbgrader issue 917), and whose tracebacks quote the lines around the failure. This preprocessor,
listed in `GenerateFeedback.preprocessors` (nbgrader_config.py), removes both from every graded test cell.
"""
from nbgrader.preprocessors import ClearHiddenTests
from nbgrader.utils import is_grade, is_solution
from traitlets import List, Unicode


class HideHiddenTests(ClearHiddenTests):
    """Replace hidden-test regions in test cells by a note, and tracebacks by the diagnostic alone.

    A ClearHiddenTests, so it removes exactly what `generate_assignment` removed, with the same
    (configurable) delimiters.
    """

    # The HTML exporter configures this for every preprocessor of the feedback pipeline; declared as
    # nbgrader's GetGrades does, so that traitlets does not warn about it.
    display_data_priority = List(config=True)

    placeholder = Unicode(
        "# (hidden tests ran here: their result is shown below / 隐藏测试已在此运行：结果见下方)",
        help="What a removed hidden-test region is replaced with.",
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
                kept.append(line[: len(line) - len(line.lstrip())] + self.placeholder)
            elif self.end_test_delimeter in line:
                hidden = False
            elif not hidden:
                kept.append(line)
        return "\n".join(kept)
