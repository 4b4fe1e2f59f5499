"""The verdict (autograder/verdict.py, DecideGrades in course/plugins/autograde.py): points come from a process
the submission's kernel never touched, so forging them earns nothing. Its parts that need no verdict process
(rendering, the hidden part, a test cell's outputs) are tests/unit/test_verdict.py.

The forgeries are data (course/corpus/forgeries.toml); each class of them is graded by the real
`nbgrader autograde` and by `course grade`, and every test cell's points are asserted.
"""
import base64
import json
import logging
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from uuid import uuid4

import nbformat
import pytest
from nbformat.v4 import new_code_cell
from traitlets.config import Config

from course import classroom
from autograder import kernel
from course.kernels import forkserver, sandbox
from course.plugins import autograde
from course.plugins.autograde import DecideGrades, SafeExecute, VerdictUnavailable
from support.graders import each_grader_under_one_build
from support.messages import shows
from support.notebooks import hidden_lines, source_notebook, verdict_cells

FORGERIES = classroom.corpus("forgeries")["forgery"]
ASSIGNMENTS = sorted({f["assignment"] for f in FORGERIES})
CONTROL = "aaa-control"


# ------------------------------------------------------------------ the program as the student ran it

# x is drawn, unseeded, as the assignments' tests draw theirs: the caller and the judge must draw the same
DOUBLE_TEST = ("from autograder import checks\nx = torch.randn(3)\n"
               "checks.assert_values(checks.call('double(x)', double, x), 2 * x, 'double(x)')")


def decided(answer, tests=1, test=DOUBLE_TEST, **settings) -> dict:
    """The verdict's records for a notebook of one answer cell (or a list of them, in order) and `tests`
    copies of `test`."""
    cells = [{"kind": "trusted", "source": "import torch", "grade_id": "imports"}]
    cells += [{"kind": "student", "source": source, "grade_id": f"answer{k}"}
              for k, source in enumerate(answer if isinstance(answer, list) else [answer])]
    cells += [{"kind": "test", "source": test, "grade_id": f"double{i}", "visible": test} for i in range(tests)]
    return DecideGrades(**settings).verdict(cells)


# Right answers in ordinary Python: module-level state of every kind the filter of old dropped.
ORDINARY = {
    "compiled-pattern": "import re\nNUMERIC = re.compile(r'float|int')\ndef double(x):\n"
                        "    assert NUMERIC.search(str(x.dtype))\n    return 2 * x",
    "logger": "import logging\nlog = logging.getLogger(__name__)\ndef double(x):\n    log.debug('doubling %s', x.shape)\n"
              "    return x * 2",
    "partial": "import functools\ntwice = functools.partial(torch.mul, other=2)\ndef double(x):\n    return twice(x)",
    "attrgetter": "import operator\nmeta = operator.attrgetter('device', 'dtype')\ndef double(x):\n"
                  "    device, dtype = meta(x)\n    return torch.full_like(x, 2, device=device, dtype=dtype) * x",
    "comprehension-table": "FACTORS = {name: k for k, name in enumerate(['zero', 'one', 'two'])}\n"
                           "def double(x):\n    return x * FACTORS['two']",
    "generator-tuple": "SCALES = tuple(float(v) for v in range(3))\ndef double(x):\n    return x * SCALES[2]",
    "dataclass-instance": "from dataclasses import dataclass\n@dataclass\nclass Scale:\n    factor: float\n"
                          "    def __call__(self, x):\n        return x * self.factor\nSCALE = Scale(2.0)\n"
                          "def double(x):\n    return SCALE(x)",
    "enum-member": "import enum\nclass Factor(enum.Enum):\n    TWO = 2\ndef double(x):\n    return x * Factor.TWO.value",
    "alias": "def _times_two(x):\n    return x + x\ndouble = _times_two",
    "default-dtype-set": "FLOATS = {torch.float32, torch.get_default_dtype()}\ndef double(x):\n"
                         "    assert x.dtype in FLOATS\n    return 2 * x",
    "statement-and-magic": "%matplotlib inline\nimport torch\nprint('checking my answer')\nfor _ in range(2):\n"
                           "    pass\ndef double(x):\n    return 2 * x\ndouble(torch.ones(1))",
    "availability-at-definition": "ON_GPU = torch.cuda.is_available()\ndef double(x):\n"
                                  "    return (2 * x).to('cuda' if ON_GPU else x.device)",
    # global state of PyTorch an ordinary notebook sets (issue 41, attack-41): the test cell runs with it
    "seed-at-the-top": "torch.manual_seed(42)  # reproducible\ndef double(x):\n    return 2 * x",
    "smoke-test-that-draws": "def double(x):\n    return 2 * x\nprint(double(torch.randn(1, 3)))",
    "default-dtype-float64": "torch.set_default_dtype(torch.float64)  # precise by default\n"
                             "def double(x):\n    return 2 * x",
    "grad-mode-off": "torch.set_grad_enabled(False)  # inference only\ndef double(x):\n    return 2 * x",
    # as a kernel runs a notebook: its folder first on sys.path, every cell inside a running event loop
    "helper-module-written-with-writefile": ["%%writefile double_helpers.py\ndef twice(x):\n    return 2 * x",
                                             "from double_helpers import twice\ndef double(x):\n    return twice(x)"],
    "task-on-the-running-loop": "import asyncio\nasync def warm_up():\n    await asyncio.sleep(0)\n"
                                "warming = asyncio.create_task(warm_up())\ndef double(x):\n    return 2 * x",
    "top-level-await": "import asyncio\nawait asyncio.sleep(0)\ndef double(x):\n    return 2 * x",
    "needs-a-running-loop-when-called": "import asyncio\ndef double(x):\n    asyncio.get_running_loop()\n"
                                        "    return 2 * x",
    "deterministic-and-printoptions": "torch.use_deterministic_algorithms(True)\n"
                                      "torch.set_printoptions(precision=2, sci_mode=False)\n"
                                      "def double(x):\n    return 2 * x",
}


@pytest.mark.parametrize("answer", ORDINARY.values(), ids=ORDINARY.keys())
def test_a_right_answer_in_ordinary_python_keeps_its_points(answer):
    assert decided(answer)["double0"]["passed"] is True


RUNS_ON = "while True:\n    try:\n        time.sleep(0.05)\n    except KeyboardInterrupt:\n        pass"
QUADRUPLE_TEST = ("from autograder import checks\nx = torch.randn(3)\n"
                  "checks.assert_values(checks.call('quadruple(x)', quadruple, x), 4 * x, 'quadruple(x)')")


def double_then_quadruple(double, quadruple, visible=DOUBLE_TEST, hidden="", **settings) -> dict:
    """The verdict's records for `double`'s cell, its test cell (released as `visible`), `quadruple`'s cell, its test."""
    cells = [{"kind": "trusted", "source": "import torch", "grade_id": "imports"},
             {"kind": "student", "source": double, "grade_id": "double"},
             {"kind": "test", "source": visible + hidden, "grade_id": "test_double", "visible": visible},
             {"kind": "student", "source": quadruple, "grade_id": "quadruple"},
             {"kind": "test", "source": QUADRUPLE_TEST, "grade_id": "test_quadruple", "visible": QUADRUPLE_TEST}]
    return DecideGrades(**settings).verdict(cells)


QUADRUPLE = "def quadruple(x):\n    return 4 * x"


@pytest.mark.parametrize("released, passes", [(True, True), (False, False)],
                         ids=["imported-by-the-released-test", "imported-by-the-hidden-tests-only"])
def test_a_module_a_test_cell_imports_is_the_students_as_in_their_kernel(released, passes):
    """The kernel runs a test cell in the student's namespace: a module its released text imports is bound there for
    the function it calls and for every later cell (a right `save_on_rank_zero` used the `os` only its visible test
    imported: validate passed it, the verdict failed it). One the hidden tests alone import never is, in either."""
    imports = "import math\n"
    hidden = "" if released else f"\n### BEGIN HIDDEN TESTS\n{imports}x = torch.ones(2)\n### END HIDDEN TESTS"
    records = double_then_quadruple("def double(x):\n    return x * math.sqrt(4)", "def quadruple(x):\n    return x * math.sqrt(16)",
                            visible=(imports if released else "") + DOUBLE_TEST, hidden=hidden)
    assert (records["test_double"]["passed"], records["test_quadruple"]["passed"]) == (passes, passes), records


@pytest.mark.parametrize("made_by, double, passes", [
    ("visible", "def double(x):\n    return 2 * x", True),
    ("visible", "def double(x):\n    return 3 * x", True),
    ("hidden", "def double(x):\n    return 2 * x", False),
], ids=["made-by-the-released-test", "made-by-the-released-test-before-it-failed", "made-by-the-hidden-tests-only"])
def test_what_a_test_cell_made_is_there_for_later_cells_as_in_the_kernel(made_by, double, passes):
    """The kernel runs a test cell as released in the student's namespace: a right answer's cell that first looked at
    the `x` its visible test made, then defined its function, passed validate and lost its test in the verdict. What a
    released test cell made before it failed is there too, as in the kernel; what only the hidden tests make never is."""
    made = "made = torch.arange(3.0)\n"
    records = double_then_quadruple(double, "print(made.sum())\n" + QUADRUPLE,
                                    visible=(made if made_by == "visible" else "") + DOUBLE_TEST,
                                    hidden="" if made_by == "visible" else f"\n### BEGIN HIDDEN TESTS\n{made}### END HIDDEN TESTS")
    assert records["test_double"]["passed"] is ("2 *" in double), records
    assert records["test_quadruple"]["passed"] is passes, records


