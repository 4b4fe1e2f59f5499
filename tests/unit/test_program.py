"""The student's program in the verdict (autograder/program.py): the names a cell mentions and binds, the files
it touched, and which cells run again on another machine, and where."""
import copy
import os
import time

import pytest

from autograder import program


def test_cells_run_again_in_a_folder_without_the_files_they_made(tmp_path, monkeypatch):
    own = tmp_path / "program-x"
    own.mkdir()
    monkeypatch.setattr(program, "_PROGRAM_FOLDER", [str(own)])
    (own / "data.txt").write_text("kept")
    before = program.listed_files()
    (own / "checkpoints").mkdir()
    (own / "checkpoints" / "w.pt").write_text("made")
    made = program.touched(before)[0]
    assert made == {"checkpoints", "checkpoints/w.pt"}
    folder = program._again_folder([{"again": True, "made": made}])
    assert sorted(os.listdir(folder)) == ["data.txt"] and os.path.dirname(folder) == str(tmp_path)
    assert program._again_folder([{"again": True, "made": None}]) is None  # unknown: the program's own folder


def test_a_data_set_of_many_files_is_one_entry_and_cells_still_run_again_apart(tmp_path, monkeypatch):
    """A data set unpacked beside the notebook (more files than the program lists) is listed as its folder: the
    cells run again still get a folder of their own, without what they made (attacks-machines.toml,
    a-data-set-of-more-than-twenty-thousand-files-then-a-setup-cell-that-makes-a-folder)."""
    own = tmp_path / "program-x"
    (own / "data" / "train").mkdir(parents=True)
    monkeypatch.setattr(program, "_PROGRAM_FOLDER", [str(own)])
    monkeypatch.setattr(program, "_FILES_LIMIT", 50)
    monkeypatch.setattr(program, "_DATA_SET_ENTRIES", 20)
    for sample in range(60):  # more than the program lists, in a folder of a data set's size
        (own / "data" / "train" / f"{sample:05d}.txt").write_text(str(sample % 10))
    before = program.listed_files()
    assert set(before) == {"data", "data/train"}
    assert before["data/train"][0] > program._FILES_BYTES  # large: linked into a folder run again, never copied
    (own / "checkpoints").mkdir()
    made = program.touched(before)[0]
    assert made == {"checkpoints"}
    folder = program._again_folder([{"again": True, "made": made}])
    assert sorted(os.listdir(folder)) == ["data"] and len(os.listdir(os.path.join(folder, "data", "train"))) == 60
    for sample in range(60):  # a data set at the top is listed file by file: past the limit, nothing is
        (own / f"{sample}.txt").write_text("1")
    assert program.listed_files() is None


def test_what_a_cell_touched_is_unknown_when_either_listing_is(tmp_path, monkeypatch):
    own = tmp_path / "program-x"
    own.mkdir()
    monkeypatch.setattr(program, "_PROGRAM_FOLDER", [str(own)])
    assert program.touched(None) == (None, set(), set())  # before it, the folder could not be listed
    before = program.listed_files()
    monkeypatch.setattr(program, "listed_files", lambda: None)
    assert program.touched(before) == (None, set(), set())  # nor after it


def test_a_cell_that_is_not_python_mentions_and_binds_nothing():
    """A cell whose code Python cannot parse (it failed in the kernel too) is no cell's dependency."""
    assert program.cell_names(program.new_shell(), "def broken(:\n    pass") == (set(), set())


@pytest.mark.parametrize("source, mentioned, assigned", [
    ("from devices import DEVICE", {"devices"}, {"DEVICE"}),  # the module too: a cell run again imports it anew
    ("device_name = 'cpu'", {"device_name"}, {"device_name"}),  # bound, though the very same string as before
    ("if ON_GPU:\n    name = 'cuda'\nelse:\n    name = 'cpu'", {"ON_GPU", "name"}, {"name"}),
    ("with open('f') as file:\n    text = file.read()", {"open", "file", "text"}, {"file", "text"}),
    ("def pick():\n    global _DEVICE\n    local = DEVICE\n    return local", {"DEVICE", "local"},
     {"pick", "_DEVICE"}),  # a function's own names are not the notebook's; a global it sets is
    ("%time x = 1", {"get_ipython"}, set()),  # a line magic: IPython's transformed code
    ("%%time\nDEVICE = NAME", {"get_ipython", "DEVICE", "NAME"}, {"DEVICE"}),  # a cell magic's body is Python
    ("config = {}\nfill_in(config)", {"fill_in", "config"}, {"config"}),  # what a call is given it may change
    ("import os\nos.environ['TORCH_CUDA'] = '13.0'", {"os", "os.environ"}, {"os", "os.environ"}),
    ("from devices.cuda import DEVICE", {"devices"}, {"DEVICE"}),  # the package a cell run again imports anew
    ("import os.path", set(), {"os"}),
    ("SIZE = 3\ndef scale(x):\n    return x * SIZE", {"SIZE", "x"}, {"SIZE", "scale"}),  # what comes before a def
    ("%%time\nDEVICE = NAME\nOTHER = 1", {"get_ipython", "DEVICE", "NAME", "OTHER"}, {"DEVICE", "OTHER"}),
    ("\n%%time\nDEVICE = NAME", {"get_ipython", "DEVICE", "NAME"}, {"DEVICE"}),  # a blank line before the magic
    ("%%time\ndef broken(:", {"get_ipython"}, set()),  # a body that is not Python: the magic's call alone
    ("NAME = os.getenv('DEVICE')", {"NAME", "os", "os.environ"}, {"NAME", "os.environ"}),
    ("os.putenv('DEVICE', 'cpu')", {"os", "os.environ"}, {"os.environ"}),
    ("os.unsetenv('DEVICE')", {"os", "os.environ"}, {"os.environ"}),
], ids=["from-import", "same-string", "branches", "with", "function", "magic", "cell-magic", "call", "environment",
        "from-a-package", "import-a-submodule", "before-a-def", "cell-magic-lines", "blank-before-magic",
        "cell-magic-not-python", "getenv", "putenv", "unsetenv"])
