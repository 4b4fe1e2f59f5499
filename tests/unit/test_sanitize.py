"""The nbval sanitizer loads every rule and rewrites only the device a lesson chooses."""
import copy as copy_module
import re
import subprocess
import sys

import nbformat
import pytest
from nbval.plugin import get_sanitize_patterns

from course.classroom import ROOT


SANITIZE = ROOT / "tests" / "sanitize.cfg"
LESSON_1 = ROOT / "notebooks" / "01_devices.ipynb"


def sanitize(text: str) -> str:
    """What nbval does to every stored and fresh output before comparing them."""
    for regex, replace in get_sanitize_patterns(SANITIZE.read_text("utf-8")):
        text = re.sub(regex, replace, text)
    return text


def test_every_rule_in_the_file_is_loaded_by_nbval():
    sections = re.findall(r"^\[.+\]$", SANITIZE.read_text("utf-8"), flags=re.MULTILINE)
    assert len(get_sanitize_patterns(SANITIZE.read_text("utf-8"))) == len(sections) >= 1


@pytest.mark.parametrize("printed", ["device = cuda", "device = cuda:0", "device = mps", "device = cpu"])
def test_the_chosen_device_line_reads_the_same_on_every_runner(printed):
    assert sanitize(printed) == "device = cpu"


@pytest.mark.parametrize("claim", [
    "lands on cuda:0: True",
    "device(type='cuda', index=0)",
    "tensor([1., 2.], device='cuda:0')",
    "weight: cuda:0  mask: cpu",
    "'cuda:1'  -> type='cuda'  index=1",
    "mps",
    "meta",
])
def test_device_claims_are_compared_strictly(claim):
    assert sanitize(claim) == claim


def run_nbval(notebook) -> subprocess.CompletedProcess:
    """nbval over one notebook, with the course's sanitizer and nothing else from pyproject.toml."""
    (notebook.parent / "pytest.ini").write_text("[pytest]\n")
    command = [sys.executable, "-m", "pytest", "--nbval", "--nbval-current-env", "-p", "no:cacheprovider",
               "--nbval-sanitize-with", str(SANITIZE), "-q", str(notebook)]
    return subprocess.run(command, cwd=notebook.parent, capture_output=True, text=True, timeout=300)


def stored_output(cell) -> str:
    return "".join(output.get("text", "") or output.get("data", {}).get("text/plain", "") for output in cell.outputs)


def swap_stored_output(cell, old, new):
    for output in cell.outputs:
        key = "text" if "text" in output else None
        if key:
            output[key] = output[key].replace(old, new)
        else:
            output["data"]["text/plain"] = output["data"]["text/plain"].replace(old, new)


@pytest.fixture(scope="module")
def lesson_runs(tmp_path_factory):
    """Lesson 1 with a chosen-device line and a device claim swapped to CUDA in its stored outputs."""
    lesson = nbformat.read(LESSON_1, as_version=4)
    chosen = [c for c in lesson.cells if c.cell_type == "code" and stored_output(c).startswith("device = cpu")]
    claim = next(c for c in lesson.cells if c.cell_type == "code" and stored_output(c) == "device(type='cpu')")
    assert chosen, "lesson 1 prints its chosen device as `device = cpu`"
    runs = {}
    for name, cells, old, new in [("chosen", chosen, "device = cpu", "device = cuda:0"),
                                  ("claim", [claim], "device(type='cpu')", "device(type='cuda', index=0)")]:
        copy = copy_module.deepcopy(lesson)
        for cell in copy.cells:
            if any(cell.source == c.source for c in cells):
                swap_stored_output(cell, old, new)
        folder = tmp_path_factory.mktemp(name)
        nbformat.write(copy, folder / LESSON_1.name)
        runs[name] = run_nbval(folder / LESSON_1.name)
    return runs


def test_a_run_on_cuda_still_matches_where_the_lesson_prints_its_chosen_device(lesson_runs):
    done = lesson_runs["chosen"]
    assert done.returncode == 0, done.stdout[-3000:]


def test_a_cpu_cuda_swap_in_a_device_claim_fails_nbval(lesson_runs):
    done = lesson_runs["claim"]
    assert done.returncode == 1, done.stdout[-3000:]
    assert "1 failed" in done.stdout
