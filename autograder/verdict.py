"""The verdict: whether each test cell passed, decided by a process that never runs student code.

`course.plugins.autograde.DecideGrades` (an nbgrader preprocessor, so plain `nbgrader autograde` and
`course grade` both use it) starts this module as a plain Python process in a sandbox of its own, in a
fresh folder, and sends it the notebook's cells. Its parent process, which alone writes the records on
the grader's pipe, runs only the instructor's locked cells (restored from the gradebook by nbgrader).
The submission runs in processes of their own, which can write nothing but data to one judge each:

* the *program* (forked before anything else ran, so it holds none of the parent's descriptors but its
  own pipes; autograder/program.py) runs the whole notebook as the student's kernel ran it, every cell in
  order in an IPython shell, the instructor's cells and the student's, magics, module-level calls, loggers
  and patterns included, and each test cell as released (which the student has) once its test has ended
  (_released_cell). It judges no test: when the parent reaches a test cell, the program forks
* a *caller* from its state at that cell (a program with threads or processes of its own, which a fork would not
  have, is its own caller: _calls_in_place). The caller runs no text of the test cell: it waits for the judge's
  requests (autograder/calls.py), each a call of the student's code with what the test gives it, as data,
  makes the call with the student's namespace, where the exercises judged before this one are the
  instructor's solutions (so that an answer that calls an earlier one is judged on its own), and sends what
  the student's function returned, as data, to
* the *judge*, forked by the parent from the instructor's cells alone: it runs the whole test cell, where
  the student's functions are stubs that are never called; each `checks.call` that reaches the student's
  code is asked of the caller, and its result read back and rebuilt from data (autograder/boundary.py),
  and every check runs on it. The judge's outcome, a message key and typed fields, is the test cell's
  record; the parent renders its text.

The parent reads the test cells' text, and the instructor's solutions, only after the program is forked
(DecideGrades hands them over as files with no name, beside the job), and sends each caller, when its test starts, the solutions of the
exercises already judged: nothing of a test cell's hidden tests is ever in the memory of a process that runs
student code, only what the judge gives the student's functions.

So no process that can write a record, or that a record is decided in, ever runs a line the student
wrote: not a definition, not an import, not a method Python calls on the student's behalf. The parent
keeps each test's time limit on its judge; DecideGrades keeps the verdict's as a whole, from outside the
sandbox, so that no student process (they share the sandbox's user) can hold the grader by stopping the
parent. What the caller sends is never shown as it is: a failed call's diagnostic is the judge's own, from
its own label (`what`), and an error the student's function raised is shown by its type and the words of
PyTorch's known errors only (README, "Threat model").
"""
import ast
import asyncio
import base64
import builtins
import contextlib
import copy
import ctypes
import functools
import glob
import hashlib
import inspect
import json
import marshal
import os
import select
import signal
import socket
import stat
import struct
import sys
import tempfile
import threading
import time

import torch

from .diagnostics import diagnosis, render
from .kernel import PAUSED_RECORD
from .linux import PR_SET_DUMPABLE, close_all_but
from . import calls, program
from .program import STUDENTS_MACHINE
from .calls import TEST_MODULE, asker, outside_now, sender
from .simulate import questions, simulated_accelerator, simulated_machine

RESULT_LIMIT = 16_000  # bytes of one test's result (its diagnostic)
# What a judge writes its parent first once its caller started. A judge whose limit ends before that waited for
# a program that never reached the test, though each of its cells is interrupted at the cell limit and the
# test's limit allows one cell limit more (DecideGrades.with_limits): a cell ran on after its interrupt, and
# the kernel, running the same cell, was stopped there, so that every later test earns nothing. The parent
# then ends the program, as SafeExecute ends that kernel, and every later test is lost at once.
REACHED = b"r"
_TEST_CELL_MISTAKES = ("verdict_test_cell_unsealed", "verdict_test_cell_gives_code")  # the instructor's, not the student's
_LENGTH = struct.Struct("<I")  # of what follows a test cell's "g" to the program (the solutions its caller binds)
_PID = struct.Struct("<i")  # of the process that goes on as the program (_released_cell), to the parent
INTERRUPT = signal.SIGUSR1  # the parent → the program: a test ran past its limit (_interrupt_calls)
STANDBY_GRACE = 1  # seconds after its test a program making its calls itself has to end them (_standby)


