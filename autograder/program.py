"""The student's program in the verdict (autograder/verdict.py): its cells run in an IPython shell as the
student's kernel ran them, in a folder of its own; what each cell mentions, binds and touches; and, where a
test simulates another machine, the cells that depend on the machine run again there (OnEachMachine), so that
a value the student's cells computed when they ran (`DEVICE = torch.device("cuda" if
torch.cuda.is_available() else "cpu")`) is that machine's, as on a student's who ran the notebook there.

Everything here runs in the verdict's program and callers, the processes that run student code: nothing here
decides a grade.
"""
import ast
import asyncio
import contextlib
import copy
import inspect
import io
import multiprocessing
import os
import shutil
import sys
import tempfile
import types

import torch

from .simulate import Machine, simulated_now, simulations

# The machine the student's cells run on in the program, and the test cells in the caller and the judge,
# whatever the grader's: one without a GPU, as most students' laptops are, and a CPU build, which claims nothing
# that any PyTorch a grader runs lacks (a CUDA build simulated on a CPU build breaks
# `torch.cuda.get_arch_list()`). A value computed at definition time (`ON_GPU = torch.cuda.is_available()`),
# and a question a function asks when called, have the same answer on a GPU grader and a CPU one: the same
# points. A test that judges another machine simulates it around its calls (OnEachMachine).
STUDENTS_MACHINE = Machine(present=None, built=None)
_STUDENTS = (STUDENTS_MACHINE.present, STUDENTS_MACHINE.built)  # as simulated_now() tells a machine


def mark_again(cells, namespace):
    """Mark `again` each of the student's `cells` (run so far, in order) that runs again on another machine
    (OnEachMachine), besides those that asked about this one or define the student's names: a cell that
    mentions what an earlier cell run again binds (`DEVICE = torch.device(DEVICE_NAME)`), and a cell that made
    an object a cell run again mentions (`args = argparse.Namespace(device=None)`, a memo every machine would
    share otherwise). Until nothing changes: a cell marked may make others so."""
    changing = True
    while changing:
        changing, differ, owner = False, set(), {}
        for cell in cells:
            if not cell["again"] and cell["mentioned"] & differ:
                cell["again"] = changing = True
            if cell["again"]:
                differ |= cell["bound"]
                for name in cell["mentioned"]:
                    made = owner.get(name)
                    if made is not None and not made["again"] and _shared(namespace.get(name)):
                        made["again"] = changing = True
            owner.update(dict.fromkeys(cell["bound"], cell))


def _shared(value) -> bool:
    """A value every machine's cells would share with the program's unless the cell that made it runs again
    there: neither plain data (each machine has its copy) nor a class or a function, nor a module but the
    student's own (a `%%writefile` module, whose cache is state)."""
    if isinstance(value, types.ModuleType):
        return _in_folder(value, _verdict_folder())
    return not (_plain(value) or isinstance(value, type) or inspect.isroutine(value))


