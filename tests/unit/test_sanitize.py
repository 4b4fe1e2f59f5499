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


LESSON_13 = ROOT / "notebooks" / "13_debugging.ipynb"


@pytest.mark.parametrize("printed, stored", [
    ("int32 targets: RuntimeError. PyTorch 2.11.0 says: expected scalar type Long but found Int",
     "int32 targets: RuntimeError. PyTorch 2.13.0 says: expected target dtype to be Long or Byte, but got Int"),
    ("RuntimeError. PyTorch 2.14.0a0+git12ab says: mat1 and mat2 must have the same dtype",
     "RuntimeError. PyTorch 2.13.0 says: mat1 and mat2 must have the same dtype, but got Double and Float"),
])
def test_pytorchs_words_for_an_error_may_differ_between_versions(printed, stored):
    assert sanitize(printed) == sanitize(stored)


@pytest.mark.parametrize("printed, stored", [
    ("int32 targets: works", "int32 targets: RuntimeError. PyTorch 2.13.0 says: expected target dtype to be Long"),
    ("x: ValueError. PyTorch 2.13.0 says: bad", "x: RuntimeError. PyTorch 2.13.0 says: bad"),
    ("nn.Linear: RuntimeError: Tensor on device meta", "nn.Linear: RuntimeError: Tensor on device cpu"),
])
def test_what_comes_before_pytorchs_words_is_compared_strictly(printed, stored):
    assert sanitize(printed) != sanitize(stored)


def test_lesson_13_prints_every_caught_errors_message_through_pytorch_says():
    """Its error-message cells outside a GPU branch (those outputs are compared) print the error's type,
    then PyTorch's words with pytorch_says: never `{error}` or `, error)` alone."""
    for index, cell in enumerate(nbformat.read(LESSON_13, as_version=4).cells):
        if cell.cell_type != "code" or "torch.cuda.is_available()" in cell.source:
            continue
        caught = re.findall(r"except RuntimeError as (\w+):", cell.source)
        for name in caught:
            assert not re.search(rf"print\(.*(\{{{name}\}}|, {name}\))", cell.source), f"cell {index} prints {name} itself"
            assert f"pytorch_says({name})" in cell.source, f"cell {index}"


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
