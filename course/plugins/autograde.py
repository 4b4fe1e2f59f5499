"""nbgrader preprocessors for grading untrusted submissions (configured in nbgrader_config.py)."""
import ast
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient.exceptions import CellExecutionComplete, CellTimeoutError, DeadKernelError
from nbconvert.exporters import NotebookExporter
from nbformat.notebooknode import NotebookNode
from nbgrader import utils
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.converters import Autograde
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import (ClearHiddenTests, ClearSolutions, DeduplicateIds, Execute, NbGraderPreprocessor, OverwriteCells,
                                     SaveAutoGrades)
from traitlets import Bool, Enum, Integer

from autograder.kernel import CELL_TIMEOUT_S, PAUSED_RECORD, RUN_AGAIN_ALLOWANCE
from autograder.messages import message, printable

from ..authoring.monolingual import source_to_traditional
from ..kernels import forkserver, sandbox
from ..kernels.manager import GradingKernelManager
from ..terminal import FewOfAKind, visible

RECORDS_LIMIT = 4 * 2**20  # bytes of verdict records read from the verdict process
def is_test_cell(cell) -> bool:
    return cell.cell_type == "code" and utils.is_grade(cell) and not utils.is_solution(cell)


class NotebookTooLargeError(Exception):
    """A submission past BoundedSubmission's bounds: not graded, and the instructor told why."""


class BoundedSubmission(NotebookExporter):
    """nbgrader's exporter of a submission, which reads it only within bounds. Reading a notebook takes time and
    memory in the grading process, outside every sandbox and before the grading budget starts with the kernel: one cell's
    metadata of 7.5 million `{}` (30 MB) took 14 minutes and 16 GB (the twenty-second session's attacker). A file of
    more than `most_bytes`, or whose JSON may hold more than `most_values` values (each counted by the bracket or comma
    before it, in strings too), is not graded: the instructor is told why, as for a file that is no notebook."""

    most_bytes = Integer(20 * 2**20, help="Bytes of the largest submitted notebook autograde reads").tag(config=True)
    most_values = Integer(250_000, help="JSON values a submitted notebook may hold (each counted by the bracket or "
                                        "comma before it, in strings too), at most").tag(config=True)

    def from_filename(self, filename, resources=None, **kw):
        with open(filename, "rb") as file:
            data = file.read(self.most_bytes + 1)
        values = sum(data.count(mark) for mark in (b"{", b"[", b","))
        if len(data) > self.most_bytes or values > self.most_values:
            raise NotebookTooLargeError(message("notebook_too_large", megabytes=self.most_bytes // 2**20,
                                                values=f"{self.most_values:,}"))
        return super().from_filename(filename, resources, **kw)


class ForgetStaleFeedback(NbGraderPreprocessor):
    """A submission graded again has no feedback until `nbgrader generate_feedback` makes it anew.

    generate_feedback skips a student whose feedback is as new as the submission's timestamp.txt, and a
    regrade (`--force`, after changing the tests) keeps that timestamp: the old page, with the old points,
    would stay and `release_feedback` would send it. So the grading of a submission removes its feedback
    folder first; `generate_feedback` then writes it again (or holds it back while hand grading waits).
    First in the sanitize preprocessors: whatever happens to the grading, the old page is gone."""

    def preprocess(self, nb, resources):
        from nbgrader.coursedir import CourseDirectory

        folders = CourseDirectory(config=self.config)
        info = resources["nbgrader"]
        stale = folders.format_path(folders.feedback_directory, info["student"], info["assignment"])
        if os.path.isdir(stale):
            self.log.info(message("feedback_removed", student=info["student"], folder=stale))
            shutil.rmtree(stale)
        return nb, resources


# what `nbgrader submit` writes beside the notebooks: the submission time, and the secret that release_feedback
# copies on to name the feedback (without it, release_feedback fails for that student)
NBGRADER_FILES = {"timestamp.txt", "submission_secret.txt"}


class OnlyTheAssignmentsFiles(NbGraderPreprocessor):
    """Nothing collected enters a grading kernel's sandbox unless it is the assignment's own.

    nbgrader's autograde copies every file of `submitted/STUDENT/ASSIGNMENT` into the folder the kernel works
    in (and may write), then the instructor's versions of the source folder's files over them. What else a
    student put in their submission (a `torch.py` or `autograder/` that the kernel would import from its
    working folder, files collected from elsewhere) is removed here, before any kernel starts, and named in a
    warning: what stays is the source folder's files, the assignment's notebooks and the two files nbgrader's
    submit writes itself (NBGRADER_FILES). In the sanitize preprocessors, after ForgetStaleFeedback."""

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        folders = CourseDirectory(config=self.config)
        working = folders.format_path(folders.autograded_directory, info["student"], info["assignment"])
        source = folders.format_path(folders.source_directory, ".", info["assignment"])
        with Gradebook(info["db_url"]) as gradebook:
            notebooks = {f"{notebook.name}.ipynb" for notebook in gradebook.find_assignment(info["assignment"]).notebooks}
        own = {os.path.relpath(path, source) for path in utils.find_all_files(source, folders.ignore + ["*.ipynb"])}
        own |= notebooks | NBGRADER_FILES
        removed = []
        for parent, dirs, files in os.walk(working, topdown=False):
            for name in files + dirs:
                path = os.path.join(parent, name)
                relative = os.path.relpath(path, working)
                if os.path.isdir(path) and not os.path.islink(path):
                    if not os.listdir(path) and not any(kept.startswith(relative + os.sep) for kept in own):
                        os.rmdir(path)
                elif relative not in own:
                    os.unlink(path)
                    removed.append(relative)
        if removed:
            self.log.warning(message("submission_extra_files", student=visible(info["student"]),
                                     names=", ".join(visible(name) for name in sorted(removed)[:20])))
        return nb, resources


