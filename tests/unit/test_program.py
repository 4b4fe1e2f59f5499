"""The student's program in the verdict (autograder/program.py): the names a cell mentions and binds, the files
it touched, and which cells run again on another machine, and where."""
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
], ids=["from-import", "same-string", "branches", "with", "function", "magic", "cell-magic", "call", "environment"])
def test_the_names_a_cell_mentions_and_assigns(source, mentioned, assigned):
    from IPython.core.interactiveshell import InteractiveShell

    InteractiveShell.clear_instance()
    found = program.cell_names(program.new_shell(), source)
    InteractiveShell.clear_instance()
    assert found == (mentioned, assigned)


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
], ids=["reads-what-a-cell-run-again-binds", "changed-in-place", "an-object-it-reads", "nothing", "module-setting"])
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
    """A cell run again starts from the plain data it started from when the program ran it (`calls = 0`), not
    from what later cells made of it; a later cell that changed it in place is not undone by the next's start."""
    cells = [{"source": "calls = calls + 1", "plain": {"calls": 0}, "made": set()},
             {"source": "config['device'] = 'cuda'", "plain": {"config": {"device": "cpu"}, "calls": 1}, "made": set()},
             {"source": "seen = (calls, config['device'])", "plain": {"config": {"device": "cpu"}}, "made": set()}]
    namespace, *_ = program.ran_again(cells, {"calls": 7, "config": {"device": "mps"}})
    assert namespace["calls"] == 1 and namespace["seen"] == (1, "cuda")


def test_cells_run_again_leave_the_callers_folder_environment_and_randomness_as_they_were(
        program_folder, fresh_shell, monkeypatch):
    """What the cells run again did to the process (its folder, environment, start method, random numbers,
    PyTorch's settings and default device) is that machine's: it comes back with their names, and the caller's
    own is as it was."""
    import multiprocessing

    import torch

    (program_folder / "runs").mkdir()
    monkeypatch.delenv("WHERE_CELLS_RAN", raising=False)
    source = ("import os, multiprocessing, torch\nos.environ['WHERE_CELLS_RAN'] = 'again'\nos.chdir('runs')\n"
              "multiprocessing.set_start_method('spawn')\ntorch.manual_seed(0)\ndrawn = torch.rand(1)\n"
              "torch.set_default_dtype(torch.float64)\ntorch.set_default_device('meta')")
    start_method, generator = multiprocessing.get_start_method(allow_none=True), torch.get_rng_state()
    namespace, left, imported, environment = program.ran_again([{"source": source, "made": set()}], {})
    assert "drawn" in namespace and imported == {}
    assert os.path.basename(left) == "runs" and os.path.dirname(os.path.dirname(left)) == str(program_folder.parent)
    assert environment["WHERE_CELLS_RAN"] == "again" and "WHERE_CELLS_RAN" not in os.environ
    assert os.getcwd() == str(program_folder)
    assert multiprocessing.get_start_method(allow_none=True) == start_method
    assert torch.equal(torch.get_rng_state(), generator)
    assert torch.get_default_dtype() is torch.float32 and torch.get_default_device().type == "cpu"


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


@pytest.mark.parametrize("refused", [False, True], ids=["confined", "landlock-refuses"])
def test_the_program_makes_its_own_folder_everything_temporary_goes_to(tmp_path, monkeypatch, refused):
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
    for name in ("TMPDIR", "HOME", "IPYTHONDIR", "MPLCONFIGDIR"):
        monkeypatch.setenv(name, "/elsewhere")
    program.own_folder(str(tmp_path))
    folder = program._PROGRAM_FOLDER[0]
    assert os.path.dirname(folder) == os.path.realpath(tmp_path) and os.path.basename(folder).startswith("program-")
    assert os.getcwd() == folder and tempfile.gettempdir() == folder
    assert [os.environ[name] for name in ("TMPDIR", "HOME", "IPYTHONDIR", "MPLCONFIGDIR")] == [folder] * 4
    assert confined == [[str(tmp_path), *(["/dev/shm"] if os.path.isdir("/dev/shm") else [])]]


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


@pytest.mark.parametrize("path, inside", [
    ("{folder}/program-x/helper.py", True), ("{folder}-other/helper.py", False), (None, False)],
    ids=["inside", "a-folder-named-alike", "no-file"])
def test_a_module_is_the_students_own_when_its_file_is_in_the_verdicts_folder(tmp_path, path, inside):
    import types

    module = types.ModuleType("helper")
    module.__file__ = None if path is None else path.format(folder=tmp_path)
    assert program._in_folder(module, str(tmp_path)) is inside
    assert program._in_folder(module, None) is False
