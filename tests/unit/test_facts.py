"""The comparison table of lesson 4 says what PyTorch does: each fact of tests/facts/comparison.toml is
checked against PyTorch here, and the table's row, in English and in Chinese, must say it, as must the
README's opening (review P1: the table could claim that `Tensor.to` works in place while every other test
passed). The quiz above the table prints what PyTorch does, compared strictly by nbval."""
import re
import tomllib
from pathlib import Path

import nbformat
import pytest
import torch
from torch import nn


ROOT = Path(__file__).resolve().parents[2]
ROWS = tomllib.loads((ROOT / "tests" / "facts" / "comparison.toml").read_text("utf-8"))["row"]
LESSON = ROOT / "notebooks" / "04_side_by_side.ipynb"


def table(language: str) -> dict[str, tuple[str, str]]:
    """Lesson 4's comparison table in `language`: row label → (Tensor.to's cell, Module.to's cell)."""
    cell = next(c for c in nbformat.read(LESSON, as_version=4).cells
                if c.cell_type == "markdown" and f"lang-{language}" in c.metadata.get("tags", []) and "| `Module.to` |" in c.source)
    rows = [[part.strip() for part in line.strip().strip("|").split("|")] for line in cell.source.splitlines()
            if line.startswith("|") and not re.match(r"\|\s*-", line)]
    return {label: (tensor, module) for label, tensor, module in (row[:3] for row in rows[1:])}


@pytest.mark.parametrize("language", ["en", "zh"])
@pytest.mark.parametrize("row", ROWS, ids=[row["fact"] for row in ROWS])
def test_the_lessons_table_says_each_fact(row, language):
    shown = table(language)
    label = row["label"][language]
    assert label in shown, f"no row {label!r} / 没有这一行: {sorted(shown)}"
    tensor, module = shown[label]
    assert tensor.startswith(row["tensor"][language]), f"Tensor.to {label}: {tensor!r}"
    assert module.startswith(row["module"][language]), f"Module.to {label}: {module!r}"


@pytest.mark.parametrize("language", ["en", "zh"])
def test_the_readme_says_the_same(language):
    readme = (ROOT / "README.md").read_text("utf-8")
    claimed = [sentence for row in ROWS for sentence in row.get("readme", {}).get(language, [])]
    assert claimed and all(sentence in readme for sentence in claimed), claimed


def test_every_fact_of_the_data_is_checked_against_pytorch():
    assert {row["fact"] for row in ROWS} == set(FACTS)


def in_place():
    x = torch.arange(3.0)
    moved = x.to(torch.float64)
    assert moved is not x and x.dtype == torch.float32  # Tensor.to leaves x as it was
    model = nn.Linear(2, 2)
    assert model.to(torch.float64) is model and model.weight.dtype == torch.float64  # Module.to changes it


def returns():
    x = torch.arange(3.0)
    assert x.to(torch.float32) is x and x.to("cpu") is x and x.to(torch.float64) is not x
    model = nn.Linear(2, 2)
    assert model.to("cpu") is model and model.to(torch.float16) is model


def identity():
    model = nn.Linear(2, 2)
    weight = model.weight
    model.to(torch.float64)
    assert model.weight is weight  # the parameter object is kept (its data replaced)


def dtype_rules():
    assert torch.arange(3.0).to(torch.int64).dtype == torch.int64  # Tensor.to: any dtype
    model = nn.BatchNorm1d(2)
    model.to(torch.float16)
    assert model.weight.dtype == torch.float16 and model.num_batches_tracked.dtype == torch.int64
    with pytest.raises(TypeError):
        nn.Linear(2, 2).to(torch.int64)  # Module.to takes floating point or complex dtypes only


def autograd():
    leaf = torch.ones(2, requires_grad=True)
    moved = leaf.to(torch.float64)
    assert not moved.is_leaf and moved.grad_fn is not None and leaf.to(torch.float32) is leaf
    assert torch.ones(2).to(torch.float64).is_leaf  # without requires_grad nothing is recorded (review M5)
    model = nn.Linear(2, 2).to(torch.float64)
    assert all(p.is_leaf and p.requires_grad for p in model.parameters())


def shortcuts():
    x = torch.arange(3.0)
    assert x.half() is not x and x.dtype == torch.float32
    model = nn.Linear(2, 2)
    assert model.half() is model and model.weight.dtype == torch.float16


FACTS = {check.__name__: check for check in (in_place, returns, identity, dtype_rules, autograd, shortcuts)}


@pytest.mark.parametrize("fact", FACTS)
def test_pytorch_does_what_the_table_says(fact):
    FACTS[fact]()


MPS_FLOAT64 = "Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't support float64"


def test_lesson_1_quotes_the_mps_float64_error_that_pytorch_expects():
    """No MPS here: the message lesson 1 quotes is checked against PyTorch's own MPS tests, as installed."""
    pytorch_tests = Path(torch.__file__).parent / "testing" / "_internal" / "common_methods_invocations.py"
    assert MPS_FLOAT64 in pytorch_tests.read_text("utf-8")
    lesson = nbformat.read(ROOT / "notebooks" / "01_devices.ipynb", as_version=4)
    for language in ["lang-en", "lang-zh"]:
        prose = " ".join(c.source.replace("\n", " ") for c in lesson.cells if language in c.metadata.get("tags", []))
        assert f"TypeError: {MPS_FLOAT64}" in prose, language
