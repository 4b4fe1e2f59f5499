"""The verdict's parts that need no sandbox (autograder/verdict.py, DecideGrades): which names the judge
stubs, how the grader reads records against its own clock, and what makes a notebook undecidable."""
import json
import os
import threading
import time

import pytest

from autograder import verdict
from course.plugins.autograde import DecideGrades, VerdictUnavailable, read_records


def test_the_judge_stubs_the_callables_the_students_cells_bound_and_nothing_else():
    import re

    def helper():
        pass

    trusted = {"torch": object(), "NORMS": (list,)}
    program = {**trusted, "re": re, "DEVICE": re.compile("cuda"), "pick_device": helper, "log": print,
               "NORMS": (dict,), "__builtins__": {}}
    names = verdict.student_names(program, trusted)
    assert names == ["log", "pick_device"]  # not a module, not a value, not what the instructor bound
    judged = verdict._judged({"torch": trusted["torch"]}, ["pick_device", "torch", "print"])
    assert judged["torch"] is trusted["torch"] and "print" not in judged  # the instructor's and Python's stay
    with pytest.raises(RuntimeError):
        judged["pick_device"]()  # a stub: a sealed test calls the student's function through checks.call


def write_later(fd, lines):
    for pause, line in lines:
        time.sleep(pause)
        os.write(fd, (json.dumps(line) + "\n").encode())


@pytest.mark.parametrize("pauses, received", [((0.0, 0.1, 0.1), 3), ((0.0, 3.0, 0.0), 1), ((3.0, 0.0, 0.0), 0)],
                         ids=["in time", "a stopped judge", "never ready"])
def test_the_grader_waits_for_each_record_no_longer_than_its_deadline(pauses, received):
    """Outside the sandbox, where no student process can stop the clock: one deadline per record."""
    reader, writer = os.pipe()
    lines = [{"ready": True}, {"grade_id": "a", "passed": True}, {"grade_id": "b", "passed": True}]
    thread = threading.Thread(target=write_later, args=(writer, list(zip(pauses, lines))), daemon=True)
    thread.start()
    started = time.monotonic()
    read = read_records(reader, [1.0, 1.0, 1.0])
    assert len(read) == received and time.monotonic() - started < 2.5
    thread.join()
    os.close(reader)
    os.close(writer)


def test_a_verdict_still_running_when_the_grading_budget_ends_is_over_budget():
    """The grading process keeps the notebook's whole budget (SafeExecute.grading_timeout): a verdict that sends
    each line just within its own deadline is stopped when the budget ends, and the notebook is not graded."""
    from course.plugins.autograde import OVER_BUDGET

    reader, writer = os.pipe()
    stop = threading.Event()

    def trickle():  # one line every 0.3 s, each well within its own 1 s deadline
        while not stop.wait(0.3):
            os.write(writer, b"{}\n")

    thread = threading.Thread(target=trickle)
    thread.start()
    started = time.monotonic()
    try:
        assert read_records(reader, [1.0, 1.0], ends=started + 1.5) is OVER_BUDGET
        assert 1.4 < time.monotonic() - started < 2.5
        assert read_records(reader, [1.0, 0.1], ends=time.monotonic() + 60) != OVER_BUDGET  # its own deadline first
    finally:
        stop.set()
        thread.join()
        os.close(reader)
        os.close(writer)


def test_records_without_the_ready_line_or_with_an_instructors_error_stop_the_notebook():
    decide = DecideGrades()
    assert decide.records(['{"ready": true}', '{"grade_id": "t", "passed": true}']) == {"t": {"grade_id": "t", "passed": True}}
    with pytest.raises(VerdictUnavailable):
        decide.records(['{"grade_id": "t", "passed": true}'])  # a record before ready is no record
    with pytest.raises(VerdictUnavailable) as stopped:
        decide.records(['{"ready": true}', '{"instructor_error": "imports", "error": "ImportError"}'])
    assert "imports" in str(stopped.value) and "ImportError" in str(stopped.value)


def test_each_test_cell_may_wait_for_the_student_cells_before_it():
    cells = [{"kind": "trusted"}, {"kind": "student"}, {"kind": "student"}, {"kind": "test"},
             {"kind": "test"}, {"kind": "student"}, {"kind": "test"}]
    decide = DecideGrades(timeout=10, start_seconds=60)
    assert decide.deadlines(decide.with_limits(cells)) == [60, 40, 20, 30]