def cell_names(shell, source) -> tuple[set, set]:
    """The names a cell mentions anywhere (a module's too, in `from devices import DEVICE`), and those it
    assigns at the top, changes in place there (`config["device"] = ...`, `config.update(...)`) or declares
    `global`: what it binds, whether or not the value is new on this machine (`device_name = "cpu"` again binds
    the very same string)."""
    try:
        tree = ast.parse(shell.transform_cell(source))
    except (SyntaxError, ValueError, TypeError):
        return set(), set()
    magic, _, body = source.lstrip().partition("\n")
    if magic.startswith("%%") and body:  # `%%time`, `%%capture`: the body is the cell's Python
        with contextlib.suppress(SyntaxError, ValueError, TypeError):
            tree.body += ast.parse(shell.transform_cell(body)).body
    mentioned, assigned, changed, attributes = set(), set(), set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            mentioned.add(node.id)
        elif isinstance(node, ast.Attribute):
            attributes.add(node.attr)
        elif isinstance(node, ast.ImportFrom) and node.module:
            mentioned.add(node.module.partition(".")[0])
        elif isinstance(node, ast.Global):
            assigned.update(node.names)
    pending = list(tree.body)
    while pending:  # the top level, and the blocks of its if, for, with, try and match statements
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            assigned.add(node.name)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            assigned.update((alias.asname or alias.name).partition(".")[0] for alias in node.names)
        if isinstance(node, ast.Call):  # `config.update(...)`, `fill_in(config)`: may change them in place
            changed.add(_root(node.func.value) if isinstance(node.func, ast.Attribute) else None)
            changed.update(_root(argument) for argument in [*node.args, *(k.value for k in node.keywords)])
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
                assigned.add(child.id)
            elif isinstance(child, (ast.Subscript, ast.Attribute)) and isinstance(child.ctx, (ast.Store, ast.Del)):
                changed.add(_root(child))  # `config["device"] = ...`, `args.device = ...`: changed in place
            elif isinstance(child, (ast.stmt, ast.expr, ast.excepthandler, ast.withitem, ast.match_case)):
                pending.append(child)
    # what it changes in place is bound anew too, but for a module's settings (`torch.backends.cudnn.benchmark = True`);
    # the environment is one name (`os.environ["TORCH_CUDA"] = ...` in one cell, `os.getenv("TORCH_CUDA")` in another)
    namespace = shell.user_ns
    assigned |= {name for name in changed - {None} if not isinstance(namespace.get(name), _UNCHANGEABLE)}
    if {"environ", "getenv", "putenv", "unsetenv"} & (mentioned | attributes):
        mentioned.add(_ENVIRONMENT)
        assigned.add(_ENVIRONMENT)
    return mentioned, assigned


# what no call changes in place, and a module, whose settings (`torch.backends.cudnn.benchmark = True`) are no name
_UNCHANGEABLE = (types.ModuleType, str, bytes, int, float, complex, type(None), torch.device, torch.dtype)
_ENVIRONMENT = "os.environ"  # the name the process's environment goes by among a cell's names (cell_names)


def _root(node) -> str | None:
    """The name an attribute or subscript chain starts from (`config` of `config["a"].b`)."""
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def run_cell(shell, loop, source, count=None):
    """Run one cell as ipykernel does: transformed (magics), then inside the running event `loop`; as the kernel's
    `count`th execution, where one is given (`Out[2]`, `_2` and `_i2` are what the kernel's run of the notebook from
    the top made them: a right answer's table built from `Out[2]` raised NameError in the verdict)."""
    try:
        transformed, error = shell.transform_cell(source), None
    except Exception:  # noqa: BLE001: the shell shows it, as the kernel does
        transformed, error = source, sys.exc_info()
    if count is not None:
        shell.execution_count = count
    loop.run_until_complete(shell.run_cell_async(source, store_history=count is not None, transformed_cell=transformed,
                                                 preprocessing_exc_tuple=error))


_PROGRAM_FOLDER = [None]  # the program's own folder (own_folder), its real path: where the student's modules are
# The temporary folders the program's cells write by absolute path (`/tmp/outputs`), where the verdict's sandbox has
# them to itself: each cell's files there are listed as its own folder's are (listed_files), and each machine its
# cells run again on has its own of what they made there (TemporaryFiles). Without the sandbox they are the
# grader's, which every process on it shares: none.
_TEMPORARY = []
HELD_PREFIX = ".course-held-"  # + the test's name: where a machine's files in a temporary folder wait (TemporaryFiles)


def own_folder(root, private_tmp=False):
    """A new folder in `root`, in the sandbox's bounded /tmp, becomes the program's own: its working folder
    and every temporary file's. Where the kernel has Landlock, the program (and every caller) writes nowhere but
    in the temporary folder (/tmp, and the grader's where it is another) and /dev/shm, as the grading kernel may
    (a right answer that logged to `/tmp/debug.log` lost its test when the program could write only its own
    folder); in the sandbox the judges write and read elsewhere (verdict._judges_apart), so no file a judge
    wrote can change under it. And it signals no process outside the program (autograder/kernel.py)."""
    from .kernel import confine

    writable = sorted(set(filter(os.path.isdir, ["/tmp", tempfile.gettempdir(), "/dev/shm"])))
    _TEMPORARY[:] = [os.path.realpath(path) for path in writable] if private_tmp else []
    folder = tempfile.mkdtemp(prefix="program-", dir=root)
    _PROGRAM_FOLDER[0] = os.path.realpath(folder)
    for name in ("TMPDIR", "HOME", "IPYTHONDIR", "MPLCONFIGDIR"):
        os.environ[name] = folder
    tempfile.tempdir = folder
    os.chdir(folder)
    try:
        confine(writable)
    except OSError:  # a kernel that refuses: the deadlines and the sandbox still hold
        pass