def test_the_names_a_cell_mentions_and_assigns(source, mentioned, assigned):
    from IPython.core.interactiveshell import InteractiveShell

    InteractiveShell.clear_instance()
    found = program.cell_names(program.new_shell(), source)
    InteractiveShell.clear_instance()
    assert found == (mentioned, assigned)


@pytest.mark.parametrize("source, changed", [
    ("config.update(device='cuda')", {"config"}), ("fill_in(config)", {"config"}), ("fill_in(devices=config)", {"config"}),
    ("torch.backends.cudnn.benchmark = True", set()),  # a module's setting is no name
    ("print(NAME)", set()),  # a string no call changes
], ids=["method", "argument", "keyword", "module-setting", "string"])
def test_what_a_call_may_change_in_place_is_bound_anew(fresh_shell, source, changed):
    import torch

    shell = program.new_shell()
    shell.user_ns.update(config={}, torch=torch, NAME="cpu")
    assert program.cell_names(shell, source)[1] == changed


def cells_marked(*sources, asked=()):
    """program.mark_again on student cells run in order in one shell; `asked`: the indexes of the cells that
    asked about the machine. The indexes of the cells marked `again`."""
    from IPython.core.interactiveshell import InteractiveShell

    InteractiveShell.clear_instance()
    shell, cells = program.new_shell(), []
    for index, source in enumerate(sources):
        before = dict(shell.user_ns)
        shell.run_cell(source)
        changed = {k: v for k, v in shell.user_ns.items() if before.get(k, program.MISSING) is not v}
        mentioned, assigned = program.cell_names(shell, source)
        cells.append({"mentioned": mentioned, "bound": assigned | set(changed),
                      "again": index in asked or any(callable(value) for value in changed.values())})
        program.mark_again(cells, shell.user_ns)
    InteractiveShell.clear_instance()
    return [index for index, cell in enumerate(cells) if cell["again"]]


@pytest.mark.parametrize("sources, asked, marked", [
    (("NAME, ON_GPU = 'cpu', False", "NAME = 'cuda' if ON_GPU else 'cpu'", "DEVICE = NAME.upper()"), {1}, [1, 2]),
    (("config = {}", "config['device'] = 'cpu'", "DEVICE = config['device']"), {1}, [1, 2]),  # changed in place
    (("import argparse\nargs = argparse.Namespace(device=None)", "def pick():\n    return args.device"), set(),
     [0, 1]),  # an object a cell run again reads: each machine makes its own
    (("SIZE = 3", "x = SIZE * 2", "print(x)"), set(), []),  # nothing asked, nothing defined
    (("import torch\ntorch.backends.cudnn.benchmark = True", "DEVICE = 1"), {1}, [1]),  # a module's setting
    (("A = 'cuda'", "B = 'mps'", "C = A"), {0, 1}, [0, 1, 2]),  # what any cell run again binds, not the last's
], ids=["reads-what-a-cell-run-again-binds", "changed-in-place", "an-object-it-reads", "nothing", "module-setting",
        "an-earlier-cell-run-again"])
def test_the_cells_marked_to_run_again_on_another_machine(sources, asked, marked):
    assert cells_marked(*sources, asked=asked) == marked