def test_each_solution_names_its_released_functions_and_its_exercises_test_cells():
    from nbformat.v4 import new_code_cell, new_notebook

    from course.plugins.autograde import solutions

    def cell(source, **nbgrader):
        return new_code_cell(source, metadata={"nbgrader": {"grade_id": nbgrader.pop("grade_id"), **nbgrader}})

    half = ("### BEGIN SOLUTION\ndef _helper(x):  # the instructor's own helper: not a name of the exercise\n"
            "    return x\n### END SOLUTION\ndef half(x):\n    ### BEGIN SOLUTION\n    return _helper(x) / 2\n"
            "    ### END SOLUTION")
    quarter = "def quarter(x):\n    ### BEGIN SOLUTION\n    return half(half(x))\n    ### END SOLUTION"
    source = new_notebook(cells=[
        cell("import torch", grade_id="imports", locked=True),
        cell(half, grade_id="half", solution=True),
        cell("assert half(2) == 1", grade_id="test_half", grade=True, points=1),
        cell(quarter, grade_id="quarter", solution=True),
        cell("assert quarter(4) == 1", grade_id="test_quarter", grade=True, points=1),
        cell("assert quarter(8) == 2", grade_id="test_quarter_again", grade=True, points=1),
        cell("def untested():\n    ### BEGIN SOLUTION\n    pass\n    ### END SOLUTION", grade_id="untested",
             solution=True),
    ])
    assert solutions(source) == [{"source": half, "names": ["half"], "tests": ["test_half"]},
                                 {"source": quarter, "names": ["quarter"], "tests": ["test_quarter", "test_quarter_again"]}]


# ------------------------------------------------------------------ an error the student's code raised

OWN = ["import torch\n\ndef double(x):\n    if x.dtype != torch.float32:\n"
       "        raise ValueError('double needs a float32 tensor')\n    return 2 * x  # 0 1 2 3 4 5 6 7 8 9 sep"]
RAISE_LINE = "raise ValueError('double needs a float32 tensor')"
HIDDEN_TEST = ("x = torch.ones(3)\n### BEGIN HIDDEN TESTS\nfor secret_dtype in [torch.float64]:\n"
               "    checks.call('double(x)', double, x.to(secret_dtype))\n### END HIDDEN TESTS\n")


def raised_in_grader(error, lines):
    return verdict.render({"key": "verdict_call_raised",
                           "fields": {"what": {"str": "double(x)"}, "error": {"str": error}, "lines": {"str": lines}}},
                          HIDDEN_TEST, "x = torch.ones(3)\n", OWN)


def test_an_error_the_students_code_raised_shows_its_message_and_the_students_line():
    from autograder.messages import shows

    shown = raised_in_grader("ValueError: double needs a float32 tensor",
                             f"{RAISE_LINE}\nchecks.call('double(x)', double, x.to(secret_dtype))")
    assert shows(shown, "verdict_call_raised_at") and "line of yours" in shown
    assert "ValueError: double needs a float32 tensor" in shown and RAISE_LINE in shown


HIDDEN_BYTES = "for secret_dtype".encode()


@pytest.mark.parametrize("error", [
    "ValueError: secret_dtype",  # a word of the hidden test only
    "ValueError: " + " ".join(str(b) for b in HIDDEN_BYTES),  # spelled in numbers the student wrote
    "ValueError: x" + "".join(chr(0x2200 + b) for b in HIDDEN_BYTES) + "x",  # in separators: one word, "x"
    "ValueError: double needs sep a float32 tensor",  # the student's words, not their literal
], ids=["hidden-word", "numbers", "separators", "words-not-literal"])
def test_a_message_that_is_not_one_of_the_students_literals_shows_only_its_type(error):
    shown = raised_in_grader(error, RAISE_LINE)
    assert "ValueError" in shown and error.partition(": ")[2] not in shown and "secret" not in shown


def test_a_quoted_line_is_the_students_own_whatever_the_caller_pads_it_with():
    padding = "".join("\u2000\u3000\t\u00a0"[b % 4] for b in HIDDEN_BYTES)
    shown = raised_in_grader("ValueError: oops", RAISE_LINE + padding)
    assert RAISE_LINE in shown and padding not in shown and "\u2000" not in shown


def test_a_line_the_student_did_not_write_is_not_quoted():
    from autograder.messages import shows

    shown = raised_in_grader("ValueError: double", "for secret_dtype in [torch.float64]:")
    assert shows(shown, "verdict_call_raised") and "secret_dtype" not in shown and "line of yours" not in shown
