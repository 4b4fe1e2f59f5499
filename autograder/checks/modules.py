"""Checks of a module: where its parameters and buffers are, its buffers and fixed tensors, its modes and
state, and the audit of a model with its batch (assignment a4).
"""
from collections.abc import Mapping

import torch
from torch import nn

from ..devices import same_device
from ..messages import text
from ..probes import saved_by_state_dict
from .core import call, _device_of, _dtype_of, _fail, _name
from .tensors import assert_values


def assert_module_on(module, device, what):
    """Every parameter and buffer of `module` on `device`, and no tensor attribute left behind."""
    __tracebackhide__ = True
    assert_module(module, what)
    for kind, named in (("kind_parameter", module.named_parameters()), ("kind_buffer", module.named_buffers())):
        for name, tensor in named:
            if not same_device(_device_of(tensor), device):
                _fail("module_tensor_device", what=what, expected=torch.device(device), found=_device_of(tensor),
                      kind=text(kind), name=name)
    for prefix, submodule in module.named_modules():
        for attribute, value in vars(submodule).items():
            if isinstance(value, torch.Tensor) and not same_device(_device_of(value), device):
                name = f"{prefix}.{attribute}" if prefix else attribute
                _fail("unregistered_tensor", what=what, expected=torch.device(device), found=_device_of(value),
                      name=name)


def assert_raises(error_type, what, function, *args, hint):
    """Calling the student's `function` (through `call`) raises `error_type`; anything else is reported as
    found. In a sealed test the error was raised in the caller: its type is known by the names of its
    classes (autograder/boundary.py: CallerError)."""
    __tracebackhide__ = True
    try:
        call(what, function, *args)
    except AssertionError as failure:
        cause = failure.__cause__
        if cause is None:  # not the function's own error (tampering seen): its own diagnostic
            raise
        if isinstance(cause, error_type) or error_type.__name__ in getattr(cause, "kinds", ()):
            return
        # the error's type alone: its text is the student's, and could carry what the test holds
        found = cause.kinds[0] if hasattr(cause, "kinds") else _name(cause)
        _fail("expected_error", what=what, expected=error_type.__name__, found=found, hint=text(hint))
    _fail("expected_error", what=what, expected=error_type.__name__, found=text("nothing_raised"), hint=text(hint))


def submodule_paths(model) -> list[str]:
    """The names of `model.named_modules()`: its structure, for `assert_structure`."""
    return [name for name, _ in model.named_modules()]


def assert_structure(model, before, what):
    """`model` has no submodule that the paths `before` (`submodule_paths` before the call) lack: no layer
    wrapped in a new module. (In a sealed test the judge finds the same before any check: boundary.py.)"""
    __tracebackhide__ = True
    added = next((path for path in submodule_paths(model) if path not in before), None)
    if added is not None:
        _fail("module_restructured", what=what, name=added)


def assert_buffer(module, name, what, persistent):
    """`module.<name>` is a registered buffer that autograd does not track, saved in `state_dict()` exactly
    when `persistent`."""
    __tracebackhide__ = True
    if name in module._parameters:
        found = text("kind_parameter")
    elif name in module._buffers:
        found = None
    elif isinstance(getattr(module, name, None), torch.Tensor):
        found = text("kind_plain_attribute")
    else:
        found = text("kind_missing")
    if found is not None:
        _fail("not_a_buffer", what=what, name=name, found=found)
    if module._buffers[name] is not None and module._buffers[name].requires_grad:
        _fail("buffer_requires_grad", what=what, name=name)
    if call(what, saved_by_state_dict, module, name)[0] != persistent:
        _fail("persistent_buffer", what=what, name=name)


def assert_fixed_tensor(module, name, what):
    """`module.<name>` is a tensor that is neither saved in `state_dict()` nor trained, by any mechanism.

    Where it lives after `.to()` is for `assert_module_on`: a registered non-persistent buffer and a plain
    attribute that the module converts itself (an overridden `_apply`) are both right.
    """
    __tracebackhide__ = True
    value = getattr(module, name, None)
    if not isinstance(value, torch.Tensor):
        _fail("missing_tensor_attribute", what=what, name=name, found=_name(value))
    if value.requires_grad:
        _fail("trained_tensor", what=what, name=name)
    if any(call(what, saved_by_state_dict, module, name)):  # by its name, or the tensor under another name
        _fail("persistent_buffer", what=what, name=name)


def assert_none(obj, what, hint):
    __tracebackhide__ = True
    if obj is not None:
        _fail("expected_none", what=what, found=repr(obj), hint=text(hint))


def assert_module(obj, what):
    __tracebackhide__ = True
    if not isinstance(obj, nn.Module):
        _fail("not_a_module", what=what, found=_name(obj))


def assert_eval(model, what):
    """`model` and every submodule in eval mode: `model.training = False` alone leaves the submodules training."""
    __tracebackhide__ = True
    assert_module(model, what)
    for name, module in model.named_modules():
        if module.training:
            path = f"model.{name}" if name else "model"
            _fail("not_eval", what=what, name=f"{path} ({_name(module)})")


