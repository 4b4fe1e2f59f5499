"""A lesson cell that moves something to the chosen `device` shows a forgotten move on a CPU runner too.

On a CPU machine `device` is `cpu`, so `x.to(device)` changes nothing and deleting it prints the same
"on the chosen device: True" (tests.md, C2-C6). Each lesson cell tagged `placement` is therefore run
again in a kernel of its own, after the cells before it, with `device` (and the accelerator the lesson
asks PyTorch for) as `meta`: a real device without data, as the graders use. It must run, and every claim
it printed as True must still be True there. A cell may stop at what meta cannot do for want of data
(compare values, `.item()`), once it has printed its placement claims. A cell tagged `device-choice`,
which only chooses `device`, runs on every simulated machine and must choose what is there (C8: the CUDA
build without a GPU is told apart only by the runtime check).
"""
import json
import re

import nbformat
import pytest

from autograder.simulate import MACHINES
from course import classroom
from support.lessons import run_after_earlier_cells

TAG = "placement"
CHOICE_TAG = "device-choice"  # a cell that only chooses `device`: checked on every simulated machine
LESSONS = sorted((classroom.ROOT / "notebooks").glob("*.ipynb"))
# the chosen device becomes meta, whether the cell reads `device` or asks torch.accelerator itself; the
# models the cells before it moved to the chosen device are moved there too (in place, as they were)
ON_META = """
import torch as _torch
device = _torch.device("meta")
_torch.accelerator.current_accelerator = lambda check_available=False: _torch.device("meta")
for _value in list(globals().values()):
    if isinstance(_value, _torch.nn.Module):
        _value.to(device)
"""
# what meta cannot do because it holds no data: a cell may end there, once its placement claims are printed
NO_DATA = re.compile(r"attempted to run this operator with Meta tensors|cannot be called on meta tensors|"
                     r"can't convert meta device type tensor|Cannot copy out of meta tensor")
CLAIM = re.compile(r"^\s*(?P<label>[^:\n]+):\s*(?P<value>True|False)\b", re.M)


def tagged_cells(tag):
    found = []
    for path in LESSONS:
        cells = nbformat.read(path, as_version=4).cells
        found += [(path, index) for index, cell in enumerate(cells) if tag in cell.metadata.get("tags", [])]
    return found


def cell_id(value):
    return value.stem if hasattr(value, "stem") else str(value)


def claims(outputs) -> dict[str, str]:
    text = "".join(output.get("text", "") for output in outputs if output.get("output_type") == "stream")
    return {match["label"].strip(): match["value"] for match in CLAIM.finditer(text)}


def test_the_cells_that_demonstrate_a_move_are_tagged():
    """Lessons 3 to 7: where a forgotten move printed the same on a CPU runner (C2-C6)."""
    tagged = {path.stem for path, _ in tagged_cells(TAG)}
    assert {"03_module_to", "04_side_by_side", "05_training_loop", "06_checkpoints",
            "07_transfers_performance"} <= tagged, tagged


@pytest.mark.parametrize("path, index", tagged_cells(TAG), ids=cell_id)
def test_a_placement_cell_holds_on_a_second_device(path, index):
    notebook = nbformat.read(path, as_version=4)
    cell = notebook.cells[index]
    stored = claims(cell.outputs)  # none in a training loop: there it must run on meta, or stop for want of data
    run, probe = run_after_earlier_cells(path, index, ON_META + cell.source)
    failed = [o for c in run.cells for o in c.outputs if o.output_type == "error"]
    stopped = bool(failed) and failed[-1] in probe.outputs and bool(NO_DATA.search(failed[-1].evalue))
    assert not failed or (len(failed) == 1 and stopped), (
        f"{path.name}, cell {index} on meta / 在 meta 上: {failed[-1].ename}: {failed[-1].evalue[:300]}")
    on_meta = claims(probe.outputs)
    # a claim printed after the cell stopped for want of data is not asked for; every one before it is
    asked = list(stored)[:len(on_meta)] if stopped else list(stored)
    changed = {label: on_meta.get(label) for label in asked if stored[label] == "True" and on_meta.get(label) != "True"}
    assert not changed, (f"{path.name}, cell {index}: on meta / 在 meta 上: {changed} "
                         "(a move that does nothing on the CPU / 一个在 CPU 上不起作用的移动)")


def test_lesson_1_chooses_its_device_with_the_runtime_check():
    tagged = {path.stem for path, _ in tagged_cells(CHOICE_TAG)}
    assert "01_devices" in tagged, tagged


@pytest.mark.parametrize("path, index", tagged_cells(CHOICE_TAG), ids=cell_id)
def test_a_device_choice_is_right_on_every_kind_of_machine(path, index):
    """On the CPU build `current_accelerator()` and `current_accelerator(check_available=True)` agree;
    on the CUDA build without a GPU (most students' laptops) only the runtime check finds no CUDA. So the
    cell runs on each simulated machine (autograder/simulate.py) and must choose what is there."""
    source = nbformat.read(path, as_version=4).cells[index].source
    probe = (f"from autograder.simulate import MACHINES as _machines, simulated_machine as _simulated\n"
             f"import json as _json\n_chosen = {{}}\n"
             f"for _machine in _machines:\n    with _simulated(_machine):\n        exec({source!r})\n"
             f"    _chosen[str(_machine)] = str(device)\n"
             f"print('CHOSEN', _json.dumps(_chosen))\n")
    _, cell = run_after_earlier_cells(path, index, probe)
    errors = [o for o in cell.outputs if o.output_type == "error"]
    assert not errors, f"{errors[0].ename}: {errors[0].evalue}" if errors else ""
    text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
    chosen = json.loads(text.split("CHOSEN ", 1)[1].splitlines()[0])
    expected = {str(machine): machine.present or "cpu" for machine in MACHINES}
    assert chosen == expected, f"{path.name}, cell {index}: chose / 选择了 {chosen}, not / 而不是 {expected}"