def test_the_files_a_cell_wrote_and_read(tmp_path, monkeypatch):
    """A file passes data on from a cell run again to a later one as a name does (program.touched): its access
    time moves on the first read after a write, and is set back after each cell so that the next read shows."""
    own = tmp_path / "program-x"
    own.mkdir()
    monkeypatch.setattr(program, "_PROGRAM_FOLDER", [str(own)])
    before = program.listed_files()
    (own / "device.txt").write_text("cpu")
    assert program.touched(before) == ({"device.txt"}, {"device.txt"}, set())
    for reader in range(2):  # each later cell that reads it
        before = program.listed_files()
        time.sleep(0.01)
        (own / "device.txt").read_text()
        assert program.touched(before) == (set(), set(), {"device.txt"}), reader


@pytest.mark.parametrize("value, before, differs", [
    ([1, 2], [1, 2], False), ({"device": "cuda"}, {"device": "cpu"}, True), (2.0, 2.0, False),
    ("__import__('torch').randn(4, 3)", 2.0, True), ("[__import__('torch').randn(3)]", [1.0], True),
], ids=["same-list", "changed-dict", "same-number", "now-a-tensor", "list-now-holds-a-tensor"])
def test_a_plain_value_changed_by_a_cell_run_again_is_told_without_comparing_tensors(value, before, differs):
    value = eval(value) if isinstance(value, str) else value
    assert program._differs(value, before) is differs


def test_a_test_on_the_students_own_machine_runs_no_cell_again():
    """Only another machine than the students' (the program's) makes the student's cells again: a test that
    simulates the students' own machine, or none, gets the program's names."""
    from autograder.simulate import simulated_accelerator, simulated_machine

    made = []
    scope = program.OnEachMachine({"pick": len}, ["pick"],
                                  lambda: made.append(True) or ({"pick": max}, None, None, None))
    with simulated_machine(program.STUDENTS_MACHINE):
        assert scope["pick"] is len
    assert scope["pick"] is len and made == []
    with simulated_accelerator("cuda"):
        assert scope["pick"] is max
    assert scope["pick"] is len and made == [True]


@pytest.fixture
def program_folder(tmp_path, monkeypatch):
    """A program's own folder, `program-x` in `tmp_path` (its real path, as own_folder makes it), and the caller
    working there."""
    own = (tmp_path / "program-x").resolve()
    own.mkdir()
    monkeypatch.setattr(program, "_PROGRAM_FOLDER", [str(own)])
    monkeypatch.chdir(own)
    return own


@pytest.fixture
def fresh_shell():
    from IPython.core.interactiveshell import InteractiveShell

    InteractiveShell.clear_instance()
    yield
    InteractiveShell.clear_instance()


def test_cells_run_again_start_from_the_plain_values_they_started_from(program_folder, fresh_shell):
    """A cell run again starts from the plain data it started from when the program ran it (`calls = 0`), not from
    what later cells or functions made of it, unless a cell run again before it bound the name anew (even to None)
    or changed it in place; the rest of the program's names are there as they are. The cells' starting values
    stay as they were, for the next machine."""
    cells = [{"source": "x = scale", "plain": {"calls": 0, "config": {"devices": ["cpu"]}}, "made": set()},
             {"source": "config['devices'].append('cuda')\nmarker = None",
              "plain": {"calls": 3, "config": {"devices": ["cpu"]}}, "made": set()},
             {"source": "seen = (calls, config['devices'], marker)",
              "plain": {"calls": 3, "config": {"devices": ["mps"]}, "marker": "old"}, "made": set()}]
    starting = copy.deepcopy(cells)
    namespace, *_ = program.ran_again(cells, {"calls": 7, "config": {"devices": []}, "scale": 10})
    assert namespace["x"] == 10 and namespace["seen"] == (3, ["cpu", "cuda"], None)
    assert cells == starting


@pytest.fixture
def start_method():
    """multiprocessing's start method, put back as it was after the test (None: not set yet)."""
    import multiprocessing

    kept = multiprocessing.context._default_context._actual_context
    yield
    multiprocessing.context._default_context._actual_context = kept