def run(cells, timeout, grader_fd, sandboxed=False, solutions=None, tests=None, judges_tmp=None):
    """Run the cells (see the module docstring); a JSON line on `grader_fd` first when the parent is ready
    (its own imports done), then one per test cell, or one naming the instructor's cell that failed here.
    `solutions`: a descriptor to read, once the program runs apart, the instructor's solutions that each
    test cell's caller binds (DecideGrades.references); `tests`: one to read then the test cells' text (grade
    id → {"source", "visible"}; a test cell in `cells` has none). Neither was ever in the program's memory.
    `judges_tmp`: in the sandbox, the judges' own temporary folder beside its /tmp (sandbox.JUDGES_TMP), where the
    program, which may write anywhere in /tmp as the grading kernel may (program.own_folder), cannot write."""
    # the parent → the program: fork the caller of the next test cell, with the ends of its pipes (made here per test,
    # so that no process that runs student code ever holds a later test's: a body that wrote on every descriptor it
    # had, called by a test cell as released in the program, had filled every later judge's pipe); its test has ended
    go, start = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    told, tells = os.pipe()  # the program → the parent: the process that goes on as the program (_released_cell)
    spared = _processes() if sandboxed else set()  # the sandbox's init, its holder, this process
    from IPython.core import interactiveshell  # noqa: F401: imported once, here, for every program's shell
    # the program's own folder, and beside it those where cells run again (program.ran_again), removed when the
    # verdict ends: in the sandbox its /tmp is gone anyway, but a grader without one (`course grade --no-sandbox`) kept
    # every notebook's files in its own /tmp
    root = tempfile.mkdtemp(prefix="verdict-")
    program_pid = _fork()
    if program_pid == 0:
        start.close()
        _program(cells, go, tells, timeout, root, private_tmp=sandboxed)
    spared.add(program_pid)
    if judges_tmp:
        _judges_apart(judges_tmp)
    running = _Running(program_pid, told, spared)
    go.close()
    os.close(tells)
    start.setblocking(False)  # a program that stopped reading holds back only its own callers
    references = _read_json(solutions, [])
    texts = _read_json(tests, {})
    own = [cell["source"] for cell in cells if cell["kind"] == "student"]  # what a diagnostic may quote
    recorded = set()  # the test cells whose records are written: their exercises' solutions may be sent
    places = {cell["grade_id"]: cell.get("place") for cell in cells if cell["kind"] == "test"}  # in the source
    _record(grader_fd, {"ready": True})
    namespace = {"__name__": TEST_MODULE, "__builtins__": builtins}
    for cell in instructors_order(cells):
        if cell["kind"] == "trusted":  # on the students' machine, as in the program (_program_cell): every grader alike
            with simulated_machine(STUDENTS_MACHINE):
                error = _execute(cell["source"], namespace, f"<{cell.get('grade_id', 'cell')}>")
            if error is not None:  # the instructor's own cell, failing in the grader's environment
                _record(grader_fd, {"instructor_error": str(cell.get("grade_id")), "error": error})
                break
        elif cell["kind"] == "test":
            cell = {**cell, **texts[cell["grade_id"]]}
            try:  # once, here: its judge runs this code
                cell["code"] = compile(cell["source"], f"<test {cell['grade_id']}>", "exec", dont_inherit=True)
            except (SyntaxError, ValueError):  # the instructor's test cell, not the student's
                _record(grader_fd, {"instructor_error": str(cell["grade_id"]), "error": "SyntaxError"})
                break
            seed = _seed(cell)
            solved = [_compiled(s) for s in references if _sent_before(s, cell, recorded, places)]
            started = json.dumps({"solutions": solved, "imports": released_imports(cell.get("visible")),
                                  "released": cell.get("visible") or ""}).encode()
            reader, writer = os.pipe()  # caller → judge
            asked, ask = os.pipe()  # judge → caller: the calls it asks for (calls.py)
            clock, ticks = os.pipe()  # caller → this process: when it runs cells again (_paused)
            _send(start, b"g" + _LENGTH.pack(len(started)) + started, [writer, asked, ticks])
            for end in (writer, asked, ticks):  # the program's now: a program that has ended, the judge says so
                os.close(end)
            result = run_test(cell, namespace, cell.get("timeout", timeout), reader, ask, own, seed,
                              clock=clock, paused=lambda: os.write(grader_fd, (PAUSED_RECORD + "\n").encode()),
                              allowance=cell.get("allowance", 0.0))
            os.close(reader)
            os.close(clock)
            os.close(ask)
            running.now()
            if result.pop("never_reached", False):  # see REACHED: every later test is lost at once, not after its limit
                running.kill()
            elif result.get("key") == "timed_out":  # as the kernel's cell is interrupted (_calls_in_place)
                running.interrupt()
            if sandboxed:
                _end_stragglers(spared, running.group)
            _send(start, b"e")  # the test has ended: the program runs its cell as released (_released_cell)
            for again in glob.glob(os.path.join(root, "again-*")):  # where this test's caller ran cells again
                program.remove_tree(again)
            if "test_cell_code" in result:  # the test cell calls the student's code other than through checks.call,
                # or gives it code of its own
                _record(grader_fd, {"instructor_error": str(cell["grade_id"]), "key": result["key"],
                                    "error": result["test_cell_code"]})
                break
            result["grade_id"] = cell["grade_id"]
            _record(grader_fd, result)
            recorded.add(cell["grade_id"])
    running.now()
    running.kill()
    program.remove_tree(root)


def _judges_apart(folder):
    """In the sandbox the program writes anywhere in /tmp, as the grading kernel may. This process and its judges then
    read nothing there: their temporary files (what a test cell saves, the files a call is sent), their home and their
    working folder are in `folder`, a bounded tmpfs the program cannot write, and they import no module from a
    folder the program could write (a `course` package beside an editable install's bound `autograder/`, a module
    on a path a test cell adds). Only the modules a judge has not imported yet are at stake: these are checked."""
    home = os.path.join(folder, "home")
    os.makedirs(home, exist_ok=True)
    # where libraries read their config (~/.config/…) and keep caches, Inductor's code cache too (torch._dynamo, imported
    # before any cell, set it in /tmp: a judge that compiled would have run what the program left there)
    os.environ.update(HOME=home, TMPDIR=folder, TORCHINDUCTOR_CACHE_DIR=os.path.join(folder, "torchinductor"))
    os.chdir(folder)  # where some read theirs too (./matplotlibrc)
    tempfile.tempdir = folder
    calls.TEMPORARY[0] = os.path.join(folder, "")
    sys.meta_path.insert(0, _ReadOnlyModules())


class _ReadOnlyModules:
    """A meta path finder first in the judges' list: a module is found as the finders after it find it, and refused
    unless every place it comes from is on a read-only mount (the runtime, bound into the sandbox read-only): its
    file, its cached bytecode (a link to a read-only `.py` beside a `.pyc` of the student's ran the student's code),
    its package's folders."""

    def find_spec(self, name, path=None, target=None):
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None) if finder is not self else None
            spec = find(name, path, target) if find else None
            if spec is not None:
                break
        else:  # Python asks the finders after this one again: a module the program puts in a folder it may write, on
            # the path searched, in between would be taken unchecked. Not found is then final.
            if any(isinstance(entry, str) and not _read_only(entry) for entry in (sys.path if path is None else path)):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None
        places = [spec.origin, spec.cached] if spec.has_location else []
        if not all(map(_read_only, filter(None, places + list(spec.submodule_search_locations or [])))):
            raise ImportError(f"{name}: not imported from a folder the student's program can write / "
                              f"不从学生程序可写的文件夹导入", name=name)
        return spec


