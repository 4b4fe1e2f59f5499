"""The verdict's parts that need no sandbox and no class (autograder/verdict.py, DecideGrades and the
outputs it writes in course/plugins/autograde.py): which names the judge stubs, how the grader reads records
against its own clock, what makes a notebook undecidable, what a diagnostic may show, and what nbgrader
makes of the outputs a test cell is given. The forgeries graded by both graders are tests/grading/test_verdict.py."""
import base64
import json
import os
import threading
import time

import nbformat
import pytest
from nbgrader.utils import determine_grade

from autograder import verdict
from autograder.messages import printable
from course.plugins.autograde import DecideGrades, VerdictUnavailable, decided_outputs, read_records, verdict_cell
from support.messages import shows


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


# ------------------------------------------------------------------ the instructor's cells where the instructor wrote them

def cells_of(order, places=True):
    """Verdict cells in the submission's `order` (i: imports, n: norm_layers, a: an answer, t and u: tests),
    with the places of the source, where the instructor wrote them in the order i, a, t, n, u."""
    source = {"i": ("trusted", 0), "a": ("student", 1), "t": ("test", 2), "n": ("trusted", 3), "u": ("test", 4)}
    cells = []
    for name in order:
        kind, place = source[name]
        cells.append({"kind": kind, "grade_id": name, **({"place": place} if places and kind != "student" else {})})
    return cells


@pytest.mark.parametrize("order, parent", [
    ("iatnu", "itnu"),  # as released
    ("niatu", "itnu"),  # an instructor's cell moved above the imports (attack-41): run where it was written
    ("iutan", "inut"),  # a later test moved first: it gets every instructor's cell before it; the rest follow
    ("tiaun", "itnu"),  # a test moved above the imports: its judge still has them
])
def test_the_parent_runs_the_instructors_cells_in_the_sources_order_and_the_tests_in_the_submissions(order, parent):
    assert "".join(cell["grade_id"] for cell in verdict.instructors_order(cells_of(order))) == parent


def test_without_a_source_notebook_the_parent_keeps_the_submissions_order():
    assert "".join(cell["grade_id"] for cell in verdict.instructors_order(cells_of("niatu", places=False))) == "nitu"


def test_each_instructors_and_test_cell_is_placed_where_the_source_holds_it():
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    from course.plugins.autograde import placed

    def cell(source, grade_id, **nbgrader):
        return new_code_cell(source, metadata={"nbgrader": {"grade_id": grade_id, **nbgrader}})

    source = new_notebook(cells=[new_markdown_cell("# a1"), cell("import torch", "imports", locked=True),
                                 cell("def f(): ...", "f", solution=True),
                                 cell("assert f() is None", "test_f", grade=True, locked=True, points=1),
                                 cell("NORMS = ()", "norms", locked=True)])
    cells = [{"kind": "trusted", "grade_id": "norms"}, {"kind": "student", "grade_id": "f"},
             {"kind": "test", "grade_id": "test_f"}, {"kind": "trusted", "grade_id": "imports"}]
    assert [cell.get("place") for cell in placed(cells, source)] == [3, None, 2, 0]
    assert placed(cells_of("ia", places=False), None) == cells_of("ia", places=False)


def test_a_call_that_fits_the_solution_runs_it_and_one_that_does_not_runs_the_students_own():
    def solution(x, device):
        return ("solution", x, device)

    def own(x, device, non_blocking=False):
        return ("own", x, device, non_blocking)

    bound = verdict._solution_or_own(solution, own)
    assert bound(1, "cpu") == bound(1, device="cpu") == ("solution", 1, "cpu")
    assert bound(1, "cpu", non_blocking=True) == ("own", 1, "cpu", True)  # a keyword of the student's own
    assert bound.__name__ == "solution"
    with pytest.raises(TypeError):
        verdict._solution_or_own(solution, None)(1)  # no own function: the solution's own error

    class Layer:
        pass

    assert verdict._solution_or_own(Layer, own) is Layer  # a class stays the solution's: isinstance holds


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
    shown = raised_in_grader("ValueError: double", "for secret_dtype in [torch.float64]:")
    assert shows(shown, "verdict_call_raised") and "secret_dtype" not in shown and "line of yours" not in shown


