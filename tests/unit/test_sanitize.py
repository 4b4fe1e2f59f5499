"""The nbval sanitizer loads every rule and rewrites only the device a lesson chooses (nbval itself over
rewritten lessons: tests/grading/test_nbval_sanitize.py)."""
import re

import nbformat
import pytest
from nbval.plugin import get_sanitize_patterns

from course.classroom import ROOT


SANITIZE = ROOT / "tests" / "sanitize.cfg"


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
