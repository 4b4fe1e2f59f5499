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