# ------------------------------------------------------------------ the hidden part

@pytest.mark.parametrize("comment", ["### ", "# ", ""], ids=["course-style", "one-hash", "bare"])
def test_the_hidden_part_is_nbgraders_whatever_its_comment(comment):
    """One rule: what nbgrader's ClearHiddenTests removes is hidden to the leak guard too."""
    source = (f"x = 1\n{comment}BEGIN HIDDEN TESTS\nsecret_reference_values_for_the_hidden_check = compute_them()\n"
              f"{comment}END HIDDEN TESTS\n")
    cell = nbformat.v4.new_code_cell(source, metadata={"nbgrader": {"grade": True, "grade_id": "t", "points": 1,
                                                                    "solution": False, "locked": True}})
    visible = verdict_cell(cell)["visible"]
    assert "secret_reference" not in visible and "x = 1" in visible
    leaked = {"key": "wrong_values", "fields": {"what": {"str": "x"}, "diff": {"number": 1},
                                                "hint": {"str": "secret_reference_values_for_the_hidden_check = compute_them"}}}
    assert "secret_reference" not in verdict.render(leaked, source, visible)


# ------------------------------------------------------------------ what a test cell shows

def graded_with(outputs, points=3) -> tuple:
    """What nbgrader's own rule (nbgrader.utils.determine_grade, as SaveAutoGrades calls it) gives a test
    cell of `points` whose outputs are `outputs`: (score, max score)."""
    cell = nbformat.v4.new_code_cell("checks.assert_values(...)", metadata={"nbgrader": {
        "grade": True, "solution": False, "locked": True, "grade_id": "t", "points": points}})
    cell.outputs = outputs
    return determine_grade(cell)


def test_a_passed_verdict_with_a_clean_run_earns_the_points_and_shows_the_graders_line():
    (output,) = decided_outputs({"passed": True}, None)
    assert output.output_type == "stream" and output.name == "stdout" and shows(output.text, "verdict_passed")
    assert graded_with([output]) == (3, 3)


def test_the_kernels_own_error_costs_the_cell_even_when_the_verdict_passed():
    outputs = decided_outputs({"passed": True}, "AssertionError: tampering")
    assert [o.output_type for o in outputs] == ["error"] and shows(outputs[0].evalue, "own_run_failed")
    assert graded_with(outputs) == (0, 3)


def test_a_diagnostic_the_kernels_own_run_also_raised_is_shown_once():
    """The visible test failed in the kernel as the grader's check did: the feedback page showed the same
    diagnostic twice, under a note that the grader's calls had passed (issue 43)."""
    diagnostic = "to_device(x, 'meta'): expected a tensor on meta.\nto_device(x, 'meta')：期望张量位于 meta。"
    record = {"passed": False, "key": "wrong_device", "message": diagnostic}
    (output,) = decided_outputs(record, f"AssertionError: {diagnostic}")
    assert output.output_type == "error" and output.evalue == diagnostic
    assert graded_with([output]) == (0, 3)


def test_another_error_of_the_kernel_comes_with_a_note_that_does_not_say_the_grader_passed():
    record = {"passed": False, "key": "wrong_device", "message": "to_device(x, 'meta'): expected a tensor on meta."}
    verdict, own = decided_outputs(record, "NameError: name 'x' is not defined")
    assert verdict.evalue == record["message"]
    assert shows(own.evalue, "own_run_failed_too") and not shows(own.evalue, "own_run_failed")
    assert own.evalue.endswith("NameError: name 'x' is not defined")
    assert graded_with([verdict, own]) == (0, 3)


def test_a_missing_record_earns_nothing():
    (output,) = decided_outputs(None, None)
    assert output.output_type == "error" and shows(output.evalue, "verdict_missing")
    assert graded_with([output]) == (0, 3)


HIDDEN = 'for dtype in [torch.float64, torch.float16]:\n    what = f"to_device(<{dtype} tensor>, {target!r})"'