@pytest.mark.parametrize("then", [RUNS_ON, "os._exit(0)"], ids=["runs-on-past-its-limit", "ends-its-process"])
def test_a_test_cell_as_released_costs_the_later_tests_nothing(then):
    """The program runs a test cell as released once its test has ended, in a fork that goes on only if the cell ends:
    a function that, called a second time (by the released cell, not the test), runs on or ends its process (a body
    that does so only in the verdict) costs the later tests nothing."""
    double = ("import os, time\ndef double(x):\n    if os.path.exists('called'):\n"
              + "\n".join("        " + line for line in then.splitlines())
              + "\n    open('called', 'w').close()\n    return 2 * x")
    records = double_then_quadruple(double, QUADRUPLE, timeout=2)
    assert (records["test_double"]["passed"], records["test_quadruple"]["passed"]) == (True, True), records


THREADS_OF_THE_PROGRAM = {  # started in double's cell, used by quadruple's after the first test
    "thread-pool": ("from multiprocessing.pool import ThreadPool\nPOOL = ThreadPool(2)\n",
                    "FACTOR = sum(POOL.map(int, ['2', '2']))\n"),
    "worker-on-a-queue": ("import threading, queue\nJOBS, DONE = queue.Queue(), queue.Queue()\n"
                          "def _work():\n    while True:\n        DONE.put(JOBS.get() * 2)\n"
                          "threading.Thread(target=_work, daemon=True).start()\n", "JOBS.put(2)\nFACTOR = DONE.get()\n"),
}


@pytest.mark.parametrize("started, used", THREADS_OF_THE_PROGRAM.values(), ids=THREADS_OF_THE_PROGRAM.keys())
def test_a_thread_the_program_started_still_works_after_a_test_cell_as_released(started, used):
    """A fork keeps none of a process's threads: where the program went on as the fork that ran a test cell as
    released, a later cell that used a pool or worker thread of an earlier one waited out its limit, and its function
    was never defined (the attacker of this design). A program with threads runs the released cell in place."""
    records = double_then_quadruple(started + "def double(x):\n    return 2 * x",
                                    used + "def quadruple(x):\n    return FACTOR * x", timeout=5)
    assert (records["test_double"]["passed"], records["test_quadruple"]["passed"]) == (True, True), records


PROCESSES_OF_THE_PROGRAM = {  # started in double's cell, used by quadruple's after the first test
    "dataloader-persistent-workers": ("from torch.utils.data import DataLoader, TensorDataset\n"
                                      "LOADER = DataLoader(TensorDataset(torch.ones(4)), batch_size=2, num_workers=1,"
                                      " persistent_workers=True)\nprint(sum(len(batch) for batch, in LOADER))\n",
                                      "FACTOR = sum(len(batch) for batch, in LOADER)\n"),
    "subprocess": ("import subprocess, sys\nHELPER = subprocess.Popen([sys.executable, '-c', 'input()'],"
                   " stdin=subprocess.PIPE)\n", "assert HELPER.poll() is None, HELPER.returncode\nFACTOR = 4\n"),
}


@pytest.mark.parametrize("started, used", PROCESSES_OF_THE_PROGRAM.values(), ids=PROCESSES_OF_THE_PROGRAM.keys())
def test_a_process_the_programs_cells_started_runs_on_past_a_test_as_in_the_kernel(started, used):
    """What a test's calls started is ended with the test; what the student's cells started is the program's, as
    in their kernel (DataLoader workers the grader ended after the first test ended the program, and every later
    test was lost)."""
    records = double_then_quadruple(started + "def double(x):\n    return 2 * x",
                                    used + "def quadruple(x):\n    return FACTOR * x", timeout=10)
    assert (records["test_double"]["passed"], records["test_quadruple"]["passed"]) == (True, True), records


# a pool or worker the student's cells started, that the student's function uses when the test calls it
SERVING_THE_FUNCTION = {
    "thread-pool": "from multiprocessing.pool import ThreadPool\nPOOL = ThreadPool(2)\ndef double(x):\n"
                   "    return POOL.apply(torch.mul, (x, 2))",
    "process-pool": "import multiprocessing\nPOOL = multiprocessing.get_context('fork').Pool(1)\ndef double(x):\n"
                    "    return torch.tensor(POOL.map(float, (2 * x).tolist()))",
    "process-pool-executor": "import multiprocessing\nfrom concurrent.futures import ProcessPoolExecutor\n"
                             "POOL = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context('fork'))\n"
                             "POOL.submit(abs, 1).result()\ndef double(x):\n"
                             "    return torch.tensor(POOL.submit(list, (2 * x).tolist()).result())",
    "dataloader-persistent-workers": "from torch.utils.data import DataLoader, TensorDataset\n"
                                     "LOADER = DataLoader(TensorDataset(torch.ones(4)), batch_size=2, num_workers=1,"
                                     " persistent_workers=True)\nnext(iter(LOADER))\ndef double(x):\n"
                                     "    return x * sum(len(batch) for batch, in LOADER) / 2",
}


@pytest.mark.parametrize("answer", SERVING_THE_FUNCTION.values(), ids=SERVING_THE_FUNCTION.keys())
def test_a_pool_the_students_cells_started_serves_their_function_as_in_the_kernel(answer):
    """A fork keeps none of the program's threads and is the parent of none of its processes: a caller forked from
    a program that has any would find its pools without their workers (the call waited out its limit) or their
    pipes closed. Such a program makes the test's calls itself, as the kernel did."""
    records = decided(answer, tests=2, timeout=10)
    assert [records[f"double{i}"]["passed"] for i in range(2)] == [True, True], records


@pytest.mark.parametrize("leaves", ["", "os.setsid()\n"], ids=["in-its-callers-group", "in-a-session-of-its-own"])
def test_what_a_tests_call_left_running_is_ended_with_its_test(leaves):
    """A process a call started writes a file after the test; the next test's call looks for it. Only the hidden
    part calls double, so that no released cell starts one in the program."""
    double = ("import os, time\ndef double(x):\n    if os.fork() == 0:\n"
              + "".join("        " + line + "\n" for line in (leaves + "time.sleep(1)\nopen('late', 'w').close()\n"
                                                                 "os._exit(0)").splitlines())
              + "    return 2 * x")
    quadruple = "import os, time\ndef quadruple(x):\n    time.sleep(2)\n    return (3 if os.path.exists('late') else 4) * x"
    records = double_then_quadruple(double, quadruple, visible="from autograder import checks\nx = torch.randn(3)\n",
                                    hidden="checks.assert_values(checks.call('double(x)', double, x), 2 * x, 'double(x)')",
                                    timeout=10)
    assert (records["test_double"]["passed"], records["test_quadruple"]["passed"]) == (True, True), records


def test_a_caller_tells_the_student_the_programs_thread_count():
    """A caller runs PyTorch's kernels in one thread (verdict._one_thread); the student's code reads the count the
    program had, as their kernel did (a right loader_kwargs sized its DataLoader workers by it)."""
    answer = ("THREADS = torch.get_num_threads()\ndef double(x):\n"
              "    assert torch.get_num_threads() == THREADS, torch.get_num_threads()\n    return 2 * x")
    assert decided(answer)["double0"]["passed"] is True


def test_a_cells_output_is_in_out_as_the_kernels_run_from_the_top_made_it():
    """`Out[2]` and `_2`: the second cell the kernel ran (after the instructor's imports), as in a run from the
    top; the program had no history, and a right answer's table built from `Out[2]` raised NameError."""
    answer = ["torch.get_default_dtype()", "DTYPES = {'cpu': Out[2], 'again': _2}\ndef double(x):\n"
              "    return (2 * x).to(DTYPES['cpu'])"]
    assert decided(answer)["double0"]["passed"] is True


@pytest.mark.parametrize("sandboxed, fork_server", [(True, True), (True, False), (False, True)],
                         ids=["sandbox-forked-from-the-fork-server", "sandbox-a-new-process", "no-sandbox"])
def test_a_students_cells_and_calls_write_anywhere_in_tmp_as_in_the_kernel(sandboxed, fork_server):
    """The grading kernel may write anywhere in its /tmp: a right answer that logged to `/tmp/debug.log` lost its
    test in the verdict, whose program could write only in its own folder. So on every grader, however the verdict
    starts."""
    log = f"/tmp/course-test-{uuid4().hex}"  # without the sandbox, the grader's own /tmp: removed afterwards
    answer = (f"import logging\nlogging.basicConfig(filename='{log}.log', level=logging.INFO, force=True)\n"
              "log = logging.getLogger('double')\ndef double(x):\n    log.info('doubling %s', x.shape)\n"
              f"    with open('{log}.csv', 'a') as calls:\n        calls.write('double\\n')\n    return 2 * x")
    try:
        records = decided(answer, tests=2, fork_server=fork_server,
                          config=Config({"Sandbox": {"enabled": sandboxed}}))
    finally:
        for written in (f"{log}.log", f"{log}.csv"):
            Path(written).unlink(missing_ok=True)
    assert records["double1"]["passed"] is True


@pytest.mark.parametrize("folder", ["JUDGES_TMP", "JOB_FOLDER"])
def test_the_program_writes_nowhere_the_judges_write(folder):
    """The judges' files (a test's checkpoint, what a call saved) are in a tmpfs of their own, beside /tmp; the job's
    folder, on the grader's disk, is outside /tmp too."""
    if kernel.landlock_abi() < 1:
        pytest.skip("this kernel has no Landlock: the program is confined by the sandbox alone")
    answer = (f"import os\nFOLDER = {getattr(sandbox, folder)!r}\nassert os.path.isdir(FOLDER)\ntry:\n"
              "    open(os.path.join(FOLDER, 'mine'), 'w').close()\n    WROTE = True\n"
              "except PermissionError:  # Landlock's refusal, not a missing folder\n    WROTE = False\n"
              "def double(x):\n    return x * (3 if WROTE else 2)")
    assert decided(answer)["double0"]["passed"] is True