class DropMalformedMetadata(NbGraderPreprocessor):
    """Cells whose nbgrader metadata is not of the shape nbgrader writes lose it.

    `"nbgrader": "a string"`, `"points": "lots"` or `"grade": "yes"` would make nbgrader's own
    preprocessors fail (DeduplicateIds, OverwriteCells), and with them the whole notebook. The cell stays
    as an ordinary cell: it runs, and earns nothing; OverwriteCells (`add_missing_cells`) puts a test cell
    that lost its metadata back. Runs first, before DeduplicateIds.
    """

    def preprocess(self, nb, resources):
        FewOfAKind.new_notebook()  # the first of each notebook's preprocessors: its log's records counted anew
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        if "nbgrader" in cell.metadata and not well_formed(cell.metadata["nbgrader"]):
            self.log.warning("Cell %d has malformed nbgrader metadata: graded as an ordinary cell", index)
            del cell.metadata["nbgrader"]
        return cell, resources


def well_formed(claimed) -> bool:
    """nbgrader cell metadata of the shape nbgrader itself writes."""
    flags = ("grade", "solution", "locked", "task")
    return (isinstance(claimed, dict) and isinstance(claimed.get("grade_id", ""), str)
            and all(isinstance(claimed.get(flag, False), bool) for flag in flags)
            and (claimed.get("points") is None or type(claimed["points"]) in (int, float)))


class ForgetUnknownCells(NbGraderPreprocessor):
    """Cells that claim a grade id the gradebook does not know lose their nbgrader metadata; those that claim a known
    one with other flags than the source gave it get the source's flags back.

    A forged test cell ("grade": true, 100 points) and the copy of a duplicated cell (whose metadata
    DeduplicateIds empties) would otherwise make OverwriteCells fail, and with it the whole notebook. They stay in
    the notebook as ordinary cells: they run, and earn nothing. So would a test cell marked no test or an answer, or
    an answer marked a test or a task (a flag any editor changes, nbgrader's own toolbar too: each left the notebook
    ungraded, with nbgrader's raw error): it is graded as the cell the source made it, where it is (a test cell
    made an ordinary one ran its visible tests as the student's own code). Runs before OverwriteCells.
    """

    FLAGS = ("grade", "solution", "locked", "task")

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        with Gradebook(info["db_url"]) as gradebook:
            notebook = gradebook.find_notebook(info["notebook"], info["assignment"])
            kinds = [{cell.name for cell in cells} for cells in (notebook.grade_cells, notebook.solution_cells)]
            tasks = {cell.name for cell in notebook.task_cells}
            self.known = {cell.name: (cell.name in kinds[0], cell.name in kinds[1], bool(cell.locked), cell.name in tasks)
                          for cell in notebook.source_cells}
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        claimed = cell.metadata.get("nbgrader")
        if claimed is None:
            return cell, resources
        known = self.known.get(claimed.get("grade_id"))
        if known is None:  # the log shows a few of them (course.terminal.FewOfAKind): 200,000 made as many lines
            self.log.warning("Cell %d claims unknown grade id %r: graded as an ordinary cell",
                             index, printable(claimed.get("grade_id"), 100))
            del cell.metadata["nbgrader"]
        elif tuple(claimed.get(flag, False) for flag in self.FLAGS) != known:
            self.log.warning("Cell %d claims grade id %r with other flags than the source's: given the source's",
                             index, printable(claimed.get("grade_id"), 100))
            claimed.update(zip(self.FLAGS, known))
            if not claimed["grade"]:
                claimed.pop("points", None)
        return cell, resources


class ViewedAsReleased(NbGraderPreprocessor):
    """A tracked cell as a 繁體 view shows it (`course view --lang zh-hant`) is the released cell: its 简体 text is put
    back before OverwriteCells and SaveAutoGrades compare anything. So a written answer left as viewed is unanswered
    (0 points, as in the bilingual notebook), a test or prose cell as viewed is no tamper, and a 繁體 view grades
    exactly as the bilingual notebook. A cell the student changed keeps its text. Runs before OverwriteCells.
    """

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        with Gradebook(info["db_url"]) as gradebook:
            notebook = gradebook.find_notebook(info["notebook"], info["assignment"])
            self.released = {cell.name: (cell.cell_type, released_source(cell, parent=self))
                             for cell in notebook.source_cells}
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        cell_type, released = self.released.get(cell.metadata.get("nbgrader", {}).get("grade_id"), (None, None))
        if cell.cell_type == cell_type and cell.source != released:
            if cell.source == source_to_traditional(cell_type, released):
                cell.source = released
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
        return cell.cell_type == source_cell.cell_type and cell.source == released_source(source_cell, parent=self)

    def report_change(self, name, attr, old, new):
        if attr == "checksum" and self._as_released:
            self.log.debug("Cell %s is as released: its hidden tests are put back", name)
            return
        super().report_change(name, attr, old, new)


class RestoreInstructorsCells(NbGraderPreprocessor):
    """An instructor's code cell (locked, neither graded nor an answer: the imports, a2's `norm_layers`) that the
    submission lacks is put back from the gradebook, after the cell the source notebook holds before it, with
    a bilingual comment that says so, and a warning for the instructor.

    nbgrader's OverwriteCells (`add_missing_cells`) puts back a deleted test or task cell only. Jupyter does not
    let a student delete a locked cell (the release marks it undeletable), but an editor does; without the
    cell, the tests that need what it defines would fail in the kernel and in the verdict's judge, and cost an
    answer that is right without it (a student who imports what their own cells use). Runs after OverwriteCells.
    """

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        present = {cell.metadata.get("nbgrader", {}).get("grade_id") for cell in nb.cells}
        with Gradebook(info["db_url"]) as gradebook:
            notebook = gradebook.find_notebook(info["notebook"], info["assignment"])
            special = {cell.name for cells in (notebook.grade_cells, notebook.solution_cells, notebook.task_cells)
                       for cell in cells}
            order = [cell.name for cell in notebook.source_cells]  # the source's order, as OverwriteCells reads it
            missing = [(order.index(cell.name), cell.name, cell.source, cell.checksum) for cell in notebook.source_cells
                       if cell.locked and cell.cell_type == "code" and cell.name not in special | present]
        note = "\n".join(f"# {line}" for line in message("instructors_cell_restored").splitlines())
        for place, name, source, checksum in sorted(missing):
            before = [k for k, cell in enumerate(nb.cells)
                      if cell.metadata.get("nbgrader", {}).get("grade_id") in order[:place]]
            nb.cells.insert(before[-1] + 1 if before else 0, nbformat.v4.new_code_cell(
                f"{note}\n{source}", metadata={"deletable": False, "editable": False, "nbgrader": {
                    "grade": False, "solution": False, "locked": True, "task": False, "grade_id": name,
                    "checksum": checksum, "schema_version": 3}}))
            self.log.warning(message("instructors_cell_restored_log", cell=name))
        return nb, resources


