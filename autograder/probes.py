"""Instruments the graders use to see what an answer does, not only what it returns."""
import importlib
import sys
import weakref
from contextlib import ExitStack, contextmanager
from types import SimpleNamespace
from unittest import mock

import torch
from torch import nn
import torch.serialization
from torch.utils import _pytree as pytree, weak
from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode_stack

from . import simulate
from .simulate import simulated_accelerator, standing_for, target_of_to

_dtype_of = torch._C.TensorBase.dtype.__get__  # not through a Python attribute a submission could patch
_device_of = torch._C.TensorBase.device.__get__
COPY_OPS = {torch.ops.aten._to_copy.default, torch.ops.aten.copy_.default}


class MetaValues(TorchDispatchMode):
    """While a call is given tensors on the meta device (standing in for a GPU on a grader without one): each
    operation on meta tensors also runs on CPU tensors of their values, and a read of one number (`.item()`,
    `float()`, `bool()`, a format, `assert torch.isfinite(loss)`) gives that number, as it would on the device. A meta
    tensor made before the call has no values anyone knows: zeros, and what the call computes from them follows
    (`loss.item()` of a zero model is a loss, finite). Copies to the CPU still fail as PyTorch's do; the stand-in
    (`meta_standing_for`) answers those. Without it a right train_step that prints `loss.item()` lost every point
    of its test (attacks-machines.toml, train-step-prints-the-loss-on-the-bare-meta-device)."""

    def __init__(self):
        super().__init__()
        self.values = weak.WeakTensorKeyDictionary()  # meta tensor → its values on the CPU

    def value(self, tensor):
        found = self.values.get(tensor)
        if found is None:
            found = self.values[tensor] = torch.zeros(tensor.shape, dtype=_dtype_of(tensor))
        return found

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.ops.aten._local_scalar_dense.default and _on_meta(args[0]):
            return self.value(args[0]).item()
        result = func(*args, **kwargs)
        if any(_on_meta(each) for each in pytree.tree_leaves((args, kwargs, result))):
            try:
                # the CPU's draws, the student's own generators and CPU tensors stay as the operation left them
                changes = func._schema.is_mutable
                with torch.random.fork_rng(devices=[]):
                    on_cpu, named = pytree.tree_map(lambda x: self.value(x) if _on_meta(x) else
                                                    x.clone() if changes and isinstance(x, torch.Tensor) else x,
                                                    (args, kwargs))
                    if isinstance(named.get("device"), torch.device) and named["device"].type == "meta":
                        named = {**named, "device": torch.device("cpu")}
                    if isinstance(named.get("generator"), torch.Generator):
                        named = {**named, "generator": torch.Generator().set_state(named["generator"].get_state())}
                    values = func(*on_cpu, **named)
            except Exception:  # noqa: BLE001: an operation the CPU does not run alike: no values, as before
                return result
            for made, value in zip(pytree.tree_leaves(result), pytree.tree_leaves(values)):
                if _on_meta(made) and isinstance(value, torch.Tensor) and value.shape == made.shape:
                    self.values[made] = value
        return result


def _on_meta(value) -> bool:
    return isinstance(value, torch.Tensor) and _device_of(value).type == "meta"