# the student's cell leaves a file wherever a judge might read one: the sandbox's home and temporary folder, a module
# on a path a test adds, and one there that links to a read-only module beside bytecode of the student's, which
# Python runs when its header names the linked file's time and size (`double` is defined only once each is written)
PLANTS = ("import importlib.util, marshal, os\n"
          f"for place in ['/tmp/planted_module.py', '{sandbox.HOME}/planted', '/tmp/planted']:\n"
          "    with open(place, 'w') as file:\n        file.write('PLANTED = True\\n')\n"
          "os.symlink(os.__file__, '/tmp/linked_module.py')\nos.makedirs('/tmp/__pycache__', exist_ok=True)\n"
          "linked = os.stat(os.__file__)\n"
          "with open(importlib.util.cache_from_source('/tmp/linked_module.py'), 'wb') as file:\n"
          "    file.write(importlib.util.MAGIC_NUMBER + bytes(4) + int(linked.st_mtime).to_bytes(4, 'little')\n"
          "               + (linked.st_size & 0xFFFFFFFF).to_bytes(4, 'little')\n"
          "               + marshal.dumps(compile('PLANTED = True', 'linked', 'exec')))\n"
          "def double(x):\n    return 2 * x")
READS_NOTHING_PLANTED = ("import os, sys, tempfile\nsys.path.insert(0, '/tmp')\nseen = []\n"
                         "for name in ('planted_module', 'linked_module'):\n    try:\n"
                         "        module = __import__(name)\n    except ImportError:\n        continue\n"
                         "    if getattr(module, 'PLANTED', False):\n        seen.append(module.__file__)\n"
                         "seen += [p for p in (os.path.expanduser('~/planted'), os.path.abspath('planted'),\n"
                         "                     os.path.join(tempfile.gettempdir(), 'planted')) if os.path.exists(p)]\n"
                         "assert not seen, seen\n" + DOUBLE_TEST)


def test_the_judges_read_nothing_the_students_program_wrote():
    """The program may write anywhere in /tmp: the judges' home, working folder and temporary files are elsewhere, and
    they import no module from a folder the program can write."""
    assert decided(PLANTS, test=READS_NOTHING_PLANTED)["double0"]["passed"] is True


def test_an_error_the_students_function_raised_in_the_grader_shows_its_message_and_line():
    answer = ("def double(x):\n    if x.requires_grad:\n        return 2 * x\n"
              "    raise TypeError('double wants a tensor that requires grad')")
    record = decided(answer)["double0"]
    assert record["passed"] is False and record["key"] == "verdict_call_raised"
    assert "TypeError: double wants a tensor that requires grad" in record["message"]
    assert "raise TypeError('double wants a tensor that requires grad')" in record["message"]


# Each test a1's pick_device has: a call on every machine the course supports, simulated.
ON_EACH_MACHINE = ("from autograder import checks\nfrom autograder.simulate import MACHINES, simulated_machine\n"
                   "x = torch.randn(3)\nfor machine in MACHINES:\n    with simulated_machine(machine):\n"
                   "        found = checks.call(f'device(x)  # {machine}', device, x)\n"
                   "    checks.assert_device_choice(found, machine.present or 'cpu', f'device(x)  # {machine}',"
                   " 'device_hint_order')")


def test_a_students_cell_that_calls_the_checks_keeps_the_later_tests_on_each_machine():
    """A student who ran a test's lines again in a cell of their own (`checks.call` on each grading device): that
    cell asks about the machine, so a later test that simulates machines runs it again in its caller, where its
    call went through the boundary and wrote on the judge's pipe, and no later call could be read back."""
    tried = ("from autograder import checks, grading_devices\nfor device in grading_devices():\n"
             "    checks.call(f'double on {device}', double, torch.ones(2, device=device))")
    test = ("from autograder import checks\nfrom autograder.simulate import MACHINES, simulated_machine\n"
            "x = torch.randn(3)\nfor machine in MACHINES:\n    with simulated_machine(machine):\n"
            "        doubled = checks.call(f'double(x)  # {machine}', double, x)\n"
            "    checks.assert_values(doubled, 2 * x, f'double(x)  # {machine}')")
    records = decided(["def double(x):\n    return 2 * x", tried], test=test)
    assert records["double0"]["passed"] is True, records


@pytest.mark.parametrize("answer, passes", [
    ("def device(x):\n    return torch.device('cuda' if torch.cuda.is_available() else 'mps'\n"
     "                        if torch.backends.mps.is_available() else 'cpu')", True),
    ("WHERE = torch.device('cuda' if torch.cuda.is_available() else 'mps' if torch.backends.mps.is_available() else 'cpu')\n"
     "def device(x):\n    return WHERE", True),
    ("import functools\n@functools.cache\ndef _found():\n    return torch.accelerator.current_accelerator(check_available=True)\n"
     "def device(x):\n    return _found() or torch.device('cpu')", True),
    ("WHERE = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\ndef device(x):\n    return WHERE", False),
    ("WHERE = torch.device('cpu')\ndef device(x):\n    return WHERE", False),
], ids=["asks-when-called", "asks-when-the-cell-ran", "asks-once-and-caches", "forgets-mps", "hard-codes-the-cpu"])
def test_a_value_the_students_cells_computed_is_the_simulated_machines_own(answer, passes):
    """Issue 41: each exercise is judged as each machine would run it, with the simulation in place before the
    student's definitions run: a module-level `DEVICE = ...` is the CUDA machine's on the CUDA machine, on a
    grader with CUDA (simulated) and one without."""
    for grader_machine in (None, "cuda"):
        records = decided(answer, test=ON_EACH_MACHINE, grader_machine=grader_machine)
        assert records["double0"]["passed"] is passes, (grader_machine, records)


def test_a_verdict_without_the_sandbox_leaves_no_folder_of_the_program_behind():
    """`course grade --no-sandbox`: the program's own folder is in the grader's /tmp, with the student's files
    (and those where its cells ran again on other machines, beside it)."""
    mine = f"written-by-the-student-{uuid4().hex}"
    answer = [f"open({mine!r}, 'w').write('mine')", "ON_GPU = torch.cuda.is_available()\ndef device(x):\n"
              "    return torch.device('cuda' if ON_GPU else 'mps' if torch.backends.mps.is_available() else 'cpu')"]
    records = decided(answer, test=ON_EACH_MACHINE, config=Config({"Sandbox": {"enabled": False}}))
    assert records["double0"]["passed"] is True
    assert list(Path("/tmp").glob(f"verdict-*/*/{mine}")) == []


def test_a_verdict_without_the_sandbox_leaves_no_process_of_the_students_behind():
    """`course grade --no-sandbox`: a call that runs on past the last test's limit, and a process it started, are
    ended with the verdict (each caller is a process group of its own, which ending the program no longer ends).
    They write their pids where Landlock lets the program write."""
    pids = Path("/dev/shm") / f"pids-{uuid4().hex}"
    answer = ("import os, time\ndef double(x):\n    os.fork()\n"
              f"    open({str(pids)!r}, 'a').write(f'{{os.getpid()}}\\n')\n"
              + "\n".join("    " + line for line in RUNS_ON.splitlines()))
    records = decided(answer, timeout=2, config=Config({"Sandbox": {"enabled": False}}))
    assert records["double0"].get("key") == "timed_out"
    started = [int(pid) for pid in pids.read_text().split()]
    pids.unlink()
    assert len(started) == 2
    time.sleep(0.5)  # for the last SIGKILL to land
    assert [pid for pid in started if _runs(pid)] == []


def _runs(pid) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("assignment", sorted(path.name for path in (classroom.ROOT / "source").iterdir() if path.is_dir()))
def test_each_solution_keeps_every_point_in_a_verdict_without_the_sandbox(assignment):
    """`course grade --no-sandbox` starts the verdict as a new process, not from the fork server that has
    PyTorch's modules imported: one imported first inside a simulated machine failed, and a3's solution lost a test."""
    source = source_notebook(assignment)
    cells = autograde.placed(verdict_cells({"assignment": assignment}), source)
    records = DecideGrades(config=Config({"Sandbox": {"enabled": False}})).verdict(cells, autograde.solutions(source))
    assert {grade_id: record["passed"] for grade_id, record in records.items()} == dict.fromkeys(records, True)
    assert set(records) == set(classroom.max_points(assignment))


def test_a_diagnostic_names_the_simulated_machine_the_answer_failed_on():
    """A label may use only the test cell's words: a1's said "pick_device(None)  # … accelerator, cuda …" where
    the answer failed on the CUDA build without a GPU."""
    trusts_the_build = next(a for a in classroom.load_corpus("a1_tensor_to") if a.id == "pick_device_trusts_the_build")
    source = source_notebook("a1_tensor_to")
    cells = verdict_cells({"assignment": "a1_tensor_to", "replace": {"pick_device": trusts_the_build.code}})
    records = DecideGrades().verdict(autograde.placed(cells, source), autograde.solutions(source))
    assert records["test_pick_device"]["message"].startswith("pick_device(None)  # no accelerator, cuda build: ")