class SafeExecute(Execute):
    """nbgrader's Execute, for a kernel that runs untrusted code: sandboxed, shown only the released
    test cells, its outputs bounded, and a kernel that dies or hangs costs only the cells it did not run.

    When student code ends the kernel (`os._exit`, a segfault, the memory or CPU-time limit), or hangs
    in a way the interrupt cannot stop, nbclient raises and nbgrader would record no grade at all for
    the notebook. Here the cells that ran keep their outputs, and every code cell from the one that was
    running onwards gets an error output, so its test earns zero instead of passing for want of output.
    The points themselves are decided afterwards, by DecideGrades.
    """

    # Outputs are bounded as they arrive, before nbgrader or a page ever holds them: a flood of displays
    # or one huge line costs the submission its outputs, never the grader its memory: every message the kernel sends
    # (displays updated in place, widgets' messages too). A cell's first error or stderr output is always kept
    # (shortened), since it decides the cell's own run.
    max_outputs = Integer(200, help="Outputs kept per cell; later ones are dropped, with a note").tag(config=True)
    max_output_chars = Integer(100_000, help="Characters of one output (a larger one becomes a note)").tag(config=True)
    max_notebook_chars = Integer(20_000_000, help="Characters of all outputs of a notebook").tag(config=True)
    # Nothing is read from a kernel after its last cell, and its sandbox ends with it: ended at once, it spares
    # each notebook its own shutdown (its exit handlers, PyTorch's teardown), a sixth of a class's grading time.
    # A kernel that had already ended on its own is not killed, so its last lines still reach the log.
    shutdown_kernel = Enum(["graceful", "immediate"], default_value="immediate",
                           help="How the kernel ends after the last cell: 'immediate' kills its sandbox, "
                                "'graceful' asks the kernel to shut down first").tag(config=True)
    timeout = Integer(CELL_TIMEOUT_S, allow_none=True, help="Seconds one cell may run (nbgrader_config.py sets "
                                                            "Execute.timeout, which `nbgrader validate` runs with too)").tag(config=True)
    notebook_timeout = Integer(900, help="Seconds the whole notebook may run in its kernel: past them, the cells "
                                         "not yet run earn nothing").tag(config=True)
    grading_timeout = Integer(1200, help="Wall-clock seconds the grading of one notebook may take, its kernel and its "
                                         "verdict together, kept by the grading process (no student code can signal "
                                         "it): past them the notebook is not graded, and the instructor is told so. "
                                         "One such student holds the class at most this long.").tag(config=True)

    def __init__(self, *args, **kwargs):
        # every kernel in its own sandbox (course/kernels/sandbox.py); nbgrader's Execute would pick
        # jupyter_client's AsyncKernelManager
        kwargs["kernel_manager_class"] = GradingKernelManager
        super().__init__(*args, **kwargs)

    def output(self, outs, msg, display_id, cell_index):
        content = msg.get("content") or {}
        size = _chars(content, limit=self.max_notebook_chars)
        # a cell's first error or stderr output is always kept (shortened): it decides the cell's own run
        # (`own_error`); later ones count as any output (a flood of stderr lines was kept whole, 100 MB a cell)
        deciding = _deciding(msg["msg_type"], content) and not any(_deciding(o.output_type, o) for o in outs)
        if not deciding and (len(outs) >= self.max_outputs or self._chars + size > self.max_notebook_chars):
            self._dropped[cell_index] = self._dropped.get(cell_index, 0) + 1
            return None
        # past the notebook's bound, a cell's first error or stderr output is kept as its first characters only: kept
        # whole in each of 300 cells, they made a 75 MB graded notebook
        limit = self._output_limit(size)
        if size > limit:
            content, size = _shortened(msg["msg_type"], content, limit), limit
            self._dropped.setdefault(cell_index, 0)
        self._chars += size
        return super().output(outs, {**msg, "content": content}, display_id, cell_index)

    def _output_limit(self, size) -> int:
        """Characters a kept output of `size` may have: an output's bound, or past the notebook's, a few."""
        return self.max_output_chars if self._chars + size <= self.max_notebook_chars else DECIDING_PAST_THE_BOUND

    def on_cell_executed(self, **kwargs):
        """nbgrader's, which adds the error of a cell's reply to its outputs when no output names it: bounded and
        counted as the cell's error output is (the reply is the kernel's, as every message of it)."""
        reply = kwargs["execute_reply"]
        content = reply["content"]
        if content["status"] == "error":
            limit = self._output_limit(0)
            kwargs["execute_reply"] = {**reply, "content": {"status": "error", **_shortened("error", content, limit)}}
            self._chars += limit
        return super().on_cell_executed(**kwargs)

    def _update_display_id(self, display_id, msg):
        """nbclient's, which writes a display's new data into the outputs shown under its id, in any cell, without
        `output`: bounded as an output is, and counted once for each output it is written into (three updates of 30 M
        characters each made a 90 MB graded notebook and feedback page, and a grader eight times as large). Past the
        notebook's bound, the note."""
        content = msg.get("content") or {}
        size = _chars(content, limit=self.max_notebook_chars)
        # written into every output shown under that id, in every cell: many tiny displays of one id, then one update
        # of 99,000 characters, made a 395 MB graded notebook and feedback page
        copies = sum(len(places) for places in self._display_id_map.get(display_id, {}).values())
        if size > self.max_output_chars or self._chars + size * copies > self.max_notebook_chars:
            content = _shortened("display_data", content, self.max_output_chars)
            size = _chars(content)
        self._chars += size * copies
        return super()._update_display_id(display_id, {**msg, "content": content})

    def handle_comm_msg(self, outs, msg, cell_index):
        """Nothing: a grading kernel's widgets have no page to show in. nbclient kept each widget's state the kernel
        sent, unbounded, in the graded notebook (60 MB from two messages), mimicked output widgets, whose outputs
        bypass `output`, and stopped the notebook on a state it could not read."""
        return None

    def process_message(self, msg, cell, cell_index):
        """nbclient's, for a message the kernel sent, which is the student's: one nbclient cannot make an output of
        (a display whose text is a number, an error whose name is a dict, content nested thousands deep) once stopped
        the whole notebook, with no grade and a raw error for the instructor. It becomes a note in the cell's
        stderr; the notebook is graded. An execution count that is no count (nbclient wrote any into the cell, and
        the notebook was then invalid) is left out."""
        content = msg.get("content")
        if isinstance(content, dict) and "execution_count" in content and not _a_count(content["execution_count"]):
            # nbclient writes it into the cell as sent
            msg = {**msg, "content": {key: value for key, value in content.items() if key != "execution_count"}}
        try:
            return super().process_message(msg, cell, cell_index)
        except CellExecutionComplete:  # nbclient's own signal that the cell has run
            raise
        except Exception as error:  # noqa: BLE001: whatever the message holds
            note = nbformat.v4.new_output("stream", name="stderr",
                                          text=message("output_unreadable", error=type(error).__name__) + "\n")
            cell.outputs.append(note)
            return note

    def preprocess(self, nb, resources, km=None):
        # The submission's kernel runs each test cell as released (visible tests only): the hidden
        # tests never enter it (they run in the verdict process, DecideGrades), so no hook can copy them.
        hidden = {}
        for index, cell in enumerate(nb.cells):
            if is_test_cell(cell):
                hidden[index] = cell.source
                cell.source = released_source(cell, parent=self)
        self._running, self._chars, self._dropped = 0, 0, {}
        resources.pop(KERNEL_STOPPED, None)
        # the grading's clock starts here, with the kernel: DecideGrades' verdict gets what the kernel left of it
        resources[GRADING_ENDS] = time.monotonic() + self.grading_timeout
        resources[GRADING_BUDGET] = self.grading_timeout
        self._budget_ends = min(time.monotonic() + self.notebook_timeout, resources[GRADING_ENDS])
        try:
            return super().preprocess(nb, resources, km=km)
        except (DeadKernelError, CellTimeoutError) as error:
            key = ("kernel_died" if isinstance(error, DeadKernelError) else
                   "notebook_over_budget" if isinstance(error, NotebookOverBudget) else "timed_out")
            self.log.warning("%s in cell %d; the remaining cells earn no points", type(error).__name__,
                             self._running)
            stop = {"index": self._running, "ename": type(error).__name__, "key": key, "seconds": self.notebook_timeout}
            for cell in nb.cells[self._running:]:
                if cell.cell_type == "code":
                    cell.outputs.append(stopped_output(stop["ename"], key, seconds=stop["seconds"]))
            resources[KERNEL_STOPPED] = stop
            return nb, resources
        finally:
            for index, source in hidden.items():
                nb.cells[index].source = source

    def _get_timeout(self, cell):
        """A cell's own limit, never past the notebook's budget."""
        timeout = super()._get_timeout(cell)
        left = max(1, int(self._budget_ends - time.monotonic()) + 1)
        return left if timeout is None else min(timeout, left)

    def preprocess_cell(self, cell, resources, index):
        self._running = index
        if cell.cell_type == "code" and time.monotonic() >= self._budget_ends:
            raise NotebookOverBudget(f"the notebook ran past {self.notebook_timeout} s")
        cell, resources = super().preprocess_cell(cell, resources, index)
        if index in self._dropped:
            cut = message("outputs_cut", dropped=self._dropped[index], outputs=self.max_outputs,
                          chars=self.max_output_chars)
            cell.outputs.append(NotebookNode(output_type="stream", name="stdout", text=cut + "\n"))
        return cell, resources


