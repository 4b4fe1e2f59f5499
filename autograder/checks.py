"""Assertion helpers for graders and tests.

Each helper raises AssertionError whose message states what was expected, what was found, and the likely
mistake with its fix: an English line, then a Chinese line (texts in messages.json). Every helper sets
`__tracebackhide__`, which IPython and pytest honour, so a failure shows the student's code and the
diagnostic rather than the grader's own frames.
"""
import re
import warnings
from collections.abc import Mapping
from os.path import exists as _exists  # bound once: a submission that replaces os.path.exists fools nothing

import numpy
import torch
from torch import nn

from . import integrity
from .devices import has_data, same_device
from .messages import diagnostic, text
from .probes import NormKernelInputs

# Read a tensor's device and dtype through PyTorch's C type, which Python code cannot patch, and accept
# only real tensors: a patched `torch.Tensor.device` or an imitation object cannot fake a result.
_TENSOR_TYPES = (torch.Tensor, nn.Parameter)
_device_of = torch._C.TensorBase.device.__get__
_dtype_of = torch._C.TensorBase.dtype.__get__
# NumPy's functions and types, bound once for the same reason
_ndarray, _array_equal, _abs = numpy.ndarray, numpy.array_equal, numpy.abs


# Errors PyTorch raises for the classic mistakes, and the message that explains each.
KNOWN_ERRORS = [
    (re.compile(r"Expected all tensors to be on the same device|is not on the expected device"), "device_mismatch"),
    (re.compile(r"Attempting to deserialize object on a CUDA device"), "cuda_checkpoint"),
    (re.compile(r"Can't call numpy\(\) on Tensor that requires grad"), "numpy_requires_grad"),
    (re.compile(r"unsupported ScalarType BFloat16"), "numpy_bfloat16"),
    (re.compile(r"_scale is None"), "amp_scale_not_used"),  # GradScaler.unscale_/step before any scale()
]


def _name(obj) -> str:
    return type(obj).__qualname__


def _fail(key, **fields):
    __tracebackhide__ = True
    raise diagnostic(key, **fields)


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
        if not str(error):  # the release's stub, `raise NotImplementedError()`, not PyTorch's own
            raise diagnostic("not_answered", what=what) from error
        raise diagnostic("raised", what=what, error=f"NotImplementedError: {str(error).splitlines()[0]}") from error
    except Exception as error:
        shown = f"{_name(error)}: {str(error).splitlines()[0] if str(error) else ''}"
        key = next((key for pattern, key in KNOWN_ERRORS if pattern.search(str(error))), "raised")
        raise diagnostic(key, what=what, error=shown) from error
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


def assert_random(t, what):
    """Not one value repeated everywhere (the text asks for random values); skipped where there is no data."""
    __tracebackhide__ = True
    assert_tensor(t, what)
    if not has_data(_device_of(t)) or t.numel() < 2:
        return
    values = t.detach().flatten()
    if bool((values == values[0]).all()):
        _fail("not_random", what=what, value=f"{values[0].item():g}")


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
    saved = module.state_dict(keep_vars=True)  # the tensors themselves: one saved under another name counts
    if name in saved or any(tensor is value for tensor in saved.values()):
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


def _clipped(grads: Mapping, max_norm):
    """What `clip_grad_norm_` makes of `grads` (name → tensor): scaled down together to a total norm of `max_norm`."""
    total = torch.stack([g.detach().cpu().double().norm() for g in grads.values()]).norm()
    coef = min(1.0, max_norm / (total.item() + 1e-6))
    return {name: g.detach().cpu().double() * coef for name, g in grads.items()}


