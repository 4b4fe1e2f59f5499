"""The verdict's parts that need no sandbox and no class (autograder/verdict.py, DecideGrades and the
outputs it writes in course/plugins/autograde.py): which names the judge stubs, how the grader reads records
against its own clock, what makes a notebook undecidable, and what nbgrader
makes of the outputs a test cell is given. The forgeries graded by both graders are tests/grading/test_verdict.py."""
import json
import os
import signal
import subprocess
import sys
import threading
import time

import nbformat
import pytest
from nbgrader.utils import determine_grade

from autograder import diagnostics, verdict
from autograder.boundary import JudgeOnlyCall
from autograder.kernel import RUN_AGAIN_ALLOWANCE
from autograder.simulate import MACHINES
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
    with pytest.raises(JudgeOnlyCall):  # a stub: a sealed test calls the student's function through checks.call,
        judged["pick_device"]()  # and one that calls it directly is the instructor's mistake, not the student's


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


def test_a_test_whose_clock_stands_still_may_take_its_allowance_more_once():
    """While a test's caller runs the student's cells again on another machine, the verdict says so once
    (PAUSED_RECORD), and the grader allows that record RUN_AGAIN_ALLOWANCE times its deadline more; the line is
    no record of its own, and a second one gives nothing more."""
    reader, writer = os.pipe()
    paused = {"paused": True}
    lines = [(0.0, {"ready": True}), (0.0, paused), (0.0, paused), (1.5, {"grade_id": "a", "passed": True}),
             (0.0, paused), (2.5, {"grade_id": "b", "passed": True})]  # 1.5 s and 2.5 s: one allowance each, 1 s a record
    thread = threading.Thread(target=write_later, args=(writer, lines), daemon=True)
    thread.start()
    started = time.monotonic()
    read = read_records(reader, [1.0, 0.4, 0.4], allowances=[0, 1.6, 1.6])
    assert [json.loads(line) for line in read] == [{"ready": True}, {"grade_id": "a", "passed": True}]
    assert 3.0 < time.monotonic() - started < 4.0  # b was waited for until its deadline and allowance ended
    thread.join()
    os.close(reader)
    os.close(writer)


@pytest.mark.parametrize("marks, limits", [(b"", 1), (b"(", 1 + RUN_AGAIN_ALLOWANCE), (b"()(", 1 + RUN_AGAIN_ALLOWANCE),
                                           (b"()", 1)], ids=["never", "never resumed", "twice", "at once"])
def test_a_tests_clock_stands_still_while_cells_run_again_and_no_longer_than_its_allowance(marks, limits):
    """run_test's judge waits for a caller that never sends a result: its test times out after its limit, plus
    the time the caller said it ran cells again, up to RUN_AGAIN_ALLOWANCE limits; the grader is told once."""
    calls, silent = os.pipe()
    clock, caller = os.pipe()
    asked, asks = os.pipe()
    os.write(caller, marks)
    told = []
    started = time.monotonic()
    result = verdict.run_test({"grade_id": "t", "source": "pass", "code": compile("pass", "<test t>", "exec")}, {}, 0.3,
                              calls, asks, clock=clock,
                              paused=lambda: told.append(True), allowance=0.3 * RUN_AGAIN_ALLOWANCE)
    took = time.monotonic() - started
    assert result["key"] == "timed_out" and told == [True] * (b"(" in marks)
    assert 0.3 * limits - 0.05 < took < 0.3 * limits + 0.5
    for fd in (calls, silent, clock, caller, asked, asks):
        os.close(fd)


def test_the_allowance_is_one_limit_for_each_machine_besides_the_students():
    assert RUN_AGAIN_ALLOWANCE == len(MACHINES) - 1


def test_a_tests_allowance_counts_every_student_cell_before_it_and_its_limit_those_since_the_last_test():
    """A cell run again on another machine is any of the notebook's from the top (program.mark_again): a
    slow cell early in the notebook is run again for every later test that simulates a machine. Its limit counts
    the student cells since the last test cell, and that test cell, which the program runs as released first."""
    kinds = ["student", "test", "student", "student", "test", "test"]
    decide = DecideGrades(timeout=10)
    cells = decide.with_limits([{"kind": kind} for kind in kinds])
    tests = [cell for cell in cells if cell["kind"] == "test"]
    assert [cell["timeout"] for cell in tests] == [20, 40, 20]
    assert [cell["allowance"] for cell in tests] == [RUN_AGAIN_ALLOWANCE * 10 * n for n in (1, 3, 3)]
    assert decide.allowances(cells) == [0, *(cell["allowance"] for cell in tests)]


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
    assert decide.deadlines(decide.with_limits(cells)) == [60, 40, 30, 40]


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
    assert "secret_reference" not in diagnostics.render(leaked, source, visible)


def test_the_judges_seed_says_nothing_of_the_hidden_part():
    """The caller reads the seed back from the generators each request carries (attacks-slicing.toml,
    judge-seed-…): the seed follows the cell's grade id and released text, and no change of its hidden tests."""
    def cell(grade_id, hidden):
        source = f"x = torch.randn(3)\n### BEGIN HIDDEN TESTS\n{hidden}\n### END HIDDEN TESTS\n"
        return verdict_cell(nbformat.v4.new_code_cell(source, metadata={"nbgrader": {
            "grade": True, "grade_id": grade_id, "points": 1, "solution": False, "locked": True}}))

    assert verdict._seed(cell("t", "checks.call(f, 1)")) == verdict._seed(cell("t", "checks.call(f, 2)"))
    assert verdict._seed(cell("t", "")) != verdict._seed(cell("u", ""))