# The program's files a cell run again starts from (`listed_files`, `_again_folder`): no more than this many, so
# that listing them before each student cell costs little; above this many bytes they are linked, not copied.
# A folder below the program's with more entries than _DATA_SET_ENTRIES is a data set (an image folder unpacked
# beside the notebook: MNIST as files is 10 folders of 6,000, Food-101 101 of 1,000): listed as one entry, its
# files not one by one, and counted as large, so that a folder where cells run again links it
_FILES_LIMIT, _FILES_BYTES, _DATA_SET_ENTRIES = 20_000, 64 * 2**20, 256
# A folder this many levels below the one listed is listed as one entry too, as a data set is: Python 3.11 walks a
# tree recursively, and a cell that made 1,500 nested folders ended the program (RecursionError) where the kernel
# had run it
_DEPTH_LIMIT = 64


def listed_files() -> dict | None:
    """The paths in the program's folder, relative to it, each with its size, modification and access times (zeros
    for a folder); None where there are more than _FILES_LIMIT, or they could not be listed. A data set's folder
    (_DATA_SET_ENTRIES) is listed, not what it holds: what a cell made there, wrote or read is not seen, while a
    data set a cell made is (its folder is new). And those in the temporary folders the program has to itself
    (_TEMPORARY), by their absolute paths, where they are no more than _FILES_LIMIT either; there the verdict's own
    folder (the program's and those where cells run again) and mount points (the runtime bound there) are not the
    program's files."""
    found = {}
    try:
        _list(_PROGRAM_FOLDER[0], found, lambda path: os.path.relpath(path, _PROGRAM_FOLDER[0]))
    except (OSError, OverflowError):
        return None
    if _TEMPORARY:
        temporary = {}
        with contextlib.suppress(OSError, OverflowError):
            for root in _TEMPORARY:
                _list(root, temporary, lambda path: path, _the_programs)
            found.update(temporary)
            found[_TEMPORARY_LISTED] = (0, 0, 0)
    return found


_TEMPORARY_LISTED = "/"  # a key of listed_files where the temporary folders were listed (touched: both times, or none)


def _list(top, found, key, programs=lambda path: True):
    """listed_files, for the folder `top`: what it holds, by `key(path)`, into `found`, but the folders that are not
    the `programs`."""
    start = len(found)
    for parent, folders, names in os.walk(top):
        if parent != top and (len(folders) + len(names) > _DATA_SET_ENTRIES
                              or os.path.relpath(parent, top).count(os.sep) >= _DEPTH_LIMIT):
            found[key(parent)] = (_FILES_BYTES + 1, 0, 0)  # the same each time
            folders.clear()  # os.walk goes no deeper
            continue
        folders[:] = [name for name in folders if programs(os.path.join(parent, name))]
        for name in folders + names:
            path = os.path.join(parent, name)
            try:
                state = os.lstat(path)
            except FileNotFoundError:  # gone meanwhile (a shared-memory file in /dev/shm)
                continue
            found[key(path)] = (0, 0, 0) if name in folders else (state.st_size, state.st_mtime_ns, state.st_atime_ns)
            if len(found) - start > _FILES_LIMIT:
                raise OverflowError


def _the_programs(folder) -> bool:
    """Whether a folder in a temporary folder is the program's: not the verdict's own, where a machine's files wait
    (HELD_PREFIX) or a mount point."""
    return (folder != _verdict_folder() and not os.path.basename(folder).startswith(HELD_PREFIX)
            and not os.path.ismount(folder))


