"""Assertion helpers for graders and tests.

Each helper raises AssertionError whose message states what was expected, what was found, and the likely
mistake with its fix: an English line, then a Chinese line (texts in messages.json).
"""
import warnings
from collections.abc import Mapping

import torch
from torch import nn

from .devices import has_data, same_device
from .messages import message, text


def _name(obj) -> str:
    return type(obj).__qualname__


def _fail(key, **fields):
    raise AssertionError(message(key, **fields))


def call(what, function, *args, **kwargs):
    """Run a student's function; an exception it raises becomes a bilingual failure, chained to it.

    Warnings it emits are recorded, not printed: nbgrader gives zero to a test cell that writes to
    stderr, and a correct answer must not lose points to a PyTorch warning. Failures still raise.
    """
    try:
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            return function(*args, **kwargs)
    except NotImplementedError as error:
        raise AssertionError(message("not_answered", what=what)) from error
    except Exception as error:
        raise AssertionError(message("raised", what=what, error=f"{_name(error)}: {error}")) from error


def assert_tensor(obj, what):
    if not isinstance(obj, torch.Tensor):
        _fail("not_a_tensor", what=what, found=_name(obj))


def assert_torch_device(obj, what):
    if not isinstance(obj, torch.device):
        _fail("not_a_device", what=what, found=f"{_name(obj)} {obj!r}")


def assert_device_choice(chosen, expected, what, hint):
    """`chosen` is a torch.device naming `expected` (an unindexed expectation accepts any index)."""
    assert_torch_device(chosen, what)
    expected = torch.device(expected)
    if expected.index is None and chosen.type == expected.type or chosen == expected:
        return
    _fail("wrong_device_type", what=what, expected=expected, found=chosen, hint=text(hint))


def assert_device(t, device, what, original=None):
    """`t` lives on `device`; when `t` is `original` itself, diagnose the forgotten `x = x.to(...)`."""
    assert_tensor(t, what)
    if same_device(t.device, device):
        return
    if original is not None and t is original:
        _fail("forgot_assignment",
              what=what, expected=torch.device(device), found=t.device)
    _fail("wrong_device", what=what, expected=torch.device(device), found=t.device)


def assert_dtype(t, dtype, what, hint="dtype_hint_keep", original=None):
    """`t` has `dtype`; when `t` is `original` itself, diagnose the forgotten `x = x.to(...)`."""
    assert_tensor(t, what)
    if t.dtype != dtype and original is not None and t is original:
        _fail("forgot_assignment_dtype", what=what, expected=dtype, found=t.dtype)
    if t.dtype != dtype:
        _fail("wrong_dtype", what=what, expected=dtype, found=t.dtype, hint=text(hint))


def assert_shape(t, shape, what):
    assert_tensor(t, what)
    if tuple(t.shape) != tuple(shape):
        _fail("wrong_shape", what=what, expected=tuple(shape), found=tuple(t.shape))


def assert_values(t, expected, what, atol=0.0):
    """Same values as `expected` (compared in float64 on the CPU); skipped where there is no data."""
    assert_tensor(t, what)
    assert_shape(t, expected.shape, what)
    if not (has_data(t.device) and has_data(expected.device)):
        return
    diff = (t.detach().cpu().double() - expected.detach().cpu().double()).abs()
    largest = diff.max().item() if diff.numel() else 0.0
    if not largest <= atol:  # also catches NaN
        _fail("wrong_values", what=what, diff=f"{largest:.3g}")


def assert_is(obj, expected, what, hint):
    if obj is not expected:
        _fail("not_same_object", what=what, expected_type=_name(expected), found_type=_name(obj),
              hint=text(hint))


def assert_requires_grad(t, what):
    assert_tensor(t, what)
    if not t.requires_grad:
        _fail("no_requires_grad", what=what)


def assert_leaf(t, what):
    """A leaf that requires grad: what an optimizer can update."""
    assert_requires_grad(t, what)
    if not t.is_leaf:
        _fail("not_leaf", what=what, grad_fn=_name(t.grad_fn))


def assert_grad_connected(t, source, what):
    """`t` is `source` itself or computed from it, so gradients flow back to `source`."""
    assert_tensor(t, what)
    if t is source:
        return
    if t.grad_fn is None:
        _fail("grad_disconnected", what=what, requires_grad=t.requires_grad)


def assert_batch_moved(result, original, device, what, depth=0):
    """Every tensor of a nested batch on `device` with its dtype; containers and other leaves unchanged."""
    if isinstance(original, torch.Tensor):
        if result is original and not same_device(original.device, device) and depth > 0:
            _fail("nested_not_moved", what=what, expected=torch.device(device), found=original.device)
        assert_device(result, device, what, original=original)
        assert_dtype(result, original.dtype, what)
        assert_values(result, original, what)
        return
    if isinstance(original, (Mapping, list, tuple)) and type(result) is not type(original):
        _fail("wrong_type", what=what, expected=_name(original), found=_name(result))
    if isinstance(original, Mapping):
        if list(result) != list(original):
            _fail("wrong_keys", what=what, expected=list(original), found=list(result))
        for key in original:
            assert_batch_moved(result[key], original[key], device, f"{what}[{key!r}]", depth + 1)
    elif isinstance(original, (list, tuple)):
        if len(result) != len(original):
            _fail("wrong_length", what=what, expected=len(original), found=len(result))
        for index, (got, want) in enumerate(zip(result, original)):
            assert_batch_moved(got, want, device, f"{what}[{index}]", depth + 1)
    elif not (result is original or result == original):
        _fail("leaf_changed", what=what, expected=repr(original), found=repr(result))


def assert_one_device(tensors: Mapping, what):
    """All named tensors share one device."""
    devices = sorted({str(t.device) for t in tensors.values()})
    if len(devices) > 1:
        _fail("mixed_devices", what=what, found=", ".join(devices))


def assert_module_on(module, device, what):
    """Every parameter and buffer of `module` on `device`, and no tensor attribute left behind."""
    if not isinstance(module, nn.Module):
        _fail("wrong_type", what=what, expected="nn.Module", found=_name(module))
    for kind, named in (("kind_parameter", module.named_parameters()), ("kind_buffer", module.named_buffers())):
        for name, tensor in named:
            if not same_device(tensor.device, device):
                _fail("module_tensor_device", what=what, expected=torch.device(device), found=tensor.device,
                      kind=text(kind), name=name)
    for prefix, submodule in module.named_modules():
        for attribute, value in vars(submodule).items():
            if isinstance(value, torch.Tensor) and not same_device(value.device, device):
                name = f"{prefix}.{attribute}" if prefix else attribute
                _fail("unregistered_tensor", what=what, expected=torch.device(device), found=value.device,
                      name=name)