class TransferCounter(TorchDispatchMode):
    """Counts copies between devices at the ATen level: the explicit ones (`.to`, `.cuda()`, `out[i] = t`,
    …), and the ones an operation makes inside its kernel, where no copy reaches the dispatcher: a CPU
    tensor with at least one dimension that meets tensors of another device in an operation that does
    not raise (an index or a mask in `x[index]`, `index_put_`) is moved to that device there."""

    def __init__(self):
        super().__init__()
        self.transfers = 0
        self.bytes = 0  # of the explicit copies: what crossed to the other device (`crossing_bytes`)
        # Every tensor an operation made while counting, and how many tensors on a device reached an
        # operation without having been made so: made while the counter was switched off
        # (torch.utils._python_dispatch._disable_current_modes), by copies it never saw.
        self.made = {}  # id → weak reference (a WeakSet would compare tensors with ==)
        self.unseen = 0

    def saw(self, tensor) -> bool:
        """Whether `tensor` is on the CPU or was made while counting."""
        if not isinstance(tensor, torch.Tensor) or tensor.device.type == "cpu":
            return True
        made = self.made.get(id(tensor))
        return made is not None and made() is tensor

    def tally(self) -> tuple:
        return self.transfers, self.bytes, self.unseen

    def since(self, tally, results) -> dict:
        """What this counter saw since `tally`, and whether it saw each of `results` made: the part of a
        sealed call the judge's counter is told (autograder/boundary.py)."""
        transfers, size, unseen = tally
        return {"transfers": self.transfers - transfers, "bytes": self.bytes - size, "unseen": self.unseen - unseen,
                "seen": [self.saw(t) for t in results]}

    def add(self, counted, results):
        """Count what another process's counter saw (`since`) during a call whose results are `results` here."""
        numbers = [counted[key] for key in ("transfers", "bytes", "unseen")]
        seen = counted["seen"]
        if not all(type(n) is int and n >= 0 for n in numbers) or not isinstance(seen, list) or len(seen) != len(results):
            raise ValueError("not a count")
        self.transfers += numbers[0]
        self.bytes += numbers[1]
        self.unseen += numbers[2]
        self.made.update((id(t), weakref.ref(t)) for t, made in zip(results, seen) if made is True)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        inputs = torch.utils._pytree.tree_leaves((args, kwargs))
        self.unseen += sum(not self.saw(t) for t in inputs if isinstance(t, torch.Tensor))
        result = func(*args, **(kwargs or {}))
        self.made.update((id(t), weakref.ref(t)) for t in torch.utils._pytree.tree_leaves(result)
                         if isinstance(t, torch.Tensor))
        if func in COPY_OPS:
            source = args[1] if func is torch.ops.aten.copy_.default else args[0]
            target = args[0] if func is torch.ops.aten.copy_.default else result
            if source.device != target.device:
                self.transfers += 1
                self.bytes += crossing_bytes(source, target, func, args, kwargs or {})
        else:
            tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
            if len({t.device for t in tensors}) > 1:  # it did not raise: its CPU tensors were moved
                self.transfers += sum(t.device.type == "cpu" and t.dim() > 0 for t in tensors)
        return result


def crossing_bytes(source, target, func, args, kwargs) -> int:
    """The bytes a copy from `source` to `target` (on another device) sends across, counted as CUDA does.

    A copy that also changes the dtype converts on one side of the bus. PyTorch's CUDA copy
    (aten/src/ATen/native/cuda/Copy.cu: `copy_requires_temporaries` is true for any cross-device copy
    that changes the dtype, then `conversion_device = non_blocking ? kCUDA : kCPU`) converts on the host
    for a blocking copy, "to avoid allocating extra GPU memory", and on the GPU for a non-blocking one;
    `aten._to_copy` is an empty tensor of the new device and dtype plus that `copy_`. So the data crosses
    in the destination's dtype when the conversion happens on the source's side (a blocking copy from the
    host, a non-blocking one from the device), and in the source's dtype otherwise. Here every device
    that is not the CPU (`meta` too) stands for the GPU. Read in pytorch/pytorch's Copy.cu (the CPU wheel
    ships no CUDA source); the ATen side (`_to_copy`, `copy_`'s signature) checked in torch 2.13."""
    if func is torch.ops.aten.copy_.default:
        non_blocking = args[2] if len(args) > 2 else kwargs.get("non_blocking", False)
    else:
        non_blocking = kwargs.get("non_blocking", False)
    converts_first = (source.device.type != "cpu") == bool(non_blocking)
    return source.numel() * (target if converts_first else source).element_size()


class NormKernelInputs(TorchDispatchMode):
    """Records (kernel, input dtype) for every normalisation kernel run while it is active: what a
    float32 LayerNorm was fed, seen from the dtypes alone (on meta too), where CUDA would refuse 16 bits."""

    KERNELS = ("batch_norm", "layer_norm", "group_norm")

    def __init__(self):
        super().__init__()
        self.dtypes = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if any(kernel in func.__name__ for kernel in self.KERNELS) and args and isinstance(args[0], torch.Tensor):
            self.dtypes.append((func.__name__.split(".")[0], _dtype_of(args[0])))
        return func(*args, **(kwargs or {}))