def touched(before) -> tuple[set | None, set, set]:
    """The paths a cell made (None where they could not be listed), the files it wrote (made or changed) and
    those it read (a settings file read and written back is both), from `listed_files()` before it and now, listed
    once. A file's access time moves on the first read after a write (the relatime default of Linux file systems): it
    is set back to the file's modification time here, so that the next cell's read shows too."""
    after = listed_files()
    if before is None or after is None:
        return None, set(), set()
    if _TEMPORARY_LISTED not in before or _TEMPORARY_LISTED not in after:  # what a cell made there is unknown
        before, after = ({path: state for path, state in listing.items() if not os.path.isabs(path)}
                         for listing in (before, after))
    wrote = {path for path, (size, written, _) in after.items()
             if before.get(path, (None, None, None))[:2] != (size, written)}
    read = {path for path, (_, written, used) in after.items() if path in before and used != before[path][2]}
    for path, (_, written, used) in after.items():
        if written and used != written:
            with contextlib.suppress(OSError):
                os.utime(os.path.join(_PROGRAM_FOLDER[0], path), ns=(written, written), follow_symlinks=False)
    return set(after) - set(before), wrote, read


def _again_folder(cells) -> str | None:
    """A new folder beside the program's, with a copy of its files but those that `cells` made when the
    program ran them: they make them again there (`os.mkdir("checkpoints")` succeeds, as on a new run of
    the notebook). None where the program's files are too many to list: the cells run again in the
    program's own folder."""
    files, made = listed_files(), set()
    for cell in cells:
        if cell.get("made") is None:
            return None
        made |= cell["made"]
    if files is None:
        return None
    folder = tempfile.mkdtemp(prefix="again-", dir=os.path.dirname(_PROGRAM_FOLDER[0]))
    ignored = lambda parent, names: [n for n in names  # noqa: E731
                                     if os.path.relpath(os.path.join(parent, n), _PROGRAM_FOLDER[0]) in made]
    # a data set of many files is linked, not copied: a cell that writes one anew replaces it, one that appends
    # to one changes the program's too
    large = sum(size for path, (size, _, _) in files.items() if not os.path.isabs(path)) > _FILES_BYTES  # its own
    try:
        shutil.copytree(_PROGRAM_FOLDER[0], folder, symlinks=True, ignore=ignored, dirs_exist_ok=True,
                        copy_function=os.link if large else shutil.copy2)
    except (OSError, shutil.Error, RecursionError):  # RecursionError: a tree deeper than _DEPTH_LIMIT
        remove_tree(folder)
        return None
    return folder



class TemporaryFiles:
    """What `cells`, those run again on another machine, made by absolute path in the temporary folders the program
    has to itself (_TEMPORARY): each machine's own. A machine's cells make them again, as on a machine that ran the
    notebook, where `os.makedirs("/tmp/outputs/run1")` succeeds (it raised FileExistsError on the second machine a
    cell ran on, and a right answer lost its test), and the test's calls on a machine find that machine's. Those of a
    machine not in place wait in a folder of the test's `name` in the same temporary folder (HELD_PREFIX), what only a
    machine's cells made there is that machine's alone (`include`), and the program's come back when the test has
    ended, however its caller ended (`restore`)."""

    def __init__(self, cells, name):
        made = sorted({path for cell in cells for path in cell.get("made") or () if os.path.isabs(path)})
        self.paths = [path for path in made if not any(path.startswith(other + os.sep) for other in made)]
        self.name, self.placed = name, _STUDENTS  # whose files are in place: a machine's, or None: nobody's yet

    def place(self, machine):
        """`machine`'s files in place (None: none, for a machine whose cells are about to run again), after those in
        place have moved to wait."""
        if machine == self.placed:
            return
        for index, path in enumerate(self.paths):
            with contextlib.suppress(OSError):  # a folder the student's cells made that cannot be moved stays
                if self.placed is not None:
                    self._wait(path, self._waiting(index, path, self.placed))
                if machine is not None:
                    self._back(path, self._waiting(index, path, machine))
                else:
                    _remove(path)
        self.placed = machine

    def restore(self):
        """The program's files in place again, and every machine's waiting folder gone."""
        if not self.paths:
            return
        back = True
        for index, path in enumerate(self.paths):
            try:
                self._back(path, self._waiting(index, path, _STUDENTS))
            except OSError:  # what is there could not be removed: the program's stay where they wait
                back = False
        for root in _TEMPORARY if back else ():
            remove_tree(os.path.join(root, HELD_PREFIX + self.name))
        self.placed = _STUDENTS

    def include(self, paths):
        """Paths a machine's cells made that the program's did not (`os.makedirs(f"/tmp/outputs_{DEVICE.type}")`):
        that machine's alone, gone with the test, so that the next test's cells make them again there."""
        for path in sorted(paths):
            if not any(path == known or path.startswith(known + os.sep) for known in self.paths):
                self.paths.append(path)

    def _waiting(self, index, path, machine) -> str:
        root = next(root for root in _TEMPORARY if path.startswith(root + os.sep))
        return os.path.join(root, HELD_PREFIX + self.name, "-".join(map(str, machine)), str(index))

    @staticmethod
    def _wait(path, waiting):
        """What is at `path` to `waiting`, or a mark there that nothing was (a caller ended half-way is undone)."""
        os.makedirs(os.path.dirname(waiting), exist_ok=True)
        _remove(waiting)
        _remove(waiting + _ABSENT)
        if os.path.lexists(path):
            os.rename(path, waiting)
        else:
            open(waiting + _ABSENT, "x").close()

    @staticmethod
    def _back(path, waiting):
        """What waits at `waiting` to `path`, or nothing at `path` where the mark says nothing was; what never waited
        stays."""
        if os.path.lexists(waiting):
            _remove(path)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            os.rename(waiting, path)
        elif os.path.lexists(waiting + _ABSENT):
            _remove(path)
            os.unlink(waiting + _ABSENT)