def _read_only(path, links=40) -> bool:
    """Whether `path` (or, where it is not there, its nearest folder that is) is on a read-only mount, and so is every
    link on the way to it: a link in a folder the program can write may point elsewhere once this has looked. Each
    part is taken as the kernel takes it, `..` after the links before it (not collapsed as text first)."""
    parts = os.path.join("/", path).split("/")[1:]
    reached = "/"
    for k, part in enumerate(parts):
        if part in ("", "."):
            continue
        step = os.path.dirname(reached) if part == ".." else os.path.join(reached, part)
        if not os.path.lexists(step):
            break
        if os.path.islink(step):
            if links == 0 or not _on_read_only_mount(reached):
                return False
            return _read_only(os.path.join(reached, os.readlink(step), *parts[k + 1:]), links - 1)
        reached = step
    return _on_read_only_mount(reached)


def _on_read_only_mount(path) -> bool:
    return bool(os.statvfs(path).f_flag & os.ST_RDONLY)


def _send(to, message, descriptors=()):
    """`message` to the program, with `descriptors`; nothing where it has ended or stopped reading."""
    with contextlib.suppress(OSError):
        sent = socket.send_fds(to, [message], list(descriptors)) if descriptors else 0
        to.sendall(message[sent:])


def _seed(cell) -> int:
    """The seed of a test cell's random numbers in the judge: from its grade id and its text as released, so that
    it is the same on every machine and every regrade. Never from the hidden tests: each request carries the
    judge's generators to the caller, where `torch.initial_seed()` reads the seed back, and a hash of the hidden
    text would confirm a guess of it (attacks-slicing.toml, judge-seed-a-hash-of-the-hidden-test-cell-…)."""
    released = f"{cell['grade_id']}\n{cell.get('visible') or ''}"
    return int.from_bytes(hashlib.sha256(released.encode()).digest()[:4], "little")


def released_imports(visible) -> str:
    """The import statements of a test cell as released, as one cell the program runs before it forks the cell's
    caller. In the kernel the test cell runs in the student's namespace, so what it imports is bound there, for
    the student's functions it calls and for every later cell: a right `save_on_rank_zero` that used the `os` only
    the visible test imported passed in the student's kernel and in validate, and failed in the verdict. Only
    the released text, which the student's kernel runs, and only its imports, unparsed: no comment, no test."""
    try:
        tree = ast.parse(visible or "")
    except SyntaxError:  # a cell magic: nbgrader's test cells hold none
        return ""
    return "\n".join(ast.unparse(node) for node in tree.body
                     if isinstance(node, ast.Import) or isinstance(node, ast.ImportFrom) and node.module != "__future__")


def instructors_order(cells) -> list[dict]:
    """The instructor's and test cells as the parent runs them: the test cells in the submission's order
    (the program forks their callers in that order), each after every instructor's cell that the source
    notebook holds before it (DecideGrades gives each cell its `place` there), the instructor's cells in
    the source's order. So a judge has what the instructor's cells before its test define, wherever the
    submission moved them, and an instructor's cell never runs before one it needs (a2's `norm_layers`
    moved above the imports stopped the notebook's grading as the instructor's error). Where a cell has no
    place (no source notebook), the submission's order."""
    kept = [cell for cell in cells if cell["kind"] != "student"]
    if any("place" not in cell for cell in kept):
        return kept
    pending = sorted((cell for cell in kept if cell["kind"] == "trusted"), key=lambda cell: cell["place"])
    ordered = []
    for test in (cell for cell in kept if cell["kind"] == "test"):
        while pending and pending[0]["place"] < test["place"]:
            ordered.append(pending.pop(0))
        ordered.append(test)
    return ordered + pending


def _fork(tries=50) -> int:
    """os.fork, again while the sandbox's process slots are full (threads the student's program started
    and has just ended still hold them for a moment)."""
    for _ in range(tries - 1):
        try:
            return os.fork()
        except BlockingIOError:
            time.sleep(0.1)
    return os.fork()


def _record(fd, record):
    os.write(fd, (json.dumps(record) + "\n").encode())


def _execute(code, namespace, filename) -> str | None:
    """Run an instructor's cell; the name of the error it raised, if any."""
    try:
        exec(compile(code, filename, "exec", dont_inherit=True), namespace)
    except BaseException as error:  # noqa: BLE001: reported to the instructor, not the student
        return type(error).__name__
    return None


def _no_audit_hooks(event, args):
    """The program's audit hook, before any student cell: Python adds no other (a hook of the student's, which no
    one can remove, ran inside whatever its callers did after the student's function returned, and rewrote the
    checkpoint a report was reading: attacks-machines.toml,
    an-audit-hook-rewrites-the-checkpoint-as-the-report-reads-it). Python leaves the student's hook out without an
    error; no lesson uses one."""
    if event == "sys.addaudithook":
        raise RuntimeError("no audit hook while grading / 评分时不添加审计钩子")