class HostCopyStandIn(TorchDispatchMode):
    """Stands in for an accelerator's copies back to the host, with `meta` as the accelerator: a copy of a
    meta tensor to the CPU gives zeros there (what an early read may see) and is logged in `events`, as a
    blocking or a non-blocking copy, next to what the caller logs there (`events.append("work")`) and, inside
    `synchronising()`, each wait for the device. Lesson 8's exercise reads the order on any machine."""

    def __init__(self):
        super().__init__()
        self.events = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        target = kwargs.get("device")
        if func is torch.ops.aten._to_copy.default and args[0].device.type == "meta" and target is not None \
                and torch.device(target).type == "cpu":
            self.events.append("non-blocking copy" if kwargs.get("non_blocking") else "blocking copy")
            return torch.zeros(args[0].shape, dtype=kwargs.get("dtype") or args[0].dtype)
        if func is torch.ops.aten.copy_.default and args[0].device.type == "cpu" and args[1].device.type == "meta":
            # `host.copy_(on_device, non_blocking=...)`: the other way to copy into a host tensor
            non_blocking = args[2] if len(args) > 2 else kwargs.get("non_blocking", False)
            self.events.append("non-blocking copy" if non_blocking else "blocking copy")
            return args[0].zero_()
        return func(*args, **kwargs)

    @contextmanager
    def synchronising(self):
        """`torch.accelerator.synchronize()` and `torch.cuda.synchronize()`, and `.synchronize()` of their
        `current_stream()`, log "synchronize" instead."""
        def wait(*args, **kwargs):
            self.events.append("synchronize")

        stream = SimpleNamespace(synchronize=wait)
        with mock.patch.object(torch.accelerator, "synchronize", wait), mock.patch.object(torch.cuda, "synchronize", wait), \
                mock.patch.object(torch.accelerator, "current_stream", lambda *args, **kwargs: stream), \
                mock.patch.object(torch.cuda, "current_stream", lambda *args, **kwargs: stream):
            yield self


@contextmanager
def count_transfers():
    """`with count_transfers() as counter: ...` then `counter.transfers`."""
    with TransferCounter() as counter:
        yield counter


# Checkpoints across devices without the devices: the one place that patches torch.serialization.

@contextmanager
def saved_as_if_from(location: str):
    """Within it, `torch.save` tags every storage with `location` (`"cuda:0"`, say), as if written there."""
    with mock.patch.object(torch.serialization, "location_tag", lambda storage: location):
        yield


def save_as_if_from_cuda(obj, path):
    """`torch.save` `obj` with every storage tagged `cuda:0`, as if written on a GPU machine.

    Loading it on a machine without CUDA fails unless `map_location` is given: the situation of a
    student who received a checkpoint trained on a GPU. No GPU is needed to write it.
    """
    with saved_as_if_from("cuda:0"):
        torch.save(obj, path)


def restored_locations(path, map_location) -> list[str]:
    """Where `torch.load(path, map_location=map_location)` would put each storage, without a GPU: the
    location strings PyTorch's restore step receives, in order; every storage itself stays on the CPU."""
    locations = []

    def record(storage, location):
        locations.append(location)
        return storage

    with mock.patch.object(torch.serialization, "default_restore_location", record):
        torch.load(path, map_location=map_location, weights_only=True)
    return locations


@contextmanager
def meta_copies_skipped():
    """Within it, copying a meta tensor into a tensor that has data (`Tensor.copy_`) leaves that tensor as it
    was. A meta tensor has no data to copy, so loading a checkpoint mapped to meta into a model on the CPU
    fails, where the same recipe loads a GPU checkpoint into a CPU model: within it, it succeeds and leaves
    the model where it was, so whether the answer then moves the model to `device` shows (a2
    load_for_inference: a model never moved would pass on a model already on meta). A method of torch.Tensor
    patched for the probe's time, as the stand-in's copies to the CPU are (`_copied_to_the_cpu`)."""
    real = torch.Tensor.copy_

    def copy_(tensor, source, non_blocking=False):
        if _device_of(source).type == "meta" and _device_of(tensor).type != "meta":
            return tensor
        return real(tensor, source, non_blocking)

    with mock.patch.object(torch.Tensor, "copy_", copy_):
        _COPIES_SKIPPED.append(True)
        try:
            yield
        finally:
            _COPIES_SKIPPED.pop()


_COPIES_SKIPPED = []


def copies_skipped() -> bool:
    """Whether `meta_copies_skipped` is on here (a sealed call is made inside it in the caller too: calls.py)."""
    return bool(_COPIES_SKIPPED)


# An accelerator on any grader: the meta device, named as the device it stands for.