_ABSENT = ".absent"


def _temporary_paths() -> set:
    """What the temporary folders the program has to itself hold now (listed_files), by absolute path."""
    if not _TEMPORARY:
        return set()
    return {path for path in listed_files() or () if os.path.isabs(path) and path != _TEMPORARY_LISTED}


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        try:
            shutil.rmtree(path)
        except RecursionError as error:  # see remove_tree
            raise OSError(f"{path}: too deep to remove") from error
    elif os.path.lexists(path):
        os.unlink(path)


def remove_tree(path):
    """shutil.rmtree, ignoring errors, whatever the student's cells made there: Python 3.11 removes a tree recursively,
    so one deeper than the recursion limit raised RecursionError, past `ignore_errors`. Such a tree stays in the
    sandbox's bounded tmpfs, and goes with it."""
    with contextlib.suppress(RecursionError):
        shutil.rmtree(path, ignore_errors=True)


def new_shell(namespace=None):
    """An IPython shell, as a kernel's, without a history file or a GUI loop (its names: `namespace`)."""
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    class Shell(InteractiveShell):
        def enable_gui(self, gui=None):  # `%matplotlib inline` works as in a kernel; nothing is drawn
            pass

    config = Config()
    config.HistoryManager.enabled = False
    return Shell.instance(config=config, user_ns=namespace)  # None: IPython's own, whose __name__ is "__main__"


def the_shell_again(shell):
    """`shell` IPython's instance again (`get_ipython()`), where cells ran again in a shell of their own (ran_again)."""
    for owner in type(shell)._walk_mro():
        owner._instance = shell


MISSING = object()