def assert_amp_gradients(model, raw: Mapping, scale, max_norm, what, atol=1e-5, stale=None):
    """Each `.grad` is this batch's gradient `raw` (name → tensor, unscaled), clipped to `max_norm` after unscaling.

    A mismatch names the classic mistake when the gradients match it: clipping while still scaled (before
    `unscale_`, or with no `unscale_` at all), backward on the unscaled loss, no clipping, gradients not
    cleared (`stale`: the value every `.grad` held before the call); else it says what the recipe is.
    """
    __tracebackhide__ = True
    found = {}
    for name, param in model.named_parameters():
        if param.grad is None:
            _fail("missing_gradient", what=what, name=name)
        found[name] = param.grad.detach().cpu().double()

    def largest(expected):
        return max((found[n] - expected[n]).abs().max().item() for n in found)

    expected = _clipped(raw, max_norm)
    diff = largest(expected)
    if diff <= atol:
        return
    name = max(found, key=lambda n: (found[n] - expected[n]).abs().max().item())
    clipped_scaled = {n: g / scale for n, g in _clipped({n: g * scale for n, g in raw.items()}, max_norm).items()}
    if largest(clipped_scaled) <= atol:
        ratio = expected[name].abs().max().item() / max(found[name].abs().max().item(), 1e-30)
        _fail("amp_clipped_scaled", what=what, name=name, ratio=f"{ratio:.3g}")
    if scale != 1 and largest({n: g.detach().cpu().double() / scale for n, g in raw.items()}) <= atol / scale:
        _fail("amp_unscaled_backward", what=what, scale=f"{scale:g}")
    if largest({n: g.detach().cpu().double() for n, g in raw.items()}) <= atol:
        _fail("amp_not_clipped", what=what, name=name, diff=f"{diff:.3g}")
    if stale is None or largest(_clipped({n: g + stale / scale for n, g in raw.items()}, max_norm)) <= atol:
        _fail("stale_gradients", what=what, diff=f"{diff:.3g}", name=name)  # the old gradients were added in
    _fail("amp_wrong_gradients", what=what, diff=f"{diff:.3g}", name=name)


def assert_outside_autocast(autocast_in_backward, what):
    """`autocast_in_backward`: whether autocast was on while the backward pass ran (recorded by a hook)."""
    __tracebackhide__ = True
    if autocast_in_backward:
        _fail("amp_backward_in_autocast", what=what)


def assert_scale(scaler, expected, what):
    """The `GradScaler`'s scale after the step: grown after a finite step, halved after an overflow."""
    __tracebackhide__ = True
    found = scaler.get_scale()
    if found != expected:
        _fail("amp_scale_not_updated", what=what, expected=f"{expected:g}", found=f"{found:g}")


def assert_step_skipped(before: Mapping, model, what):
    """After a non-finite gradient, every parameter equals the snapshot `before` (name → tensor)."""
    __tracebackhide__ = True
    for name, param in model.named_parameters():
        if not torch.equal(param.detach().cpu(), before[name].cpu()):
            _fail("amp_nonfinite_step", what=what, name=name)


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


_NORMS = (nn.modules.batchnorm._BatchNorm, nn.LayerNorm, nn.GroupNorm)


def assert_16_bit_forward(model, x, dtype, what):
    """`model(x)` runs and returns `dtype`, every normalisation kernel computes on float32 (a float32
    LayerNorm or GroupNorm fed 16 bits runs on the CPU but raises on CUDA, so this is checked on every
    device, meta included), and every normalisation layer hands back `dtype`."""
    __tracebackhide__ = True
    returned = []
    hooks = [m.register_forward_hook(lambda m, args, out: returned.append((_name(m), out)))
             for m in model.modules() if isinstance(m, _NORMS)]
    recorder = NormKernelInputs()
    try:
        with torch.no_grad(), recorder:
            output = call(what, model, x)
    except AssertionError:
        _assert_norms_computed_right(recorder.dtypes, returned, dtype, what)  # the likely cause, if seen
        raise
    finally:
        for hook in hooks:
            hook.remove()
    _assert_norms_computed_right(recorder.dtypes, returned, dtype, what)
    assert_dtype(output, dtype, what, hint="dtype_hint_norm_output")


