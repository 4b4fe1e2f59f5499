"""Assertion helpers for graders and tests.

Each helper raises AssertionError whose message states what was expected, what was found, and the likely
mistake with its fix: an English line, then a Chinese line (texts in messages.json). Every helper sets
`__tracebackhide__`, which IPython and pytest honour, so a failure shows the student's code and the
diagnostic rather than the grader's own frames.
"""
import re
import warnings
from collections.abc import Mapping

import torch
from torch import nn

from . import integrity
from .devices import has_data, same_device
from .messages import message, text

# Read a tensor's device and dtype through PyTorch's C type, which Python code cannot patch, and accept
# only real tensors: a patched `torch.Tensor.device` or an imitation object cannot fake a result.
_TENSOR_TYPES = (torch.Tensor, nn.Parameter)
_device_of = torch._C.TensorBase.device.__get__
_dtype_of = torch._C.TensorBase.dtype.__get__


# Errors PyTorch raises for the classic mistakes, and the message that explains each.
KNOWN_ERRORS = [
    (re.compile(r"Expected all tensors to be on the same device|is not on the expected device"), "device_mismatch"),
    (re.compile(r"Attempting to deserialize object on a CUDA device"), "cuda_checkpoint"),
    (re.compile(r"Can't call numpy\(\) on Tensor that requires grad"), "numpy_requires_grad"),
]


def _name(obj) -> str:
    return type(obj).__qualname__


def _fail(key, **fields):
    __tracebackhide__ = True
    raise AssertionError(message(key, **fields))


def call(what, function, *args, **kwargs):
    """Run a student's function; an exception it raises becomes a bilingual failure, chained to it.

    Warnings it emits are recorded, not printed: nbgrader gives zero to a test cell that writes to
    stderr, and a correct answer must not lose points to a PyTorch warning. Failures still raise.
    """
    __tracebackhide__ = True
    integrity.verify(what)
    try:
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            result = function(*args, **kwargs)
    except NotImplementedError as error:
        raise AssertionError(message("not_answered", what=what)) from error
    except Exception as error:
        shown = f"{_name(error)}: {str(error).splitlines()[0] if str(error) else ''}"
        key = next((key for pattern, key in KNOWN_ERRORS if pattern.search(str(error))), "raised")
        raise AssertionError(message(key, what=what, error=shown)) from error
    integrity.verify(what)
    return result


def assert_tensor(obj, what):
    __tracebackhide__ = True
    if type(obj) not in _TENSOR_TYPES:
        _fail("not_a_tensor", what=what, found=_name(obj))


def assert_torch_device(obj, what):
    __tracebackhide__ = True
    if not isinstance(obj, torch.device):
        _fail("not_a_device", what=what, found=f"{_name(obj)} {obj!r}")


def assert_device_choice(chosen, expected, what, hint):
    """`chosen` is a torch.device naming `expected` (an unindexed expectation accepts any index)."""
    __tracebackhide__ = True
    assert_torch_device(chosen, what)
    expected = torch.device(expected)
    if expected.index is None and chosen.type == expected.type or chosen == expected:
        return
    _fail("wrong_device_type", what=what, expected=expected, found=chosen, hint=text(hint))


def assert_device(t, device, what, original=None):
    """`t` lives on `device`; when `t` is `original` itself, diagnose the forgotten `x = x.to(...)`."""
    __tracebackhide__ = True
    assert_tensor(t, what)
    if same_device(_device_of(t), device):
        return
    if original is not None and t is original:
        _fail("forgot_assignment",
              what=what, expected=torch.device(device), found=_device_of(t))
    _fail("wrong_device", what=what, expected=torch.device(device), found=_device_of(t))


def assert_dtype(t, dtype, what, hint="dtype_hint_keep", original=None):
    """`t` has `dtype`; when `t` is `original` itself, diagnose the forgotten `x = x.to(...)`."""
    __tracebackhide__ = True
    assert_tensor(t, what)
    if _dtype_of(t) != dtype and original is not None and t is original:
        _fail("forgot_assignment_dtype", what=what, expected=dtype, found=_dtype_of(t))
    if _dtype_of(t) != dtype:
        _fail("wrong_dtype", what=what, expected=dtype, found=_dtype_of(t), hint=text(hint))


def assert_shape(t, shape, what):
    __tracebackhide__ = True
    assert_tensor(t, what)
    if tuple(t.shape) != tuple(shape):
        _fail("wrong_shape", what=what, expected=tuple(shape), found=tuple(t.shape))


def assert_values(t, expected, what, atol=0.0):
    """Same values as `expected` (compared in float64 on the CPU); skipped where there is no data."""
    __tracebackhide__ = True
    assert_tensor(t, what)
    assert_shape(t, expected.shape, what)
    if not (has_data(_device_of(t)) and has_data(_device_of(expected))):
        return
    diff = (t.detach().cpu().double() - expected.detach().cpu().double()).abs()
    largest = diff.max().item() if diff.numel() else 0.0
    if not largest <= atol:  # also catches NaN
        _fail("wrong_values", what=what, diff=f"{largest:.3g}")


def assert_is(obj, expected, what, hint):
    __tracebackhide__ = True
    if obj is not expected:
        _fail("not_same_object", what=what, expected_type=_name(expected), found_type=_name(obj),
              hint=text(hint))


def assert_requires_grad(t, what):
    __tracebackhide__ = True
    assert_tensor(t, what)
    if not t.requires_grad:
        _fail("no_requires_grad", what=what)


