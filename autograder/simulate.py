"""Pretend a machine has (or lacks) an accelerator, through every API a correct answer may ask.

What a machine *has* and what its PyTorch was *built for* differ on most students' laptops: PyPI's
default Linux wheel is the CUDA build, and on a machine without an NVIDIA GPU it reports CUDA as its
accelerator (`torch.accelerator.current_accelerator()`) while CUDA is not available. Only availability
is simulated: no tensor is ever created on the pretended device; one made there is made on the meta device
(`_made_on_meta`), with its shape and dtype and no values.
"""
import contextlib
import functools
import importlib
import inspect
import os
import pkgutil
import platform
import sys
import types
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass
from types import SimpleNamespace
from unittest import mock

import torch
from torch.utils import weak
from torch.utils._device import _device_constructors

ACCELERATORS = (None, "cuda", "mps")


@dataclass(frozen=True)
class Machine:
    """A machine as PyTorch sees it: the accelerator it can use, and the one its build was made for."""
    present: str | None
    built: str | None

    def __str__(self):
        if self.present:
            return f"{self.present} present"
        return f"no accelerator, {self.built or 'cpu'} build"


# The five cases that matter: the CPU build; the CUDA build on a machine without a GPU (PyPI's default
# wheel on most laptops); a CUDA GPU; an Apple GPU; PyTorch for macOS on a Mac whose GPU it cannot use (an
# Intel Mac, macOS in a virtual machine), where `torch.backends.mps.is_built()` is true and nothing is there.
MACHINES = (Machine(None, None), Machine(None, "cuda"), Machine("cuda", "cuda"), Machine("mps", "mps"),
            Machine(None, "mps"))


def _current_accelerator(kind, built, check_available=False):
    # torch 2.13: the compile-time accelerator, or None with check_available=True when it is not usable
    if built is None or (check_available and kind is None):
        return None
    return torch.device(built)


# what `torch.cuda.get_device_properties(0)` tells of the simulated GPU: a recent one with 80 GiB, named as that GPU
# names itself (a name that said "simulated" let an answer take its wrong path on real GPUs alone; what else tells the
# simulation, a determined student can still find: README, "What a student's code can still misreport")
_SIMULATED_GPU = SimpleNamespace(name="NVIDIA H100 80GB HBM3", major=9, minor=0, total_memory=80 * 2**30,
                                 multi_processor_count=132, is_integrated=False)


_UNAME = platform.uname()  # the grader's, read before any simulation


def _uname(built):
    if built == "mps":
        return _UNAME._replace(system="Darwin", release="23.5.0", version="Darwin Kernel Version 23.5.0",
                               machine="arm64")
    return _UNAME._replace(system="Linux", machine="x86_64")


def _os_uname(built):
    system = _uname(built)
    return os.uname_result((system.system, system.node, system.release, system.version, system.machine))


def _on_cuda(kind, built, answer):
    """`answer` where a CUDA GPU is simulated; elsewhere the error PyTorch raises there."""
    if kind == "cuda":
        return answer
    if built != "cuda":
        raise AssertionError("Torch not compiled with CUDA enabled")
    raise RuntimeError("Found no NVIDIA driver on your system.")


def _on_mps(kind, answer):
    """`answer` where an Apple GPU is simulated; elsewhere the error PyTorch raises there."""
    if kind == "mps":
        return answer
    raise RuntimeError("MPS backend is not available")


def _eager(kind, built, model=None, **options):
    """`torch.compile` on a simulated machine: the function or module as it is, run eagerly, as `torch.compile(...,
    disable=True)` gives it. Compiling would ask the grader's own machine (Inductor's cache, its compilers, a GPU
    that is not there), and compiled code computes what the eager code does."""
    return model if model is not None else (lambda model: model)


# Copies to the host that a non-blocking `.to("cpu", non_blocking=True)` from a stand-in for the GPU started
# (autograder/probes.py): what they hold until the GPU's queue is waited for, as on the GPU, where PyTorch copies
# into page-locked memory and returns at once (lesson 08: read before `torch.cuda.synchronize()`, it is not there).
_IN_FLIGHT = []
_PINNED = weak.WeakTensorKeyDictionary()  # host tensors the simulation pinned (_pin_memory, pin_memory=True)


def in_flight(host, values):
    """`host` holds what was there before a non-blocking copy of `values` lands: NaN (ones where the dtype has no
    NaN), until `landed()`."""
    torch._C.TensorBase.fill_(host, float("nan") if host.is_floating_point() else 1)
    _IN_FLIGHT.append((host, values))