def test_a_cell_that_neither_asks_about_the_machine_nor_defines_a_function_is_not_run_again():
    """A slow cell that only waits (a training run, say) costs its time once, not once per machine: the cells
    run again are those that asked about the machine, define the student's functions and classes, or mention
    what such a cell binds."""
    answer = ["import time\ntime.sleep(3)", "def device(x):\n    return torch.device('cuda' if torch.cuda.is_available() "
              "else 'mps' if torch.backends.mps.is_available() else 'cpu')"]
    started = time.monotonic()
    assert decided(answer, test=ON_EACH_MACHINE)["double0"]["passed"] is True
    assert time.monotonic() - started < 3 * 3  # the program's sleep, not one more per simulated machine


def test_the_cells_run_again_on_another_machine_leave_the_tests_numbers_as_they_were():
    """Running the student's cells again on a simulated machine draws their random numbers in the caller
    alone: the inputs the test draws next are still the judge's."""
    answer = "NOISE = torch.randn(1000)\nprint('drawn', NOISE.sum())\ndef double(x):\n    return 2 * x"
    test = ("from autograder import checks\nfrom autograder.simulate import simulated_accelerator\n"
            "with simulated_accelerator('cuda'):\n    checks.call('double(1)', double, torch.ones(1))\n"
            "x = torch.randn(3)\n"
            "with simulated_accelerator('cuda'):\n"
            "    checks.assert_values(checks.call('double(x)', double, x), 2 * x, 'double(x)')")
    assert decided(answer, test=test)["double0"]["passed"] is True


def test_a_cell_that_fails_on_another_machine_leaves_the_programs_names():
    """A student's cell that cannot run on a simulated machine (it makes a tensor there, and only availability
    is simulated) still has the program's definitions."""
    answer = "def double(x):\n    return 2 * x\nif torch.cuda.is_available():\n    torch.ones(1, device='cuda')"
    test = ("from autograder import checks\nfrom autograder.simulate import simulated_accelerator\nx = torch.randn(3)\n"
            "with simulated_accelerator('cuda'):\n"
            "    checks.assert_values(checks.call('double(x)', double, x), 2 * x, 'double(x)')")
    assert decided(answer, test=test)["double0"]["passed"] is True


# ------------------------------------------------------------------ what the caller never holds

# As the assignments' hidden tests do: what the check compares against is computed before the call.
EXPECTING_TEST = ("from autograder import checks\nx = torch.randn(3)\nexpected = 2 * x\n"
                  "doubled = checks.call('double(x)', double, x)\nchecks.assert_values(doubled, expected, 'double(x)')")

# Wrong answers (each returns x) that return the test's expected value instead wherever they can reach it.
READS_THE_TEST = {
    "walks-up-the-frames": "import sys\ndef double(x):\n    frame = sys._getframe(1)\n    while frame is not None:\n"
                           "        for scope in (frame.f_locals, frame.f_globals):\n"
                           "            if isinstance(scope.get('expected'), torch.Tensor):\n"
                           "                return scope['expected']\n        frame = frame.f_back\n    return x",
    "scans-the-heap": "import gc\ndef double(x):\n    for found in gc.get_objects():\n"
                      "        if isinstance(found, dict) and isinstance(found.get('expected'), torch.Tensor):\n"
                      "            return found['expected']\n    return x",
    "traces-the-test-cell": "import sys\nseen = {}\ndef watch(frame, event, arg):\n"
                            "    if isinstance(frame.f_globals.get('expected'), torch.Tensor):\n"
                            "        seen['expected'] = frame.f_globals['expected']\n    return watch\n"
                            "sys.settrace(watch)\ndef double(x):\n    return seen.get('expected', x)",
    "watches-every-tensor-made": "from torch.overrides import TorchFunctionMode\nmade = []\n"
                                 "class Watch(TorchFunctionMode):\n"
                                 "    def __torch_function__(self, func, types, args=(), kwargs=None):\n"
                                 "        made.append(func(*args, **(kwargs or {})))\n        return made[-1]\n"
                                 "Watch().__enter__()\ndef double(x):\n"
                                 "    return next((t for t in reversed(made) if isinstance(t, torch.Tensor) and t is not x\n"
                                 "                 and t.shape == x.shape and not t.equal(x)), x)",
}


def earns_beside_the_test(answer, test) -> bool:
    """Whether the answer passes the test when both run in one plain process, as a kernel runs them: the
    proof that each of READS_THE_TEST reaches the expected value wherever the test cell runs beside it."""
    program = "\n".join(["import torch", answer, "try:", *("    " + line for line in test.splitlines()),
                         "except AssertionError:", "    raise SystemExit(1)"])
    return subprocess.run([sys.executable, "-c", program], capture_output=True).returncode == 0


@pytest.mark.parametrize("answer", READS_THE_TEST.values(), ids=READS_THE_TEST.keys())
def test_a_wrong_answer_finds_nothing_the_checks_compare_against(answer):
    """issue 41, item 0: the caller is sent what the test gives the student's function, nothing else of the test
    cell (autograder/calls.py)."""
    assert earns_beside_the_test(answer, EXPECTING_TEST)
    assert decided(answer, test=EXPECTING_TEST)["double0"]["passed"] is False


def test_what_only_the_judge_draws_leaves_both_sides_the_same_numbers():
    """The judge draws `noise`, which the caller never makes: `x` is still the same tensor on both sides."""
    test = ("from autograder import checks\nnoise = torch.randn(100)\nx = torch.randn(3)\n"
            "checks.assert_values(checks.call('double(x)', double, x), 2 * x + 0 * noise[:3], 'double(x)')")
    assert decided("def double(x):\n    return 2 * x", test=test)["double0"]["passed"] is True


@pytest.mark.parametrize("draw", ["random.random()", "numpy.random.rand()", "torch.rand(()).item()"])
def test_what_the_students_call_draws_leaves_both_sides_the_same_numbers(draw):
    """Only the caller runs the student's function: whatever global generator it draws from, the test's next
    draw is the same on both sides (boundary.random_state_kept), so a right answer keeps its points."""
    test = ("from autograder import checks\nimport random\nimport numpy\nx = torch.ones(2)\n"
            "checks.call('double(x)', double, x)\ny = torch.tensor([random.random(), numpy.random.rand()])\n"
            "checks.assert_values(checks.call('double(y)', double, y), 2 * y, 'double(y)')")
    answer = f"import random, numpy\n\ndef double(x):\n    {draw}  # an augmentation, say\n    return 2 * x"
    assert decided(answer, test=test)["double0"]["passed"] is True


@pytest.mark.parametrize("test, shown", [
    ("from autograder import checks\nx = torch.ones(2)\nexpected = double(x)\n"
     "checks.assert_values(checks.call('double(x)', double, x), expected, 'double(x)')", "verdict_test_cell_unsealed"),
    ("from autograder import checks\nx = torch.ones(2)\n"
     "checks.call('double(x, then)', double, x, then=lambda y, x: y.sum())", "verdict_test_cell_gives_code"),
    ("from autograder import checks\nfrom torch import nn\nclass Net(nn.Module):\n    def forward(self, x):\n"
     "        return x\nchecks.call('double(Net())', double, Net())", "verdict_test_cell_gives_code"),
], ids=["calls-the-student-outside-checks-call", "gives-a-function-of-its-own", "gives-a-forward-of-its-own"])
def test_a_test_cell_the_verdict_cannot_seal_is_the_instructors_error(test, shown):
    """The caller receives no code of the test's (autograder/calls.py): such a helper is shipped in
    autograder.probes."""
    with pytest.raises(VerdictUnavailable) as stopped:
        decided("def double(x):\n    return 2 * x", test=test)
    assert shows(str(stopped.value), shown) and "double0" in str(stopped.value)


def test_a_test_cell_may_name_its_checks_as_it_likes():
    """The judge runs the whole test cell: nothing of it is told apart from its calls (no text reaches the caller)."""
    test = ("from autograder import checks\nfrom autograder.checks import assert_values as same\nx = torch.ones(2)\n"
            "same(checks.call('double(x)', double, x), 2 * x, 'double(x)')")
    assert decided("def double(x):\n    return 2 * x", test=test)["double0"]["passed"] is True


# Answers that ask whether CUDA is there, at definition time or when called: a grader with CUDA (simulated)
# and one without give each the same points. The student's cells run on the students' usual machine (the
# CUDA build without a GPU) in the verdict, whatever the grader's, so a value computed at definition time
# does not follow the grader.
AVAILABILITY = {
    "flag-at-definition": ("ON_GPU = torch.cuda.is_available()\ndef double(x):\n"
                           "    return (2 * x).to('cuda' if ON_GPU else x.device)", True),
    "device-at-definition": ("DEVICE = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
                             "def double(x):\n    return (2 * x.to(DEVICE)).to(x.device)", True),
    "moves-when-called": ("def double(x):\n    return (2 * x).to('cuda') if torch.cuda.is_available() else x", False),
    # found by a trial of ordinary styles: asked when called, outside any simulation the test makes, the question
    # was answered by the grader's machine, so a GPU grader passed what is wrong on every laptop
    "skips-the-work-without-a-gpu": ("def double(x):\n    return 2 * x if torch.cuda.is_available() else x", False),
}


@pytest.mark.parametrize("answer, right", AVAILABILITY.values(), ids=AVAILABILITY.keys())
def test_a_grader_with_cuda_and_one_without_give_the_same_points(answer, right):
    on_cpu, on_gpu = decided(answer)["double0"], decided(answer, grader_machine="cuda")["double0"]
    assert on_cpu["passed"] is on_gpu["passed"] is right


