"""Untrusted submissions, graded in one class between two controls, by the real `nbgrader autograde` and
by `course grade` (kernels forked from a warm fork server, several submissions at a time).

Tampering earns nothing from the point it happens and shows a bilingual note; crashes and time-outs
cost only what did not run; broken files get a clear error; the controls keep full marks; the class
finishes in bounded time. The cases are data: tests/corpus/untrusted.toml.
"""
import copy
import re
import time
import tomllib

import nbformat
import pytest
from nbformat.v4 import new_code_cell

from autograder import classroom
from autograder.messages import shows

ASSIGNMENT = "a1_tensor_to"
CASES = tomllib.loads((classroom.ROOT / "tests" / "corpus" / "untrusted.toml").read_text("utf-8"))["case"]
CONTROLS = ["aaa-control-first", "zzz-control-last"]
WRONG = {a.exercise: a for a in classroom.load_corpus(ASSIGNMENT) if a.id.endswith("forgot_assignment")}
# Shorter time limits than nbgrader_config.py's, so the slow cases stay quick (and bounded) in the suite.
# The memory limit is the configured one (GRADING_MEMORY_BYTES, defined earlier in the same file).
TEST_LIMITS = """
c.Execute.timeout = 10
c.Execute.extra_arguments = kernel_arguments(memory_bytes=GRADING_MEMORY_BYTES, cpu_seconds=40)
"""
CLASS_TIME_LIMIT_S = 600
# how each grader names a submission it could not process
NOT_GRADED = {"nbgrader autograde": "for student '{}'", "course grade": "! {}: not graded"}


def index_of(notebook, grade_id):
    return next(i for i, c in enumerate(notebook.cells) if classroom.grade_id(c) == grade_id)


def edited(notebook, case):
    """The solved notebook with the case's edit applied (see the corpus file for the vocabulary)."""
    cells, edit = notebook.cells, case["edit"]
    where = next((i for i, c in enumerate(cells) if classroom.grade_id(c) == case["cell"]), None)
    if "also_wrong" in case:
        cells[index_of(notebook, case["also_wrong"])].source = WRONG[case["also_wrong"]].code.strip()
    if edit == "replace":
        cells[where].source = case["code"].strip()
    elif edit == "insert":
        cells.insert(where + 1, new_code_cell(case["code"].strip()))
        if "then_code" in case:
            after = max(index_of(notebook, case["then_after"]), where + 1)
            cells.insert(after + 1, new_code_cell(case["then_code"].strip()))
    elif edit == "delete":
        del cells[where]
    elif edit == "empty":
        cells[where].source = ""
    elif edit == "strip":
        del cells[where].metadata["nbgrader"]
    elif edit == "forge":
        forged = new_code_cell(case["code"], metadata={"nbgrader": {
            "grade": True, "grade_id": case["cell"], "locked": True, "points": 100, "schema_version": 3,
            "solution": False, "task": False}})
        cells.append(forged)
    elif edit == "duplicate":
        twin = copy.deepcopy(cells[where])
        twin.id = f"{twin.id}-copy"  # Jupyter gives a pasted cell its own id
        cells.insert(where + 1, twin)
    elif edit == "to_end":
        cells.append(cells.pop(where))
    elif edit == "prefill":
        for cell in cells:
            if cell.metadata.get("nbgrader", {}).get("grade") and cell.cell_type == "code":
                cell.outputs = [nbformat.v4.new_output("stream", text="tests passed / 测试通过\n")]
                cell.execution_count = 1
    else:
        raise ValueError(f"unknown edit {edit!r}")
    return notebook


@pytest.fixture(scope="module", params=NOT_GRADED)
def grader(request):
    return request.param