def _program(cells, go, tells, timeout, root, private_tmp=False):
    """The notebook as the student's kernel ran it, in this forked process, in a folder of its own in `root`;
    at each test cell, a caller forked from its state then (see the module docstring). `private_tmp`: the sandbox's
    /tmp and /dev/shm are the program's alone (program.TemporaryFiles). Never returns."""
    try:
        os.setpgid(0, 0)  # the parent ends the program and its callers as one group
        go.shutdown(socket.SHUT_WR)  # what the parent sends, only
        _only_descriptors([go.fileno(), tells])
        sys.addaudithook(_no_audit_hooks)
        program.own_folder(root, private_tmp)
        from . import integrity

        shell, bound = program.new_shell(), {}
        # as ipykernel does: the notebook's folder (here the program's own, where `%%writefile` writes) first
        # on sys.path, and every cell run inside a running event loop (top-level `await`, create_task)
        sys.path.insert(0, "")
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        integrity.start_grading()  # what the kernel checks after every cell, this shell checks too
        bound.update(shell.user_ns)
        signal.signal(signal.SIGALRM, _interrupt)
        signal.signal(INTERRUPT, _interrupt_calls)
        executed = 0  # the kernel's execution count: each cell that is not blank, as nbclient runs them, counts
        for index, cell in enumerate(cells):
            if cell["kind"] == "test":
                started, ends = _started(go)
                if started is None:
                    break
                if started.get("imports"):  # bound as the kernel binds them, for this caller and every later cell
                    _program_cell(shell, loop, {"kind": "trusted", "source": started["imports"]}, cells, index, bound,
                                  timeout)
                writer, ask, clock = ends
                names = student_names(shell.user_ns, bound)
                again = [cell for cell in cells[:index] if cell.get("again")]
                temporary = program.TemporaryFiles(again, str(index))  # each machine's of what they made in /tmp
                if _has_its_own_helpers():  # returns in the process that goes on as the program
                    _calls_in_place(shell, loop, started, writer, ask, names, again, clock, tells, temporary)
                    caller = None
                else:
                    caller = _fork()
                    with contextlib.suppress(OSError):  # as the caller does itself (_caller), whichever runs first
                        os.setpgid(caller, caller)
                    if caller == 0:
                        _caller(started, shell.user_ns, writer, ask, names, again, clock, temporary)  # never returns
                    for end in (writer, clock, ask):
                        os.close(end)
                if go.recv(1) != b"e":  # the test has ended, its caller with it
                    break
                if caller is not None:
                    _kill(caller)
                temporary.restore()  # a caller ended half-way left another machine's
                executed += bool(started["released"].strip())
                _released_cell(shell, loop, started["released"], cells, index, bound, timeout, tells, executed)
                continue
            if cell["source"].strip():
                executed += 1
                cell["count"] = executed
            _program_cell(shell, loop, cell, cells, index, bound, timeout)
        while go.recv(1):  # the last caller's parent until the verdict ends
            pass
    finally:
        os._exit(0)


def _program_cell(shell, loop, cell, cells, index, bound, timeout):
    """Run the program's cell `index` as the kernel did; for a student's cell, note what it takes to make it again
    on another machine (program.mark_again). On the students' machine, the instructor's cells too (none asks about
    the machine): a student's input transformer, event hook or audit hook runs around them, and so does what reads
    the student's names."""
    with simulated_machine(STUDENTS_MACHINE):
        before, asked = dict(shell.user_ns), questions()
        plain = program.plain_values(shell.user_ns) if cell["kind"] == "student" else {}
        files = program.listed_files() if cell["kind"] == "student" else None
        signal.alarm(timeout)  # as the kernel's cell timeout interrupts a cell
        try:
            program.run_cell(shell, loop, cell["source"], cell.get("count"))
        except BaseException:  # noqa: BLE001: an interrupt between two statements of the shell
            pass
        finally:
            signal.alarm(0)
        changed = {name: value for name, value in shell.user_ns.items()
                   if before.get(name, program.MISSING) is not value}
        if cell["kind"] == "trusted":  # what the instructor's cells bind is not the student's
            bound.update(changed)
            return
        mentioned, assigned = program.cell_names(shell, cell["source"])
        made, wrote, read = program.touched(files)  # a file passes data on as a name does: "file " + its path
        cell.update(plain=plain, made=made, mentioned=mentioned | {f"file {path}" for path in read},
                    bound=assigned | set(changed) | {f"file {path}" for path in wrote},
                    again=questions() != asked or any(callable(value) for value in changed.values()))
        program.mark_again([each for each in cells[:index + 1] if each["kind"] == "student"], shell.user_ns)


def _started(go) -> tuple[dict | None, list[int]]:
    """What the parent sends the program at a test cell: what its caller binds, the cell's released text, and the
    caller's ends of its three pipes (to the judge, from the judge, to the parent's clock); None when it has ended."""
    from .boundary import read_exactly

    head, ends, _, _ = socket.recv_fds(go, 1 + _LENGTH.size, 3)
    if len(ends) != 3 or not head.startswith(b"g"):
        return None, ends
    head += read_exactly(go.fileno(), 1 + _LENGTH.size - len(head)) or b""
    started = read_exactly(go.fileno(), _LENGTH.unpack(head[1:])[0]) if len(head) == 1 + _LENGTH.size else None
    return (None if started is None else json.loads(started)), ends


def _released_cell(shell, loop, released, cells, index, bound, timeout, tells, count):
    """Run test cell `index` as released, where it stands, once its test has ended: the kernel ran it in the
    student's namespace, so what it made is there for every later cell (a right answer's cell that first printed
    the `x` a visible test made, then defined `match`, passed validate and lost its test in the verdict). In a fork
    that goes on as the program (it tells the parent on `tells`) if the cell ends, with an error too, as the kernel
    goes on; where it ends its process (a body that does so only in the verdict) or runs past its limit, this
    process goes on without the cell, and the later tests are judged as before. Returns in the process that goes on.
    A fork keeps none of the student's threads (a `ThreadPool`, a worker on a queue, that a later cell uses), so a
    program that has any runs the cell here, where a body that ends the program or runs on loses only the student's
    own later tests. So does a program with processes of its own (DataLoader workers, a `subprocess`): they are the
    children of this process, not of a fork (a right answer's helper process seemed to have ended, and a
    DataLoader's workers end once the process that started them has)."""

    def run():
        _program_cell(shell, loop, {"kind": "trusted", "source": released, "count": count}, cells, index, bound, timeout)

    if not released.strip():
        return
    if _has_its_own_helpers():
        return run()
    ended, ends = os.pipe()
    child = _fork()
    if child == 0:
        os.close(ended)
        _one_thread()
        run()
        _tell(ends, b"k")
        os.close(ends)
        return
    os.close(ends)
    went_on = select.select([ended], [], [], timeout + 1)[0] and os.read(ended, 1) == b"k"
    os.close(ended)
    if went_on:
        _tell(tells, _PID.pack(child))
        os._exit(0)
    _kill(child)


def _interrupt(signum, frame):
    raise KeyboardInterrupt


_CALLING = [False]  # whether the program makes a test's calls itself now (_calls_in_place)


