"""Every lesson's model solution, typed into its exercise cell, passes the lesson's own check.

The solutions are folded markdown, so nothing runs them on Run All (tests/unit/test_practice.py); here each one
runs after the lesson's earlier cells, in a kernel of its own.
"""
from pathlib import Path

import nbformat
import pytest

from autograder.messages import fingerprint
from lessons import exercises, printed, run_after_earlier_cells, solution_code

LESSONS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", LESSONS, ids=lambda path: path.stem)
def test_every_model_solution_passes_its_check(path):
    lesson = nbformat.read(path, as_version=4)
    for start, _, check, solution in exercises(lesson):
        run, probe = run_after_earlier_cells(path, start, solution_code(solution[0]) + "\n\n" + check.source)
        assert fingerprint("practice_correct").en in printed(probe), printed(probe) or probe.outputs