@pytest.mark.parametrize("method", [None, "forkserver"], ids=["start-method-not-set", "start-method-set"])
@pytest.mark.parametrize("default_device", ["cpu", "meta"])
def test_cells_run_again_leave_the_callers_process_as_it_was(program_folder, fresh_shell, monkeypatch, capsys,
                                                             start_method, method, default_device):
    """What the cells run again did to the process (its folder, environment, start method, random numbers, output,
    PyTorch's settings and default device) is that machine's: it comes back with their names, and the caller's
    own is as it was."""
    import multiprocessing

    import torch

    multiprocessing.context._default_context._actual_context = None
    if method is not None:
        multiprocessing.set_start_method(method)
    (program_folder / "runs").mkdir()
    monkeypatch.delenv("WHERE_CELLS_RAN", raising=False)
    source = ("import os, multiprocessing, torch\nos.environ['WHERE_CELLS_RAN'] = 'again'\nos.chdir('runs')\n"
              "multiprocessing.set_start_method('spawn')\ntorch.manual_seed(0)\ndrawn = torch.rand(1)\n"
              "torch.set_default_dtype(torch.float64)\ntorch.set_default_device('cpu')\nprint('ran again')")
    generator = torch.get_rng_state()
    torch.set_default_device(None if default_device == "cpu" else default_device)
    try:
        namespace, left, imported, environment = program.ran_again([{"source": source, "made": set()}], {})
        assert torch.get_default_device().type == default_device
    finally:
        torch.set_default_device(None)
    assert "drawn" in namespace and imported == {} and capsys.readouterr().out == ""
    assert os.path.basename(left) == "runs" and os.path.dirname(os.path.dirname(left)) == str(program_folder.parent)
    assert environment["WHERE_CELLS_RAN"] == "again" and "WHERE_CELLS_RAN" not in os.environ
    assert os.getcwd() == str(program_folder)
    assert multiprocessing.get_start_method(allow_none=True) == method
    assert torch.equal(torch.get_rng_state(), generator)
    assert torch.get_default_dtype() is torch.float32


def test_cells_run_again_in_an_event_loop_of_their_own(program_folder, fresh_shell):
    """A caller that runs in an event loop: the cells run again, top-level `await` included, in a loop of their
    own, and the caller's loop is its running loop again afterwards."""
    import asyncio

    async def caller():
        namespace, *_ = program.ran_again([{"source": "import asyncio\nawait asyncio.sleep(0)\ndone = True",
                                            "made": set()}], {})
        return namespace["done"], asyncio.get_running_loop()

    loop = asyncio.new_event_loop()
    try:
        assert loop.run_until_complete(caller()) == (True, loop)
    finally:
        loop.close()


def test_the_students_own_module_is_imported_anew_where_cells_run_again(program_folder, fresh_shell, monkeypatch):
    """A `%%writefile` module of the student's is imported anew from the folder where the cells run again, and the
    caller keeps the program's."""
    import sys

    monkeypatch.syspath_prepend("")  # the working folder, as a kernel's sys.path has it
    (program_folder / "helper_of_the_student.py").write_text("VALUE = 1\n")
    import helper_of_the_student

    monkeypatch.setitem(sys.modules, "helper_of_the_student", helper_of_the_student)
    cells = [{"source": "%%writefile helper_of_the_student.py\nVALUE = 2\n", "made": set()},
             {"source": "import helper_of_the_student\nvalue = helper_of_the_student.VALUE", "made": set()}]
    namespace, left, imported, _ = program.ran_again(cells, {})
    assert namespace["value"] == 2 and imported["helper_of_the_student"].VALUE == 2
    assert sys.modules["helper_of_the_student"] is helper_of_the_student
    assert (program_folder / "helper_of_the_student.py").read_text() == "VALUE = 1\n"  # a copy was written, not it
    assert program._own_modules() == {"helper_of_the_student": helper_of_the_student}


def test_a_cell_runs_as_a_kernel_runs_it_magics_and_top_level_await(fresh_shell):
    import asyncio

    shell, loop = program.new_shell(), asyncio.new_event_loop()
    try:
        program.run_cell(shell, loop, "%%capture shown\nprint('hidden')\nx = 1")
        program.run_cell(shell, loop, "import asyncio\nawait asyncio.sleep(0)\ny = x + 1")
    finally:
        loop.close()
    assert shell.user_ns["y"] == 2 and shell.user_ns["shown"].stdout == "hidden\n"
    assert shell.history_manager.enabled is False  # no history file in the sandbox


@pytest.mark.parametrize("refused, shm", [(False, True), (True, True), (False, False)],
                         ids=["confined", "landlock-refuses", "no-dev-shm"])
def test_the_program_makes_its_own_folder_everything_temporary_goes_to_and_writes_only_temporary_folders(
        tmp_path, monkeypatch, refused, shm):
    import tempfile

    from autograder import kernel

    confined = []

    def confine(writable):
        confined.append(writable)
        if refused:
            raise OSError("no Landlock here")

    monkeypatch.setattr(kernel, "confine", confine)
    monkeypatch.setattr(program, "_PROGRAM_FOLDER", [None])
    monkeypatch.setattr(tempfile, "tempdir", None)
    monkeypatch.chdir(tmp_path)
    for name in ("HOME", "IPYTHONDIR", "MPLCONFIGDIR"):
        monkeypatch.setenv(name, "/elsewhere")
    graders_tmp = tmp_path / "graders-tmp"  # a grader whose temporary folder is not /tmp
    graders_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(graders_tmp))
    isdir = os.path.isdir
    with monkeypatch.context() as machine:  # a machine with or without /dev/shm
        machine.setattr(os.path, "isdir", lambda path: (shm and isdir(path)) if path == "/dev/shm" else isdir(path))
        program.own_folder(str(tmp_path))
    folder = program._PROGRAM_FOLDER[0]
    assert os.path.dirname(folder) == os.path.realpath(tmp_path) and os.path.basename(folder).startswith("program-")
    assert os.getcwd() == folder and tempfile.gettempdir() == folder
    assert [os.environ[name] for name in ("TMPDIR", "HOME", "IPYTHONDIR", "MPLCONFIGDIR")] == [folder] * 4
    # where the grading kernel may write too: a right answer that logged to /tmp/debug.log kept its points there
    assert confined == [sorted(["/tmp", str(graders_tmp), *(["/dev/shm"] if shm and os.path.isdir("/dev/shm") else [])])]