def _assert_norms_computed_right(fed, returned, dtype, what):
    """Each normalisation kernel got float32 (on a GPU, the error of one that did not is its reason to
    fail) and each normalisation layer returned `dtype` (the next layer's dtype error, if not)."""
    __tracebackhide__ = True
    for kernel, found in fed:
        if found != torch.float32:
            _fail("norm_fed_16_bit", what=what, kernel=kernel, found=found)
    for layer, out in returned:
        assert_dtype(out, dtype, f"{what}: {layer}", hint="dtype_hint_norm_output")


def assert_rows_of(rows, table, what):
    """Every row of `rows` is a row of `table`, none twice (the order may differ, rows may be left out)."""
    __tracebackhide__ = True
    assert_tensor(rows, what)
    if rows.ndim != 2 or rows.shape[1] != table.shape[1]:
        _fail("wrong_shape", what=what, expected=("N", table.shape[1]), found=tuple(rows.shape))
    matches = (rows[:, None, :] == table[None, :, :]).all(dim=2)
    if not bool(matches.any(dim=1).all()) or bool((matches.sum(dim=0) > 1).any()):
        _fail("rows_not_from_dataset", what=what)


def assert_transfers(counter, expected, what, result=None):
    """A `probes.count_transfers()` counter saw exactly `expected` copies between devices, and saw how
    every tensor on a device came there (`result` too): none was made while the counter was switched off."""
    __tracebackhide__ = True
    if counter.unseen or (result is not None and not counter.saw(result)):
        _fail("transfer_unseen", what=what)
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
    if type(array) is not _ndarray:
        _fail("not_numpy", what=what, found=_name(array))
    expected = tensor.detach().cpu()
    expected = (expected.float() if expected.dtype == torch.bfloat16 else expected).numpy()  # NumPy has no bfloat16
    if array.dtype != expected.dtype:
        _fail("numpy_dtype", what=what, expected=expected.dtype, found=array.dtype)
    if array.shape != expected.shape:
        _fail("wrong_shape", what=what, expected=expected.shape, found=array.shape)
    if not _array_equal(array, expected):
        diff = _abs(array.astype("float64") - expected.astype("float64")).max()
        _fail("wrong_values", what=what, diff=f"{diff:.3g}")


# ------------------------------------------------------------------ a4_several_devices
# Checks of assignment a4: the audit of a model and its batch, checkpoints across ranks, each rank's shard.

KNOWN_ERRORS.append((re.compile(r"Default process group has not been initialized"), "no_process_group"))


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


def restored_locations(path, map_location):
    """Where `torch.load(path, map_location=map_location)` would put each storage, without a GPU: the
    location strings PyTorch's restore step receives, in order; every storage itself stays on the CPU."""
    import torch.serialization
    from unittest import mock

    locations = []

    def record(storage, location):
        locations.append(location)
        return storage

    with mock.patch.object(torch.serialization, "default_restore_location", record):
        torch.load(path, map_location=map_location, weights_only=True)
    return locations


def assert_map_location(map_location, rank, world_size, folder, what):
    """A dict that sends tensors saved from each of "cuda:0" … "cuda:<world_size-1>" to "cuda:<rank>",
    and leaves tensors saved from the CPU on the CPU: checked by loading checkpoints saved as if from there."""
    __tracebackhide__ = True
    import pathlib
    import torch.serialization
    from unittest import mock

    if not isinstance(map_location, dict):
        _fail("map_not_dict", what=what, found=f"{_name(map_location)} {map_location!r}")
    for saved in [f"cuda:{index}" for index in range(world_size)] + ["cpu"]:
        path = pathlib.Path(folder) / f"saved_from_{saved.replace(':', '_')}.pt"
        with mock.patch.object(torch.serialization, "location_tag", lambda storage, saved=saved: saved):
            torch.save({"weight": torch.ones(2)}, path)
        (found,) = restored_locations(path, map_location)
        if saved == "cpu" and found != "cpu":
            _fail("map_moves_cpu", what=what, found=repr(found))
        if saved != "cpu" and found != f"cuda:{rank}":
            _fail("map_wrong_target", what=what, saved=repr(saved), found=repr(found), rank=rank, last=world_size - 1)