@pytest.mark.parametrize("fields", [
    {"what": {"str": "to_device(<torch.float64 tensor>, 'meta')"}, "error": {"str": "RuntimeError: " + HIDDEN}},
    {"what": {"str": HIDDEN}, "error": {"str": "ValueError"}},
    {"what": {"str": "to_device(x, 'meta')"}, "error": {"str": base64.b64encode(HIDDEN.encode()).decode()}},
], ids=["in-the-error", "as-the-call", "base64"])
def test_a_diagnostic_is_rendered_from_checked_parts_only(fields):
    shown = verdict.render({"key": "raised", "fields": fields}, source=HIDDEN)
    assert "for dtype in" not in shown and base64.b64encode(HIDDEN.encode()).decode()[:12] not in shown
    assert shows(shown, "raised")


def shown_as_found(hidden_line, found):
    """expected_none's diagnostic, rendered for a cell whose hidden part is `hidden_line`, when the string
    the student's code returned (`found`) was read from the test's own frame."""
    source = f"x = 1\n### BEGIN HIDDEN TESTS\n{hidden_line}\n### END HIDDEN TESTS\n"
    return verdict.render({"key": "expected_none", "fields": {"what": {"str": "f(x)"}, "found": {"str": found},
                                                      "hint": {"text": "hint_no_tensors"}}}, source, "x = 1\n")


def test_a_field_other_than_the_tests_label_never_repeats_a_hidden_line():
    """A hidden line the student's code returned is not shown; the test's own label keeps its words."""
    line = "class HalfMoved(nn.Module):  # a parameter here, a buffer there"
    shown = shown_as_found(line, f"'{line}'")
    assert "HalfMoved" not in shown and shows(shown, "expected_none")
    source = f"x = 1\n### BEGIN HIDDEN TESTS\n{line}\n### END HIDDEN TESTS\n"
    label = verdict.render({"key": "expected_none", "fields": {"what": {"str": "nn.Module(<a parameter here, a buffer there>)"},
                                                       "found": {"str": "'x'"}, "hint": {"text": "hint_no_tensors"}}},
                   source=source)
    assert "nn.Module(<a parameter here, a buffer there>)" in label  # the test's own label keeps its words


def test_a_diagnostic_keeps_the_words_of_its_test_and_its_devices_dtypes_and_numbers():
    fields = {"what": {"str": "to_device(<torch.float64 tensor>, 'meta')"}, "expected": {"dtype": "torch.float64"},
              "found": {"dtype": "torch.float32"}, "hint": {"text": "dtype_hint_keep"}}
    shown = verdict.render({"key": "wrong_dtype", "fields": fields}, source=HIDDEN)
    assert "to_device(<torch.float64 tensor>, 'meta')" in shown and "torch.float32" in shown
    assert shows(shown, "wrong_dtype") and shows(shown, "dtype_hint_keep")


def test_text_from_a_submission_loses_its_terminal_escape_sequences():
    forged = "\x1b]52;c;ZXZpbA==\x07\x1b[2K\r✓ all tests passed\x1b]0;title\x07\x00"
    assert printable(forged) == "✓ all tests passed"
    assert len(printable("x" * 10_000)) < 4100


def test_a_string_of_hidden_words_shows_as_dots_however_it_is_interleaved():
    """The caller ran the whole cell: a string it returned may carry hidden words between known ones."""
    shown = shown_as_found("class Sample(namedtuple): image label source nested pairs",
                           "'Sample nan image label nan source nested nan pairs torch'")
    assert "image" not in shown and "Sample" not in shown and shows(shown, "expected_none")


def test_the_program_writes_only_in_its_own_folder_and_signals_only_itself(tmp_path):
    """Landlock (autograder/kernel.py: confine), where the kernel has it: a caller cannot change a file a
    judge wrote, nor stop the verdict's parent."""
    from autograder import kernel

    abi = kernel.landlock_abi()
    if abi < 1:
        pytest.skip("this kernel has no Landlock: the deadlines and the sandbox hold alone")
    own, judges = tmp_path / "program", tmp_path / "judge.pt"
    own.mkdir()
    judges.write_text("the judge's checkpoint")
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(reader)
        kernel.confine([str(own)])
        outcome = []
        for attempt in (lambda: judges.write_text("swapped"), lambda: (own / "mine").write_text("ok"),
                        lambda: os.kill(os.getppid(), 0)):
            try:
                attempt()
                outcome.append("done")
            except OSError:
                outcome.append("refused")
        os.write(writer, ",".join(outcome).encode())
        os._exit(0)
    os.close(writer)
    os.waitpid(pid, 0)
    outcome = os.read(reader, 100).decode().split(",")
    assert outcome[:2] == ["refused", "done"] and judges.read_text() == "the judge's checkpoint"
    assert outcome[2] == ("refused" if abi >= 6 else "done")


