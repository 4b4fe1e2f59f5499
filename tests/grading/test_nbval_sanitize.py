"""nbval itself, with the course's sanitizer (tests/sanitize.cfg), over lessons whose stored outputs were
rewritten as another runner or another torch would print them. The sanitizer's rules one by one are
tests/unit/test_sanitize.py."""
import copy as copy_module
import subprocess
import sys

import nbformat
import pytest

from course.classroom import ROOT

SANITIZE = ROOT / "tests" / "sanitize.cfg"
LESSON_1 = ROOT / "notebooks" / "01_devices.ipynb"
LESSON_13 = ROOT / "notebooks" / "13_debugging.ipynb"


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


def test_nbval_on_another_torch_fails_on_a_changed_error_type_but_not_on_changed_words(tmp_path):
    """Lesson 13 with its stored outputs rewritten as another torch would word them passes nbval; with an
    error type changed it fails."""
    lesson = nbformat.read(LESSON_13, as_version=4)
    said = [c for c in lesson.cells if c.cell_type == "code" and "says: " in stored_output(c)]
    assert len(said) >= 8
    runs = {}
    for name, old, new in [("words", "says: ", "says: in other words, "), ("type", "RuntimeError. PyTorch", "ValueError. PyTorch")]:
        copy = copy_module.deepcopy(lesson)
        for cell in copy.cells:
            if any(cell.source == c.source for c in said):
                swap_stored_output(cell, old, new)
        folder = tmp_path / name
        folder.mkdir()
        nbformat.write(copy, folder / LESSON_13.name)
        runs[name] = run_nbval(folder / LESSON_13.name)
    assert runs["words"].returncode == 0, runs["words"].stdout[-3000:]
    assert runs["type"].returncode == 1 and f"{len(said)} failed" in runs["type"].stdout, runs["type"].stdout[-3000:]