def test_a_name_the_test_binds_is_the_tests_own_on_every_machine():
    """A test cell that binds a name of the student's (`model = ...`) holds its own object: no machine's cells
    redefine it."""
    from autograder.simulate import simulated_accelerator

    made = []
    scope = program.OnEachMachine({"model": len}, ["model"],
                                  lambda: made.append(True) or ({"model": max}, None, None, None))
    scope["model"] = min
    with simulated_accelerator("cuda"):
        assert scope["model"] is min
    assert made == []


@pytest.mark.parametrize("value, plain", [
    ([1, ("a", 2.0)], True), ({"device": None, 1: b"x"}, True), (frozenset({1}), True),
    ("[0] * 9_999", True), ("[0] * 10_000", False),  # the list and its items: at most _PLAIN_ITEMS in all
    ("nested(49)", True), ("nested(50)", False),  # a container at the depth limit is not looked into
    (len, False), ("__import__('torch').zeros(1)", False), ("[__import__('torch').device('cpu'), {'a': object()}]", False),
], ids=["list", "dict", "frozenset", "items-at-limit", "items-past-limit", "depth-at-limit", "depth-past-limit",
        "function", "tensor", "container-of-other"])
def test_plain_values_are_builtin_data_small_enough_to_copy(value, plain):
    def nested(depth):  # `depth` lists in lists around a number
        value = 0
        for _ in range(depth + 1):
            value = [value]
        return value

    value = eval(value, {"nested": nested}) if isinstance(value, str) else value
    assert program._plain(value) is plain
    copied = program.plain_values({"name": value, "other": len})
    assert list(copied) == (["name"] if plain else [])
    if plain and isinstance(value, list):
        assert copied["name"] == value and copied["name"] is not value  # a copy, which no cell changes
    nested = [[1]]
    copied = program.plain_values({"nested": nested})
    nested[0].append(2)
    assert copied == {"nested": [[1]]}  # a deep copy


@pytest.mark.parametrize("path, inside", [
    ("{folder}/program-x/helper.py", True), ("{folder}-other/helper.py", False), (None, False)],
    ids=["inside", "a-folder-named-alike", "no-file"])
def test_a_module_is_the_students_own_when_its_file_is_in_the_verdicts_folder(tmp_path, path, inside):
    import types

    module = types.ModuleType("helper")
    module.__file__ = None if path is None else path.format(folder=tmp_path)
    assert program._in_folder(module, str(tmp_path)) is inside
    assert program._in_folder(module, None) is False
    assert program._in_folder(types.ModuleType("builtin"), str(tmp_path)) is False  # no __file__ at all


@pytest.mark.parametrize("entries, listed", [(5, True), (6, False)], ids=["at-the-limit", "past-the-limit"])
def test_the_program_lists_at_most_its_limit_of_files(program_folder, monkeypatch, entries, listed):
    monkeypatch.setattr(program, "_FILES_LIMIT", 5)
    for index in range(entries):
        (program_folder / f"{index}.txt").write_text("1")
    assert (program.listed_files() is not None) is listed


@pytest.mark.parametrize("entries, data_set", [(4, False), (5, True)], ids=["at-the-limit", "past-the-limit"])
def test_a_folder_of_more_entries_than_a_data_sets_limit_is_one_entry(program_folder, monkeypatch, entries, data_set):
    monkeypatch.setattr(program, "_DATA_SET_ENTRIES", 4)
    for folder in ("images", "labels"):  # two of them: the listing goes on after the first
        (program_folder / folder).mkdir()
        for index in range(entries):
            (program_folder / folder / f"{index}.txt").write_text("1")
    listed = program.listed_files()
    for folder in ("images", "labels"):
        assert (f"{folder}/0.txt" not in listed) is data_set
        assert listed[folder] == ((program._FILES_BYTES + 1, 0, 0) if data_set else (0, 0, 0))