# ------------------------------------------------------------------ the edges mutation testing found (make mutation)

def test_the_instructors_own_callables_and_python_dunders_are_never_stubbed():
    def check():
        pass

    def helper():
        pass

    program = {"check": check, "helper": helper, "__getattr__": helper, "__builtins__": {}}
    assert verdict.student_names(program, {"check": check}) == ["helper"]


@pytest.mark.parametrize("result", [
    {"key": "no_such_message", "fields": {}},
    {"key": "wrong_values", "fields": [["what", {"str": "x"}]]},
    {"key": "wrong_values", "fields": {}},
    {"key": "expected_none", "fields": {"what": {"str": "f(x)"}, "found": ["'x'"], "hint": {"text": "hint_no_tensors"}}},
], ids=["unknown-message", "fields-not-a-mapping", "fields-missing", "a-field-not-typed"])
def test_a_record_the_grader_cannot_render_as_written_shows_only_that_a_check_failed(result):
    assert shows(verdict.render(result, "x = 1"), "verdict_failed")


def test_a_hidden_run_of_words_is_dots_even_when_each_word_is_visible_alone():
    visible = "x = alpha + beta\ny = gamma + delta\n"
    source = visible + "### BEGIN HIDDEN TESTS\nsecret = alpha(beta, gamma, delta)\n### END HIDDEN TESTS\n"
    fields = {"what": {"str": "f(x)"}, "found": {"str": "'alpha beta gamma delta'"}, "hint": {"text": "hint_no_tensors"}}
    shown = verdict.render({"key": "expected_none", "fields": fields}, source, visible)
    assert "alpha beta gamma delta" not in shown and shows(shown, "expected_none")
    fields["found"] = {"str": "'gamma delta alpha beta'"}  # the same words, in no hidden order
    assert "gamma delta alpha beta" in verdict.render({"key": "expected_none", "fields": fields}, source, visible)


def test_the_tests_label_may_use_the_words_of_its_hidden_part():
    visible = "x = 1\n"
    source = visible + "### BEGIN HIDDEN TESTS\nclass HalfMoved: pass\n### END HIDDEN TESTS\n"
    fields = {"what": {"str": "HalfMoved(x)"}, "found": {"str": "'HalfMoved'"}, "hint": {"text": "hint_no_tensors"}}
    shown = verdict.render({"key": "expected_none", "fields": fields}, source, visible)
    assert "HalfMoved(x)" in shown and "'HalfMoved'" not in shown


def test_a_device_field_shows_a_device_and_no_other_field_passes_as_one():
    fields = {"what": {"str": "f(x)"}, "expected": {"device": "cuda:0"}, "found": {"dtype": "cpu"}}
    shown = verdict.render({"key": "wrong_device", "fields": fields}, "x = 1")
    assert "expected device cuda:0, found …" in shown


def test_an_error_of_pytorchs_own_type_keeps_its_type_and_the_words_a_check_knows():
    error = "RuntimeError: Expected all tensors to be on the same device, but found cuda:0 and cpu (secret_name)"
    shown = verdict.render({"key": "raised", "fields": {"what": {"str": "f(x)"}, "error": {"str": error}}}, "x = 1")
    assert "RuntimeError: Expected all tensors to be on the same device …" in shown and "secret_name" not in shown
    torch_own = {"what": {"str": "f(x)"}, "error": {"str": "OutOfMemoryError: tried to allocate"}}
    assert "raised OutOfMemoryError." in verdict.render({"key": "raised", "fields": torch_own}, "x = 1")


