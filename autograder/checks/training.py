"""Checks of a training step: detached outputs, updated parameters, gradients, mixed precision (loss
scaling, clipping, autocast, skipped steps) and a 16-bit forward pass with its normalisation layers.
"""
from collections.abc import Mapping

import torch
from torch import nn

from ..messages import text
from ..probes import NormKernelInputs
from .core import call, _dtype_of, _fail, _grad_fn_name, _name, raised
from .tensors import assert_dtype, assert_tensor


def assert_detached(t, what):
    """Out of autograd altogether: no `grad_fn`, and no `requires_grad` either (a new leaf is still tracked)."""
    __tracebackhide__ = True
    assert_tensor(t, what)
    if t.requires_grad or t.grad_fn is not None:
        _fail("not_detached", what=what, grad_fn=_grad_fn_name(t), requires_grad=t.requires_grad)


def assert_updated(before: Mapping, model, what):
    """At least one parameter differs from the snapshot `before` (name → tensor). When none does, the
    gradients left say why: none (None or zero) means the step had nothing to apply, `zero_grad()` between
    backward and step; some mean the step was never taken."""
    __tracebackhide__ = True
    after = dict(model.named_parameters())
    if all(torch.equal(after[name].detach().cpu(), value.cpu()) for name, value in before.items()):
        if all(p.grad is None or not p.grad.detach().cpu().any() for p in after.values()):
            _fail("gradients_gone_before_step", what=what)
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


def assert_autocast(seen, device_type, dtypes, what):
    """`seen` (probes.autocast_seen): the model's layers ran, each under the autocast of `device_type`
    (the model's) with one of `dtypes`, the first of them named when another was chosen."""
    __tracebackhide__ = True
    if not seen:
        _fail("autocast_not_run", what=what)
    for state in seen:
        if not state:
            _fail("autocast_off", what=what, hint=text("dtype_hint_autocast"))
        if device_type not in state:
            found = ", ".join(f"{kind} ({dtype})" for kind, dtype in state.items())
            _fail("autocast_device_type", what=what, found=found, device_type=device_type)
        if state[device_type] not in dtypes:
            _fail("wrong_dtype", what=f"{what}: torch.autocast({device_type!r})", expected=dtypes[0],
                  found=state[device_type], hint=text("dtype_hint_autocast"))


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


_NORMS = (nn.modules.batchnorm._BatchNorm, nn.LayerNorm, nn.GroupNorm)
# how CUDA's "expected scalar type … but found Float" names an input's dtype
_SCALAR_TYPE = {torch.float16: "Half", torch.bfloat16: "BFloat16", torch.float64: "Double"}


def assert_16_bit_forward(model, x, dtype, what):
    """`model(x)` runs and returns `dtype`, every normalisation kernel computes on float32 (a float32
    LayerNorm or GroupNorm fed 16 bits runs on the CPU but raises on CUDA, so this is checked on every
    device, meta included), and every normalisation layer hands back `dtype`. The forward pass runs
    through `call`, where the model runs (in a sealed test, the caller, when the model carries the
    student's hooks), and comes back as data: the output, the error, what each normalisation saw."""
    __tracebackhide__ = True
    output, error, fed, returned = call(what, _recorded_forward, model, x)
    _assert_norms_computed_right(fed, returned, dtype, what)  # the likely cause of an error, if seen
    if error is not None:  # reported as `call` reports a student's error
        raise raised(what, *error)
    # every normalisation layer of the model ran: a `forward` replaced by nn.Identity fed none of them 16 bits
    # (attacks-slicing.toml, cast-floating-without-hooks-replaces-model-forward-with-identity)
    # by where each layer is: its class may change (a float32 subclass swapped in is as right as hooks)
    ran = {path for _, _, path in returned}
    skipped = [m for path, m in model.named_modules() if isinstance(m, _NORMS) and path not in ran]
    if skipped:
        _fail("norm_layer_skipped", what=what, layer=_name(skipped[0]))
    assert_dtype(output, dtype, what, hint="dtype_hint_norm_output")


def _recorded_forward(model, x):
    """`model(x)` without gradients, and what the check reads of it: (output or None, the error's type
    name and text or None, (kernel, input dtype) of each normalisation kernel, (layer, output, path) of each
    normalisation layer, with its path in the model)."""
    returned = []
    hooks = [m.register_forward_hook(lambda m, args, out, path=path: returned.append((_name(m), out, path)))
             for path, m in model.named_modules() if isinstance(m, _NORMS)]
    recorder = NormKernelInputs()
    output = error = None
    try:
        with torch.no_grad(), recorder:
            output = model(x)
    except Exception as failure:  # noqa: BLE001: reported by the check, after what the norms saw
        error = [_name(failure), str(failure)]
    finally:
        for hook in hooks:
            hook.remove()
    return output, error, recorder.dtypes, returned


def _assert_norms_computed_right(fed, returned, dtype, what):
    """Each normalisation kernel got float32 (on a GPU, the error of one that did not is its reason to
    fail) and each normalisation layer returned `dtype` (the next layer's dtype error, if not)."""
    __tracebackhide__ = True
    for kernel, found in fed:
        if found != torch.float32:
            _fail("norm_fed_16_bit", what=what, kernel=kernel, found=found, scalar=_SCALAR_TYPE.get(found, str(found)))
    for layer, out, _ in returned:
        assert_tensor(out, what)
        if _dtype_of(out) != dtype:  # the layer's name is the caller's, so a field of its own, never the label
            _fail("norm_output_dtype", what=what, layer=layer, expected=dtype, found=_dtype_of(out))