def test_listing_what_a_cell_touched_changes_no_folders_link_or_written_times(program_folder, tmp_path):
    """A folder is no file a cell wrote when a file in it was made; the times a listing sets back are a file's own
    access time, never a folder's, a link's target's (outside the program's folder) or a file's modification time."""
    import time

    (program_folder / "runs").mkdir()
    target = tmp_path / "outside.bin"
    target.write_text("data")
    os.utime(target, ns=(1_000_000_000, 1_000_000_000))
    (program_folder / "data.bin").symlink_to(target)
    os.utime(program_folder / "data.bin", ns=(3_000_000_000, 2_000_000_000), follow_symlinks=False)
    (program_folder / "notes.txt").write_text("notes")
    before = program.listed_files()
    time.sleep(0.01)
    (program_folder / "runs" / "log.txt").write_text("epoch 1")
    (program_folder / "notes.txt").read_text()
    written, folder = (os.stat(program_folder / name).st_mtime_ns for name in ("notes.txt", "runs"))
    assert program.touched(before) == ({"runs/log.txt"}, {"runs/log.txt"}, {"notes.txt"})
    assert os.stat(target).st_mtime_ns == os.stat(target).st_atime_ns == 1_000_000_000
    assert os.lstat(program_folder / "data.bin").st_atime_ns == 2_000_000_000  # the link's own, set back
    assert os.stat(program_folder / "notes.txt").st_mtime_ns == written
    assert os.stat(program_folder / "runs").st_mtime_ns == folder


def test_a_file_that_went_before_its_time_is_set_back_is_no_error(program_folder, monkeypatch):
    before = program.listed_files()
    (program_folder / "notes.txt").write_text("notes")

    def gone(*args, **kwargs):
        raise FileNotFoundError("removed meanwhile")

    monkeypatch.setattr(os, "utime", gone)
    assert program.touched(before)[0] == {"notes.txt"}


def test_a_folder_run_again_links_a_large_data_set_copies_the_rest_and_keeps_links(program_folder, monkeypatch):
    """Files past _FILES_BYTES in all are linked into the folder where cells run again (a data set), at most that
    many are copied; a symbolic link stays one; what any of the cells made is left out."""
    monkeypatch.setattr(program, "_FILES_BYTES", 18)  # exactly these: the file's 10 bytes and the link's 8
    (program_folder / "data.bin").write_bytes(b"x" * 10)
    (program_folder / "latest.bin").symlink_to("data.bin")
    (program_folder / "made-by-one.txt").write_text("")
    (program_folder / "made-by-two.txt").write_text("")
    cells = [{"made": {"made-by-one.txt"}}, {"made": {"made-by-two.txt"}}]
    copied = program._again_folder(cells)
    assert os.path.basename(copied).startswith("again-")  # beside the program's, named for a person reading /tmp
    assert sorted(os.listdir(copied)) == ["data.bin", "latest.bin"]
    assert os.readlink(os.path.join(copied, "latest.bin")) == "data.bin"
    assert os.stat(os.path.join(copied, "data.bin")).st_ino != os.stat(program_folder / "data.bin").st_ino
    (program_folder / "more.bin").write_bytes(b"x")  # now past the limit: a data set
    linked = program._again_folder(cells)
    assert os.stat(os.path.join(linked, "data.bin")).st_ino == os.stat(program_folder / "data.bin").st_ino


def test_a_tree_deeper_than_pythons_recursion_limit_is_listed_as_one_entry_and_removed(program_folder):
    """A cell that made 1,500 nested folders ended the program (RecursionError) where the kernel had run it: such a
    folder is listed as a data set is (its top, no deeper), a folder where cells would run again is not made from it
    (they run in the program's own), and the verdict's removal of it raises nothing."""
    import subprocess
    import sys

    folder = os.open(program_folder, os.O_RDONLY)
    for _ in range(sys.getrecursionlimit() + 500):  # as the cell did: os.makedirs would recurse as deep
        os.mkdir("d", dir_fd=folder)
        folder, above = os.open("d", os.O_RDONLY, dir_fd=folder), folder
        os.close(above)
    os.close(folder)
    deep = program_folder / "d"
    try:
        files = program.listed_files()
        assert "d" in files and len(files) == program._DEPTH_LIMIT + 1
        assert program._again_folder([{"made": set()}]) is None
        assert not [name for name in os.listdir(program_folder.parent) if name.startswith("again-")]
        program.remove_tree(deep)  # what Python cannot remove stays in the sandbox's tmpfs
        with pytest.raises(OSError):
            program._remove(str(deep))
    finally:
        subprocess.run(["rm", "-rf", str(deep)], check=True)  # iterative