@pytest.mark.parametrize("received, taken", [
    (b"SEAL" + b'{"passed": true}', True),
    (b'{"passed": true}' + b" " * 17_000, False),  # what a caller's file, written on the judge's pipe, said
    (b'{"passed": true}SEAL{"passed": false}', False),
    (b"SEAL" + b'{"passed": true}' + b" " * verdict.RESULT_LIMIT, False),
], ids=["sealed", "unsealed", "before-the-seal", "too-long"])
def test_only_what_follows_the_judges_seal_is_its_result(received, taken):
    """attacks-slicing.toml, loader-kwargs-path-makes-the-judge-write-its-own-result-pipe."""
    if taken:
        assert verdict._sealed_result(received, b"SEAL") == {"passed": True}
    else:
        with pytest.raises(ValueError):
            verdict._sealed_result(received, b"SEAL")


@pytest.mark.parametrize("restarted", [True, False], ids=["restarted", "as-forked"])
def test_a_thread_pool_a_cell_used_works_in_a_caller_forked_after_it(restarted):
    """A fork keeps no thread: a pool the student's cell had used waited for its dead workers forever (a right
    `move_batch` that moved tensors on a pool of its own timed out)."""
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=2)
    assert list(pool.map(abs, [-1, -2])) == [1, 2]  # its workers started, now idle
    pid = os.fork()
    if pid == 0:  # the caller
        signal.alarm(2)  # a pool waiting on dead workers ends the child by the alarm
        if restarted:
            verdict._thread_pools_restarted()
        os._exit(0 if list(pool.map(abs, [-3])) == [3] else 1)
    _, status = os.waitpid(pid, 0)
    pool.shutdown()
    assert (os.waitstatus_to_exitcode(status) == 0) is restarted

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


def test_after_the_programs_audit_hook_no_other_is_added():
    """attacks-machines.toml: an-audit-hook-rewrites-the-checkpoint-as-the-report-reads-it. In a process of its own:
    an audit hook cannot be removed."""
    code = ("import sys\nfrom autograder import verdict\nsys.addaudithook(verdict._no_audit_hooks)\nseen = []\n"
            "sys.addaudithook(lambda event, args: seen.append(event))\nopen(__import__('os').devnull).close()\n"
            "print(len(seen))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "0", done.stderr


@pytest.fixture
def mounts(tmp_path, monkeypatch):
    """Two folders as the judges see them: one on a read-only mount (the runtime), one the program may write."""
    read_only, writable = tmp_path / "ro", tmp_path / "w"
    read_only.mkdir(), writable.mkdir()
    monkeypatch.setattr(verdict, "_on_read_only_mount", lambda path: str(path).startswith(str(read_only)))
    return read_only, writable


def test_the_judges_take_a_module_only_through_read_only_folders_and_links(tmp_path, mounts):
    """verdict._read_only, as the judges' import guard asks it: a link the program could have made (one in a folder it
    may write) counts as the program's, wherever it points now, and `..` is taken after the links before it, as the
    kernel takes it (collapsed as text, `/tmp/x/../clone/…` named the read-only clone while the kernel followed x)."""
    read_only, writable = mounts
    for folder in (read_only / "sub", writable / "deep", writable / "ro"):
        folder.mkdir()
    for folder in (read_only, writable / "ro"):
        (folder / "mod.py").write_text("X = 1\n")
    (writable / "link.py").symlink_to(read_only / "mod.py")
    (read_only / "link.py").symlink_to(read_only / "mod.py")
    (read_only / "out.py").symlink_to(writable / "ro" / "mod.py")
    (tmp_path / "x").symlink_to(writable / "deep")  # made by the program, beside the read-only folder
    decided = {name: verdict._read_only(str(path)) for name, path in {
        "a file in a read-only folder": read_only / "mod.py",
        "a file in a writable folder": writable / "ro" / "mod.py",
        "a link in a writable folder to a read-only file": writable / "link.py",
        "a link in a read-only folder to a read-only file": read_only / "link.py",
        "a link in a read-only folder to a writable file": read_only / "out.py",
        "not there yet, in a read-only folder": read_only / "sub" / "__pycache__" / "mod.pyc",
        "dot-dot after a link of the program's": f"{tmp_path}/x/../ro/mod.py",
    }.items()}
    assert [name for name, taken in decided.items() if taken] == [
        "a file in a read-only folder", "a link in a read-only folder to a read-only file",
        "not there yet, in a read-only folder"]


def test_a_module_the_judges_do_not_find_stays_not_found_where_the_program_may_write(mounts):
    """Python asks every finder again after the judges' guard found nothing: a module the program wrote in between, in
    a folder it may write on the path searched, was imported unchecked (the second reader's race). Not found is final
    there; on a read-only path, the usual None (importlib.util.find_spec's probes go on as before)."""
    read_only, writable = mounts
    guard = verdict._ReadOnlyModules()
    assert guard.find_spec("no_such_module_anywhere", [str(read_only)]) is None
    with pytest.raises(ModuleNotFoundError):
        guard.find_spec("no_such_module_anywhere", [str(read_only), str(writable)])