def _interrupt_calls(signum, frame):
    """INTERRUPT, from the parent once a test has run past its limit: the program's call is interrupted, as the
    kernel's cell is; a program that waits for its next test (its caller was forked) is not."""
    if _CALLING[0]:
        raise KeyboardInterrupt


def student_names(namespace, bound) -> list[str]:
    """The callables of the program that the student's cells bound: the names the judge stubs."""
    return sorted(name for name, value in namespace.items()
                  if name.isidentifier() and not name.startswith("__") and callable(value)
                  and bound.get(name, program.MISSING) is not value)


def _caller(started, namespace, writer, asks, names, again=(), clock=None, temporary=None):
    """In a caller forked from the program: it makes each call of the student's code the judge asks for (_serve).
    Never returns."""
    try:
        # a group of its own: what the test's calls start is ended with the test (_end_stragglers), what the program's
        # cells started is the program's, as in the kernel (a right answer's DataLoader with persistent workers)
        os.setpgid(0, 0)
        _only_descriptors([writer, asks, *([] if clock is None else [clock]), *_students_files()])
        _one_thread()
        _thread_pools_restarted()
        _serve(started, namespace, writer, asks, names, _bind_solutions(namespace, started["solutions"]), again, clock,
               temporary)
    finally:
        os._exit(0)


def _has_its_own_helpers() -> bool:
    """Whether the program has threads or processes of its own (a pool, a worker on a queue, DataLoader workers, a
    `subprocess`): a fork keeps none of its threads and is the parent of none of its processes."""
    return threading.active_count() > 1 or bool(_children(os.getpid()))


def _calls_in_place(shell, loop, started, writer, asks, names, again, clock, tells, temporary=None):
    """The test's calls made by the program itself, as the kernel made them, where it has helpers of its own
    (_has_its_own_helpers): a caller forked from it found the student's pool without its workers, and the call
    waited out its limit, or their pipes closed. What the calls change stays, as in the kernel; the solutions bound
    for them (_bind_solutions) and the machine they last worked on (program.OnEachMachine) do not. A call that runs
    on is interrupted once the test has run past its limit (INTERRUPT), as the kernel's cell is. One that swallows
    the interrupt would hold the program, though the kernel, which runs no hidden test, never made that call (the
    attacker of this path: every later right answer was lost): a fork made before the calls, without the program's
    helpers, goes on as the program in its place once the test has ended and STANDBY_GRACE more has passed, and the
    later tests are judged. Returns in the process that goes on as the program; the three ends are closed there."""
    standby = _fork()
    if standby == 0:
        _standby(asks, (writer, clock), tells)
        return
    namespace = shell.user_ns
    kept = dict(namespace)
    solved = _bind_solutions(namespace, started["solutions"])
    bound = {name: namespace[name] for name in solved}
    _CALLING[0] = True
    try:
        _serve(started, namespace, writer, asks, names, solved, again, clock, temporary)
    except BaseException:  # noqa: BLE001: the interrupt, or the student's code ending the calls
        pass
    finally:
        _CALLING[0] = False
        _kill(standby)
        for end in (writer, asks, clock):
            os.close(end)
        asyncio.set_event_loop(loop)
        program.the_shell_again(shell)  # a cell run again on another machine made a shell of its own
        for name, solution in bound.items():  # the student's own again, where no call rebound it
            if namespace.get(name) is not solution:
                continue
            if name in kept:
                namespace[name] = kept[name]
            else:
                del namespace[name]


def _standby(asks, ends, tells):
    """In the fork `_calls_in_place` made before its calls, which the program ends once its calls have: once the
    test has ended (its judge and the parent have closed `asks`) and STANDBY_GRACE more has passed, it ends the
    program instead and goes on as the program itself (it tells the parent on `tells`, as _released_cell's fork
    does), with the state from before the test's calls and none of the program's threads (a later call that needs
    them is judged as a forked caller's was)."""
    for end in ends:
        os.close(end)
    _one_thread()
    watch = select.poll()
    watch.register(asks, select.POLLHUP)
    while not any(event & (select.POLLHUP | select.POLLERR) for _, event in watch.poll()):
        time.sleep(0.1)  # a request the program has not read yet
    time.sleep(STANDBY_GRACE)
    os.close(asks)
    with contextlib.suppress(OSError):
        os.kill(os.getppid(), signal.SIGKILL)
    _tell(tells, _PID.pack(os.getpid()))


def _serve(started, namespace, writer, asks, names, solved, again, clock, temporary=None):
    """Make each call of the student's code the judge asks for on `asks` (calls.py) with the student's namespace,
    inside a running event loop as a kernel's cells do, and send each result to the judge on `writer`, until the
    judge ends. The exercises judged before this one are the instructor's solutions here (`solved`, the names
    _bind_solutions bound), so that a student's function that calls one of them is judged on its own. `again`: the
    student's cells before the test that program.OnEachMachine runs again on another machine, with each machine's
    files of theirs in /tmp (`temporary`, program.TemporaryFiles)."""
    from . import boundary, calls
    from .checks import core

    names = sorted({*names, *solved})
    handles = boundary.Handles(1)
    recorder = boundary.Recorder(writer, handles)
    core.use_boundary(recorder)
    recorder.send_names(names)
    loop = asyncio.new_event_loop()  # the program's own shared its selector with the program
    asyncio.set_event_loop(loop)
    pristine = program.plain_values(namespace)  # before any call of the test's changes them
    scope = program.OnEachMachine(namespace, names, lambda: _paused(clock, lambda: _again_here(
        again, {**namespace, **copy.deepcopy(pristine)}, started["solutions"])), temporary)

    async def serve():
        while (asked := calls.read_request(asks)) is not None:
            calls.answer(asked, recorder, handles, scope, core.run_here)

    try:
        loop.run_until_complete(serve())
    finally:
        loop.close()
        core.use_boundary(None)
        scope.close()