class OnEachMachine(dict):
    """The caller's namespace. Where a test simulates another machine than the students' (STUDENTS_MACHINE,
    which the program ran on; autograder/simulate.py), a name of the student's is what the student's cells
    define on that machine: the first time a name is looked up on it, the cells that asked about the machine
    when the program ran them, or that define the student's functions and classes, and those they depend on or
    that depend on them (mark_again), run again there, in order, on a copy of the program's namespace and in
    a copy of its folder (`define`), where the test's calls on that machine then work. So a value the
    student's cells computed when they ran (`DEVICE = torch.device("cuda" if torch.cuda.is_available() else
    "cpu")`), or a function's cache, is that machine's, as on a student's who ran the notebook there, and a
    cell that only waits or prints is not run again. A name those cells do not define there (a cell that
    failed on it) is the program's. An object the test made before, of a class the student defined, stays of
    the program's class. Only the test's own simulations count, not a grader's machine simulated around the
    whole verdict (`grader_machine`)."""

    def __init__(self, namespace, names, define, temporary=None):
        super().__init__(namespace)
        self.names, self.define, self.machines = set(names), define, {}
        self.temporary = TemporaryFiles([], "") if temporary is None else temporary  # each machine's /tmp files
        self.outside = simulations()
        # where the students' machine's calls work, and with which of the student's own modules and environment
        self.home, self.home_modules, self.home_environment = os.open(".", os.O_RDONLY), _own_modules(), dict(os.environ)
        self.working = _STUDENTS  # the machine whose folder and modules the caller works with now

    def __setitem__(self, name, value):  # bound by the test cell (its `model`, its loop's `rank`): the test's own
        self.names.discard(name)
        super().__setitem__(name, value)

    def __getitem__(self, name):
        if name not in self.names:
            return super().__getitem__(name)
        machine = simulated_now(inside=self.outside)
        if machine is None:
            machine = _STUDENTS
        if machine != _STUDENTS and machine not in self.machines:
            self.temporary.place(None)
            before = _temporary_paths()
            try:
                self.machines[machine] = self.define()
            except Exception:  # noqa: BLE001: no new shell here; the program's names, as before
                self.machines[machine] = ({}, None, None, None)
            self.temporary.include(_temporary_paths() - before)
            self.temporary.placed = machine  # what its cells made there
        if machine != self.working:
            self._work_on(machine)
        defined = self.machines[machine][0] if machine in self.machines else {}
        return defined[name] if name in defined else super().__getitem__(name)

    def close(self):
        """Back on the students' machine (its folder, modules and environment): a program that made the test's calls
        itself goes on there (verdict._calls_in_place)."""
        if self.working != _STUDENTS:
            self._work_on(_STUDENTS)
        self.temporary.restore()
        os.close(self.home)

    def _work_on(self, machine):
        """A call on a machine works in the folder its cells left when they ran again, with the student's
        modules they imported and the environment they left (a settings file its setup cell wrote, a module's
        cache, an `os.environ["TORCH_CUDA"]` are that machine's)."""
        _, folder, modules, environment = self.machines.get(machine, (None, None, None, None))
        self.temporary.place(machine)  # first: the folder its cells left may be one of them (`os.chdir("/tmp/run")`)
        if folder is None:
            os.fchdir(self.home)
        else:
            os.chdir(folder)
        for name in _own_modules():
            del sys.modules[name]
        sys.modules.update(self.home_modules if modules is None else modules)
        _set_environment(self.home_environment if environment is None else environment)
        self.working = machine


def ran_again(cells, namespace) -> tuple[dict, str, dict, dict]:
    """`namespace` (a copy of the program's) where `cells` ran again, in a new shell, on the machine simulated
    now (the caller binds the solutions of the exercises already judged there again). As on a machine that
    ran the notebook from the top: each cell starts from the student's plain data as it was before the program
    ran it (`_found = {}`, `_DEVICE = None`, where a cell run again on this machine has not set them since), in
    a folder without the files these cells made (`_again_folder`), in a process whose multiprocessing start
    method is not set yet; the modules the student's cells imported from the notebook's folder (a `%%writefile`
    module) are imported anew, and the cells run in an event loop of their own, where a top-level `await` works
    (the caller's own loop is set aside meanwhile). The caller's random numbers, PyTorch's settings and default
    device are as they were (the judge ran none of this). Also the working folder the cells left, the student's own
    modules they imported and the environment they left, where and with which the test's calls on that
    machine run (OnEachMachine), as they would after that machine's run."""
    from IPython.core.interactiveshell import InteractiveShell

    from . import boundary

    settings, device = boundary.torch_settings(), torch.get_default_device()
    own = _own_modules()
    running, start_method = asyncio.events._get_running_loop(), multiprocessing.get_start_method(allow_none=True)
    folder, here, callers_environment = _again_folder(cells), os.open(".", os.O_RDONLY), dict(os.environ)
    try:
        for name in own:
            del sys.modules[name]
        asyncio.events._set_running_loop(None)
        multiprocessing.context._default_context._actual_context = None  # `set_start_method("spawn")` works once more
        if folder is not None:
            os.chdir(folder)
        with boundary.random_state_kept(), contextlib.redirect_stdout(io.StringIO()):
            # the program's __future__ imports hold in every later cell, as IPython's compiler keeps them
            flags = InteractiveShell.instance().compile.flags if InteractiveShell.initialized() else 0
            InteractiveShell.clear_instance()
            shell, loop, rebound = new_shell(namespace), asyncio.new_event_loop(), set()
            shell.compile.flags |= flags
            for cell in cells:
                for name, value in cell.get("plain", {}).items():
                    if name not in rebound:
                        shell.user_ns[name] = copy.deepcopy(value)
                before = dict(shell.user_ns)
                run_cell(shell, loop, cell["source"], cell.get("count"))
                rebound.update(name for name, value in shell.user_ns.items() if before.get(name, MISSING) is not value)
                # and what it changed in place (`config["device"] = ...`): a later cell does not take it back
                rebound.update(name for name, value in cell.get("plain", {}).items()
                               if _differs(shell.user_ns.get(name, MISSING), value))
            loop.close()
            left, imported, environment = os.getcwd(), _own_modules(), dict(os.environ)
    finally:
        os.fchdir(here)  # the caller's own working folder, which a cell of the program's may have changed
        os.close(here)
        _set_environment(callers_environment)
        multiprocessing.context._default_context._actual_context = None
        if start_method is not None:
            multiprocessing.set_start_method(start_method, force=True)
        asyncio.events._set_running_loop(running)
        sys.modules.update(own)
        boundary.take_torch_settings(settings)
        # `torch.set_default_device(DEVICE)` in a cell run again: given back without asking (a simulated GPU
        # as the default device cannot even say so, `get_default_device` makes a tensor there)
        torch.set_default_device(None if device.type == "cpu" else device)
    return shell.user_ns, left, imported, environment