WHERE_ON_A_GPU = ("from autograder import checks\nfrom autograder.simulate import Machine, simulated_machine\n"
                  "with simulated_machine(Machine('cuda', 'cuda')):\n    chosen = checks.call('where()', where)\n"
                  "checks.assert_device_choice(chosen, 'cuda', 'where()', 'device_hint_order')")
WHERE_THE_INSTRUCTOR_SAYS = ("from autograder import checks\n"
                             "checks.assert_device_choice(checks.call('where()', where), DEVICE, 'where()', 'device_hint_order')")
# Honest programs the students' machine must not change (the attacker's findings): a function imported under
# another name while the student's cells ran on it, asked later on a simulated GPU; a CUDA-only question at
# definition time on a CPU build; an instructor's cell that reads the machine (it runs on the students' machine
# in the program and in the judge alike, as every cell of the verdict does).
DEFINITIONS = {
    "imported-alias": ("import torch", "from torch.cuda import is_available as cuda_available\ndef where():\n"
                       "    return torch.device('cuda' if cuda_available() else 'cpu')", WHERE_ON_A_GPU),
    "kept-in-a-table": ("import torch", "ORDER = [('cuda', torch.cuda.is_available), ('mps', torch.backends.mps.is_available)]\n"
                        "def where():\n    return torch.device(next((d for d, ok in ORDER if ok()), 'cpu'))", WHERE_ON_A_GPU),
    "arch-list-at-definition": ("import torch", "print('compiled for', torch.cuda.get_arch_list())\ndef where():\n"
                                "    return torch.device('cuda' if torch.cuda.is_available() else 'cpu')", WHERE_ON_A_GPU),
    "instructors-machine": ("import torch\nDEVICE = torch.device('cuda' if torch.cuda.is_available() else 'cpu')",
                            "def where():\n    return DEVICE", WHERE_THE_INSTRUCTOR_SAYS),
}


@pytest.mark.parametrize("trusted, answer, test", DEFINITIONS.values(), ids=DEFINITIONS.keys())
@pytest.mark.parametrize("grader_machine", [None, "cuda"], ids=["cpu-grader", "cuda-grader"])
def test_an_honest_program_keeps_its_points_on_the_students_machine(trusted, answer, test, grader_machine):
    cells = [{"kind": "trusted", "source": trusted, "grade_id": "imports"},
             {"kind": "student", "source": answer, "grade_id": "answer"},
             {"kind": "test", "source": test, "grade_id": "where", "visible": test}]
    assert DecideGrades(grader_machine=grader_machine).verdict(cells)["where"]["passed"] is True


# ------------------------------------------------------------------ each exercise judged on its own

HALF_TEST = ("from autograder import checks\nx = torch.arange(4.0)\n"
             "checks.assert_values(checks.call('half(x)', half, x), x / 2, 'half(x)')")
QUARTER_TEST = ("from autograder import checks\nx = torch.arange(4.0)\n"
                "checks.assert_values(checks.call('quarter(x)', quarter, x), x / 4, 'quarter(x)')")
HALF_SOLUTION = "def half(x):\n    # the instructor's: SOLUTION-MARKER\n    return x / 2"
QUARTER_SOLUTION = "def quarter(x):\n    return x / 4"


def two_exercises(half, quarter="def quarter(x):\n    return half(half(x))", order="hHqQ", extra="") -> dict:
    """Records of a notebook of two exercises where the second's answer calls the first's, graded with
    the instructor's solutions as DecideGrades reads them from the source notebook. `order`: the cells
    after the imports as the submission holds them (h, q: the answers; H, Q: their tests; x: `extra`)."""
    cells = {"h": {"kind": "student", "source": half, "grade_id": "half"},
             "H": {"kind": "test", "source": HALF_TEST, "grade_id": "test_half", "visible": HALF_TEST},
             "q": {"kind": "student", "source": quarter, "grade_id": "quarter"},
             "Q": {"kind": "test", "source": QUARTER_TEST, "grade_id": "test_quarter", "visible": QUARTER_TEST},
             "x": {"kind": "student", "source": extra, "grade_id": None}}
    solutions = [{"source": HALF_SOLUTION, "names": ["half"], "tests": ["test_half"]},
                 {"source": QUARTER_SOLUTION, "names": ["quarter"], "tests": ["test_quarter"]}]
    imports = {"kind": "trusted", "source": "import torch", "grade_id": "imports"}
    return DecideGrades().verdict([imports, *(cells[c] for c in order)], solutions)


# a cell that starts a thread of the program's own, which then makes its tests' calls itself (verdict._calls_in_place)
A_THREAD_OF_ITS_OWN = "import threading\nthreading.Thread(target=threading.Event().wait, daemon=True).start()\n"


def test_a_program_that_makes_its_tests_calls_itself_gets_its_own_functions_back_after_each_test():
    """In a program with a thread of its own, the test's calls are the program's (as the kernel's): the earlier
    exercise's solution bound for quarter's test is the student's own `half` again afterwards, for later cells."""
    third_test = QUARTER_TEST.replace("quarter", "third").replace("x / 4", "3 * x")
    cells = [{"kind": "trusted", "source": "import torch", "grade_id": "imports"},
             {"kind": "student", "source": 'def half(x):\n    """mine"""\n    return x / 2', "grade_id": "half"},
             {"kind": "test", "source": HALF_TEST, "grade_id": "test_half", "visible": HALF_TEST},
             {"kind": "student", "grade_id": "quarter",
              "source": A_THREAD_OF_ITS_OWN + "def quarter(x):\n    return half(half(x))"},
             {"kind": "test", "source": QUARTER_TEST, "grade_id": "test_quarter", "visible": ""},
             {"kind": "student", "grade_id": "third",
              "source": "MINE = half.__doc__ == 'mine'\ndef third(x):\n    return x * (3 if MINE else 0)"},
             {"kind": "test", "source": third_test, "grade_id": "test_third", "visible": third_test}]
    solutions = [{"source": HALF_SOLUTION, "names": ["half"], "tests": ["test_half"]},
                 {"source": QUARTER_SOLUTION, "names": ["quarter"], "tests": ["test_quarter"]}]
    records = DecideGrades().verdict(cells, solutions)
    assert {grade_id: record["passed"] for grade_id, record in records.items()} == dict.fromkeys(records, True), records


def test_a_wrong_answer_costs_only_its_own_exercise_when_a_later_answer_calls_it():
    records = two_exercises("def half(x):\n    return x - 1")
    assert (records["test_half"]["passed"], records["test_quarter"]["passed"]) == (False, True)


def test_a_later_answer_still_fails_on_its_own_mistake_with_the_earlier_solution():
    records = two_exercises("def half(x):\n    return x / 2", quarter="def quarter(x):\n    return half(x)")
    assert (records["test_half"]["passed"], records["test_quarter"]["passed"]) == (True, False)


# Right answers that gave an earlier exercise's function an optional keyword of their own and call it so
# (attack-41's a1 `to_device(..., non_blocking=True)` from `move_batch`, a2 `model_device(model, empty=...)`
# from `train_step`): the call does not fit the solution, so it runs the student's own.
EXTENDED = {
    "keyword": ("def half(x, rounding_mode=None):\n    return torch.div(x, 2, rounding_mode=rounding_mode)",
                "def quarter(x):\n    return half(half(x, rounding_mode=None), rounding_mode=None)"),
    "keyword-only-with-a-default": ("def half(x, *, scale=2):\n    return x / scale",
                                    "def quarter(x):\n    return half(x, scale=4)"),
}


@pytest.mark.parametrize("half, quarter", EXTENDED.values(), ids=EXTENDED.keys())
def test_a_later_answer_that_calls_its_own_extension_of_an_earlier_one_keeps_its_points(half, quarter):
    records = two_exercises(half, quarter=quarter)
    assert (records["test_half"]["passed"], records["test_quarter"]["passed"]) == (True, True)


def test_a_wrong_earlier_answer_still_costs_nothing_where_the_later_call_fits_the_solution():
    records = two_exercises("def half(x, rounding_mode=None):\n    return x - 1",
                            quarter="def quarter(x):\n    return half(half(x))")
    assert (records["test_half"]["passed"], records["test_quarter"]["passed"]) == (False, True)


# A program that looks for the instructor's solution where an attacker would (every object the garbage
# collector tracks, every string of the process's own memory), and answers with it if found.
FINDS_THE_SOLUTION = """import ctypes, gc, re
FOUND_IN = re.compile(rb"SOLUTION-MARKE(?=R)")  # so that this cell's own text is not found
def _found():
    for value in gc.get_objects():
        try:
            if FOUND_IN.search(repr(value)[:100_000].encode()):
                return True
        except Exception:
            pass
    with open("/proc/self/maps") as maps:
        regions = [line.split() for line in maps]
    for region in regions:
        if "rw" in region[1] and (len(region) < 6 or region[5].startswith("[")):
            start, end = (int(v, 16) for v in region[0].split("-"))
            try:
                if FOUND_IN.search(ctypes.string_at(start, end - start)):
                    return True
            except Exception:
                pass
    return False
FOUND = _found()
def half(x):
    return x / 2 if FOUND else x - 1
"""


# The attacker's way to an exercise's solution: move its test cell after a later exercise's, then look for
# the solution in the program's objects before that test runs.
STEALS_A_SOLUTION = """import gc
for _found in [o for o in gc.get_objects() if type(o) is dict and set(o) >= {"source", "names"}]:
    exec(_found["source"], globals())
"""