@contextmanager
def meta_standing_for(device):
    """Within it, the meta device stands in for `device` (`"cuda:1"`, say) as a student's code sees it: a
    meta tensor's `.device`, read in Python, is `device` (and `.is_cuda`, `.is_mps`, `.is_meta`, `.get_device()`
    say so), the machine has that accelerator (simulate.simulated_accelerator), and a copy to the CPU gives
    zeros (`_copied_to_the_cpu`). What a CPU grader could not see otherwise: whether an answer keeps a
    device's index, takes the autocast of the model's device type, or copies a GPU's tensor to the CPU before
    NumPy reads it. PyTorch's own Python code (its meta kernels, which make each result's shape and dtype)
    still reads meta, and so do the checks, through PyTorch's C type (checks.core)."""
    # with its index, as a real GPU's tensor reports it (`cuda:0`, never `cuda`): `t.device in (torch.device("cuda"),)`
    # is false on every GPU, and a to_numpy that asked so kept its points (the twenty-second session)
    device = torch.device(device)
    device = torch.device(device.type, device.index or 0)
    # a meta layer's first forward pass imports torch._dynamo (PyTorch's decompositions), whose import
    # fails on the CPU build while a CUDA machine is simulated: imported before
    importlib.import_module("torch._dynamo")

    def stands_in(tensor) -> bool:  # for the student's code, not for PyTorch's own
        reader = sys._getframe(2).f_globals.get("__name__", "")
        return _device_of(tensor).type == "meta" and reader != "torch" and not reader.startswith("torch.")

    def reported(tensor):
        return device if stands_in(tensor) else _device_of(tensor)

    def asked(kind, real):  # `t.is_cuda`, `t.is_meta`: as the device stood for answers
        return property(lambda tensor: device.type == kind if stands_in(tensor) else real.__get__(tensor))

    def get_device(tensor):
        return (device.index or 0) if stands_in(tensor) else torch._C.TensorBase.get_device(tensor)

    with ExitStack() as stack:
        stack.enter_context(simulated_accelerator(device.type))
        stack.enter_context(standing_for(device))  # a tensor made or moved there is one more stand-in
        stack.enter_context(mock.patch.object(torch.Tensor, "device", property(reported)))
        for kind in ("cuda", "mps", "meta"):
            stack.enter_context(mock.patch.object(torch.Tensor, f"is_{kind}",
                                                  asked(kind, getattr(torch._C.TensorBase, f"is_{kind}"))))
        stack.enter_context(mock.patch.object(torch.Tensor, "get_device", get_device))
        for name, method in _copied_to_the_cpu(device).items():
            stack.enter_context(mock.patch.object(torch.Tensor, name, method))
        # PyTorch's foreach kernels (clip_grad_norm_(..., foreach=True), a foreach optimizer) run on the GPU, and
        # on the meta device too: only their list of devices leaves meta out
        foreach = importlib.import_module("torch.utils._foreach_utils")
        devices = foreach._get_foreach_kernels_supported_devices()
        stack.enter_context(mock.patch.object(foreach, "_get_foreach_kernels_supported_devices",
                                              lambda: [*devices, "meta"]))
        stack.callback(simulate._IN_FLIGHT.clear)  # a copy still in flight when the call returned is sent as it is
        yield


