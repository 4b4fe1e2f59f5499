"""Checks of one tensor or a nested batch of them: type, device, dtype, shape, values, randomness,
identity, and its place in the autograd graph.
"""
from collections.abc import Mapping

import torch

from ..devices import has_data, same_device
from ..messages import text
from .core import _device_of, _dtype_of, _fail, _grad_fn_name, _name, _TENSOR_TYPES


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
    expected = torch.device(expected)
    if chosen is None:  # no device found: what `hint` says, not how to wrap a device's name
        _fail("device_choice_none", what=what, expected=expected, hint=text(hint))
    assert_torch_device(chosen, what)
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


def assert_values(t, expected, what, atol=0.0, key="wrong_values"):
    """Same values as `expected` (compared in float64 on the CPU); skipped where there is no data. `key`: the
    message for a difference, when the likely cause is not a move (`wrong_values` speaks of moving)."""
    __tracebackhide__ = True
    assert_tensor(t, what)
    assert_shape(t, expected.shape, what)
    if not (has_data(_device_of(t)) and has_data(_device_of(expected))):
        return
    diff = (t.detach().cpu().double() - expected.detach().cpu().double()).abs()
    largest = diff.max().item() if diff.numel() else 0.0
    if not largest <= atol:  # also catches NaN
        _fail(key, what=what, diff=f"{largest:.3g}")


# From this many values assert_random also refuses a pattern: values in sorted order (2 / 12! ≈ 4e-9 for
# random ones), evenly spaced once sorted (every gap within 2 % of the mean gap: about 1e-15), a few values
# repeated (at most half of them distinct: a tile, `repeat_interleave`; even bfloat16 draws rarely repeat one
# value), or one value plus tiny noise (all within NEARLY_CONSTANT of the largest magnitude: below 1e-30 for
# draws of randn or rand)
PATTERN_FROM = 12
NEARLY_CONSTANT = 1e-3


def assert_random(t, what):
    """Not one value repeated everywhere, and from PATTERN_FROM values not a pattern (`torch.linspace`,
    `torch.arange`, any sorted fill, a few values repeated, a constant plus tiny noise), which a random draw
    makes about never (the text asks for random values); skipped where there is no data."""
    __tracebackhide__ = True
    assert_tensor(t, what)
    if not has_data(_device_of(t)) or t.numel() < 2:
        return
    values = t.detach().flatten()
    if not bool(torch.isfinite(values).all()):  # NaN equals nothing: it would pass the check below
        _fail("not_finite", what=what)
    if bool((values == values[0]).all()):
        _fail("not_random", what=what, value=f"{values[0].item():g}")
    if values.numel() >= PATTERN_FROM and (_sorted(values) or _evenly_spaced(values) or _repeated(values)
                                           or _nearly_constant(values)):
        _fail("not_random_pattern", what=what)


def _sorted(values) -> bool:
    steps = values.double().diff()
    return bool((steps >= 0).all() or (steps <= 0).all())


def _evenly_spaced(values) -> bool:
    """The sorted values' gaps all within 2 % of their mean, give or take the dtype's rounding."""
    ordered = values.double().sort().values
    gaps = ordered.diff()
    rounding = 2 * torch.finfo(values.dtype).eps * ordered.abs().max() if values.is_floating_point() else 0
    return bool(((gaps - gaps.mean()).abs() <= 0.02 * gaps.mean() + rounding).all())


def _repeated(values) -> bool:
    """At most half of the values distinct: a few values tiled or repeated, in whatever order."""
    return 2 * values.unique().numel() <= values.numel()


def _nearly_constant(values) -> bool:
    """Every value within NEARLY_CONSTANT (relative to the largest magnitude) of every other."""
    values = values.double()
    return bool(values.max() - values.min() <= NEARLY_CONSTANT * values.abs().max())


def assert_draws_differ(first, second, what):
    """Two calls drew different values: noise that repeats from call to call was seeded inside the function
    (which also resets the caller's random stream). Skipped where there is no data."""
    __tracebackhide__ = True
    assert_tensor(first, what)
    assert_tensor(second, what)
    if not (has_data(_device_of(first)) and has_data(_device_of(second))) or first.shape != second.shape:
        return
    if bool(torch.equal(first.detach(), second.detach())):
        _fail("same_draw_twice", what=what)


