"""Reading and running the lessons' cells, for the tests of their practice and their placement claims."""
import ast
import re

import nbformat
from IPython.core.inputtransformer2 import TransformerManager
from nbclient import NotebookClient

# a folded model solution: the code block of a markdown `<details>` cell
SOLUTION_BLOCK = re.compile(r"<details>.*?```python\n(?P<code>.*?)\n```", re.S)
NOT_PROSE = re.compile(r"```.*?```|`[^`]*`|<[^>]+>|!\[[^\]]*\]\([^)]*\)", re.S)  # code, HTML, images


def tags(cell) -> set[str]:
    return set(cell.metadata.get("tags", []))


def printed(cell) -> str:
    """What a code cell printed (its stream outputs' text)."""
    return "".join(output.get("text", "") for output in cell.get("outputs", []))


def run_after_earlier_cells(path, index, probe_source):
    """The lesson's code cells before `index`, then `probe_source`, in a kernel of their own: the notebook
    run (errors kept as outputs) and the probe cell."""
    notebook = nbformat.read(path, as_version=4)
    earlier = [c for c in notebook.cells[:index] if c.cell_type == "code"]
    probe = nbformat.v4.new_code_cell(probe_source)
    run = nbformat.v4.new_notebook(cells=[*earlier, probe], metadata=notebook.metadata)
    NotebookClient(run, timeout=300, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    return run, probe


def english_headings(path) -> list[str]:
    """The headings of a lesson's English cells, without their #s."""
    return [line.lstrip("#").strip() for cell in nbformat.read(path, as_version=4).cells
            if "lang-en" in tags(cell) for line in cell.source.splitlines() if line.startswith("#")]


def prose_words(lesson) -> int:
    """Words of the lesson's English prose: its English markdown cells without code, HTML, images, the
    shared prediction cells and the folded model solutions (what a student reads, in one language)."""
    cells = [cell for cell in lesson.cells if cell.cell_type == "markdown" and tags(cell) & {"lang-en", "lang-zh"} == {"lang-en"}
             and "solution" not in tags(cell)]
    return sum(len(re.findall(r"[A-Za-z][A-Za-z'-]*", NOT_PROSE.sub("", cell.source))) for cell in cells)


def exercises(lesson):
    """(exercise cell index, the name it defines, its check cell, the solution's English and Chinese cells)."""
    cells = lesson.cells
    starts = [i for i, cell in enumerate(cells) if "exercise" in tags(cell)]
    for start, end in zip(starts, [*starts[1:], len(cells)]):
        following = cells[start + 1:end]
        check = next(cell for cell in following if "self_check(" in cell.source)
        solution = [cell for cell in following if "solution" in tags(cell)]
        yield start, defined_names(cells[start].source), check, solution


def defined_names(source) -> set[str]:
    """The functions and classes a cell defines at top level (IPython's magics read as IPython does)."""
    python = TransformerManager().transform_cell(source)
    return {node.name for node in ast.parse(python).body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}


def solution_code(cell) -> str:
    return SOLUTION_BLOCK.search(cell.source)["code"]