def test_a_submission_that_moves_a_test_cell_gets_no_solution_before_that_tests_points_are_decided():
    unanswered = "def half(x):\n    raise NotImplementedError()"
    records = two_exercises(unanswered, quarter="def quarter(x):\n    return x / 4", order="hqQxH",
                            extra=STEALS_A_SOLUTION)
    assert (records["test_half"]["passed"], records["test_quarter"]["passed"]) == (False, True)


def test_a_later_exercises_solution_never_answers_an_earlier_exercise_whose_test_cell_was_moved_below_it():
    """attacks-slicing.toml, test-cells-reordered-so-a-later-solution-answers-an-earlier-exercise: the source holds
    half's test before quarter's; a submission that moves it below gets no quarter's solution in half's caller."""
    uses_the_later_solution = ("def half(x):\n    solution = getattr(quarter, '__wrapped__', None)\n"
                               "    return solution(x) * 2 if solution is not None else x")
    source_order = "hHqQ"  # where each cell is in the source notebook, after the imports
    cells = {"h": {"kind": "student", "source": uses_the_later_solution, "grade_id": "half"},
             "H": {"kind": "test", "source": HALF_TEST, "grade_id": "test_half", "visible": HALF_TEST},
             "q": {"kind": "student", "source": "def quarter(x):\n    return x", "grade_id": "quarter"},
             "Q": {"kind": "test", "source": QUARTER_TEST, "grade_id": "test_quarter", "visible": QUARTER_TEST}}
    for key, cell in cells.items():
        cell["place"] = 1 + source_order.index(key)
    solutions = [{"source": HALF_SOLUTION, "names": ["half"], "tests": ["test_half"]},
                 {"source": QUARTER_SOLUTION, "names": ["quarter"], "tests": ["test_quarter"]}]
    imports = {"kind": "trusted", "source": "import torch", "grade_id": "imports", "place": 0}
    records = DecideGrades().verdict([imports, *(cells[c] for c in "hqQH")], solutions)
    assert (records["test_half"]["passed"], records["test_quarter"]["passed"]) == (False, False)


def test_an_exercises_solution_is_nowhere_in_the_students_program_before_its_points_are_decided():
    records = two_exercises(FINDS_THE_SOLUTION)
    assert records["test_half"]["passed"] is False


@pytest.mark.parametrize("where, found", [("the instructor's cell", True), ("a test cell's hidden part", False)])
def test_no_test_cells_text_is_in_the_students_program(where, found):
    """The parent reads the test cells' text only once the program runs apart (autograder/verdict.py), and the
    caller is sent what the test gives the student's functions, never its text (autograder/calls.py): the
    program's objects and memory hold a marker in an instructor's cell, never one in a test cell, not even the
    label of a call of the student's code (which the caller ran when it ran the cell's calls)."""
    marked = "# MARKER-OF-THE-TEST\n"
    hidden = marked + "checks.call('half(x)  # MARKER-OF-THE-TEST', half, x)\n"
    test = HALF_TEST + ("\n### BEGIN HIDDEN TESTS\n" + hidden + "### END HIDDEN TESTS" if not found else "")
    cells = [{"kind": "trusted", "source": "import torch\n" + (marked if found else ""), "grade_id": "imports"},
             {"kind": "student", "source": FINDS_THE_SOLUTION.replace("SOLUTION-MARKE(?=R)", "MARKER-OF-THE-TES(?=T)"),
              "grade_id": "half"},
             {"kind": "test", "source": test, "grade_id": "test_half", "visible": HALF_TEST}]
    assert DecideGrades().verdict(cells)["test_half"]["passed"] is found


# ------------------------------------------------------------------ the instructor's cells where the instructor wrote them

SCALED_TEST = ("from autograder import checks\nx = torch.randn(3)\n"
               "checks.assert_values(checks.call('double(x)', double, x), SCALE * x, 'double(x)')")


def moved(order) -> dict:
    """Records of a notebook whose source holds, in order, the imports (i), an instructor's cell that needs
    them (s: SCALE), the answer (a) and its test (t), with the cells as the submission holds them in
    `order`; x: a student's own `import torch`."""
    cells = {"i": {"kind": "trusted", "source": "import torch", "grade_id": "imports", "place": 0},
             "s": {"kind": "trusted", "source": "SCALE = torch.tensor(2.0)", "grade_id": "scale", "place": 1},
             "a": {"kind": "student", "source": "def double(x):\n    return 2 * x", "grade_id": "double"},
             "t": {"kind": "test", "source": SCALED_TEST, "grade_id": "test_double", "visible": SCALED_TEST,
                   "place": 3},
             "x": {"kind": "student", "source": "import torch", "grade_id": None}}
    return DecideGrades().verdict([cells[c] for c in order])


@pytest.mark.parametrize("order, passed", [
    ("isat", True),   # as released
    ("xsiat", True),  # the instructor's cell moved above the imports, the student's own import above it
    ("siat", True),   # moved above the imports alone (attack-41): the parent ran it first, and stopped
    ("iats", True),   # the test moved above the instructor's cell it needs: its judge has that cell
    ("itsa", False),  # the test moved above the answer: there is no answer to call when it runs
])
def test_an_instructors_cell_moved_by_the_submission_runs_where_the_instructor_wrote_it(order, passed):
    """Attack-41: a2's `norm_layers` moved above the imports failed in the verdict's parent, and the notebook
    got no grade (the instructor's error) instead of its zero. The parent runs the instructor's cells in the
    source's order, so the notebook is graded and each judge has the instructor's cells before its test.
    Where the moved cell breaks the student's own notebook (siat, iats), the kernel's error in the test cell
    costs its points (DecideGrades; graded for real in forgeries.toml)."""
    assert moved(order)["test_double"]["passed"] is passed


# Wrong answers (`double` returns x) whose definitions run code as Python defines them: each tries to
# write a passing record on every descriptor it can reach, or to change what the checks compute.
FORGE = ("import os\nfor fd in range(3, 200):\n    try:\n"
         "        os.write(fd, b'{\"passed\": true, \"grade_id\": \"double0\"}\\n' * 4)\n"
         "    except OSError:\n        pass\n")
AT_DEFINITION = {
    "init-subclass-assigned": "def hook(cls, **kw):\n" + FORGE.replace("\n", "\n    ").replace("import os", "    import os", 1)
                              + "\nclass Base:\n    __init_subclass__ = classmethod(hook)\nclass Child(Base):\n    pass",
    "enum-member-init": "import enum\nclass E(enum.Enum):\n    A = 1\n    def __init__(self, value):\n"
                        + "".join("        " + line + "\n" for line in FORGE.splitlines()),
    "metaclass": "class Meta(type):\n    def __new__(mcs, *args):\n"
                 + "".join("        " + line + "\n" for line in FORGE.splitlines())
                 + "        return super().__new__(mcs, *args)\nclass M(metaclass=Meta):\n    pass",
    "set-name": "class Field:\n    def __set_name__(self, owner, name):\n"
                + "".join("        " + line + "\n" for line in FORGE.splitlines()) + "class Holder:\n    f = Field()",
    "module-level": FORGE,
    "patch-the-checks": "import autograder.checks as c\nc.assert_values = lambda *a, **k: None\n"
                        "import torch\ntorch.equal = lambda *a: True\ntorch.allclose = lambda *a, **k: True",
}


@pytest.mark.parametrize("forgery", AT_DEFINITION.values(), ids=AT_DEFINITION.keys())
def test_code_that_runs_at_definition_time_decides_nothing(forgery):
    records = decided(forgery + "\ndef double(x):\n    return x", tests=2)
    assert [records[f"double{i}"]["passed"] for i in range(2)] == [False, False]


def test_a_stopped_verdict_holds_the_grader_no_longer_than_its_deadlines():
    """A function body stops the verdict's parent (the same user, the same sandbox): the clock outside
    the sandbox ends the verdict; the student's own notebook earns nothing for it, and nothing hangs. The body
    stops every process of the sandbox it sees: once a test cell as released ran in a fork that went on as the
    program, the program's parent is the sandbox's first process or that fork's parent, not the verdict's, and a
    body that stopped only its program's parent succeeded now and then."""
    stop = ("def double(x):\n    import os, signal\n"
            "    for pid in sorted(int(name) for name in os.listdir('/proc') if name.isdigit()):\n"
            "        if pid != os.getpid():\n            os.kill(pid, signal.SIGSTOP)\n    return 2 * x")
    started = time.monotonic()
    records = decided(stop, tests=2, timeout=3)
    assert time.monotonic() - started < 3 * 2 + 10 + 15
    assert not any(record["passed"] for record in records.values())


def test_an_instructors_cell_that_fails_in_the_grader_stops_the_notebook_not_the_student():
    cells = [{"kind": "trusted", "source": "import torch\nfrom autograder import no_such_helper", "grade_id": "imports"},
             {"kind": "student", "source": "def double(x):\n    return 2 * x", "grade_id": "answer"},
             {"kind": "test", "source": DOUBLE_TEST, "grade_id": "double0", "visible": DOUBLE_TEST}]
    with pytest.raises(VerdictUnavailable) as stopped:
        DecideGrades().verdict(cells)
    assert shows(str(stopped.value), "verdict_instructor_cell") and "ImportError" in str(stopped.value)