def assert_leaf(t, what):
    """A leaf that requires grad: what an optimizer can update."""
    __tracebackhide__ = True
    assert_requires_grad(t, what)
    if not t.is_leaf:
        _fail("not_leaf", what=what, grad_fn=_name(t.grad_fn))


def assert_grad_connected(t, source, what):
    """`t` is `source` itself or computed from it, so gradients flow back to `source`.

    A `grad_fn` alone is not enough: `x.detach().requires_grad_().to(device)` has one, but its graph
    starts at a new leaf, so the graph is walked back until it reaches `source`.
    """
    __tracebackhide__ = True
    assert_tensor(t, what)
    if t is source:
        return
    if not _reaches(t.grad_fn, source):
        _fail("grad_disconnected", what=what, requires_grad=t.requires_grad,
              grad_fn=_name(t.grad_fn))


def _reaches(node, source) -> bool:
    """Whether the autograd graph from `node` leads to `source`: its `grad_fn`, or its leaf accumulator."""
    pending, seen = [node], set()
    while pending:
        node = pending.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if node is source.grad_fn or getattr(node, "variable", None) is source:
            return True
        pending.extend(parent for parent, _ in node.next_functions)
    return False


def assert_batch_moved(result, original, device, what, depth=0):
    """Every tensor of a nested batch on `device` with its dtype; containers and other leaves unchanged."""
    __tracebackhide__ = True
    if isinstance(original, torch.Tensor):
        if result is original and not same_device(_device_of(original), device) and depth > 0:
            _fail("nested_not_moved", what=what, expected=torch.device(device), found=_device_of(original))
        assert_device(result, device, what, original=original)
        assert_dtype(result, _dtype_of(original), what)
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
    __tracebackhide__ = True
    devices = sorted({str(_device_of(t)) for t in tensors.values()})
    if len(devices) > 1:
        _fail("mixed_devices", what=what, found=", ".join(devices))


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
    """Calling the student's `function` raises `error_type` (anything else is reported as found)."""
    __tracebackhide__ = True
    try:
        with warnings.catch_warnings(record=True):
            function(*args)
    except error_type:
        return
    except Exception as error:
        found = f"{_name(error)}: {error}"
        _fail("expected_error", what=what, expected=error_type.__name__, found=found, hint=text(hint))
    _fail("expected_error", what=what, expected=error_type.__name__, found=text("nothing_raised"), hint=text(hint))


def assert_buffer(module, name, what, persistent):
    """`module.<name>` is a registered buffer, saved in `state_dict()` exactly when `persistent`."""
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
    if (name in module.state_dict()) != persistent:
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


def assert_detached(t, what):
    """Out of autograd altogether: no `grad_fn`, and no `requires_grad` either (a new leaf is still tracked)."""
    __tracebackhide__ = True
    assert_tensor(t, what)
    if t.requires_grad or t.grad_fn is not None:
        _fail("not_detached", what=what, grad_fn=_name(t.grad_fn), requires_grad=t.requires_grad)


def assert_updated(before: Mapping, model, what):
    """At least one parameter differs from the snapshot `before` (name → tensor)."""
    __tracebackhide__ = True
    after = dict(model.named_parameters())
    if all(torch.equal(after[name].detach().cpu(), value.cpu()) for name, value in before.items()):
        _fail("not_updated", what=what)


def assert_gradients(model, expected: Mapping, what, atol=1e-6):
    """Each parameter's `.grad` equals the gradient of this batch alone (no stale gradients added).

    A parameter whose `.grad` is None (cleared after the step, or never computed) fails too.
    """
    __tracebackhide__ = True
    for name, param in model.named_parameters():
        if param.grad is None:
            _fail("missing_gradient", what=what, name=name)
        diff = (param.grad.detach().cpu() - expected[name].cpu()).abs().max().item()
        if not diff <= atol:
            _fail("stale_gradients", what=what, diff=f"{diff:.3g}", name=name)


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


def assert_transfers(counter, expected, what):
    """A `probes.count_transfers()` counter saw exactly `expected` copies between devices."""
    __tracebackhide__ = True
    if counter.transfers != expected:
        _fail("transfer_count", what=what, found=counter.transfers)


def assert_loader_kwargs(kwargs, pin_memory, what):
    """DataLoader keyword arguments whose `pin_memory` is `pin_memory` (a missing key means False)."""
    __tracebackhide__ = True
    if not isinstance(kwargs, dict):
        _fail("not_a_dict", what=what, found=_name(kwargs))
    found = kwargs.get("pin_memory", False)
    if bool(found) != pin_memory:
        _fail("pin_memory", what=what, expected=pin_memory, found=found)


def assert_ndarray(array, tensor, what):
    """`array` is a numpy array with the tensor's shape, dtype and values."""
    __tracebackhide__ = True
    import numpy

    if not isinstance(array, numpy.ndarray):
        _fail("not_numpy", what=what, found=_name(array))
    expected = tensor.detach().cpu().numpy()
    if array.dtype != expected.dtype:
        _fail("numpy_dtype", what=what, expected=expected.dtype, found=array.dtype)
    if array.shape != expected.shape:
        _fail("wrong_shape", what=what, expected=expected.shape, found=array.shape)
    if not numpy.array_equal(array, expected):
        diff = numpy.abs(array.astype("float64") - expected.astype("float64")).max()
        _fail("wrong_values", what=what, diff=f"{diff:.3g}")