@pytest.fixture(scope="module")
def graded(grader, course, tmp_path_factory):
    root = tmp_path_factory.mktemp("untrusted")
    classroom.prepare_course(root, ASSIGNMENT)
    with open(root / "nbgrader_config.py", "a", encoding="utf-8") as config:
        config.write(TEST_LIMITS)
    for student in CONTROLS:
        classroom.submit(root, ASSIGNMENT, student, classroom.solved_notebook(root, ASSIGNMENT))
    for case in CASES:
        student = case["id"]
        if "raw" in case:
            classroom.submit(root, ASSIGNMENT, student, raw=case["raw"].encode())
            continue
        notebook = classroom.solved_notebook(root, ASSIGNMENT)
        if "edit" in case:
            notebook = edited(notebook, case)
        classroom.submit(root, ASSIGNMENT, student, notebook)
        if "filename" in case:
            path = classroom.notebook_path(root, "submitted", ASSIGNMENT, student)
            path.rename(path.with_name(case["filename"]))
    started = time.monotonic()
    if grader == "nbgrader autograde":
        _, log = classroom.nbgrader(root, "autograde", ASSIGNMENT, check=False)
    else:
        done = course("grade", ASSIGNMENT, "--root", root, timeout=CLASS_TIME_LIMIT_S)
        log = done.stdout + done.stderr
    elapsed = time.monotonic() - started
    return root, classroom.scores(root, ASSIGNMENT), log, elapsed


@pytest.mark.parametrize("student", CONTROLS)
def test_control_students_keep_full_marks(graded, student):
    _, scores, _, _ = graded
    assert scores[student] == classroom.max_points(ASSIGNMENT)


@pytest.mark.parametrize("case", [c for c in CASES if c.get("graded", True)], ids=lambda c: c["id"])
def test_each_case_earns_exactly_what_it_should(graded, case):
    course, scores, log, _ = graded
    assert case["id"] in scores, f"{case['id']} was not graded:\n{log[-3000:]}"
    full = classroom.max_points(ASSIGNMENT)
    expected = {cell: 0 if cell in case["zero"] else points for cell, points in full.items()}
    assert scores[case["id"]] == expected


@pytest.mark.parametrize("case", [c for c in CASES if "shows" in c], ids=lambda c: c["id"])
def test_each_case_shows_its_bilingual_note(graded, case):
    course, _, _, _ = graded
    shown = classroom.diagnostics(course, ASSIGNMENT, case["id"])
    for cell in case["zero"]:
        assert shows(shown.get(cell, ""), case["shows"]), f"{case['id']} · {cell}: {shown.get(cell)}"


@pytest.mark.parametrize("case", [c for c in CASES if not c.get("graded", True)], ids=lambda c: c["id"])
def test_broken_files_are_reported_and_earn_nothing(graded, grader, case):
    course, scores, log, _ = graded
    assert case["id"] not in scores
    assert NOT_GRADED[grader].format(case["id"]) in log


def test_the_memory_bomb_asks_for_more_than_the_configured_limit():
    """The memory-bomb case holds at the limit instructors really get, not at a lowered one."""
    config = (classroom.ROOT / "nbgrader_config.py").read_text("utf-8")
    configured = eval(re.search(r"^GRADING_MEMORY_BYTES = (.+?)  #", config, re.MULTILINE).group(1))
    bomb = next(c for c in CASES if c["id"] == "memory-bomb")
    asked = eval(re.search(r"bytearray\((.+?)\)", bomb["code"]).group(1))
    assert configured < asked < 24 * 2**30  # more than a kernel may take, less than this machine has


def test_huge_output_is_truncated(graded):
    course, _, _, _ = graded
    autograded = classroom.notebook_path(course, "autograded", ASSIGNMENT, "huge-print")
    assert autograded.stat().st_size < 2_000_000


def test_the_class_finishes_in_bounded_time_with_a_consistent_gradebook(graded):
    course, scores, _, elapsed = graded
    assert elapsed < CLASS_TIME_LIMIT_S
    graded_cases = {c["id"] for c in CASES if c.get("graded", True)}
    assert set(scores) == graded_cases | set(CONTROLS)
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for student in scores:
            submission = gradebook.find_submission(ASSIGNMENT, student)
            assert submission.score == pytest.approx(sum(scores[student].values()))