def test_a_sandboxed_verdict_works_in_an_empty_tmpfs_not_on_the_graders_disk():
    """The job, the solutions and the test cells are handed over as files with no name, and the verdict works in a
    tmpfs of its sandbox, where the program finds nothing: without Landlock, a program once fallocated 1 GiB in the
    job's folder, bound from the grader's disk."""
    answer = ("import os\nMOUNTS = [line.split() for line in open('/proc/self/mountinfo')]\n"
              "TMPFS = any(m[4] == '/var/job' and m[m.index('-') + 1] == 'tmpfs' for m in MOUNTS)\n"
              "EMPTY = os.listdir('/var/job') == []\n"
              "def double(x):\n    return x * (2 if TMPFS and EMPTY else 3)")
    assert decided(answer)["double0"]["passed"] is True


def test_the_verdicts_files_have_no_name_and_hold_their_data():
    handed = autograde.unnamed_file({"cells": ["é"]})
    try:
        assert os.fstat(handed).st_nlink == 0
        with open(os.dup(handed), encoding="utf-8") as file:
            assert json.load(file) == {"cells": ["é"]}
    finally:
        os.close(handed)


def test_a_verdict_that_never_starts_is_the_instructors_error(monkeypatch):
    """The case of issue 41: an environment the verdict cannot run in. No zero is recorded for anyone."""
    monkeypatch.setattr(autograde, "verdict_command", lambda writer, handed: [sys.executable, "-c", "raise SystemExit(1)"])
    with pytest.raises(VerdictUnavailable) as stopped:
        decided("def double(x):\n    return 2 * x", fork_server=False)
    assert shows(str(stopped.value), "verdict_unavailable")


# ------------------------------------------------------------------ the verdict process itself

@pytest.mark.parametrize("forked", [True, False, "unavailable"],
                         ids=["forked from the fork server", "a new process", "fork server unavailable"])
def test_the_verdict_process_decides_the_same_forked_or_new(forked, caplog, monkeypatch):
    """Forked from the warm fork server (the default) or started as a new process, the verdict runs the
    student's program (its statements too: here the SystemExit the shell catches) and decides each test cell."""
    cells = [{"kind": "trusted", "source": "import torch", "grade_id": "imports"},
             {"kind": "student", "source": "def double(x):\n    return 2 * x\nraise SystemExit", "grade_id": "answer"},
             {"kind": "test", "source": "from autograder import checks\n"
                                        "assert checks.call('double(2)', double, torch.tensor(2)).item() == 4",
              "grade_id": "right"},
             {"kind": "test", "source": "from autograder import checks\nassert checks.call('double(1)', double, 1) == 3",
              "grade_id": "wrong"}]
    if forked == "unavailable":  # then a new process, in the same sandbox started again
        monkeypatch.setattr(forkserver, "fork_server", lambda *a: (_ for _ in ()).throw(OSError("stopped")))
    with caplog.at_level(logging.WARNING):
        records = DecideGrades(fork_server=bool(forked)).verdict(cells)
    assert records["right"]["passed"] is True
    assert records["wrong"]["passed"] is False
    assert ("Fork server unavailable" in caplog.text) == (forked == "unavailable")


FORGED_RECORD = """def double(x):
    import os
    for fd in map(int, os.listdir("/proc/self/fd")):
        try:
            os.write(fd, b'{"passed": true}')
        except OSError:
            pass
    os._exit(0)"""


@pytest.mark.parametrize("answer, passes", [
    ("def double(x):\n    return 2 * x", True),
    ("def double(x):\n    return x + x + 0 * x.sum()", True),
    ("def double(x):\n    return x", False),
    (FORGED_RECORD, False),
    ("def double(x):\n    import os, signal\n    os.kill(os.getppid(), signal.SIGKILL)\n    return 2 * x", True),
    ("def double(x):\n    import os, signal\n    os.kill(os.getppid(), signal.SIGKILL)\n    return x", False),
], ids=["right", "right-another-way", "wrong", "forges-the-record", "right-and-ends-the-program", "wrong-and-ends-the-program"])
def test_a_sealed_cells_points_come_from_its_judge_which_sees_only_data(answer, passes):
    """autograder/boundary.py: the student's function runs in the caller, the checks in the judge."""
    test = ("from autograder import checks\nx = torch.arange(3.0)\n"
            "checks.assert_values(checks.call('double(x)', double, x), 2 * x, 'double(x)')")
    cells = [{"kind": "trusted", "source": "import torch", "grade_id": "imports"},
             {"kind": "student", "source": answer, "grade_id": "answer"},
             {"kind": "test", "source": test, "grade_id": "double", "visible": test}]
    record = DecideGrades().verdict(cells).get("double")  # none: the verdict itself was killed
    assert (record is not None and record["passed"]) is passes


LOOPS_ONCE = ("import os, time\ndef double(x):\n    if not os.path.exists('looped'):  # the first caller alone\n"
              "        open('looped', 'w').close()\n" + "\n".join("        " + line for line in RUNS_ON.splitlines())
              + "\n    return 2 * x")


def test_a_cell_that_runs_on_after_its_interrupt_loses_the_later_tests_at_once():
    """As SafeExecute stops a kernel whose cell ran on after its interrupt (every later test then earns
    nothing there), the verdict ends a program that never reached a test within the test's limit: the
    later tests do not each wait out theirs (one such submission held plain nbgrader for a minute)."""
    started = time.monotonic()
    records = decided(["import time\ndef double(x):\n    return 2 * x", RUNS_ON], tests=4, timeout=2)
    assert [records[f"double{i}"].get("key") for i in range(4)] == ["timed_out"] + ["verdict_program_lost"] * 3
    assert time.monotonic() - started < 4 + 3 * 2  # the first test's limit (two cells), not every test's


def test_a_call_that_runs_on_costs_only_its_own_test():
    """A function that never returns in one test's caller holds that caller, not the program: the later
    tests are judged."""
    records = decided(LOOPS_ONCE, tests=3, timeout=2)
    assert [records[f"double{i}"]["passed"] for i in range(3)] == [False, True, True]
    assert records["double0"].get("key") == "timed_out"


@pytest.mark.parametrize("loop", ["while True:\n    time.sleep(0.05)", RUNS_ON, "sum(range(10 ** 12))"],
                         ids=["stops-at-the-interrupt", "swallows-the-interrupt", "runs-on-in-c"])
def test_a_call_that_runs_on_in_a_program_that_makes_its_calls_itself_costs_only_its_own_test(loop):
    """A program with a thread of its own makes its tests' calls itself (a pool the function uses is there): a call
    that runs on is interrupted at the test's limit, as the kernel's cell is, and the later tests are judged. One
    that swallows the interrupt (on hidden inputs only, which the kernel never calls: the attacker of this path) is
    left behind: a fork made before the calls goes on as the program."""
    answer = (A_THREAD_OF_ITS_OWN + "import os, time\ndef double(x):\n"
              "    if not os.path.exists('looped'):  # the first call alone\n        open('looped', 'w').close()\n" + "\n".join("        " + line for line in loop.splitlines())
              + "\n    return 2 * x")
    records = decided(answer, tests=3, timeout=2)
    assert [records[f"double{i}"]["passed"] for i in range(3)] == [False, True, True], records
    assert records["double0"].get("key") == "timed_out"


def test_a_notebook_past_its_time_budget_stops_and_its_later_cells_earn_nothing(tmp_path):
    """Cells under their own limit can still hold the class: the notebook as a whole has a budget."""
    notebook = nbformat.v4.new_notebook(cells=[new_code_cell("import time"), new_code_cell("time.sleep(60)"),
                                               new_code_cell("print('never run')")])
    started = time.monotonic()
    SafeExecute(notebook_timeout=4, timeout=120, interrupt_on_timeout=True).preprocess(
        notebook, {"metadata": {"path": str(tmp_path)}})
    assert time.monotonic() - started < 50  # a kernel's start, the budget, the interrupt: not the minute of sleep
    last = notebook.cells[2].outputs
    assert [o.output_type for o in last] == ["error"] and shows(last[0].evalue, "notebook_over_budget")


def test_the_verdict_runs_the_notebook_only_as_far_as_its_kernel_ran(tmp_path):
    """A cell that does not stop when interrupted stops the kernel, and no later test cell earns a point: the
    verdict ran them all the same, waiting out every test's limit again (a1's checks-patched-by-a-constant held
    each grader a minute). The test cells from the stop on show the kernel's note alone."""
    test = {"nbgrader": {"grade": True, "grade_id": "double0", "locked": True, "points": 1, "schema_version": 3,
                         "solution": False, "task": False}}
    notebook = nbformat.v4.new_notebook(cells=[
        new_code_cell("import torch\ndef double(x):\n    return 2 * x"),
        new_code_cell("import time\nwhile True:\n    try:\n        time.sleep(100)\n    except KeyboardInterrupt:\n        pass"),
        new_code_cell(DOUBLE_TEST, metadata=test)])
    resources = {"metadata": {"path": str(tmp_path)}}
    SafeExecute(timeout=3).preprocess(notebook, resources)
    started = time.monotonic()
    DecideGrades(timeout=3).preprocess(notebook, resources)
    assert time.monotonic() - started < 3  # no verdict: its test's limit is longer
    (shown,) = notebook.cells[2].outputs
    assert shown.output_type == "error" and shows(shown.evalue, "timed_out")
    assert notebook.cells[2].metadata[autograde.DIAGNOSIS] == {"key": "timed_out"}