def assert_argument_kept(original, before, what):
    """The caller's tensor `original` still holds what `before` (a copy taken before the call) held: its
    device, dtype and values; the function made its result without writing into its argument."""
    __tracebackhide__ = True
    if _device_of(original) != _device_of(before) or _dtype_of(original) != _dtype_of(before):
        _fail("changed_argument", what=what)
    if has_data(_device_of(original)) and not torch.equal(original.detach(), before):
        _fail("changed_argument", what=what)


def assert_standard_normal(t, what):
    """Values that look drawn from N(0, 1): mean and standard deviation within 0.1 of 0 and 1, ten standard
    errors at 10⁴ values, so a right answer fails about never; uniform `rand` (std 0.29), a constant, an
    uninitialised `empty` and NaN fail. Skipped where there is no data."""
    __tracebackhide__ = True
    assert_tensor(t, what)
    if not has_data(_device_of(t)):
        return
    values = t.detach().double().flatten()
    mean, std = values.mean().item(), values.std().item()
    if not (abs(mean) <= 0.1 and abs(std - 1) <= 0.1):  # also catches NaN
        _fail("not_standard_normal", what=what, count=values.numel(), mean=f"{mean:.3g}", std=f"{std:.3g}")


def assert_grad_left_off(original, what):
    """The caller's tensor `original` still does not require grad: the student's function switched
    nothing on in it (`x.to(device)` is `x` when nothing changes, and `requires_grad_()` is in place)."""
    __tracebackhide__ = True
    if original.requires_grad:
        _fail("caller_requires_grad", what=what)


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
        _fail("not_leaf", what=what, grad_fn=_grad_fn_name(t))


def assert_grad_connected(t, source, what):
    """`t` is `source` itself or computed from it, so gradients flow back to `source`.

    A `grad_fn` alone is not enough: `x.detach().requires_grad_().to(device)` has one, but its graph
    starts at a new leaf, so the graph is walked back until it reaches `source`.
    """
    __tracebackhide__ = True
    assert_tensor(t, what)
    if t is source:
        return
    if not reaches(t.grad_fn, source):
        _fail("grad_disconnected", what=what, requires_grad=t.requires_grad,
              grad_fn=_grad_fn_name(t))


def reaches(node, source) -> bool:
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


def assert_one_per_batch(outputs, batches, what):
    """As many outputs as batches: the function went through every batch before it returned."""
    __tracebackhide__ = True
    if len(outputs) != len(batches):
        _fail("outputs_per_batch", what=what, expected=len(batches), found=len(outputs))


def batch_items(batch):
    """What a nested batch holds, for `assert_batch_unchanged`: each container's type and items, each leaf
    itself (and a tensor's device and dtype), taken before a call."""
    if isinstance(batch, Mapping):
        return type(batch), [(key, batch_items(value)) for key, value in batch.items()]
    if isinstance(batch, (list, tuple)):
        return type(batch), [batch_items(item) for item in batch]
    if isinstance(batch, torch.Tensor):
        return batch, _device_of(batch), _dtype_of(batch)
    return batch


def assert_batch_unchanged(original, before, what):
    """`original` still holds what `batch_items` saw before the call: the caller's batch, its containers
    and their items, left as they were (a batch kept for logging or used again must not move)."""
    __tracebackhide__ = True
    if not _holds(original, before):
        _fail("batch_changed", what=what)


def _holds(batch, items) -> bool:
    if isinstance(batch, (Mapping, list, tuple)):
        kind, entries = items if isinstance(items, tuple) and len(items) == 2 else (None, None)
        if type(batch) is not kind:
            return False
        if isinstance(batch, Mapping):
            return [key for key, _ in entries] == list(batch) and all(_holds(batch[k], v) for k, v in entries)
        return len(batch) == len(entries) and all(_holds(b, v) for b, v in zip(batch, entries))
    if isinstance(batch, torch.Tensor):
        return isinstance(items, tuple) and len(items) == 3 and items[0] is batch and items[1:] == (
            _device_of(batch), _dtype_of(batch))
    # a number or a string: equal, of the same type (a sealed call rebuilds the caller's, as equal objects)
    return items is batch or type(items) is type(batch) and items == batch