def _deciding(kind, content) -> bool:
    """Whether an output (its type and content) is one `own_error` reads: an error, or a stderr stream."""
    return kind == "error" or kind == "stream" and content.get("name") == "stderr"


def _chars(content, limit=sys.maxsize) -> int:
    """About how many characters an output's content takes as JSON: its strings and dicts' keys with their quotes,
    and a few for every other value and every item (a list of twenty million empty strings, or a key of thirty
    million characters, counted as nothing, made a 220 MB graded notebook and a grader of 2.4 GB), and each dict and
    list as CONTAINER characters, about what it takes in the grader's memory: 60 outputs of 49,000 `{}` each, two
    characters apiece, made a grader of 3.1 GB and a feedback page of 100 s and 5.2 GB (the twenty-second session).
    Counting stops past `limit`; a content nested deeper than DEEPEST_OUTPUT counts as larger than any limit (no
    notebook output is: nbformat's deepest are a few levels), and is not walked further."""
    total, waiting = 0, [(content, 0)]
    while waiting and total <= limit:
        value, depth = waiting.pop()
        if depth > DEEPEST_OUTPUT:
            return sys.maxsize
        if isinstance(value, str):
            total += len(value) + 3
        elif isinstance(value, dict):
            total += CONTAINER + sum(len(key) + 3 if isinstance(key, str) else 8 for key in value)
            waiting.extend((inner, depth + 1) for inner in value.values())
        elif isinstance(value, list):
            total += CONTAINER
            waiting.extend((inner, depth + 1) for inner in value)
        else:
            total += 8
    return total


DEEPEST_OUTPUT = 32
CONTAINER = 50  # characters a dict or a list of an output counts as (_chars)
DECIDING_PAST_THE_BOUND = 1000  # characters of a cell's first error or stderr output kept past the notebook's bound