def test_a_kernel_is_ended_at_once_after_its_last_cell_and_runs_no_exit_handler(tmp_path):
    """A kernel's own shutdown (its exit handlers, PyTorch's teardown) cost a sixth of a class's grading, and an
    exit handler that waits held each notebook for jupyter_client's whole shutdown wait."""
    notebook = nbformat.v4.new_notebook(cells=[new_code_cell(
        "import atexit, pathlib, time\natexit.register(time.sleep, 30)\n"
        "atexit.register(pathlib.Path('exit-handler-ran').write_text, 'yes')"), new_code_cell("print('done')")])
    started = time.monotonic()
    SafeExecute(timeout=120).preprocess(notebook, {"metadata": {"path": str(tmp_path)}})
    assert notebook.cells[1].outputs[0].text == "done\n"
    assert not (tmp_path / "exit-handler-ran").exists() and time.monotonic() - started < 30


# ------------------------------------------------------------------ forgeries, graded for real

def submission(root, forgery):
    assignment = forgery["assignment"]
    if forgery["base"] == "release":
        notebook = nbformat.read(classroom.notebook_path(root, "release", assignment), as_version=4)
    elif forgery["base"] == "wrong":
        corpus = classroom.load_corpus(assignment)
        wrong = {}
        for answer in corpus:
            if not answer.correct:
                wrong.setdefault(answer.exercise, answer)
        notebook = classroom.solved_notebook(root, assignment, wrong.values())
    else:
        notebook = classroom.solved_notebook(root, assignment)
    for cell in notebook.cells:
        if classroom.grade_id(cell) in forgery.get("replace", {}):
            cell.source = forgery["replace"][classroom.grade_id(cell)].strip()
    if "insert" in forgery:
        after = next(i for i, c in enumerate(notebook.cells) if classroom.grade_id(c) == "imports")
        notebook.cells.insert(after + 1, new_code_cell(forgery["insert"].strip()))
    for moved_id, above in forgery.get("move", {}).items():
        moving = next(c for c in notebook.cells if classroom.grade_id(c) == moved_id)
        notebook.cells.remove(moving)
        notebook.cells.insert(next(i for i, c in enumerate(notebook.cells) if classroom.grade_id(c) == above), moving)
    notebook.cells = [cell for cell in notebook.cells if classroom.grade_id(cell) not in forgery.get("delete", [])]
    crafted = forgery.get("crafted")
    if crafted == "bad-points":
        for cell in notebook.cells:
            if classroom.grade_id(cell) == "test_to_device":
                cell.metadata.nbgrader.update(points="lots", grade="yes")
    elif crafted == "metadata-not-a-dict":
        notebook.cells[0].metadata["nbgrader"] = "not a dict"
    elif crafted == "deep-nesting":
        notebook.cells[0].metadata["deep"] = "NESTED"
        return nbformat.writes(notebook).replace('"NESTED"', "[" * 100_000 + "]" * 100_000).encode()
    elif crafted == "many-values":
        notebook.cells[0].metadata["pad"] = "PAD"
        return nbformat.writes(notebook).replace('"PAD"', "[" + "{}," * 300_000 + "{}]").encode()
    return notebook


# A shorter cell limit than the default, as the untrusted class has (tests/grading/test_untrusted.py): a forgery
# that hangs its program (checks-patched-by-a-constant) waits out this limit in the kernel, and a multiple of it in
# the verdict (DecideGrades.with_limits), under each grader: at 60 s that one submission took about 190 s of each
# class. The controls' cells take well under a second.
CELL_LIMIT = "\nc.Execute.timeout = 10\n"


# plain nbgrader here under the CPU build in CI, `course grade` under the CUDA build (test_untrusted.py the other way)
@pytest.fixture(scope="module", params=each_grader_under_one_build(under_the_cpu_build="nbgrader autograde"))
def grader(request):
    return request.param


@pytest.fixture(scope="module")
def graded(grader, course, course_folder):
    """assignment → (course folder, points per student and test cell, log). The four classes are graded two at a
    time, as an instructor may grade two assignments at once: a forgery that waits out a limit holds only its own
    class, and the CI machine's two cores are not asked for more (the class has a 10 s cell limit)."""
    roots = {}
    for assignment in ASSIGNMENTS:
        root = roots[assignment] = course_folder(assignment, f"forgeries-{assignment}", config=CELL_LIMIT)
        classroom.submit(root, assignment, CONTROL, classroom.solved_notebook(root, assignment))
        for forgery in FORGERIES:
            if forgery["assignment"] == assignment:
                made = submission(root, forgery)
                if isinstance(made, bytes):
                    classroom.submit(root, assignment, forgery["id"], raw=made)
                else:
                    classroom.submit(root, assignment, forgery["id"], made)

    def grade(assignment):
        if grader == "nbgrader autograde":
            return classroom.nbgrader(roots[assignment], "autograde", assignment, check=False)[1]
        done = course("grade", assignment, "--root", roots[assignment], "--jobs", "1")
        return done.stdout + done.stderr

    with ThreadPoolExecutor(2) as graders:
        logs = dict(zip(ASSIGNMENTS, graders.map(grade, ASSIGNMENTS)))
    return {assignment: (roots[assignment], classroom.scores(roots[assignment], assignment), logs[assignment])
            for assignment in ASSIGNMENTS}


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_the_control_keeps_every_point(graded, assignment):
    _, scores, log = graded[assignment]
    assert scores.get(CONTROL) == classroom.max_points(assignment), log[-3000:]


GRADED = [f for f in FORGERIES if f.get("graded", True)]


@pytest.mark.parametrize("forgery", [f for f in FORGERIES if not f.get("graded", True)], ids=lambda f: f["id"])
def test_a_crafted_file_is_reported_and_the_class_graded(graded, grader, forgery):
    _, scores, log = graded[forgery["assignment"]]
    assert forgery["id"] not in scores and CONTROL in scores
    if grader == "course grade":  # nbgrader autograde logs its own traceback
        assert shows(log, forgery["shows"]), log[-3000:]


@pytest.mark.parametrize("forgery", GRADED, ids=lambda f: f["id"])
def test_each_forgery_earns_exactly_what_its_answers_earn(graded, forgery):
    root, scores, log = graded[forgery["assignment"]]
    full = classroom.max_points(forgery["assignment"])
    zero = set(full) if forgery["zero"] == "all" else set(forgery["zero"])
    assert scores.get(forgery["id"]) == {cell: 0 if cell in zero else points for cell, points in full.items()}, \
        log[-3000:]


@pytest.mark.parametrize("forgery", [f for f in FORGERIES if f.get("leaks")], ids=lambda f: f["id"])
def test_no_hidden_test_reaches_the_graded_notebook(graded, forgery):
    """What feedback is built from: no line of a hidden test, plain or base64-encoded, in any output."""
    root, _, _ = graded[forgery["assignment"]]
    source = nbformat.read(classroom.notebook_path(root, "source", forgery["assignment"]), as_version=4)
    hidden = {line for line in hidden_lines(source, regions=("HIDDEN TESTS",)) if len(line) > 12}
    encoded = {base64.b64encode(line.encode()).decode()[:16] for line in hidden}
    notebook = nbformat.read(classroom.notebook_path(root, "autograded", forgery["assignment"], forgery["id"]),
                             as_version=4)
    shown = "\n".join(str(output) for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs)
    assert hidden and not [line for line in hidden if line in shown]
    assert not [piece for piece in encoded if piece in shown]


@pytest.mark.parametrize("forgery", [f for f in FORGERIES if f.get("flood")], ids=lambda f: f["id"])
def test_a_flood_of_output_is_cut_with_a_note(graded, forgery):
    root, _, _ = graded[forgery["assignment"]]
    path = classroom.notebook_path(root, "autograded", forgery["assignment"], forgery["id"])
    assert path.stat().st_size < 25 * 2**20
    notebook = nbformat.read(path, as_version=4)
    flooded = next(cell for cell in notebook.cells if "display(i)" in cell.source)
    # what decides a grade (an error, stderr) is kept past the cut (SafeExecute.output); the flood is not
    cut = [o for o in flooded.outputs if o.output_type != "error" and o.get("name") != "stderr"]
    assert len(cut) == SafeExecute().max_outputs + 1 and shows(cut[-1].text, "outputs_cut")


@pytest.mark.parametrize("forgery", GRADED, ids=lambda f: f["id"])
def test_no_forged_passed_line_appears_under_a_failed_test(graded, forgery):
    root, _, _ = graded[forgery["assignment"]]
    notebook = nbformat.read(classroom.notebook_path(root, "autograded", forgery["assignment"], forgery["id"]),
                             as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("grade"):
            kinds = [o.output_type for o in cell.outputs]
            assert "execute_result" not in kinds and "display_data" not in kinds
            if "error" in kinds:
                assert not any("tests passed" in o.get("text", "") for o in cell.outputs)


@pytest.mark.parametrize("grader", ["nbgrader autograde", "course grade"])
def test_a_verdict_that_cannot_run_records_no_zero_under_either_grader(grader, course, course_folder):
    """Issue 41: a verdict that failed for a reason that is not the submission's gave the instructor's own
    solution 0 of 11 under one grader. Now both stop that notebook with a message for the instructor and
    record nothing (here the verdict is given no time to start)."""
    root = course_folder("a1_tensor_to", config="\nc.DecideGrades.start_seconds = 0  # the verdict cannot say it is ready in time\n")
    classroom.submit(root, "a1_tensor_to", "instructor", classroom.solved_notebook(root, "a1_tensor_to"))
    if grader == "nbgrader autograde":
        code, log = classroom.nbgrader(root, "autograde", "a1_tensor_to", check=False)
    else:
        done = course("grade", "a1_tensor_to", "--root", root)
        code, log = done.returncode, done.stdout + done.stderr
    assert code != 0 and "verdict process did not start" in log and "判定进程没有启动" in log, log
    assert "instructor" not in classroom.scores(root, "a1_tensor_to")