def _paused(clock, work):
    """`work()`, while the test's clock stands still: the caller tells its parent on `clock` when the student's
    cells start and end running again on another machine (run_test), as a student's slow training cell took its
    time once on their own machine."""
    _tell(clock, b"(")
    try:
        return work()
    finally:
        _tell(clock, b")")


def _tell(fd, what):
    if fd is not None:
        with contextlib.suppress(OSError):  # the parent no longer listens: the test has ended
            os.write(fd, what)


def _again_here(again, namespace, solutions):
    """program.ran_again, with the solutions of the exercises already judged bound there as in the caller's
    own. A class the cells define again there is the student's to the boundary as any class neither PyTorch's
    nor the course's is (boundary.Recorder._carries_code). A cell that calls `checks.call` (a student who ran a
    test's lines again in a cell of their own) makes its call here, as their kernel did, not through the boundary,
    where it wrote on the judge's pipe and every later call of the test could not be read back."""
    from .checks import core

    side = core.boundary
    core.use_boundary(None)
    try:
        ran = program.ran_again(again, namespace)
    finally:
        core.use_boundary(side)
    _bind_solutions(ran[0], solutions)
    return ran


def _bind_solutions(namespace, solutions) -> list[str]:
    """Bind the names each solution defines in `namespace` to the solution's own (`_solution_or_own`); the
    names bound. The solutions run in a copy of the namespace, in order, so that one may call an earlier
    one; one that fails here (the student's program changed what it needs) leaves the student's own."""
    scope, bound = dict(namespace), []
    for solution in solutions:
        try:
            exec(marshal.loads(base64.b64decode(solution["code"])), scope)
        except Exception:  # noqa: BLE001: the student's own stay
            continue
        for name in solution["names"]:
            if name in scope:
                namespace[name] = _solution_or_own(scope[name], namespace.get(name))
                bound.append(name)
    return bound


def _solution_or_own(solution, own):
    """The instructor's function, for every call that fits its signature; for one that does not, the
    student's own `own`: a right answer may have given its earlier function an optional keyword of its own
    (`to_device(x, device, non_blocking=True)`) and call it so from a later one. A wrong earlier answer still
    costs nothing where the later call fits the solution, and where it does not the student's program runs
    as they wrote it, which they could have had anyway under another name. A class stays the solution's
    (a wrapper would fail `isinstance` and subclassing)."""
    if not inspect.isfunction(solution) or not callable(own):
        return solution
    signature = inspect.signature(solution)

    @functools.wraps(solution)
    def solution_or_own(*args, **kwargs):
        try:
            signature.bind(*args, **kwargs)
        except TypeError:
            return own(*args, **kwargs)
        return solution(*args, **kwargs)

    return solution_or_own


def _sent_before(solution, test, recorded, places) -> bool:
    """Whether a test cell's caller gets `solution`: once every test cell of its exercise has its record, and only
    for a test cell that the source notebook holds after them. A submission that moved a later exercise's test cell
    up got that exercise's solution bound in an earlier exercise's caller, which then answered with it
    (attacks-slicing.toml, test-cells-reordered-so-a-later-solution-answers-an-earlier-exercise)."""
    if not recorded.issuperset(solution["tests"]):
        return False
    here = test.get("place")
    return here is None or all(places.get(grade_id) is not None and places[grade_id] < here
                               for grade_id in solution["tests"])


def _compiled(solution) -> dict:
    """A solution as its caller gets it: compiled, without its docstrings, its comments or the text around its
    code (the student's process holds no text of it: attacks-slicing.toml,
    earlier-solution-source-read-in-caller-shown-as-seventeen-digit-ints), marshalled for the JSON it travels in.
    A solution that does not compile is not sent (the student's own stays)."""
    try:
        tree = ast.parse(solution["source"])
    except (SyntaxError, ValueError):
        tree = ast.parse("")
    for node in ast.walk(tree):  # docstrings out, asserts kept (compile's optimize=2 drops both)
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    code = compile(ast.fix_missing_locations(tree), "<solution>", "exec", dont_inherit=True)
    return {"code": base64.b64encode(marshal.dumps(code)).decode(), "names": solution["names"]}


def _read_json(fd, default):
    """What the file open at `fd` holds (the instructor's solutions, the test cells' text); `default` for None."""
    if fd is None:
        return default
    with open(fd, encoding="utf-8") as file:
        return json.load(file)


def _one_thread():
    """In a process forked from one that may have run PyTorch's CPU thread pool (OpenMP): a forked child keeps
    the pool's state but not its threads, and its first parallel kernel would wait for them forever. A student
    cell that tried its answer once (one bfloat16 autocast forward, a few training steps) hung every later
    test's caller. One thread runs every kernel in the calling thread, as PyTorch's DataLoader workers do. The
    student's code still reads the program's count, as in the kernel (a right `loader_kwargs` that sized its workers
    by `torch.get_num_threads() // 2` asked for none, and its `prefetch_factor` was refused)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.get_num_threads = lambda: threads


def _students_files() -> list[int]:
    """The regular files open in this process: the student's cells opened them (the program kept only its pipes), a
    log a function appends to, and a caller keeps them as the kernel would (a right `to_device` that printed to a
    file opened in its cell raised OSError). Pipes and sockets it closes: the other tests' among them."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if stat.S_ISREG(os.fstat(int(name)).st_mode):
                found.append(int(name))
        except OSError:  # the listing's own descriptor, closed since
            pass
    return found


def _thread_pools_restarted():
    """In a caller, forked from the program: the student's thread pools start their workers again. A fork keeps
    none of a process's threads, and a `ThreadPoolExecutor` a cell had used counted its dead workers as idle and
    waited for them forever (a right `move_batch` that moved tensors on a pool of its own timed out). A program whose
    pool has workers makes its calls itself (_calls_in_place); its callers are forked again only once its standby
    has gone on as the program, with the pools and none of their workers (_standby)."""
    pools = sys.modules.get("concurrent.futures.thread")
    if pools is None:  # no cell made a thread pool
        return
    executors = set()
    for worker in list(pools._threads_queues):  # every worker thread started, with a reference to its executor
        found = (getattr(worker, "_args", None) or (None,))[0]
        executor = found() if callable(found) else None
        if isinstance(executor, pools.ThreadPoolExecutor):
            executors.add(executor)
    for executor in executors:
        executor._threads = set()
        executor._idle_semaphore = threading.Semaphore(0)
        executor._shutdown_lock = threading.Lock()