def landed():
    """The GPU's queue waited for (`synchronize`, a value read from it): every copy in flight holds its values."""
    while _IN_FLIGHT:
        host, values = _IN_FLIGHT.pop()
        torch._C.TensorBase.copy_(host, values)


class _SimulatedStream:
    """What `torch.cuda.current_stream()` or `torch.cuda.Stream()` gives on the simulated GPU: a stream with nothing
    queued (lessons 07 and 08: side streams, `torch.cuda.stream(s)`, `wait_stream`)."""
    device, device_index, device_type, stream_id, cuda_stream, priority = torch.device("cuda", 0), 0, 1, 0, 0, 0

    def synchronize(self):
        return landed()

    def query(self):  # done: what was in flight has landed
        landed()
        return True

    def wait_stream(self, stream):
        return None

    def wait_event(self, event):
        return None

    def record_event(self, event=None):
        return event if event is not None else _SimulatedEvent()


class _SimulatedEvent:
    """What `torch.cuda.Event(enable_timing=True)` gives on the simulated GPU (lesson 10 times a step with two): one
    that has happened as soon as it is recorded, no time after another."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        self.enable_timing = enable_timing

    def record(self, stream=None):
        return None

    def wait(self, stream=None):
        return None

    def query(self):  # done: what was in flight has landed
        landed()
        return True

    def synchronize(self):
        return landed()

    def elapsed_time(self, end_event):
        return 0.0


# What each function answers on a simulated machine (its accelerator `kind`, its build `built`).
_ANSWERS = {
    "torch.cuda.is_available": lambda kind, built: kind == "cuda",
    "torch.cuda.device_count": lambda kind, built: int(kind == "cuda"),
    "torch.cuda.current_device": lambda kind, built: 0,
    # a simulated GPU is a recent one, with native bfloat16 (`torch.autocast("cuda", dtype=torch.bfloat16)` asks)
    "torch.cuda.is_bf16_supported": lambda kind, built, including_emulation=True: kind == "cuda",
    # what a student may print about the GPU it found (`torch.cuda.get_device_name(0)`): a recent one
    "torch.cuda.get_device_name": lambda kind, built, device=None: _on_cuda(kind, built, _SIMULATED_GPU.name),
    "torch.cuda.get_device_capability": lambda kind, built, device=None: _on_cuda(kind, built, (9, 0)),
    "torch.cuda.get_device_properties": lambda kind, built, device=None: _on_cuda(kind, built, _SIMULATED_GPU),
    "torch.cuda.mem_get_info": lambda kind, built, device=None: _on_cuda(kind, built, (79 * 2**30, 80 * 2**30)),
    "torch.cuda.memory_allocated": lambda kind, built, device=None: _on_cuda(kind, built, 0),
    "torch.cuda.memory_reserved": lambda kind, built, device=None: _on_cuda(kind, built, 0),
    "torch.cuda.synchronize": lambda kind, built, device=None: _on_cuda(kind, built, None) or landed(),
    # what a setup cell may do with the GPU it found (lesson 01's `torch.cuda.set_device(0)`, `with
    # torch.cuda.device(0):`)
    "torch.cuda.set_device": lambda kind, built, device=None: _on_cuda(kind, built, None),
    "torch.cuda._exchange_device": lambda kind, built, device=0: _on_cuda(kind, built, 0) if device >= 0 else -1,
    "torch.cuda._maybe_exchange_device": lambda kind, built, device=0: _on_cuda(kind, built, 0) if device >= 0 else -1,
    "torch.cuda.reset_peak_memory_stats": lambda kind, built, device=None: _on_cuda(kind, built, None),
    "torch.cuda.max_memory_allocated": lambda kind, built, device=None: _on_cuda(kind, built, 0),
    "torch.cuda.empty_cache": lambda kind, built: None,
    "torch.cuda.memory_summary": lambda kind, built, device=None, abbreviated=False: _on_cuda(kind, built, ""),
    "torch.cuda.get_arch_list": lambda kind, built: ["sm_90"] if built == "cuda" else [],
    "torch.accelerator.synchronize": lambda kind, built, device=None: landed(),
    "torch.compile": _eager,
    # what a setup cell may set or read on a machine with a GPU, as the lessons show (08 and 13: sync debugging;
    # a shared GPU's share; its streams and generator; cuDNN and NCCL, which come with CUDA)
    "torch.cuda.set_sync_debug_mode": lambda kind, built, debug_mode: _on_cuda(kind, built, None),
    "torch.cuda.get_sync_debug_mode": lambda kind, built: _on_cuda(kind, built, 0),
    "torch.cuda.set_per_process_memory_fraction": lambda kind, built, fraction, device=None: _on_cuda(kind, built, None),
    "torch.cuda.current_stream": lambda kind, built, device=None: _on_cuda(kind, built, _SimulatedStream()),
    "torch.cuda.default_stream": lambda kind, built, device=None: _on_cuda(kind, built, _SimulatedStream()),
    "torch.cuda.Stream": lambda kind, built, device=None, priority=0, **options: _on_cuda(kind, built, _SimulatedStream()),
    "torch.cuda.stream": lambda kind, built, stream=None: _on_cuda(kind, built, nullcontext(stream)),
    "torch.cuda.Event": lambda kind, built, enable_timing=False, blocking=False, interprocess=False:
        _on_cuda(kind, built, _SimulatedEvent(enable_timing, blocking, interprocess)),
    "torch.cuda.get_rng_state": lambda kind, built, device="cuda":
        _on_cuda(kind, built, torch.zeros(16, dtype=torch.uint8)),
    "torch.backends.cudnn.is_available": lambda kind, built: built == "cuda",  # the build's, GPU or not
    "torch.backends.cudnn.version": lambda kind, built: 91002 if built == "cuda" else None,
    "torch.distributed.is_nccl_available": lambda kind, built: built == "cuda",
    "torch.accelerator.set_device_index": lambda kind, built, device: None if kind else _on_cuda(kind, built, None),
    # an Apple GPU's: `torch.manual_seed` seeds it where PyTorch is built for it (torch._C._has_mps, simulated)
    "torch.mps.manual_seed": lambda kind, built, seed: None,
    "torch.mps.seed": lambda kind, built: None,
    "torch.mps.get_rng_state": lambda kind, built, device="mps": _on_mps(kind, torch.zeros(16, dtype=torch.uint8)),
    "torch.mps.set_rng_state": lambda kind, built, new_state, device="mps": _on_mps(kind, None),
    "torch.mps.synchronize": lambda kind, built: _on_mps(kind, None) or landed(),
    "torch.mps.empty_cache": lambda kind, built: _on_mps(kind, None),
    "torch.mps.set_per_process_memory_fraction": lambda kind, built, fraction: _on_mps(kind, None),
    "torch.mps.current_allocated_memory": lambda kind, built: _on_mps(kind, 0),
    "torch.mps.driver_allocated_memory": lambda kind, built: _on_mps(kind, 0),
    "torch.mps.recommended_max_memory": lambda kind, built: _on_mps(kind, 16 * 2**30),
    "torch.mps.device_count": lambda kind, built: int(kind == "mps"),
    "torch.backends.cuda.is_built": lambda kind, built: built == "cuda",
    "torch.backends.mps.is_available": lambda kind, built: kind == "mps",
    "torch.backends.mps.is_built": lambda kind, built: built == "mps",
    "torch.accelerator.is_available": lambda kind, built: kind is not None,
    "torch.accelerator.device_count": lambda kind, built: int(kind is not None),
    "torch.accelerator.current_accelerator": _current_accelerator,
    "torch.accelerator.current_device_index": lambda kind, built: 0,
    # what the real functions read in turn: a function object kept from before the simulation (a student's
    # module-level table holding `torch.cuda.is_available`) sees the simulated machine too
    "torch.cuda._is_compiled": lambda kind, built: built == "cuda",
    "torch._C._cuda_getDeviceCount": lambda kind, built: int(kind == "cuda"),
    "torch._C._mps_is_available": lambda kind, built: kind == "mps",
    "torch._C._accelerator_getAccelerator": lambda kind, built: torch.device(built) if built else None,
    # the system around it: PyTorch for macOS runs on an Apple-silicon Mac (arm64: one whose GPU PyTorch cannot
    # use is macOS in a virtual machine there, as on CI's macOS runners), every other simulated machine is Linux
    # on x86_64 (`if platform.system() == "Darwin" and torch.backends.mps.is_available()`), as `os.uname()` and
    # `sys.platform` (`_AskedSystem`) tell it. The sandbox and the kernel read the grader's before any simulation
    "platform.uname": lambda kind, built: _uname(built),
    "platform.system": lambda kind, built: _uname(built).system,
    "platform.machine": lambda kind, built: _uname(built).machine,
    "platform.processor": lambda kind, built: "arm" if built == "mps" else "x86_64",
    "platform.platform": lambda kind, built, aliased=False, terse=False:
        "macOS-14.5-arm64-arm-64bit" if built == "mps" else f"Linux-{_uname(built).release}-x86_64-with-glibc2.36",
    "platform.mac_ver": lambda kind, built, release="", versioninfo=("", "", ""), machine="":
        ("14.5", ("", "", ""), "arm64") if built == "mps" else (release, versioninfo, machine),
    "os.uname": lambda kind, built: _os_uname(built),
}
_SIMULATED = []  # the machines simulated now, (kind, built), the innermost last
_QUESTIONS = [0]  # how many questions a simulated machine has answered (`questions`)


def _resolve(target):
    owner, _, name = target.rpartition(".")
    return getattr(importlib.import_module(owner), name, None)


# answers the same on every machine, so no question about it: `torch.manual_seed` seeds an Apple GPU where
# PyTorch is built for one (every cell that seeds would otherwise run again on every machine), and compiling
_NOT_QUESTIONS = {"torch.mps.manual_seed", "torch.mps.seed", "torch.compile"}


def _replacement(target, answer):
    """One function for `target`, the same object in every simulation: a student's name bound to it while
    one machine was simulated (`from torch.cuda import is_available`) answers for the machine simulated
    when it is called, and is the real function again outside any simulation."""
    real, asks = _resolve(target), target not in _NOT_QUESTIONS

    def replacement(*args, **kwargs):
        if _SIMULATED:
            _QUESTIONS[0] += asks
            return answer(*_SIMULATED[-1], *args, **kwargs)
        return real(*args, **kwargs) if real is not None else answer(None, None, *args, **kwargs)

    replacement.__name__ = target.rpartition(".")[2]
    return replacement


_REPLACEMENTS = {target: _replacement(target, answer) for target, answer in _ANSWERS.items()}


# PyTorch's functions that make a tensor on the `device=` they are given: those its device context gives a device
# (`torch.utils._device._device_constructors`: `torch.asarray`, `torch.tensor`, the windows, ...), and the others
# that take one (`torch.normal(0.0, 0.02, size=shape, device=device)`, the `_like` ones, a tensor's `new_` ones: a
# right make_weight that drew with torch.normal, or made the tensor by torch.asarray, lost its test on a simulated GPU)
_FACTORIES = sorted({*(f"torch.{function.__name__}" for function in _device_constructors()
                       if getattr(torch, function.__name__, None) is function),
                     *(f"torch.{name}" for name in ("normal", "zeros_like", "ones_like", "empty_like", "full_like",
                                                    "rand_like", "randn_like", "randint_like", "fft.fftfreq",
                                                    "fft.rfftfreq")),
                     *(f"torch.Tensor.{name}" for name in ("new_zeros", "new_ones", "new_empty", "new_full",
                                                           "new_tensor", "new_empty_strided"))})
_STOOD_FOR = []  # the device the meta device stands for now (autograder/probes.py: meta_standing_for), innermost last


def _on_the_accelerator(device) -> bool:
    """Whether `device` is the simulated accelerator's: its one device (index 0, or none named), or the very device
    the meta device stands for (`cuda:1`)."""
    if not (_SIMULATED and _SIMULATED[-1][0]) or not isinstance(device, (str, torch.device)):
        return False
    device, home = torch.device(device), _STOOD_FOR[-1] if _STOOD_FOR else torch.device(_SIMULATED[-1][0], 0)
    return (device.type, device.index or 0) == (home.type, home.index or 0)


# What a real accelerator refuses that the meta device standing in for it takes (the same grade on every machine:
# a wrong answer that fails on a real GPU fails on a simulated one). PyTorch's own messages.
_MPS_FLOAT64 = ("Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't support float64. "
                "Please use float32 instead.")


def _stand_in(tensor) -> bool:
    """Whether `tensor` stands for one on the simulated accelerator: on the meta device while one is simulated (the
    student's own meta tensors too, which no exercise makes)."""
    return bool(_SIMULATED and _SIMULATED[-1][0]) and isinstance(tensor, torch.Tensor) \
        and torch._C.TensorBase.device.__get__(tensor).type == "meta"


def _drawn_on(tensor) -> str:
    """The device type `tensor` is drawn on: the simulated accelerator's for a stand-in."""
    return _SIMULATED[-1][0] if _stand_in(tensor) else torch._C.TensorBase.device.__get__(tensor).type


def _refuse_generator(generator, drawn_on):
    """A random tensor drawn on the device type `drawn_on` with a generator of another device (a CPU
    `torch.Generator()` for a CUDA weight, a generator on the simulated GPU for a CPU one): PyTorch checks the
    generator's device type against the tensor's."""
    if isinstance(generator, _REAL_GENERATOR) and generator.device.type != drawn_on:
        raise RuntimeError(f"Expected a '{drawn_on}' device type for generator but found '{generator.device.type}'")


_REAL_GENERATOR = torch.Generator


class _SimulatedGenerator(_REAL_GENERATOR):
    """A generator on the simulated accelerator (`torch.Generator(device="cuda")`): a CPU one underneath, whose state
    the meta device's draws leave as it was, that tells the accelerator's device, as PyTorch's checks read it."""

    def __new__(cls, device):
        generator = super().__new__(cls, "cpu")
        generator._device = device
        return generator

    @property
    def device(self):
        return self._device

    def __reduce__(self):  # copied (a caller's pristine namespace) or pickled, it is one of these still
        return type(self), (self._device,), super().__reduce__()[2]


class _AnyGenerator(type(_REAL_GENERATOR)):
    def __instancecheck__(cls, instance):  # PyTorch's own generators, made before the simulation too
        return isinstance(instance, _REAL_GENERATOR)

    def __subclasscheck__(cls, subclass):
        return issubclass(subclass, _REAL_GENERATOR)


class _Generator(_REAL_GENERATOR, metaclass=_AnyGenerator):
    """`torch.Generator` on a simulated machine: one on its accelerator is `_SimulatedGenerator` (a right `make_weight`
    that draws with a generator of the device it draws on), one on an accelerator it lacks is refused with PyTorch's
    message, whatever the grader has."""

    def __new__(cls, device="cpu"):
        device = torch.device(device)
        if _on_the_accelerator(device):
            return _SimulatedGenerator(torch.device(device.type, device.index or 0))
        kind, built = _SIMULATED[-1] if _SIMULATED else (None, None)
        if device.type == kind:
            raise RuntimeError(f"{kind.upper()} error: invalid device ordinal")
        if device.type == "cuda":
            raise RuntimeError("Found no NVIDIA driver on your system." if built == "cuda" else
                               "Cannot get CUDA generator without ATen_cuda library. PyTorch splits its backend into "
                               "two shared libraries: a CPU library and a CUDA library")
        if device.type == "mps":
            raise RuntimeError("Cannot execute getNewGenerator() without MPS backend.")
        return _REAL_GENERATOR(device)


def _refuse_float64(made):
    """`made`, where it stands for a tensor on a simulated Apple GPU, which has no float64."""
    if _stand_in(made) and _SIMULATED[-1][0] == "mps" and torch._C.TensorBase.dtype.__get__(made) == torch.float64:
        raise TypeError(_MPS_FLOAT64)
    return made


def _made_on_meta(real):
    """`real`, a factory, where a tensor made on the simulated accelerator (`torch.ones(1, device="cuda")`) is made
    on the meta device: its shape and dtype, and no values, on every grader, a GPU's too (the same grade on each).
    Code that checks that the device works by making a tensor there (a driver too old, a GPU taken) works on the
    simulated one (attacks-machines.toml: pick-device-checks-that-a-tensor-can-be-made-there); on the meta device
    standing in for a GPU (autograder/probes.py) the tensor is one more stand-in. Page-locked memory needs the
    accelerator's driver: a pinned tensor is a plain one. A function patched for the simulation's time, as the
    answers are: a mode would route the checks' reads of a tensor's device through it."""

    def made(*args, **kwargs):
        if not kwargs.get("pin_memory") or not _SIMULATED:  # kept by a cell past the simulation: PyTorch's own
            return real(*args, **kwargs)
        if not _SIMULATED[-1][0]:  # a grader's GPU simulated around a machine without one
            raise RuntimeError("pin_memory=True requires a CUDA or other accelerator backend; no pinned memory "
                               "allocator is available on this system.")
        pinned = real(*args, **{**kwargs, "pin_memory": False})
        _PINNED[pinned] = True
        return pinned

    @functools.wraps(real)
    def factory(*args, **kwargs):
        if _on_the_accelerator(kwargs.get("device")):
            kwargs = {**kwargs, "device": "meta"}
        tensor = made(*args, **kwargs)
        if isinstance(tensor, torch.Tensor):  # `device=ref.device` of a stand-in, `randn_like(stand_in)`, ...
            _refuse_generator(kwargs.get("generator"), _drawn_on(tensor))
        return _refuse_float64(tensor)

    return factory


def target_of_to(args, kwargs) -> tuple:
    """The device (a torch.device, or None) and the dtype `Tensor.to(*args, **kwargs)` asks for, as PyTorch parses
    them; its parser refuses the `copy` flag, which changes neither."""
    kwargs = {key: value for key, value in kwargs.items() if key != "copy"}
    while True:
        try:
            target, dtype, _, _ = torch._C._nn._parse_to(*args, **kwargs)
            return (None if target is None else torch.device(target)), dtype
        except RuntimeError:
            if not (args and isinstance(args[-1], bool)):  # a positional copy (or non_blocking) flag
                raise
            args = args[:-1]


def _to(tensor, *args, **kwargs):
    """`Tensor.to`: a move to the simulated accelerator (`torch.zeros(1).to("cuda")`, to check it works) is a move to
    the meta device, as a factory's tensor made there is (`_made_on_meta`). An Apple GPU refuses float64 there, and
    so on a stand-in (`x.to(ref.device)`, `ref.to(torch.float64)`)."""
    target, dtype = target_of_to(args, kwargs)
    if _on_the_accelerator(target):
        return _refuse_float64(_REAL_TO(tensor, device="meta", dtype=dtype or torch._C.TensorBase.dtype.__get__(tensor),
                                        copy=kwargs.get("copy", False)))
    return _refuse_float64(_REAL_TO(tensor, *args, **kwargs))


def _double(tensor, *args, **kwargs):
    """`Tensor.double`, as `_to` to float64."""
    return _refuse_float64(_REAL_DOUBLE(tensor, *args, **kwargs))


def _cuda(tensor, device=None, non_blocking=False, memory_format=torch.preserve_format):
    """`Tensor.cuda()`, as `_to` moves it."""
    device = torch.device("cuda", device) if isinstance(device, int) else torch.device(device or "cuda")
    if _on_the_accelerator(device):
        return _to(tensor, device)
    return torch._C.TensorBase.cuda(tensor, device, non_blocking, memory_format=memory_format)


def _pin_memory(tensor, *args, **kwargs):
    """`Tensor.pin_memory()` (lesson 07's `.pin_memory().to(device, non_blocking=True)`) on the simulated machine,
    whatever the grader's: a copy where it has an accelerator, as the page-locked one would be, its values the same;
    PyTorch's own refusal where it has none, as on a laptop. Every simulation patches it, the students' machine's
    too: a GPU grader's real pin_memory, or one simulated around the whole verdict, gave an answer that pins on
    every machine the points a grader without a GPU refused (attacks-machines.toml,
    pinned-memory-works-only-on-a-grader-with-a-gpu)."""
    if not _SIMULATED:  # kept by a cell and called after the simulation: PyTorch's own
        return torch._C.TensorBase.pin_memory(tensor, *args, **kwargs)
    if not _SIMULATED[-1][0]:
        raise RuntimeError("Cannot access accelerator device when none is available.")
    pinned = torch._C.TensorBase.clone(tensor)
    _PINNED[pinned] = True  # a non-blocking copy into it is in flight (autograder/probes.py)
    return pinned


def _drawn_on_meta(real):
    """`real`, a random fill in place (`normal_`, and so most of `torch.nn.init`) or a draw from a tensor
    (`torch.bernoulli`, `torch.multinomial`), where it draws with a generator of another device (a stand-in with a
    CPU generator, a CPU tensor with one made on the simulated accelerator): refused, as PyTorch refuses it."""
    try:
        signature = inspect.signature(real)  # torch.nn.init's, whose generator may come by position
    except (TypeError, ValueError):  # PyTorch's own: keyword only
        signature = None

    @functools.wraps(real)
    def draw(tensor, *args, **kwargs):
        if isinstance(tensor, torch.Tensor):
            generator = kwargs.get("generator")
            with contextlib.suppress(TypeError):  # the call's own error, raised by `real`
                generator = signature.bind(tensor, *args, **kwargs).arguments.get("generator") if signature else generator
            _refuse_generator(generator, _drawn_on(tensor))
        return real(tensor, *args, **kwargs)

    return draw


# and those of torch.nn.init that skip a meta tensor before they draw: the one they call (`trunc_normal_`'s, so a
# name the student bound before the simulation is caught too), or their own
_DRAWS = [*(f"torch.Tensor.{name}" for name in ("normal_", "uniform_", "random_", "bernoulli_", "exponential_",
                                                "geometric_", "log_normal_", "cauchy_", "bernoulli", "multinomial")),
          "torch.bernoulli", "torch.multinomial", "torch.poisson",
          "torch.nn.init._no_grad_trunc_normal_", "torch.nn.init.orthogonal_", "torch.nn.init.sparse_"]
_REAL_TO = torch.Tensor.to
_REAL_DOUBLE = torch.Tensor.double


_REAL_RESTORE = torch.serialization.default_restore_location


def _restore_location(storage, location):
    """torch.load's step that puts each storage where it is mapped (`map_location="cuda"`, a checkpoint saved on a
    GPU loaded without one): on the simulated accelerator, made on meta, as a tensor made there is (PyTorch's own asked
    the CUDA driver, or refused a storage for an Apple GPU, on a grader without them)."""
    if _on_the_accelerator(location):
        return torch.UntypedStorage(storage.nbytes(), device="meta")
    return _REAL_RESTORE(storage, location)


def _device_context(self, function, types, args=(), kwargs=None):
    """PyTorch's device context (`with torch.device("cuda"):`, `torch.set_default_device("cuda")`), which gives a
    factory called without a device its own: on the simulated accelerator, the factory as the simulation makes it
    there (`_made_on_meta`; PyTorch's own, which the context calls, asked the CUDA driver on a grader without one)."""
    kwargs = kwargs or {}
    if function in _device_constructors() and kwargs.get("device") is None:
        kwargs["device"] = self.device
    return _made_on_meta(function)(*args, **kwargs)


# what an accelerator's simulation patches besides its answers (no simulation of a machine without one does)
_ON_AN_ACCELERATOR = {**{target: _made_on_meta(pkgutil.resolve_name(target)) for target in _FACTORIES},
                      **{target: _drawn_on_meta(pkgutil.resolve_name(target)) for target in _DRAWS},
                      "torch.Tensor.double": _double,
                      "torch.Tensor.to": _to, "torch.Tensor.cuda": _cuda,
                      "torch.utils._device.DeviceContext.__torch_function__": _device_context,
                      "torch.serialization.default_restore_location": _restore_location}
# the real one (functools.lru_cache: what it answered before is not the machine's)
_MPS_IS_AVAILABLE = torch.backends.mps.is_available


class _AskedVersion(types.ModuleType):
    """`torch.version`, whose `cuda` a simulation sets: reading it asks about the machine, as calling
    `torch.backends.cuda.is_built()` does (`CUDA_BUILD = torch.version.cuda is not None` in a cell of its own
    makes that cell the machine's: `questions`)."""

    def __getattribute__(self, name):
        if name == "cuda" and _SIMULATED:
            _QUESTIONS[0] += 1
        return super().__getattribute__(name)


torch.version.__class__ = _AskedVersion


class _AskedSystem(types.ModuleType):
    """`sys` while a machine is simulated, whose `platform` the simulation sets ("darwin" where PyTorch is built for
    an Apple GPU, "linux" elsewhere, as `platform.system()` answers): reading it asks about the machine, so that a
    cell that read it (`ON_MACOS = sys.platform == "darwin"`) runs again on every machine; the libraries' own reads
    do not ask (`_LIBRARIES`: a cell's first import, a `%%time` cell, a plot would run again). A plain str all
    along: a student's checkpoint may keep it. Only for the simulation's time: every `sys.` read costs more."""

    def __getattribute__(self, name):
        if name == "platform" and _SIMULATED and not sys._getframe(1).f_code.co_filename.startswith(_LIBRARIES):
            _QUESTIONS[0] += 1
        return super().__getattribute__(name)


# where the code that reads sys.platform for itself lives, not the student's: Python's frozen import system, the
# standard library, the installed packages (IPython's %time and !cmd, matplotlib, PyTorch's first save and step)
_LIBRARIES = ("<frozen", *sorted({os.path.join(prefix, "") for prefix in
                                  (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}),
              os.path.join(os.path.dirname(os.path.abspath(__file__)), ""))


def _resolved(path):
    """The object at dotted `path` ("torch.Tensor"), found as `mock.patch(path + ".name")` finds it
    (`pkgutil.resolve_name`: a module imported under that name, else an attribute of what comes before), without
    its tries to import what is no module ("torch.Tensor"): each asked every folder on `sys.path` and the verdict's
    finder of read-only modules, for each of about 130 targets, each time a machine is simulated (several times a
    call). Entering a simulated GPU took 2.0 ms, now 0.55 ms; a1's solution's verdict 2.15 s, now 1.55 s."""
    parts = path.split(".")
    found = importlib.import_module(parts[0])
    for index in range(1, len(parts)):
        name = ".".join(parts[:index + 1])
        if name in sys.modules:
            found = sys.modules[name]
        else:
            try:
                found = getattr(found, parts[index])
            except AttributeError:
                found = importlib.import_module(name)
    return found


@contextmanager
def simulated_accelerator(kind, built=None):
    """Inside, `kind` ("cuda", "mps" or None for none) is the machine's only usable accelerator, and
    `built` (default: `kind`) the accelerator PyTorch was compiled for."""
    built = kind if built is None else built
    if kind not in ACCELERATORS or built not in ACCELERATORS or (kind and built != kind):
        raise ValueError(f"kind and built must be one of {ACCELERATORS}, and equal when kind is set, "
                         f"not {kind!r} and {built!r}")
    # imported as the real machine is: its import asks whether PyTorch was built for CUDA and then imports what only
    # that build has, so under a simulated CUDA build of the CPU build it fails, or stays half imported for the
    # call that needs it next (a GPU's stand-in's first forward pass, probes.meta_standing_for)
    importlib.import_module("torch._dynamo")
    with ExitStack() as stack:
        for target, replacement in [*_REPLACEMENTS.items(), ("torch.Tensor.pin_memory", _pin_memory),
                                    ("torch.Generator", _Generator),
                                    *(_ON_AN_ACCELERATOR.items() if kind else ())]:
            owner, attribute = target.rsplit(".", 1)
            stack.enter_context(mock.patch.object(_resolved(owner), attribute, replacement, create=True))
        stack.enter_context(mock.patch.object(torch._C, "_has_cuda", built == "cuda", create=True))
        stack.enter_context(mock.patch.object(torch._C, "_has_mps", built == "mps", create=True))
        stack.enter_context(mock.patch.object(torch.version, "cuda", "13.0" if built == "cuda" else None))
        stack.enter_context(mock.patch.object(sys, "platform", "darwin" if built == "mps" else "linux"))
        stack.callback(setattr, sys, "__class__", sys.__class__)
        sys.__class__ = _AskedSystem
        _SIMULATED.append((kind, built))
        stack.callback(_SIMULATED.pop)
        _MPS_IS_AVAILABLE.cache_clear()
        stack.callback(_MPS_IS_AVAILABLE.cache_clear)
        yield


def replacement(target):
    """What a simulation of a machine with an accelerator puts at `target` for its time ("torch.Tensor.to"), or None:
    autograder.integrity does not take it for tampering."""
    return _ON_AN_ACCELERATOR.get(target) if _SIMULATED and _SIMULATED[-1][0] else None


@contextmanager
def standing_for(device):
    """Inside, the meta device stands for `device` (autograder/probes.py: meta_standing_for): a tensor made or moved
    there is made on meta, one more stand-in, and one made or moved to another device of its kind is not."""
    _STOOD_FOR.append(torch.device(device))
    try:
        yield
    finally:
        _STOOD_FOR.pop()


def simulated_now(inside=0) -> tuple | None:
    """The machine simulated now, (accelerator, build) of the innermost simulation; None outside any, or
    where no simulation was entered inside the `inside` outermost ones."""
    return _SIMULATED[-1] if len(_SIMULATED) > inside else None


def questions() -> int:
    """How many questions (`torch.cuda.is_available()`, ...) simulated machines have answered so far: code
    that asked none did not depend on the machine."""
    return _QUESTIONS[0]


def simulations() -> int:
    """How many simulations are entered now (a `simulated_now` from inside them sees only later ones)."""
    return len(_SIMULATED)


@contextmanager
def simulated_machine(machine: Machine):
    with simulated_accelerator(machine.present, machine.built):
        yield