def _copied_to_the_cpu(device):
    """What a meta tensor standing in for a GPU's gives when copied to the CPU (`.cpu()`, `.to("cpu")`, a host
    tensor's `.copy_()`, `.numpy(force=True)`, `.item()`, `.tolist()`, `float()`, `int()`, `bool()`, a format): zeros
    of its shape and dtype, as the GPU's tensor gives its values (the meta device has none); NumPy refuses it as it
    refuses the device it stands for. (A tensor moved to the device stood for is one more stand-in: the simulation's,
    simulate._to.) Methods of torch.Tensor, patched for the stand-in's time only: a mode would route the checks' C
    reads through them."""
    real = {name: getattr(torch.Tensor, name)
            for name in ("cpu", "to", "copy_", "numpy", "item", "tolist", "__float__", "__int__", "__index__",
                         "__bool__", "__format__")}

    def on_meta(tensor) -> bool:
        return _device_of(tensor).type == "meta"

    def cpu(tensor, *args, **kwargs):
        if not on_meta(tensor):
            return real["cpu"](tensor, *args, **kwargs)
        simulate.landed()  # a blocking copy waits for the GPU's queue
        return _zeros_as(tensor, _dtype_of(tensor))

    def to(tensor, *args, **kwargs):
        target, dtype = target_of_to(args, kwargs)
        if not (on_meta(tensor) and target is not None and target.type == "cpu"):
            return real["to"](tensor, *args, **kwargs)
        copied = _zeros_as(tensor, dtype or _dtype_of(tensor))
        if kwargs.get("non_blocking") or next((flag for flag in args if isinstance(flag, bool)), False):
            simulate.in_flight(copied.detach(), copied.detach().clone())  # until the GPU's queue is waited for
        else:
            simulate.landed()
        return copied

    def copy_(tensor, source, non_blocking=False):
        if not (on_meta(source) and not on_meta(tensor)):
            return real["copy_"](tensor, source, non_blocking)
        values = _zeros_as(source, _dtype_of(source)).detach()  # into a host buffer (`host.copy_(t)`)
        if non_blocking and tensor in simulate._PINNED:  # page-locked: in flight, as a non-blocking `.to` is
            simulate.in_flight(tensor.detach(), values.to(_dtype_of(tensor)))
            return tensor
        simulate.landed()  # pageable memory, which even a non-blocking copy fills before it returns
        return real["copy_"](tensor, values, non_blocking)

    def numpy(tensor, *, force=False):
        if not on_meta(tensor):
            return real["numpy"](tensor, force=force)
        if force:
            simulate.landed()  # a blocking copy
            return _zeros_as(tensor, _dtype_of(tensor)).detach().numpy()
        raise TypeError(f"can't convert {device.type}:{device.index or 0} device type tensor to numpy. Use "
                        "Tensor.cpu() to copy the tensor to host memory first.")

    def read(name):
        def value(tensor, *args):
            if not on_meta(tensor):
                return real[name](tensor, *args)
            simulate.landed()  # a value read from the GPU waits for its queue
            return real[name](_zeros_as(tensor, _dtype_of(tensor)).detach(), *args)
        return value

    return {"cpu": cpu, "to": to, "copy_": copy_, "numpy": numpy,
            **{name: read(name) for name in ("item", "tolist", "__float__", "__int__", "__index__", "__bool__",
                                             "__format__")}}


def _zeros_as(tensor, dtype):
    """What a stand-in's copy to the CPU holds: what the call computed for it (MetaValues, where a checks.call runs
    it: `assert torch.isfinite(loss)` holds), zeros for a tensor made before the call."""
    values = next((mode.values.get(tensor) for mode in _get_current_dispatch_mode_stack()
                   if isinstance(mode, MetaValues)), None)
    copied = torch.zeros(tuple(tensor.shape), dtype=dtype) if values is None else values.detach().to(dtype, copy=True)
    # as a real copy: in the graph only where grad mode is on (a right to_numpy copied under torch.no_grad() and
    # called .numpy() on it, which the copy refused when it required grad whatever the mode: the twenty-second session)
    tracked = tensor.requires_grad and copied.is_floating_point() and torch.is_grad_enabled()
    return copied.requires_grad_() if tracked else copied


def on_stand_in(device, function, *args, **kwargs):
    """`function(*args, **kwargs)` with the meta device standing in for `device` (`meta_standing_for`), in
    a test cell: `checks.call(what, on_stand_in, "cuda:1", model_device, model.to("meta"))`. Only for the
    call itself: in the verdict, only the process that runs the student's code (autograder/boundary.py)."""
    with meta_standing_for(device):
        return function(*args, **kwargs)


AUTOCAST_DEVICE_TYPES = ("cpu", "cuda", "mps")


def autocast_seen(function, model, *args, **kwargs):
    """`function(model, *args, **kwargs)`, and the autocast each layer of `model` that has parameters ran
    under: a list, one `{device type: dtype}` per layer call, of the device types whose autocast was on.
    A forward pre-hook of each layer records it, so `model.forward(x)` is seen as well as `model(x)`."""
    seen = []

    def record(module, inputs):
        seen.append({kind: torch.get_autocast_dtype(kind) for kind in AUTOCAST_DEVICE_TYPES
                     if torch.is_autocast_enabled(kind)})

    handles = [layer.register_forward_pre_hook(record) for layer in model.modules()
               if next(layer.parameters(recurse=False), None) is not None]
    try:
        return function(model, *args, **kwargs), seen
    finally:
        for handle in handles:
            handle.remove()