def test_only_a_raised_error_gets_the_students_line():
    own = ["def f(x):\n    raise ValueError('no')"]
    fields = {"what": {"str": "f(x)"}, "error": {"str": "ValueError"}, "lines": {"str": "raise ValueError('no')"}}
    assert shows(verdict.render({"key": "raised", "fields": fields}, "x = 1", None, own), "raised")


@pytest.mark.parametrize("literal, quoted", [("x", True), ("y" * 200, True), ("y" * 201, False), ("", False)],
                         ids=["one-character", "at-the-limit", "over-the-limit", "empty"])
def test_a_literal_of_the_students_is_quoted_from_one_character_to_the_limit(literal, quoted):
    written = verdict.Written([f"raise ValueError({literal!r})"])
    assert written.message(literal) == (literal if quoted else None)


HIDDEN_RUN_OF_FOUR = {("a", "b", "c", "d")}
LIMIT_LONG = ("x," * verdict.FIELD_LIMIT)[:verdict.FIELD_LIMIT]
# (field name, (kind, value) as the judge typed it, what the diagnostic shows): a field is shown only as the
# kind it claims to be, and only if it is that kind; anything else is "…"
FIELDS = {
    "device": ("found", ("device", "cuda:0"), "cuda:0"),
    "not-a-device": ("found", ("device", "the grader's home"), "…"),
    "device-as-dtype": ("found", ("dtype", "cpu"), "…"),
    "dtype": ("found", ("dtype", "torch.float16"), "torch.float16"),
    "dtype-not-a-string": ("found", ("dtype", ["torch.float16"]), "…"),
    "dtype-as-number": ("found", ("number", "torch.float16"), "…"),
    "number": ("found", ("number", 2.5), 2.5),
    "number-as-str": ("found", ("str", 5), "…"),
    "number-not-a-number": ("found", ("number", "x"), "…"),
    "shape": ("found", ("shape", [2, 3]), (2, 3)),
    "shape-of-eight": ("found", ("shape", [1] * 8), (1,) * 8),
    "shape-of-nine": ("found", ("shape", [1] * 9), "…"),
    "shape-of-floats": ("found", ("shape", [2.0]), "…"),
    "shape-as-number": ("found", ("number", [1]), "…"),
    "unknown-hint": ("hint", ("text", "no_such_message"), "…"),
    "error-type-and-colons": ("error", ("str", "ValueError: no: really"), "ValueError"),
    "error-of-an-unknown-type": ("error", ("str", "MyOwnError: x"), "Exception"),
    "error-pytorch-knows": ("error", ("str", "RuntimeError: Expected all tensors to be on the same device, x"),
                            "RuntimeError: Expected all tensors to be on the same device …"),
    "str-at-the-limit": ("found", ("str", LIMIT_LONG), LIMIT_LONG),
    "str-over-the-limit": ("found", ("str", LIMIT_LONG + "x"), "…"),
    "label-with-a-hidden-run": ("what", ("str", "a b c d"), "a b c d"),
    "found-with-a-hidden-run": ("found", ("str", "a b c d"), "…"),
    "found-without-one": ("found", ("str", "b a c d"), "b a c d"),
}


@pytest.mark.parametrize("name, item, shown", FIELDS.values(), ids=FIELDS.keys())
def test_a_field_shows_only_as_what_it_claims_to_be(name, item, shown):
    from autograder.messages import text

    words = verdict._words("x = 1") | {"a", "b", "c", "d"}
    assert verdict._field(name, item, words, text, HIDDEN_RUN_OF_FOUR) == shown


def test_the_words_a_diagnostic_may_use_are_pythons_pytorchs_and_the_checks():
    allowed = verdict._words("")
    assert {"len", "float16", "Linear", "assert_values", "running_mean"} <= allowed
    assert {"index", "ndarray", "OrderedDict", "mask", "module"} <= allowed  # named by messages, not by a library


def test_every_cell_of_the_student_is_theirs_to_quote():
    written = verdict.Written(["raise ValueError('first')", "y = 2"])
    assert written.first_line(["raise ValueError('first')"]) == "raise ValueError('first')"
    assert written.message("first") == "first"