def _only_descriptors(kept):
    """Standard streams to /dev/null; every other descriptor but `kept` closed."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    close_all_but(kept)
    sys.stdin = open(0, closefd=False)
    sys.stdout = sys.stderr = open(1, "w", closefd=False)


def _judged(namespace, names) -> dict:
    """The judge's namespace: the instructor's cells' names, and a stub, never called, for each other name
    the student's program binds to a callable (a name the instructor's cells or the builtins bind stays
    theirs: a program that rebinds one only loses its calls)."""
    from .boundary import stub

    judged = dict(namespace)
    for name in names:
        if name not in namespace and not hasattr(builtins, name):
            judged[name] = stub(name)
    return judged


def run_test(cell, namespace, timeout, calls, asks, own=(), seed=0, clock=None, paused=None,
             allowance=0.0) -> dict:
    """One test cell's judge, forked, running the whole cell; its result, or why it has none (died, timed
    out). It reads the student's names from its caller on `calls`, then asks it on `asks` for each call of the
    student's code and reads the call's result on `calls`. While the caller says on `clock` that it runs the student's cells again on
    another machine (`_paused`), the test's clock stands still, up to `allowance` seconds
    (DecideGrades.with_limits); `paused()` is called the first time."""
    reader, writer = os.pipe()
    # what the judge's result starts with, known to this process and the judge alone: bytes the judge was made to
    # write on its pipe from a caller's report are never taken for its result (attacks-slicing.toml,
    # loader-kwargs-path-makes-the-judge-write-its-own-result-pipe)
    seal = os.urandom(16).hex().encode()
    pid = _fork()
    if pid == 0:
        _judge(cell, namespace, writer, calls, asks, seed, seal)  # never returns
    os.close(writer)
    received, deadline, timed_out = b"", time.monotonic() + timeout, False
    watched, held, stopped, said = [reader, *([clock] if clock is not None else [])], 0.0, None, False
    while True:
        now = time.monotonic()
        standing = held + (now - stopped if stopped is not None else 0.0)  # the clock stood still this long
        left = deadline + min(standing, allowance) - now
        if left <= 0:
            timed_out = True
            break
        ready = select.select(watched, [], [], left)[0]
        if not ready:  # the deadline again: the clock may have stood still meanwhile
            continue
        if clock in ready:
            told, now = os.read(clock, 4096), time.monotonic()
            if not told:  # the caller has ended
                watched.remove(clock)
            for mark in told or b")":
                if mark == ord("(") and stopped is None:
                    if paused is not None and not said:
                        paused()
                    stopped, said = now, True
                elif mark == ord(")") and stopped is not None:
                    held, stopped = held + now - stopped, None
        if reader not in ready:
            continue
        chunk = os.read(reader, 65536)
        if not chunk:
            break
        received += chunk
        if len(received) > len(REACHED) + len(seal) + RESULT_LIMIT:
            break
    os.close(reader)
    _kill(pid)
    reached = received.startswith(REACHED)
    if timed_out:
        return {"passed": False, "key": "timed_out", "never_reached": not reached}
    try:
        result = _sealed_result(received.removeprefix(REACHED), seal)
        if result["passed"] is True:
            return {"passed": True}
        if result.get("key") in _TEST_CELL_MISTAKES:
            return {"passed": False, "key": result["key"], "test_cell_code": str(result.get("code", ""))[:100]}
        return {"passed": False, "message": render(result, cell["source"], cell.get("visible"), own), **diagnosis(result)}
    except (ValueError, KeyError, TypeError, AttributeError):
        return {"passed": False, "key": "kernel_died"}  # it ended without a result: a crash, a limit


def _kill(pid):
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            target()
        except (ProcessLookupError, PermissionError):
            pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


class _Running:
    """Which process is the program now, as the parent knows it: the one it forked, until the program says which
    process goes on as it after a test cell as released (_released_cell). Any student code can write what the program
    says (a body that wrote `{"passed": true}` on every descriptor it had), so it is only which process of the
    program's group the parent spares (one, as the program itself would be) and kills: another of the student's own,
    or none, and the program itself is ended, which loses only the student's later tests."""

    def __init__(self, pid, told, spared):
        self.group = self.pid = pid  # the group the program's processes are in (its callers, what the student started)
        self.told, self.spared = told, spared
        os.set_blocking(told, False)

    def now(self):
        """Read what the program said since (a pid, four bytes each time); the last one is the program."""
        said = b""
        with contextlib.suppress(OSError):  # nothing more said (EAGAIN)
            while chunk := os.read(self.told, 4096):
                said += chunk
        whole = len(said) - len(said) % _PID.size
        if whole:
            pid = _PID.unpack(said[whole - _PID.size:whole])[0]
            if pid > 1 and pid != os.getpid() and _group(pid) == self.group:
                self.spared.discard(self.pid)
                self.pid = pid
                self.spared.add(pid)

    def interrupt(self):
        with contextlib.suppress(OSError):
            os.kill(self.pid, INTERRUPT)

    def kill(self):
        """End the program, what its cells started, and each caller with what its calls started (a group of its own,
        _caller): the program's group is stopped first, so that it forks no caller while they are found."""
        with contextlib.suppress(OSError):
            os.killpg(self.group, signal.SIGSTOP)
        for caller in _callers(self.group):
            _kill(caller)
        _kill(self.group)
        _kill(self.pid)


def _callers(group) -> list[int]:
    """The leaders of the groups that processes of `group` forked (the program's callers): found by their parent, so
    that no other group is ended, without the sandbox too."""
    living = _living()
    return [pid for pid, (parent, leader) in living.items()
            if leader == pid != group and living.get(parent, (0, None))[1] == group]