def assert_state_unchanged(model, before: Mapping, what, hint):
    """`model.state_dict()` has the entries of the snapshot `before`, each with its dtype and values."""
    __tracebackhide__ = True
    state = model.state_dict()
    if set(state) != set(before):
        _fail("wrong_keys", what=f"{what}: state_dict()", expected=list(before), found=list(state))
    for name, tensor in state.items():
        if _dtype_of(tensor) != _dtype_of(before[name]):
            _fail("model_modified", what=what, name=name, expected=_dtype_of(before[name]), found=_dtype_of(tensor),
                  hint=text(hint))
        assert_values(tensor, before[name], f"{what}: {name}")


def assert_modes(model, training, what):
    """`model` and every submodule still in the mode the caller left them in (`training`)."""
    __tracebackhide__ = True
    for name, module in model.named_modules():
        if module.training != training:
            _fail("mode_changed", what=what, name=f"model.{name}" if name else "model",
                  expected="train()" if training else "eval()", found="train()" if module.training else "eval()")


def _batch_tensors(batch, name="batch"):
    """(name, tensor) of every tensor in a nested batch, named by the indexing that reaches it."""
    if isinstance(batch, torch.Tensor):
        yield name, batch
    elif isinstance(batch, Mapping):
        for key, value in batch.items():
            yield from _batch_tensors(value, f"{name}[{key!r}]")
    elif isinstance(batch, (list, tuple)):
        for index, value in enumerate(batch):
            yield from _batch_tensors(value, f"{name}[{index}]")


def _audit_hint(model, batch, name):
    """The hint for a name the audit missed (or reported wrongly): what kind of tensor it is."""
    tensors = dict(_batch_tensors(batch))
    buffers = dict(model.named_buffers())
    tensors.update(dict(model.named_parameters()), **buffers)
    for prefix, module in model.named_modules():
        for attribute, value in vars(module).items():
            if isinstance(value, torch.Tensor):
                tensors[f"{prefix}.{attribute}" if prefix else attribute] = value
    if name not in tensors:
        return None, "audit_hint_names"
    tensor = tensors[name]
    if name.startswith("batch"):
        hint = "audit_hint_batch"
    elif name in buffers and name not in model.state_dict():
        hint = "audit_hint_buffer"
    elif name not in buffers and name not in dict(model.named_parameters()):
        hint = "audit_hint_attribute"
    else:
        hint = "audit_hint_rule"
    if not tensor.is_floating_point():
        hint = "audit_hint_integer"
    return tensor, hint


def assert_audit(found, expected, model, batch, what):
    """`found` holds exactly the names `expected` (any order, each once); a missed or extra name is
    diagnosed by the kind of tensor it names: non-persistent buffer, plain attribute, nested batch, integer."""
    __tracebackhide__ = True
    if not isinstance(found, list):
        _fail("audit_not_names", what=what, found=_name(found))
    found = list.__iter__(found)  # what the list holds, whatever a subclass's methods claim
    found = [*found]
    if not all(type(name) is str for name in found):
        _fail("audit_not_names", what=what, found=repr(found)[:120])
    repeated = [name for name in found if found.count(name) > 1]
    if repeated:
        _fail("audit_twice", what=what, name=repeated[0])
    for name in found:
        if name not in expected:
            _, hint = _audit_hint(model, batch, name)
            _fail("audit_extra", what=what, name=name, hint=text(hint if hint == "audit_hint_integer" else "audit_hint_names"))
    model_device = _device_of(next(model.parameters()))
    for name in expected:
        if name not in found:
            tensor, hint = _audit_hint(model, batch, name)
            if hint == "audit_hint_integer" or _device_of(tensor) == model_device:
                hint = "audit_hint_rule"  # missed for its dtype, or an integer tensor missed for its device
            _fail("audit_missed", what=what, name=name, device=_device_of(tensor), dtype=_dtype_of(tensor),
                  hint=text(hint))


def assert_stripped(result, original, before, what, ordered=True):
    """`result` is a new dict: `before` (the items of `original` before the call) with a leading `module.`
    removed from each key, in the same order where `ordered`, the very same tensors; `original` itself
    left as it was."""
    __tracebackhide__ = True
    if not isinstance(result, Mapping):
        _fail("not_a_state_dict", what=what, found=_name(result))
    if result is original:
        _fail("state_dict_same_object", what=what)
    if list(original) != [key for key, _ in before] or any(original[k] is not v for k, v in before):
        _fail("state_dict_input_changed", what=what)
    expected = [key.removeprefix("module.") for key, _ in before]
    if ordered and sorted(result) == sorted(expected) and list(result) != expected:
        _fail("wrong_order", what=what, expected=expected, found=list(result))
    for (key, value), want in zip(before, expected):
        if want not in result:
            found = next((k for k in result if k not in expected), text("kind_missing"))
            _fail("prefix_key", what=what, name=key, expected=want, found=found)
        if result[want] is not value:
            _fail("value_touched", what=what, name=want)
    if len(result) != len(expected):
        extra = next(k for k in result if k not in expected)
        _fail("prefix_key", what=what, name=extra, expected=text("kind_missing"), found=extra)
