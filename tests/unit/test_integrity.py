"""Tampering with PyTorch or the course's helpers is seen, and stays seen."""
import builtins
import types
from pathlib import Path

import pytest
import torch
from torch import nn

from autograder import boundary, calls, checks, integrity, probes, simulate
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
    # what the caller runs for the judge (the second attacker of its requests)
    (probes, "global_rng_kept", lambda function, *a, **k: (function(*a, **k), True)),
    (calls, "take", lambda value, state: None),
    (torch.Tensor, "grad", property(lambda self: None, lambda self, value: None)),
    (torch, "get_rng_state", lambda: torch.zeros(5056, dtype=torch.uint8)),
], ids=["Tensor.to", "Tensor.device", "Tensor.dtype", "Module.to", "torch.device", "checks.assert_device",
        "checks.core._fail", "checks.tensors.assert_tensor", "builtins.print", "boundary.Known.index",
        "boundary.encode", "probes.global_rng_kept", "calls.take", "Tensor.grad", "torch.get_rng_state"])
def test_a_patch_is_reported_by_name(monkeypatch, owner, name, replacement):
    monkeypatch.setattr(owner, name, replacement)
    shown = tampering_reported(integrity.verify, "to_device")
    assert name in shown



def _returns_none(*args, **kwargs):
    return None


@pytest.mark.parametrize("owner, name, replacement", [
    (boundary._encoded, "__code__", _returns_none.__code__),  # the function stays the same object
    (boundary._encoded, "__defaults__", (None, 1)),
    (calls.take, "__kwdefaults__", {"unused": None}),
    (boundary.random_state_kept.__closure__[0], "cell_contents", _returns_none),  # what contextmanager wraps
    (boundary, "integrity", types.SimpleNamespace(verify=_returns_none)),  # a module the boundary imported
    (boundary, "DEPTH_LIMIT", 10**9),  # a constant
], ids=["code", "defaults", "keyword-defaults", "closure", "imported-module", "constant"])
def test_a_change_inside_a_watched_function_or_module_is_reported(monkeypatch, owner, name, replacement):
    """attacks-slicing.toml, a-function-of-the-boundary-given-other-code-in-place: a cell that gives a function
    of the boundary other code keeps it the same object; so does one that rebinds what a function reads."""
    monkeypatch.setattr(owner, name, replacement)
    tampering_reported(integrity.verify, "make_weight")


def test_what_the_course_binds_again_while_grading_is_no_tampering(monkeypatch):
    from autograder.checks import core

    monkeypatch.setattr(core, "boundary", object())  # core.use_boundary, in the verdict's caller
    integrity.verify()

def test_a_patch_is_seen_whatever_the_cell_makes_the_lookups_answer(monkeypatch):
    """attacks-slicing.toml: importlib-import-module-patched-so-integrity-sees-the-originals and
    simulate-replacement-patched-so-integrity-excuses-any-patch."""
    import importlib
    import types

    patched = lambda function, *a, **k: (function(*a, **k), True)  # noqa: E731
    copy = types.ModuleType("autograder.probes")
    copy.__dict__.update(vars(probes))
    real_import = importlib.import_module
    monkeypatch.setattr(importlib, "import_module", lambda name, *a: copy if name == "autograder.probes"
                        else real_import(name, *a))
    monkeypatch.setattr(simulate, "replacement", lambda name: patched)
    monkeypatch.setattr(probes, "global_rng_kept", patched)
    assert "global_rng_kept" in tampering_reported(integrity.verify, "make_sampler")


def test_a_module_put_in_the_place_of_a_watched_one_is_tampering(monkeypatch):
    import sys
    import types

    monkeypatch.setitem(sys.modules, "autograder.probes", types.ModuleType("autograder.probes"))
    tampering_reported(integrity.verify, "make_sampler")


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