def _children(pid) -> list[int]:
    return [child for child, (parent, _) in _living().items() if parent == pid]


def _living() -> dict[int, tuple[int, int]]:
    """Each process that has not ended (a zombie has), with its parent and its group, from /proc."""
    found = {}
    for pid in _processes():
        with contextlib.suppress(OSError, ValueError):
            with open(f"/proc/{pid}/stat") as stat:
                state, parent, group = stat.read().rpartition(")")[2].split()[:3]
            if state != "Z":
                found[pid] = int(parent), int(group)
    return found


def _group(pid) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def _processes() -> set[int]:
    return {int(entry) for entry in os.listdir("/proc") if entry.isdigit()}


def _end_stragglers(spared, group):
    """Kill what a test left running (its caller, what the student's calls started), so that it cannot touch the
    next test; what the program's cells started (the program's `group`) runs on, as in the kernel. Only in the
    sandbox, whose PID namespace holds nothing else: the `spared` processes were there before any test (its init,
    the holder a forked verdict joined, this process, the program). A process of the caller's that joins the
    program's group runs on too, as one the program started: it holds only its caller's pipes, whose judge has
    ended, and can change only the student's own later tests, as the program can."""
    for _ in range(100):  # again while processes forked during the last pass are found
        found = [pid for pid, (_, its_group) in _living().items() if pid not in spared and its_group != group]
        if not found:
            break
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG) == (0, 0):
                break
        except ChildProcessError:
            break


def _sealed_result(sealed, seal) -> dict:
    """The judge's result, which follows its seal; ValueError for any other bytes on its pipe."""
    if not sealed.startswith(seal) or len(sealed) > len(seal) + RESULT_LIMIT:
        raise ValueError("not the judge's result")
    return json.loads(sealed[len(seal):])


def _judge(cell, namespace, writer, calls, asks, seed, seal):
    """In the forked judge: only its pipes stay open; it reads the student's names from the caller, then
    runs the test, asking the caller for each call of the student's code, and writes the result on `writer`.
    Never returns."""
    try:
        _only_descriptors([writer, calls, asks])
        _one_thread()
        from . import boundary
        from .checks import core

        start = boundary.read_names(calls)
        if start is None:  # the program ended before this test: the student's code ended it
            result = {"passed": False, "key": "verdict_program_lost"}
        else:
            os.write(writer, REACHED)
            names, settings = start
            boundary.take_torch_settings(settings)  # the test's tensors made as in the student's kernel
            boundary.same_draws(seed)
            judged = _judged(namespace, names)
            stubs = {name: judged[name] for name in names if name in judged}
            handles = boundary.Handles(-1)
            ask = asker(sender(asks), handles, {id(stub): name for name, stub in stubs.items()})
            core.use_boundary(boundary.Judge(calls, ask, stubs, handles))
            outside_now()  # the machines simulated from here on are the test's, and the caller's too
            with simulated_machine(STUDENTS_MACHINE):  # the same grade on every grader, a GPU's too
                result = _test(cell, judged)
        os.write(writer, seal + json.dumps(result).encode()[:RESULT_LIMIT])
    finally:
        os._exit(0)


def _test(cell, namespace) -> dict:
    """Run the test; a failure comes back as its message key and typed fields, never as text."""
    from .boundary import JudgeOnlyCall
    from .boundary import TestCellCode
    from .messages import typed_field

    try:
        exec(cell["code"], namespace)
    except JudgeOnlyCall as call:  # the test cell's own mistake: no process decided it
        return {"passed": False, "key": "verdict_test_cell_unsealed", "code": str(call)}
    except TestCellCode as code:
        return {"passed": False, "key": "verdict_test_cell_gives_code", "code": str(code)}
    except AssertionError as failure:  # a check's (messages.diagnostic), or a bare `assert` of a test
        fields = getattr(failure, "course_fields", None)
        if not isinstance(fields, dict):
            return {"passed": False, "key": "verdict_failed"}
        return {"passed": False, "key": getattr(failure, "course_key", "verdict_failed"),
                "fields": {name: typed_field(value) for name, value in fields.items()}}
    except NameError as error:
        return {"passed": False, "key": "verdict_not_defined", "fields": {"name": {"str": getattr(error, "name", None) or ""}}}
    except BaseException as error:  # noqa: BLE001: SystemExit, KeyboardInterrupt, a test's own error
        return {"passed": False, "key": "verdict_raised", "fields": {"error": {"str": type(error).__name__}}}
    return {"passed": True}


def _not_dumpable():
    """No process of the sandbox may open this one's descriptors through /proc or ptrace it."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def main():
    # descriptors of files with no name (course.plugins.autograde.unnamed_file): the job, read now; the solutions and
    # the test cells, read only once the program is forked (which closes them), so that nothing of them is in its memory
    grader_fd, job_fd, solutions, tests = map(int, sys.argv[1:5])
    with open(job_fd, encoding="utf-8") as file:
        job = json.load(file)
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")  # is_available() does not start CUDA before a fork
    # Imported before any machine is simulated, as a sandboxed verdict's fork server has (PRELOADED in
    # course/kernels/forkserver.py): a meta layer's first forward pass and an optimizer's first step import it,
    # and its import fails on PyTorch's CPU build while a CUDA machine is simulated. Without the sandbox, a3's
    # solution lost test_autocast_forward for it.
    import torch._dynamo  # noqa: F401
    _not_dumpable()
    from .kernel import limit_resources, own_session_keyring

    own_session_keyring()
    limit_resources(job.get("memory_bytes"), job.get("cpu_seconds"))
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # what the instructor's cells print goes nowhere; records go to grader_fd
        os.dup2(null, fd)
    with simulated_accelerator(job["grader_machine"]) if job.get("grader_machine") else contextlib.nullcontext():
        run(job["cells"], job["timeout"], grader_fd, sandboxed=job.get("sandboxed", False), solutions=solutions,
            tests=tests, judges_tmp=job.get("judges_tmp"))


if __name__ == "__main__":
    main()