def test_on_each_machine_the_caller_works_in_that_machines_folder_with_its_modules_and_environment(
        program_folder, tmp_path):
    """The test's calls on a simulated machine run in the folder its cells left, with the student's modules they
    imported and the environment they left; back on the students' machine, the program's. A machine whose cells
    could not run again gives the program's names."""
    import sys
    import types

    from autograder.simulate import simulated_accelerator

    cuda_folder = tmp_path / "again-cuda"
    cuda_folder.mkdir()
    helper = types.ModuleType("student_helper_on_cuda")
    helper.__file__ = str(cuda_folder / "student_helper_on_cuda.py")
    environment = dict(os.environ, WHERE_CELLS_RAN="cuda")
    scope = program.OnEachMachine({"pick": len}, ["pick"], lambda: (
        {"pick": max}, str(cuda_folder), {helper.__name__: helper}, environment))
    with simulated_accelerator("cuda"):
        assert scope["pick"] is max
        assert os.getcwd() == str(cuda_folder) and sys.modules[helper.__name__] is helper
        assert os.environ["WHERE_CELLS_RAN"] == "cuda"
    assert scope["pick"] is len
    assert os.getcwd() == str(program_folder) and helper.__name__ not in sys.modules
    assert "WHERE_CELLS_RAN" not in os.environ

    def fails():
        raise RuntimeError("a cell failed on this machine")

    failed = program.OnEachMachine({"pick": len}, ["pick"], fails)
    with simulated_accelerator("mps"):
        assert failed["pick"] is len and failed["pick"] is len  # asked twice: defined once, the program's


@pytest.mark.parametrize("value, shared", [
    ("os", False), ("own_module", True), (len, False), (int, False), (3, False), ("object()", True),
], ids=["a-library-module", "the-students-module", "function", "class", "plain", "an-object"])
def test_a_value_is_shared_by_every_machine_unless_it_is_plain_a_class_a_function_or_a_library(
        program_folder, value, shared):
    import types

    own_module = types.ModuleType("own")
    own_module.__file__ = str(program_folder / "own.py")
    if isinstance(value, str):
        value = {"os": os, "own_module": own_module}.get(value) or eval(value)
    assert program._shared(value) is shared


def test_the_students_cells_run_as_main():
    """`if __name__ == "__main__":` in a student's cell runs, as in a notebook."""
    from IPython.core.interactiveshell import InteractiveShell

    InteractiveShell.clear_instance()
    try:
        assert program.new_shell().user_ns["__name__"] == "__main__"
    finally:
        InteractiveShell.clear_instance()


def test_cells_run_again_keep_the_programs_future_imports(program_folder, fresh_shell):
    """A `from __future__ import annotations` cell of the program holds in the cells run again, as IPython keeps
    it for every later cell (attacks-machines.toml, a-future-annotations-import-is-lost-in-the-cells-run-again)."""
    import asyncio

    shell, loop = program.new_shell(), asyncio.new_event_loop()
    try:
        program.run_cell(shell, loop, "from __future__ import annotations")
    finally:
        loop.close()
    source = "def pick() -> NeverDefined:\n    return 'cpu'\nBEST = pick()"
    namespace, *_ = program.ran_again([{"source": source, "made": set()}], dict(shell.user_ns))
    assert namespace["BEST"] == "cpu"


@pytest.fixture
def temporary(program_folder, tmp_path, monkeypatch):
    """A temporary folder the program has to itself (as /tmp in the verdict's sandbox), beside the verdict's own."""
    folder = (tmp_path / "tmp").resolve()
    folder.mkdir()
    monkeypatch.setattr(program, "_TEMPORARY", [str(folder)])
    return folder


def test_what_a_cell_makes_in_a_temporary_folder_of_its_own_is_listed_by_its_absolute_path(temporary, monkeypatch):
    """Not the verdict's own folder there (the program's is listed relative to it), a machine's files waiting, nor a
    mount point (the runtime bound into /tmp); a temporary folder that cannot be listed leaves the program's listing."""
    own = temporary / "verdict-1" / "program-x"  # as in the sandbox: the verdict's folder in /tmp
    own.mkdir(parents=True)
    monkeypatch.setattr(program, "_PROGRAM_FOLDER", [str(own)])
    (temporary / ".course-held-3").mkdir()  # program.HELD_PREFIX
    (temporary / "runtime").mkdir()
    ismount = os.path.ismount
    monkeypatch.setattr(os.path, "ismount", lambda path: path == str(temporary / "runtime") or ismount(path))
    before = program.listed_files()
    (temporary / "outputs" / "run1").mkdir(parents=True)
    for made in ("runtime/x.py", ".course-held-3/0", "verdict-1/again-2", "verdict-1/program-x/log.txt"):
        (temporary / made).write_text("")
    assert program.touched(before)[0] == {f"{temporary}/outputs", f"{temporary}/outputs/run1", "log.txt"}
    monkeypatch.setattr(program, "_FILES_LIMIT", 1)
    assert set(program.listed_files()) == {"log.txt"}