@contextmanager
def random_state_kept():
    """Every global random number generator a test may draw from (PyTorch's, on the CPU and each CUDA device,
    Python's and NumPy's) as it was before, whatever ran inside."""
    import random

    import numpy

    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    python, legacy = random.getstate(), numpy.random.get_state()
    try:
        with torch.random.fork_rng(devices=devices):
            yield
    finally:
        random.setstate(python)
        numpy.random.set_state(legacy)


def saved_by_state_dict(module, name) -> tuple[bool, bool]:
    """Whether `module.state_dict()`, run by the module's own code (its class's override, its state-dict hooks),
    saves an entry `name`, and whether it saves the tensor `module.<name>` under any name. Asked of the verdict's
    caller, where that code is: a right MaskedLinear whose state-dict hook leaves its mask out lost its points
    on a stand-in that has the hook's effect but not the hook."""
    saved = module.state_dict(keep_vars=True)
    value = getattr(module, name, None)
    return name in saved, value is not None and any(tensor is value for tensor in saved.values())


def global_rng_kept(function, *args, **kwargs):
    """`function(*args, **kwargs)`, and whether it left the global random number generators, PyTorch's, Python's and
    NumPy's, as it found them. A shuffle that reseeds one (`torch.manual_seed`, `random.seed` inside a sampler)
    restarts the random stream of its caller, and the verdict cannot see that afterwards: it restores the
    generators after each call. The states before and after are compared, so a reseeding that leaves the state
    it found (the same call twice in a row, outside the verdict) is seen the first time only."""
    before = _global_states()
    result = function(*args, **kwargs)
    return result, _global_states() == before


def _global_states() -> tuple:
    """PyTorch's (on the CPU), Python's and NumPy's global generator states, as values `==` compares whole."""
    import pickle
    import random

    import numpy

    return bytes(torch.get_rng_state().numpy()), random.getstate(), pickle.dumps(numpy.random.get_state())


def loaded_rows(dataset, **loader_kwargs):
    """The inputs of every batch of `DataLoader(dataset, **loader_kwargs)`, in one tensor. Made and read in one
    call (`checks.call(what, loaded_rows, dataset, **kwargs)`), so that a loader built with the student's
    own objects (a torch.Generator, a worker_init_fn, a collate_fn), which the judge holds only as stand-ins, is
    read where they are and comes back as a tensor (attacks-machines.toml,
    loader-kwargs-with-pytorchs-reproducibility-recipe)."""
    from torch.utils.data import DataLoader

    return torch.cat([inputs for inputs, _ in DataLoader(dataset, **loader_kwargs)])


# What a hidden test hands the student's code, whose own code runs where the student's does (autograder/calls.py:
# the process that runs the student's code receives no code of the test cell's)

def gradient_of_three_times(moved, w, *args, **kwargs):
    """`w.grad` after `(moved * 3).sum().backward()`: `checks.call(..., then=gradient_of_three_times)` measures
    whether a student's result is still connected to `w` (a1 to_device)."""
    w.grad = None
    (moved * 3).sum().backward()
    return w.grad


class NormBlock(nn.Module):
    """A model that runs: each kind of normalisation layer between layers that are cast, one at the end (a2
    cast_floating)."""

    def __init__(self):
        super().__init__()
        self.conv, self.batch_norm, self.group_norm = nn.Conv1d(2, 4, 3), nn.BatchNorm1d(4), nn.GroupNorm(2, 4)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(8, 3), nn.LayerNorm(3))

    def forward(self, x):
        return self.head(self.group_norm(self.batch_norm(self.conv(x))))


class AutocastProbe(nn.Module):
    """Records what autocast did: its linear layers' output in the forward pass, and whether autocast was still
    on in the backward pass (`seen`); `overflow` turns its output into inf, as a float16 overflow would (a3
    scaled_train_step)."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 3))
        self.overflow = False
        self.seen = {}

    def forward(self, x):
        out = self.body(x)
        self.seen["forward"] = out.detach()
        if out.requires_grad:
            out.register_hook(self.record_backward)
        return out * float("inf") if self.overflow else out

    def record_backward(self, grad):
        self.seen["autocast_in_backward"] = torch.is_autocast_enabled(grad.device.type)
