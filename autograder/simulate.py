"""Pretend an accelerator is (or is not) available, through every API a correct answer may ask.

Only availability is simulated: no tensor is ever created on the pretended device.
"""
from contextlib import ExitStack, contextmanager
from unittest import mock

import torch

ACCELERATORS = (None, "cuda", "mps")


@contextmanager
def simulated_accelerator(kind):
    """Inside, `kind` ("cuda", "mps" or None for none) is the machine's only accelerator."""
    if kind not in ACCELERATORS:
        raise ValueError(f"kind must be one of {ACCELERATORS}, not {kind!r}")
    accelerator = torch.device(kind) if kind else None
    count = 1 if kind else 0
    patches = {
        "torch.cuda.is_available": lambda: kind == "cuda",
        "torch.cuda.device_count": lambda: int(kind == "cuda"),
        "torch.cuda.current_device": lambda: 0,
        "torch.backends.mps.is_available": lambda: kind == "mps",
        "torch.backends.mps.is_built": lambda: kind == "mps",
        "torch.accelerator.is_available": lambda: kind is not None,
        "torch.accelerator.device_count": lambda: count,
        "torch.accelerator.current_accelerator": lambda check_available=False: accelerator,
        "torch.accelerator.current_device_index": lambda: 0,
    }
    with ExitStack() as stack:
        for target, replacement in patches.items():
            stack.enter_context(mock.patch(target, replacement))
        yield
