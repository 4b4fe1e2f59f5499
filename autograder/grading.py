"""nbgrader preprocessors for grading untrusted submissions (configured in nbgrader_config.py)."""
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.notebooknode import NotebookNode
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.preprocessors import ClearHiddenTests, Execute, NbGraderPreprocessor, OverwriteCells

from .messages import message
from .sandbox import GradingKernelManager


class ForgetUnknownCells(NbGraderPreprocessor):
    """Cells that claim a grade id the gradebook does not know lose their nbgrader metadata.

    A forged test cell ("grade": true, 100 points) and the copy of a duplicated cell (whose metadata
    DeduplicateIds empties) would otherwise make OverwriteCells fail, and with it the whole notebook.
    They stay in the notebook as ordinary cells: they run, and earn nothing. Runs before OverwriteCells.
    """

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        with Gradebook(info["db_url"]) as gradebook:
            notebook = gradebook.find_notebook(info["notebook"], info["assignment"])
            self.known = {cell.name for cell in notebook.source_cells}
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        claimed = cell.metadata.get("nbgrader")
        if claimed is not None and claimed.get("grade_id") not in self.known:
            self.log.warning("Cell %d claims unknown grade id %r: graded as an ordinary cell",
                             index, claimed.get("grade_id"))
            del cell.metadata["nbgrader"]
        return cell, resources


class OverwriteCellsQuietly(OverwriteCells):
    """nbgrader's OverwriteCells, except that a test cell the student left as released is no news.

    The gradebook holds the instructor's test cells, hidden tests included, so every released test cell
    differs from it and OverwriteCells warns "Attribute 'checksum' ... has changed!" five times for an
    honest submission: a real tamper warning drowns. Here the cell is restored exactly as before; the
    warning stays for a cell whose text is not the released one (edited, emptied, forged), and an
    unchanged cell gets one debug line.
    """

    def preprocess_cell(self, cell, resources, cell_index):
        self._as_released = self._released_unchanged(cell)
        return super().preprocess_cell(cell, resources, cell_index)

    def _released_unchanged(self, cell) -> bool:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id is None:
            return False
        try:
            source_cell = self.gradebook.find_source_cell(grade_id, self.notebook_id, self.assignment_id)
        except MissingEntry:
            return False
        # the released text: what generate_assignment left of the instructor's cell (same delimiters)
        released = NotebookNode(cell_type=source_cell.cell_type, source=source_cell.source, metadata={})
        ClearHiddenTests(parent=self)._remove_hidden_test_region(released)
        return cell.cell_type == source_cell.cell_type and cell.source == released.source

    def report_change(self, name, attr, old, new):
        if attr == "checksum" and self._as_released:
            self.log.debug("Cell %s is as released: its hidden tests are put back", name)
            return
        super().report_change(name, attr, old, new)


class SafeExecute(Execute):
    """nbgrader's Execute, except that the kernel is sandboxed and a kernel that dies or hangs costs
    only the cells it did not run.

    When student code ends the kernel (`os._exit`, a segfault, the memory or CPU-time limit), or hangs
    in a way the interrupt cannot stop, nbclient raises and nbgrader would record no grade at all for
    the notebook. Here the cells that ran keep their outputs, and every code cell from the one that was
    running onwards gets an error output, so its test earns zero instead of passing for want of output.
    """

    def __init__(self, *args, **kwargs):
        # every kernel in its own sandbox (autograder/sandbox.py); nbgrader's Execute would pick
        # jupyter_client's AsyncKernelManager
        kwargs["kernel_manager_class"] = GradingKernelManager
        super().__init__(*args, **kwargs)

    def preprocess(self, nb, resources, km=None):
        self._running = 0
        try:
            return super().preprocess(nb, resources, km=km)
        except (DeadKernelError, CellTimeoutError) as error:
            key = "kernel_died" if isinstance(error, DeadKernelError) else "timed_out"
            self.log.warning("%s in cell %d; the remaining cells earn no points", type(error).__name__,
                             self._running)
            for cell in nb.cells[self._running:]:
                if cell.cell_type == "code":
                    cell.outputs.append(stopped_output(type(error).__name__, key))
            return nb, resources

    def preprocess_cell(self, cell, resources, index):
        self._running = index
        return super().preprocess_cell(cell, resources, index)


def stopped_output(ename, key) -> NotebookNode:
    text = message(key)
    return NotebookNode(output_type="error", ename=ename, evalue=text, traceback=[text])