def _set_environment(environment):
    os.environ.clear()
    os.environ.update(environment)


def _differs(value, before) -> bool:
    """Whether `value` is no longer the plain data `before` (compared without asking a tensor what `!=` is)."""
    try:
        return type(value) is not type(before) or bool(value != before)
    except Exception:  # noqa: BLE001: a list that now holds a tensor, say
        return True


def _own_modules() -> dict:
    """The student's own modules imported now: those of the program's folder and of the folders beside it
    where cells run again (a `%%writefile` module)."""
    folder = _verdict_folder()
    if folder is None:
        return {}
    # a module imported from the working folder has its real path (os.getcwd's): only one there is resolved, not
    # each of the thousand modules PyTorch imported (28 ms a time, several times a test)
    return {name: module for name, module in list(sys.modules.items())
            if isinstance(path := getattr(module, "__file__", None), str) and path.startswith(folder + os.sep)
            and _in_folder(module, folder)}


def _verdict_folder() -> str | None:
    """The folder of the program's own and of those where cells run again; None before the program made it."""
    return None if _PROGRAM_FOLDER[0] is None else os.path.dirname(_PROGRAM_FOLDER[0])


def _in_folder(module, folder) -> bool:
    path = getattr(module, "__file__", None)
    return folder is not None and isinstance(path, str) and os.path.realpath(path).startswith(folder + os.sep)


# What a student's cell may bind at the top and a function change later (`_found = {}`, `_DEVICE = None`,
# `calls = 0`): the program copies it before each student cell, and the caller before the test's calls, so
# that a cell run again on another machine starts from it as a new run of the notebook would. Plain data only,
# and not too much of it: a copy cannot hold a tensor or a module.
_PLAIN = (type(None), bool, int, float, complex, str, bytes, torch.device, torch.dtype)
_CONTAINERS = (list, tuple, set, frozenset, dict)
_PLAIN_ITEMS, _PLAIN_DEPTH = 10_000, 50


def plain_values(namespace) -> dict:
    """The names of `namespace` bound to plain data (`_plain`), each copied."""
    return {name: copy.deepcopy(value) for name, value in namespace.items() if _plain(value)}


def _plain(value) -> bool:
    """`_PLAIN`, and builtin containers of it, not nested deeper than _PLAIN_DEPTH nor holding more than
    _PLAIN_ITEMS items."""
    pending, seen = [(value, 0)], 0
    while pending:
        item, depth = pending.pop()
        seen += 1
        if seen > _PLAIN_ITEMS:
            return False
        if type(item) in _CONTAINERS and depth < _PLAIN_DEPTH:
            pending.extend((each, depth + 1) for each in ([*item.keys(), *item.values()] if type(item) is dict else item))
        elif type(item) not in _PLAIN:
            return False
    return True


