"""Pretend a machine has (or lacks) an accelerator, through every API a correct answer may ask.

What a machine *has* and what its PyTorch was *built for* differ on most students' laptops: PyPI's
default Linux wheel is the CUDA build, and on a machine without an NVIDIA GPU it reports CUDA as its
accelerator (`torch.accelerator.current_accelerator()`) while CUDA is not available. Only availability
is simulated: no tensor is ever created on the pretended device.
"""
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from unittest import mock

import torch

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


# The four cases that matter: the CPU build; the CUDA build on a machine without a GPU (PyPI's default
# wheel on most laptops); a CUDA GPU; an Apple GPU.
MACHINES = (Machine(None, None), Machine(None, "cuda"), Machine("cuda", "cuda"), Machine("mps", "mps"))


# the real one (a simulation replaces it, and one simulation may run inside another)
_MPS_IS_AVAILABLE = torch.backends.mps.is_available


@contextmanager
def simulated_accelerator(kind, built=None):
    """Inside, `kind` ("cuda", "mps" or None for none) is the machine's only usable accelerator, and
    `built` (default: `kind`) the accelerator PyTorch was compiled for."""
    built = kind if built is None else built
    if kind not in ACCELERATORS or built not in ACCELERATORS or (kind and built != kind):
        raise ValueError(f"kind and built must be one of {ACCELERATORS}, and equal when kind is set, "
                         f"not {kind!r} and {built!r}")

    def current_accelerator(check_available=False):
        # torch 2.13: the compile-time accelerator, or None with check_available=True when it is not usable
        if built is None or (check_available and kind is None):
            return None
        return torch.device(built)

    count = 1 if kind else 0
    patches = {
        "torch.cuda.is_available": lambda: kind == "cuda",
        "torch.cuda.device_count": lambda: int(kind == "cuda"),
        "torch.cuda.current_device": lambda: 0,
        "torch.backends.cuda.is_built": lambda: built == "cuda",
        "torch.backends.mps.is_available": lambda: kind == "mps",
        "torch.backends.mps.is_built": lambda: built == "mps",
        "torch.accelerator.is_available": lambda: kind is not None,
        "torch.accelerator.device_count": lambda: count,
        "torch.accelerator.current_accelerator": current_accelerator,
        "torch.accelerator.current_device_index": lambda: 0,
    }
    # What the real functions read in turn: a function object kept from before the simulation (a student's
    # module-level table holding `torch.cuda.is_available`) sees the simulated machine too.
    internals = {
        "torch.cuda._is_compiled": lambda: built == "cuda",
        "torch._C._cuda_getDeviceCount": lambda: count if kind == "cuda" else 0,
        "torch._C._mps_is_available": lambda: kind == "mps",
        "torch._C._accelerator_getAccelerator": lambda: torch.device(built) if built else None,
        "torch._C._has_cuda": built == "cuda",
        "torch._C._has_mps": built == "mps",
    }
    cached = _MPS_IS_AVAILABLE  # functools.lru_cache: what it answered before is not the machine's
    with ExitStack() as stack:
        for target, replacement in patches.items():
            stack.enter_context(mock.patch(target, replacement))
        for target, replacement in internals.items():
            stack.enter_context(mock.patch(target, replacement, create=True))
        stack.enter_context(mock.patch.object(torch.version, "cuda", "13.0" if built == "cuda" else None))
        cached.cache_clear()
        stack.callback(cached.cache_clear)
        yield


@contextmanager
def simulated_machine(machine: Machine):
    with simulated_accelerator(machine.present, machine.built):
        yield