def assert_rank_zero_checkpoint(path, rank, expected, what):
    """Rank 0 wrote a state dict at `path` with the keys and values of `expected`; other ranks wrote nothing."""
    __tracebackhide__ = True
    if rank != 0:
        if _exists(path):
            _fail("saved_on_other_rank", what=what, rank=rank)
        return
    if not _exists(path):
        _fail("not_saved", what=what)
    try:
        saved = torch.load(path, weights_only=True)
    except Exception:  # a pickled module object is refused by weights_only loading
        saved = torch.load(path, weights_only=False)
    if not isinstance(saved, Mapping) or not all(isinstance(v, torch.Tensor) for v in saved.values()):
        _fail("checkpoint_not_state_dict", what=what, found=_name(saved))
    if set(saved) != set(expected):  # the instructions ask for the state dict, not for its order
        _fail("checkpoint_keys", what=what, expected=list(expected), found=list(saved))
    for key, tensor in expected.items():
        assert_dtype(saved[key], _dtype_of(tensor), f"{what}: {key}")
        assert_values(saved[key], tensor, f"{what}: {key}")


def sampled_indices(sampler, size, what):
    """The indices a sampler yields, as ints: each an int (or 0-dim integer tensor) indexing `size` samples."""
    __tracebackhide__ = True
    import numbers

    indices = call(what, list, sampler)
    if not all(isinstance(i, numbers.Integral) or isinstance(i, torch.Tensor) and i.ndim == 0
               and not i.is_floating_point() and not i.is_complex() for i in indices) \
            or not all(0 <= int(i) < size for i in indices):
        _fail("not_indices", what=what, last=size - 1, found=repr(indices)[:120])
    return [int(i) for i in indices]


def assert_shards(shards, size, what):
    """`shards` (rank → list of indices) are disjoint and all of size `size // world_size`."""
    __tracebackhide__ = True
    world_size = len(shards)
    owner = {}
    for rank, indices in shards.items():
        indices = sampled_indices(indices, size, f"{what} rank {rank}")
        if len(indices) != size // world_size:
            _fail("shard_size", what=what, rank=rank, found=len(indices), expected=size // world_size,
                  size=size, world_size=world_size)
        for index in indices:
            if index in owner:
                _fail("shard_overlap", what=what, index=index, ranks=f"{owner[index]}, {rank}")
            owner[index] = rank


def assert_epochs_differ(first, second, epochs, rank, what):
    """Rank `rank`'s shards of two epochs (lists of indices) differ in content or order."""
    __tracebackhide__ = True
    if list(first) == list(second):
        _fail("shard_same_every_epoch", what=what, first=epochs[0], second=epochs[1], rank=rank)


def assert_loads_on_rank(path, map_location, rank, world_size, what):
    """Every storage of the checkpoint at `path` would load onto "cuda:<rank>" with this `map_location`."""
    __tracebackhide__ = True
    places = restored_locations(path, map_location)
    wrong = [place for place in places if place != f"cuda:{rank}"]
    if wrong:
        _fail("map_wrong_target", what=what, saved=text("saved_checkpoint"), found=repr(wrong[0]), rank=rank,
              last=world_size - 1)


def assert_same_shard(first, second, rank, what):
    """Two calls with the same arguments gave rank `rank` the same indices in the same order."""
    __tracebackhide__ = True
    if list(first) != list(second):
        _fail("shard_not_repeatable", what=what, rank=rank)


def assert_seeds_differ(first, second, seeds, what):
    """The shards drawn with two different seeds differ."""
    __tracebackhide__ = True
    if list(first) == list(second):
        _fail("shard_ignores_seed", what=what, first=seeds[0], second=seeds[1])
