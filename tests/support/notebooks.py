"""What the tests look for in the course's notebooks: the ones a student reads, and the lines a source
notebook hides from the release. Test helpers, so not in the packages that ship."""
import re
from pathlib import Path

import nbformat
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import ClearSolutions

from course.classroom import ROOT
from course.plugins.autograde import verdict_cell


def student_notebooks(root: Path = ROOT) -> list[Path]:
    """The lessons and the release notebooks: every notebook a student gets."""
    return sorted((root / "notebooks").glob("*.ipynb")) + sorted((root / "release").glob("*/*.ipynb"))


def hidden_lines(source, regions=("SOLUTION", "HIDDEN TESTS")) -> set[str]:
    """Lines that stand only inside the given regions of a source notebook, never outside them."""
    kinds = "|".join(regions)
    inside, hidden, visible = False, set(), set()
    for cell in source.cells:
        for line in cell.source.splitlines():
            stripped = line.strip()
            if re.match(rf"### BEGIN ({kinds})", stripped):
                inside = True
            elif re.match(rf"### END ({kinds})", stripped):
                inside = False
            elif stripped:
                (hidden if inside else visible).add(stripped)
    return hidden - visible


def source_notebook(assignment):
    return nbformat.read(ROOT / "source" / assignment / f"{assignment}.ipynb", as_version=4)


def verdict_cells(submission) -> list[dict]:
    """The verdict's cells of a submission described as the attack corpora do (`assignment`; `base`, each solution
    cell as the solution, "solution", or as released, "release"; `replace`, a solution cell's code by its grade
    id; `insert`, a cell of the student's own after the imports, or a list of them; `move`, a cell by its grade id
    put right after another): the source's code cells, made as DecideGrades makes them."""
    cells = []
    for cell in source_notebook(submission["assignment"]).cells:
        if cell.cell_type != "code":
            continue
        made = verdict_cell(cell)
        if made["kind"] == "student" and submission.get("base", "solution") == "release":
            released = NotebookNode(cell_type="code", source=cell.source, metadata={})
            ClearSolutions()._replace_solution_region(released, "python")
            made["source"] = released.source
        made["source"] = submission.get("replace", {}).get(made["grade_id"], made["source"]).strip()
        cells.append(made)
        if made["grade_id"] == "imports" and "insert" in submission:  # a cell of the student's, as forgeries.toml's
            inserted = submission["insert"]  # or a list of them, in order
            for source in [inserted] if isinstance(inserted, str) else inserted:
                cells.append({"kind": "student", "source": source.strip(), "grade_id": None})
    for moved, after in submission.get("move", {}).items():  # a submission that reorders its cells
        cell = cells.pop(next(i for i, made in enumerate(cells) if made["grade_id"] == moved))
        cells.insert(1 + next(i for i, made in enumerate(cells) if made["grade_id"] == after), cell)
    return cells
