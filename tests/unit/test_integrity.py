"""Tampering with PyTorch or the course's helpers is seen, and stays seen."""
import builtins
from pathlib import Path

import pytest
import torch
from torch import nn

from autograder import boundary, checks, integrity
from support.messages import shows


@pytest.fixture(autouse=True)
def fresh_record(monkeypatch):
    """Each test starts as a new grading kernel: nothing remembered, nothing seen."""
    monkeypatch.setattr(integrity, "_remembered", {})
    monkeypatch.setattr(integrity, "_tampered", set())
    integrity.start_grading()


def tampering_reported(function, *args):
    with pytest.raises(AssertionError) as raised:
        function(*args)
    assert shows(str(raised.value), "tampering"), str(raised.value)
    return str(raised.value)


def test_nothing_patched_verifies():
    integrity.verify()
    assert checks.call("f()", lambda: 3) == 3


@pytest.mark.parametrize("owner, name, replacement", [
    (torch.Tensor, "to", lambda self, *a, **k: self),
    (torch.Tensor, "device", property(lambda self: torch.device("meta"))),
    (torch.Tensor, "dtype", property(lambda self: torch.float32)),
    (nn.Module, "to", lambda self, *a, **k: self),
    (torch, "device", lambda *a, **k: "meta"),
    (checks, "assert_device", lambda *a, **k: None),
    (checks.core, "_fail", lambda *a, **k: None),  # what every check calls, in the module the checks live in
    (checks.tensors, "assert_tensor", lambda *a, **k: None),
    (builtins, "print", lambda *a, **k: None),  # a builtin pytest itself does not need while this runs
    # what the verdict's caller says of a result: a copy sent as the very argument (an attacker's, issue 41)
    (boundary.Known, "index", lambda self, value: 0),
    (boundary, "encode", lambda *a, **k: b""),
], ids=["Tensor.to", "Tensor.device", "Tensor.dtype", "Module.to", "torch.device", "checks.assert_device",
        "checks.core._fail", "checks.tensors.assert_tensor", "builtins.print", "boundary.Known.index",
        "boundary.encode"])
def test_a_patch_is_reported_by_name(monkeypatch, owner, name, replacement):
    monkeypatch.setattr(owner, name, replacement)
    shown = tampering_reported(integrity.verify, "to_device")
    assert name in shown


def test_every_module_of_the_checks_is_watched():
    modules = {f"autograder.checks.{p.stem}" for p in Path(checks.__file__).parent.glob("*.py") if p.stem != "__init__"}
    assert modules and modules <= set(integrity.WATCHED), sorted(modules - set(integrity.WATCHED))


def test_student_calls_are_checked_before_and_after():
    def patches_then_answers():
        torch.Tensor.to = lambda self, *a, **k: self
        return 1

    original = torch.Tensor.to
    try:
        tampering_reported(checks.call, "to_device(x, 'meta')", patches_then_answers)
    finally:
        torch.Tensor.to = original


def test_restoring_the_original_does_not_hide_the_tampering(monkeypatch):
    original = torch.Tensor.to
    torch.Tensor.to = lambda self, *a, **k: self
    try:
        integrity.tampered()  # what the post-cell hook does after the student's cell
    finally:
        torch.Tensor.to = original
    tampering_reported(integrity.verify)
