"""A lesson cell that moves something to the chosen `device` shows a forgotten move on a CPU runner too.

On a CPU machine `device` is `cpu`, so `x.to(device)` changes nothing and deleting it prints the same
"on the chosen device: True" (tests.md, C2-C6). Each lesson cell tagged `placement` is therefore run
again in a kernel of its own, after the cells before it, with `device` (and the accelerator the lesson
asks PyTorch for) as `meta`: a real device without data, as the graders use. It must run, and every claim
it printed as True must still be True there. A cell may stop at what meta cannot do for want of data
(compare values, `.item()`), once it has printed its placement claims.
"""
import re

import nbformat
import pytest
from nbclient import NotebookClient

from autograder import classroom

TAG = "placement"
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


def placement_cells():
    found = []
    for path in LESSONS:
        cells = nbformat.read(path, as_version=4).cells
        found += [(path, index) for index, cell in enumerate(cells) if TAG in cell.metadata.get("tags", [])]
    return found


def claims(outputs) -> dict[str, str]:
    text = "".join(output.get("text", "") for output in outputs if output.get("output_type") == "stream")
    return {match["label"].strip(): match["value"] for match in CLAIM.finditer(text)}


def test_the_cells_that_demonstrate_a_move_are_tagged():
    """Lessons 3 to 7: where a forgotten move printed the same on a CPU runner (C2-C6)."""
    tagged = {path.stem for path, _ in placement_cells()}
    assert {"03_module_to", "04_side_by_side", "05_training_loop", "06_checkpoints",
            "07_transfers_performance"} <= tagged, tagged


@pytest.mark.parametrize("path, index", placement_cells(), ids=lambda v: v.stem if hasattr(v, "stem") else str(v))
def test_a_placement_cell_holds_on_a_second_device(path, index):
    notebook = nbformat.read(path, as_version=4)
    cell = notebook.cells[index]
    stored = claims(cell.outputs)  # none in a training loop: there it must run on meta, or stop for want of data
    earlier = [c for c in notebook.cells[:index] if c.cell_type == "code"]
    probe = nbformat.v4.new_code_cell(ON_META + cell.source)
    run = nbformat.v4.new_notebook(cells=[*earlier, probe], metadata=notebook.metadata)
    NotebookClient(run, timeout=300, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
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