def test_each_machine_has_its_own_of_what_the_cells_run_again_made_in_a_temporary_folder(temporary):
    """The program's files wait while a machine's cells make theirs again, each machine finds its own when it is
    worked on again, and the program's are back at the end; a file the program did not have is gone again."""
    made = {f"{temporary}/outputs", f"{temporary}/outputs/run1", f"{temporary}/run.log", "checkpoints"}
    (temporary / "outputs" / "run1").mkdir(parents=True)
    (temporary / "outputs" / "run1" / "device.txt").write_text("cpu")
    files = program.TemporaryFiles([{"made": made}, {"made": None}], "7")
    assert files.paths == [f"{temporary}/outputs", f"{temporary}/run.log"]  # the folders at the top, absolute only

    def run_again(device):  # as a cell run again: it makes them exclusively
        files.place(None)
        os.makedirs(temporary / "outputs" / "run1")
        (temporary / "outputs" / "run1" / "device.txt").write_text(device)
        open(temporary / "run.log", "x").close()
        files.placed = device

    run_again("cuda")
    run_again("mps")
    for device in ("cuda", program._STUDENTS, "mps"):
        files.place(device)
        expected = "cpu" if device == program._STUDENTS else device
        assert (temporary / "outputs" / "run1" / "device.txt").read_text() == expected
        assert (temporary / "run.log").exists() is (expected != "cpu")
    files.restore()
    assert (temporary / "outputs" / "run1" / "device.txt").read_text() == "cpu" and not (temporary / "run.log").exists()
    assert sorted(os.listdir(temporary)) == ["outputs"]  # no machine's left waiting


@pytest.mark.parametrize("ended_after", ["waiting", "made-again", "moving-back"])
def test_the_programs_temporary_files_come_back_however_its_caller_ended(temporary, ended_after):
    """A caller ended half-way (its test ran past its limit): the program, with the test's name alone, puts its own
    back and leaves nothing of another machine's."""
    made = [{"made": {f"{temporary}/outputs", f"{temporary}/run.log"}}]
    (temporary / "outputs").mkdir()
    (temporary / "outputs" / "device.txt").write_text("cpu")
    files = program.TemporaryFiles(made, "4")
    files.place(None)
    if ended_after != "waiting":
        (temporary / "outputs").mkdir()
        (temporary / "outputs" / "device.txt").write_text("cuda")
        (temporary / "run.log").write_text("cuda")
        files.placed = ("cuda", "cuda")
    if ended_after == "moving-back":  # the first path back, the second not yet
        files._wait(files.paths[0], files._waiting(0, files.paths[0], ("cuda", "cuda")))
        files._back(files.paths[0], files._waiting(0, files.paths[0], program._STUDENTS))
    program.TemporaryFiles(made, "4").restore()  # what the program knows
    assert (temporary / "outputs" / "device.txt").read_text() == "cpu"
    assert sorted(os.listdir(temporary)) == ["outputs"]


def test_what_only_a_machines_cells_made_in_a_temporary_folder_is_gone_with_the_test(temporary):
    """`os.makedirs(f"/tmp/outputs_{DEVICE.type}")`: the CUDA machine's folder, which the program never made, is that
    machine's alone, so the next test's cells make it again there (it raised FileExistsError)."""
    files = program.TemporaryFiles([{"made": {f"{temporary}/outputs_cpu"}}], "2")
    (temporary / "outputs_cpu").mkdir()
    files.place(None)
    (temporary / "outputs_cuda").mkdir()
    files.include({f"{temporary}/outputs_cuda"})
    files.placed = ("cuda", "cuda")
    files.place(program._STUDENTS)
    assert sorted(os.listdir(temporary)) == [".course-held-2", "outputs_cpu"]
    files.restore()
    assert sorted(os.listdir(temporary)) == ["outputs_cpu"]


def test_a_temporary_listing_that_failed_makes_nothing_there_new(temporary, program_folder, monkeypatch):
    """Past the limit once, a folder in /tmp the program had all along is no file the next cell made; and where the
    cells run again, only the program's own folder counts towards linking it."""
    (temporary / "data").mkdir()
    monkeypatch.setattr(program, "_FILES_LIMIT", 0)
    before = program.listed_files()
    monkeypatch.setattr(program, "_FILES_LIMIT", 20_000)
    assert program.touched(before)[0] == set()
    monkeypatch.setattr(program, "_FILES_BYTES", 10)
    (temporary / "data" / "big.bin").write_bytes(b"x" * 100)  # a data set in /tmp
    (program_folder / "settings.json").write_text("{}")
    copied = program._again_folder([{"made": set()}])
    assert os.stat(os.path.join(copied, "settings.json")).st_ino != os.stat(program_folder / "settings.json").st_ino
