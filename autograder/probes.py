"""Instruments the graders use to see what an answer does, not only what it returns."""
from contextlib import contextmanager
from unittest import mock

import torch
import torch.serialization
from torch.utils._python_dispatch import TorchDispatchMode

COPY_OPS = {torch.ops.aten._to_copy.default, torch.ops.aten.copy_.default}


class TransferCounter(TorchDispatchMode):
    """Counts copies between devices (`.to`, `.cuda()`, `out[i] = t`, …) at the ATen level."""

    def __init__(self):
        super().__init__()
        self.transfers = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if func in COPY_OPS:
            source = args[1] if func is torch.ops.aten.copy_.default else args[0]
            target = args[0] if func is torch.ops.aten.copy_.default else result
            if source.device != target.device:
                self.transfers += 1
        return result


@contextmanager
def count_transfers():
    """`with count_transfers() as counter: ...` then `counter.transfers`."""
    with TransferCounter() as counter:
        yield counter


def save_as_if_from_cuda(obj, path):
    """`torch.save` `obj` with every storage tagged `cuda:0`, as if written on a GPU machine.

    Loading it on a machine without CUDA fails unless `map_location` is given: the situation of a
    student who received a checkpoint trained on a GPU. No GPU is needed to write it.
    """
    with mock.patch.object(torch.serialization, "location_tag", lambda storage: "cuda:0"):
        torch.save(obj, path)