def _shortened(kind, content, limit) -> dict:
    """An output cut to `limit` characters: text shortened, a display too large to show replaced by a note. Made of
    the fields an output of its kind holds, each cut: a field kept as sent (an error's name of 30 M characters, a
    stream's name) was kept whole in the graded notebook."""
    if kind == "stream":
        name = content.get("name") if content.get("name") in ("stdout", "stderr") else "stdout"
        return {"name": name, "text": str(content.get("text", ""))[:limit]}
    if kind == "error":
        traceback = content.get("traceback") if isinstance(content.get("traceback"), list) else []
        return {"ename": str(content.get("ename", ""))[:200], "evalue": str(content.get("evalue", ""))[:limit // 2],
                "traceback": [str(line)[:1000] for line in traceback[:40]]}
    count = content.get("execution_count")
    return {"data": {"text/plain": message("output_too_large", chars=limit)}, "metadata": {},
            **({"execution_count": count} if _a_count(count) else {})}


def _a_count(value) -> bool:
    """Whether `value` is an execution count as nbformat holds one: an int, not negative (a bool is no count)."""
    return type(value) is int and value >= 0


def released_source(cell, parent=None) -> str:
    """What generate_assignment leaves of an instructor's cell: the hidden-test region removed."""
    released = NotebookNode(cell_type=cell.cell_type, source=cell.source, metadata={})
    ClearHiddenTests(parent=parent)._remove_hidden_test_region(released)
    return released.source


GRADING_ENDS = "course_grading_ends"  # resources: when the notebook's grading budget ends (time.monotonic())
GRADING_BUDGET = "course_grading_budget"  # resources: that budget in seconds (SafeExecute.grading_timeout)
# resources: where the kernel stopped (the cell it was running, why), when it did: no later cell earns a point
KERNEL_STOPPED = "course_kernel_stopped"


class GradingOverBudget(Exception):
    """The notebook's grading (kernel and verdict together) ran past SafeExecute.grading_timeout. As with
    VerdictUnavailable, nbgrader records no grade for it and names it: never a zero that blames the student."""


class VerdictUnavailable(Exception):
    """The verdict could not decide this notebook for a reason that is not the submission's: the grader's
    environment, or an instructor's cell that fails there. nbgrader records no grade for the notebook and
    names it; the instructor fixes the cause and grades again."""


class DecideGrades(NbGraderPreprocessor):
    """The points of every test cell, decided where the submission's code cannot reach.

    Runs after SafeExecute and before SaveAutoGrades. It sends the notebook's cells to a verdict
    process (autograder/verdict.py: a sandbox of its own, whose parent runs only the instructor's cells;
    the notebook runs again, as the student ran it, in a program process whose callers send data only to
    one judge per test cell). Then every test cell's outputs are replaced by the grader's own: a "passed"
    line, or an error with the verdict's diagnostic. What the submission's kernel printed there is dropped
    (a forged "tests passed", a published `execute_result` that nbgrader would read as partial credit);
    an error the kernel itself raised in that cell (tampering seen, a crash, a time-out) still costs the
    cell its points and is shown after the grader's line, made printable. So a test cell earns its points
    only when the verdict passed it *and* the notebook's own run did not fail there: the kernel can lose
    points, never gain them. A verdict that cannot start, or whose instructor's cells fail, stops this
    notebook with VerdictUnavailable: the instructor's error, never a zero for the student.
    """

    timeout = Integer(None, allow_none=True,
                      help="Seconds one test cell may run in the verdict (default: the kernel's, Execute.timeout)").tag(config=True)
    memory_bytes = Integer(None, allow_none=True, help="RLIMIT_DATA of the verdict process (default: the "
                                                       "kernel's, GradingKernelManager.memory_bytes)").tag(config=True)
    cpu_seconds = Integer(None, allow_none=True, help="RLIMIT_CPU of each test cell's process (default: the "
                                                      "kernel's, GradingKernelManager.cpu_seconds)").tag(config=True)
    fork_server = Bool(True, help="Fork the verdict process from a warm fork server (torch imported once "
                                  "per grading process) rather than start a new one").tag(config=True)
    start_seconds = Integer(60, help="Seconds the verdict may take to start (before it runs any cell)").tag(config=True)
    grader_machine = Enum(["cuda", "mps"], None, allow_none=True,
                          help="Grade as a grader with this accelerator would, simulated (autograder/simulate.py): "
                               "how the tests show that a GPU grader and a CPU one give the same points").tag(config=True)

    def preprocess(self, nb, resources):
        source = self.source_notebook(resources)
        # The verdict runs the notebook as far as its kernel ran: from the cell where the kernel stopped (a cell
        # that would not stop, a crash, the notebook's budget), no test cell earns a point, and the verdict would
        # only wait out the same limits again. The instructor's cells all run, wherever the submission put them.
        stop = resources.get(KERNEL_STOPPED, {}).get("index", len(nb.cells))
        code = [(index, verdict_cell(cell, parent=self)) for index, cell in enumerate(nb.cells) if cell.cell_type == "code"]
        cells = placed([made for index, made in code if index < stop or made["kind"] == "trusted"], source)
        tests = sum(cell["kind"] == "test" for cell in cells)
        started = time.monotonic()
        records = self.verdict(cells, self.references(source), ends=resources.get(GRADING_ENDS),
                               budget=resources.get(GRADING_BUDGET)) if tests else {}
        self.log.info("Verdict of %d test cells in %.1f s", tests, time.monotonic() - started)
        for index, cell in enumerate(nb.cells):
            if is_test_cell(cell):
                cell.metadata.pop(DIAGNOSIS, None)  # never the submission's own
                if index >= stop:  # the kernel's note alone, as the grader wrote it
                    stopped = resources[KERNEL_STOPPED]
                    cell.outputs = [stopped_output(stopped["ename"], stopped["key"], seconds=stopped["seconds"])]
                    cell.metadata[DIAGNOSIS] = {"key": stopped["key"]}
                    continue
                grade_id = cell.metadata.nbgrader["grade_id"]
                record, kernel_error = records.get(grade_id), own_error(cell)
                cell.outputs = decided_outputs(record, kernel_error)
                if found := diagnosis(record, kernel_error):
                    cell.metadata[DIAGNOSIS] = found
        return nb, resources

    def cell_timeout(self) -> int:
        """This setting, else the kernel's own cell limit as configured (c.Execute.timeout or c.SafeExecute.timeout)."""
        return self.timeout if self.timeout is not None else SafeExecute(config=self.config).timeout

    def limits(self) -> dict:
        """The verdict's per-process limits: these settings, else the kernel's (GradingKernelManager)."""
        kernel = GradingKernelManager(config=self.config)
        return {"memory_bytes": self.memory_bytes if self.memory_bytes is not None else kernel.memory_bytes,
                "cpu_seconds": self.cpu_seconds if self.cpu_seconds is not None else kernel.cpu_seconds}

    def with_limits(self, cells) -> list[dict]:
        """The cells, each test cell with its own limit (`timeout`) in the verdict: its judge first waits
        for the program to run the student's cells before it, each under the cell limit, and the test cell
        before them as released (verdict._released_cell). And how long its
        clock may stand still while its caller runs the student's cells again on other machines (`allowance`):
        RUN_AGAIN_ALLOWANCE times every student cell before it, from the top, each under the cell limit."""
        timeout, waited, before = self.cell_timeout(), 0, 0
        for cell in cells:
            if cell["kind"] == "student":
                waited, before = waited + 1, before + 1
            elif cell["kind"] == "test":
                cell["timeout"], waited = timeout * (1 + waited), 1
                cell["allowance"] = RUN_AGAIN_ALLOWANCE * timeout * max(before, 1)
        return cells

    def deadlines(self, cells) -> list[float]:
        """Seconds each record may take after the one before: the start, then each test cell's limit, plus
        a margin for forks and kills. Kept here, outside the sandbox, where no student process can stop
        the clock (the verdict's parent keeps the same limits, but shares the sandbox with the student's code)."""
        return [self.start_seconds, *(cell["timeout"] + 10 for cell in cells if cell["kind"] == "test")]

    def allowances(self, cells) -> list[float]:
        """Seconds more each record may take where the verdict said its test's clock stood still (with_limits)."""
        return [0, *(cell["allowance"] for cell in cells if cell["kind"] == "test")]

    def source_notebook(self, resources):
        """The assignment's source notebook, as the instructor wrote it; None where there is none."""
        info = resources.get("nbgrader", {})
        if "assignment" not in info or "notebook" not in info:
            return None
        folders = CourseDirectory(config=self.config)
        path = Path(folders.format_path(folders.source_directory, ".", info["assignment"])) / f"{info['notebook']}.ipynb"
        if not path.is_file():
            self.log.warning("No source notebook at %s: each exercise is graded with the student's earlier ones, "
                             "the instructor's cells in the submission's order", path)
            return None
        return nbformat.read(path, as_version=4)

    def references(self, source) -> list[dict]:
        """The instructor's solutions (see `solutions`) in the source notebook; [] where there is none."""
        return [] if source is None else solutions(source, parent=self)

    def verdict(self, cells, references=None, ends=None, budget=None) -> dict:
        """grade id → {"passed": bool, "message" or "key"}: the verdict process's records. `references`:
        what `references` returns, given to the verdict apart from the cells (autograder/verdict.py). `ends`:
        when the notebook's grading budget (`budget` seconds, SafeExecute.grading_timeout) ends; a verdict
        still running then is stopped, and the notebook is not graded (GradingOverBudget)."""
        cells = self.with_limits(cells)
        tests = {cell["grade_id"]: {"source": cell["source"], "visible": cell.get("visible")}
                 for cell in cells if cell["kind"] == "test"}
        program = [{key: value for key, value in cell.items() if key not in ("source", "visible")}
                   if cell["kind"] == "test" else cell for cell in cells]  # a test cell's text: `tests`
        job = {"cells": program, "timeout": self.cell_timeout(), **self.limits(), "sandboxed": sandbox.enabled(self.config),
               "grader_machine": self.grader_machine, "judges_tmp": sandbox.JUDGES_TMP if sandbox.enabled(self.config) else None}
        # the job, the instructor's solutions and the test cells' text, each in a file that has no name: no folder of
        # the grader's disk is the verdict's (its sandbox works in a tmpfs of its own, sandbox.JOB_FOLDER)
        handed = [unnamed_file(job), unnamed_file(references or []), unnamed_file(tests)]
        reader, writer = os.pipe()
        box = process = folder = None
        try:
            if not sandbox.enabled(self.config):
                folder = tempfile.mkdtemp(prefix="course-verdict-")
                process = subprocess.Popen(verdict_command(writer, handed), cwd=folder, env=sandbox.environment(gpus=True),
                                           pass_fds=[writer, *handed], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL, start_new_session=True)
            else:
                box, process = self.start_sandboxed(writer, handed)
            for fd in (writer, *handed):
                os.close(fd)
            writer, handed = None, []
            lines = read_records(reader, self.deadlines(cells), ends=ends, allowances=self.allowances(cells))
            if lines is OVER_BUDGET:
                raise GradingOverBudget(message("grading_over_budget", seconds=budget))
        finally:
            for fd in ([writer] if writer is not None else []) + handed:
                os.close(fd)
            os.close(reader)
            if box is not None:
                box.close(reap=process.wait if isinstance(process, forkserver.AdoptedProcess) else None)
            elif process is not None:
                os.killpg(process.pid, signal.SIGKILL)  # the verdict and every process of its session
                process.wait()
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
        return self.records(lines)

    def records(self, lines) -> dict:
        """The test cells' records, once the verdict said it was ready. VerdictUnavailable when it never did,
        or when an instructor's cell failed in it."""
        records, ready = {}, False
        for line in lines:
            try:
                record = json.loads(line)
                if not ready:
                    ready = record["ready"] is True
                elif record.get("key") in ("verdict_test_cell_unsealed", "verdict_test_cell_gives_code"):
                    raise VerdictUnavailable(message(record["key"], cell=printable(record["instructor_error"], 100),
                                                     named=printable(record.get("error"), 100)))
                elif "instructor_error" in record:
                    raise VerdictUnavailable(message("verdict_instructor_cell",
                                                     cell=printable(record["instructor_error"], 100),
                                                     error=printable(record.get("error"), 100)))
                else:
                    records.setdefault(str(record["grade_id"]), record)
            except (ValueError, KeyError, TypeError):
                self.log.warning("Verdict: unreadable record %r", printable(line, 200))
        if not ready:
            raise VerdictUnavailable(message("verdict_unavailable"))
        return records

    def start_sandboxed(self, writer, handed):
        """The verdict process in a sandbox of its own, working in its own tmpfs: forked from this process's warm
        fork server (torch already imported, as for `course grade`'s kernels) where it can be, else a new process
        (in the same sandbox, started again, as ForkedKernelProvisioner does for a kernel). `writer`: the records'
        pipe; `handed`: the files `verdict_command` names."""
        env = forkserver.autograde_environment(self.config)
        box = sandbox.KernelSandbox(None, log=self.log, config=self.config, judges=True)
        if self.fork_server and sys.platform.startswith("linux"):
            try:
                return box, forkserver.fork_into(box, sys.executable, [], env, kept=[writer, *handed], verdict=True)
            except OSError as error:
                self.log.warning("Fork server unavailable (%s): starting the verdict as a new process", error)
                box.stop()
        return box, box.start(verdict_command(writer, handed), env, keep_fds=[writer, *handed])


def verdict_command(writer, handed) -> list[str]:
    """The verdict as a new process: a plain, isolated Python (`-I`: no folder of the grader on sys.path), given
    the descriptors of its records' pipe (`writer`) and of its job, the solutions and the test cells (`handed`)."""
    return [sys.executable, "-I", "-m", "autograder.verdict", str(writer), *map(str, handed)]


def unnamed_file(data) -> int:
    """A descriptor of a file that holds `data` as JSON, at its start, and has no name anywhere: the verdict's parent
    reads its job at once, and the solutions and the test cells' text only once its program runs apart
    (autograder/verdict.py), so nothing of them is ever in the memory of a process that runs student code."""
    with tempfile.TemporaryFile("w+", encoding="utf-8") as file:
        json.dump(data, file)
        file.flush()
        fd = os.dup(file.fileno())
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def solutions(source, parent=None) -> list[dict]:
    """The instructor's solution cells, each as {"source", "names", "tests"}: the names the released cell
    defines (the exercise's own functions and classes) and the grade ids of its exercise's test cells (those
    after it, up to the next exercise's solution).

    A test cell's caller binds those names to the instructor's solutions of the exercises already judged, so
    that a student's function that calls an earlier exercise's (a `train_step` that asks `model_device`) is
    judged on its own: a wrong answer costs the points of its own exercise only. The verdict's parent sends a
    solution only once every test cell of its exercise has its record, in whatever order the submission holds
    them, so a solution never reaches the student's process before its own points are decided."""
    found, exercise = [], []  # exercise: the solutions the next test cells judge
    for cell in source.cells:
        if cell.cell_type != "code":
            continue
        if is_test_cell(cell):
            for solution in exercise:
                solution["tests"].append(cell.metadata.nbgrader["grade_id"])
        elif utils.is_solution(cell):
            if any(solution["tests"] for solution in exercise):  # a solution after tests: the next exercise
                exercise = []
            released = NotebookNode(cell_type="code", source=cell.source, metadata={})
            ClearSolutions(parent=parent)._replace_solution_region(released, "python")
            if names := defined_names(released.source):
                exercise.append({"source": cell.source, "names": names, "tests": []})
                found.append(exercise[-1])
    return [solution for solution in found if solution["tests"]]  # one no test judges is never sent


def defined_names(source) -> list[str]:
    """The functions and classes a cell defines at its top level."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return [node.name for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]


def verdict_cell(cell, parent=None) -> dict:
    """A code cell as the verdict process needs it: test (with its text as released: nbgrader's own
    delimiters tell its hidden part), instructor's (locked, restored by OverwriteCells), or student's."""
    grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
    if is_test_cell(cell):
        return {"kind": "test", "source": cell.source, "grade_id": grade_id,
                "visible": released_source(cell, parent=parent)}
    if utils.is_locked(cell) and not utils.is_solution(cell):
        return {"kind": "trusted", "source": cell.source, "grade_id": grade_id}
    return {"kind": "student", "source": cell.source, "grade_id": grade_id}


def placed(cells, source) -> list[dict]:
    """The verdict's cells, each instructor's and test cell with its `place`: where the source notebook holds
    it among its code cells (by grade id). The verdict's parent runs the instructor's cells in those places,
    whatever order the submission moved them to (autograder/verdict.py, `instructors_order`); the program
    runs the notebook as the student did. No source: no places, and the parent keeps the submission's order."""
    if source is None:
        return cells
    code = [cell for cell in source.cells if cell.cell_type == "code"]
    places = {cell.metadata.get("nbgrader", {}).get("grade_id"): k for k, cell in enumerate(code)}
    places.pop(None, None)
    for cell in cells:
        if cell["kind"] != "student" and cell["grade_id"] in places:
            cell["place"] = places[cell["grade_id"]]
    return cells


OVER_BUDGET = ["over budget"]  # what read_records returns when the whole grading's budget ran out first


def read_records(fd, deadlines, ends=None, allowances=None) -> list[str]:
    """The verdict's lines, each within its deadline after the one before (`deadlines`, in seconds; the
    last one's for any line past them): past a deadline, or RECORDS_LIMIT bytes, the rest is not waited for.
    Where the verdict says a test's clock stands still (PAUSED_RECORD: its caller runs the student's cells
    again on another machine), that record may take its `allowances` more, once (DecideGrades.allowances; none
    where there are none).
    `ends` (time.monotonic()): the notebook's grading budget; OVER_BUDGET when the verdict had not ended by then."""
    pending, lines, total, extended = b"", [], 0, False
    deadline = time.monotonic() + deadlines[0]
    while total < RECORDS_LIMIT:
        over_budget = ends is not None and ends < deadline
        left = (ends if over_budget else deadline) - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            if over_budget:
                return OVER_BUDGET
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        total += len(chunk)
        *done, pending = (pending + chunk).split(b"\n")
        for line in done:
            if line.decode("utf-8", "replace") == PAUSED_RECORD:
                index = min(len(lines), len(deadlines) - 1)
                if not extended:
                    deadline += allowances[index] if allowances else 0
                extended = True
                continue
            lines.append(line.decode("utf-8", "replace"))
            deadline, extended = time.monotonic() + deadlines[min(len(lines), len(deadlines) - 1)], False
    return lines


def own_error(cell) -> str | None:
    """The first error the submission's kernel raised in this cell, as text (None: it raised none)."""
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            return f"{output.get('ename', '')}: {output.get('evalue', '')}"
        if output.get("output_type") == "stream" and output.get("name") == "stderr":
            return str(output.get("text", ""))
    return None


DIAGNOSIS = "course_diagnosis"  # test-cell metadata of an autograded notebook: what `course insights` counts


ATTEMPTS = "attempts"  # the course folder's attempts/ASSIGNMENT/STUDENT.json: each graded submission's diagnoses


def attempts_file(root, assignment: str, student: str) -> str:
    """Where the grader keeps what each graded submission of `student` got wrong, by submission time:
    outside autograded/, which grading a resubmission replaces (`course insights` reads it)."""
    return os.path.join(str(root), ATTEMPTS, assignment, f"{student}.json")


class RememberAttempts(NbGraderPreprocessor):
    """Keep the diagnoses of every graded submission, by the time it was submitted, so that a student's first
    attempt is not lost when they resubmit (`course insights` shows it apart from the latest). Grading the same
    submission again (`--force`) replaces its entry. After DecideGrades, which stores the diagnoses."""

    def preprocess(self, nb, resources):
        from nbgrader.coursedir import CourseDirectory

        info = resources["nbgrader"]
        with Gradebook(info["db_url"]) as gradebook:
            submitted = gradebook.find_submission(info["assignment"], info["student"]).timestamp
        cells = {cell.metadata["nbgrader"].get("grade_id"): dict(cell.metadata.get(DIAGNOSIS, {}))
                 for cell in nb.cells if is_test_cell(cell)}
        cells.pop(None, None)
        path = attempts_file(CourseDirectory(config=self.config).root, info["assignment"], info["student"])
        recorded = {}
        if os.path.exists(path):
            with open(path, encoding="utf-8") as kept:
                recorded = json.load(kept)
        recorded.setdefault(str(submitted or ""), {})[info["notebook"]] = cells
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as kept:
            json.dump(recorded, kept, indent=1, sort_keys=True)
        return nb, resources


def diagnosis(record, kernel_error) -> dict:
    """The message keys of why a test cell lost its points ({} when it kept them), from the grader's
    records only: the verdict's key and hint (checked against the catalogue there), else why there was
    no verdict, else the kernel's own failure."""
    if record is None:
        return {"key": "verdict_missing"}
    if record.get("passed") is not True:
        found = {"key": str(record.get("key") or "verdict_failed")}
        return found | ({"hint": str(record["hint"])} if record.get("hint") else {})
    return {"key": "own_run_failed"} if kernel_error is not None else {}


def decided_outputs(record, kernel_error) -> list:
    if record is None:
        record = {"passed": False, "key": "verdict_missing"}
    if record.get("passed") is True and kernel_error is None:
        return [NotebookNode(output_type="stream", name="stdout", text=message("verdict_passed") + "\n")]
    outputs = []
    passed = record.get("passed") is True
    if not passed:
        shown = printable(record.get("message") or message(record.get("key") or "verdict_missing"))
        outputs.append(NotebookNode(output_type="error", ename="AssertionError", evalue=shown, traceback=[shown]))
        if kernel_error is not None and _same_diagnostic(kernel_error, shown):
            return outputs  # the visible test failed in the kernel as the grader's check did: shown once
    if kernel_error is not None:
        # the note says what happened: the grader's calls passed, or the cell failed in both runs
        shown = message("own_run_failed" if passed else "own_run_failed_too") + "\n" + printable(kernel_error)
        outputs.append(NotebookNode(output_type="error", ename="OwnRunFailed", evalue=shown, traceback=[shown]))
    return outputs


def _same_diagnostic(kernel_error: str, shown: str) -> bool:
    """Whether the kernel's own error (`ename: evalue`) is the diagnostic the verdict gives."""
    return printable(kernel_error.partition(": ")[2]).strip() == shown.strip()


class NotebookOverBudget(CellTimeoutError):
    """The notebook as a whole ran past SafeExecute.notebook_timeout."""


def stopped_output(ename, key, **fields) -> NotebookNode:
    text = message(key, **fields)
    return NotebookNode(output_type="error", ename=ename, evalue=text, traceback=[text])


def _nbgrader_default(trait) -> list:
    return Autograde.class_traits()[trait].default()


def sanitize_pipeline() -> list:
    """nbgrader's sanitize preprocessors for autograde (the submission before anything runs), after the
    submission's old feedback is removed (ForgetStaleFeedback) and every file that is not the assignment's with
    it (OnlyTheAssignmentsFiles), with cells of
    malformed nbgrader metadata or unknown grade ids made ordinary cells, and OverwriteCells that does not
    warn about test cells left as released (their hidden tests make the checksum differ), so that a warning
    in the log means a test cell was really changed; before it, the cells of a 繁體 view made the released ones
    again (ViewedAsReleased); after it, an instructor's cell the submission lacks put back (RestoreInstructorsCells)."""
    pipeline = [f"{__name__}.ForgetStaleFeedback", f"{__name__}.OnlyTheAssignmentsFiles",
                *_nbgrader_default("sanitize_preprocessors")]
    pipeline.insert(pipeline.index(DeduplicateIds), f"{__name__}.DropMalformedMetadata")
    pipeline.insert(pipeline.index(OverwriteCells), f"{__name__}.ForgetUnknownCells")
    pipeline.insert(pipeline.index(OverwriteCells), f"{__name__}.ViewedAsReleased")
    pipeline.insert(pipeline.index(OverwriteCells) + 1, f"{__name__}.RestoreInstructorsCells")
    pipeline[pipeline.index(OverwriteCells)] = f"{__name__}.OverwriteCellsQuietly"
    return pipeline


def autograde_pipeline() -> list:
    """nbgrader's autograde preprocessors, with SafeExecute for Execute (a kernel that dies or hangs costs
    only the cells that did not run), DecideGrades before SaveAutoGrades reads the points, and
    RememberAttempts at the end (each graded submission's diagnoses, for `course insights`)."""
    pipeline = [f"{__name__}.SafeExecute" if step is Execute else step
                for step in _nbgrader_default("autograde_preprocessors")]
    pipeline.insert(pipeline.index(SaveAutoGrades), f"{__name__}.DecideGrades")
    pipeline.append(f"{__name__}.RememberAttempts")
    return pipeline
