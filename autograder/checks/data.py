"""Checks of data and its movement: rows of a data set, counted transfers, DataLoader arguments, NumPy
arrays, and each rank's samples, shards, epochs and seeds.
"""
import collections
import contextlib
import random
import zlib

import numpy
import torch

from ..probes import global_rng_kept, random_state_kept
from .core import call, _device_of, _fail, _name
from .tensors import assert_tensor

# NumPy's functions and types, bound once: a submission that replaces them fools nothing
_ndarray, _array_equal, _abs = numpy.ndarray, numpy.array_equal, numpy.abs


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
    every tensor on a device came there (`result` too): none was made while the counter was switched off.
    A `result` on a device came there whole: no fewer bytes crossed than it holds (a stack sent as float16
    and converted back there has half its bytes, and every value rounded)."""
    __tracebackhide__ = True
    if counter.unseen or (result is not None and not counter.saw(result)):
        _fail("transfer_unseen", what=what)
    if counter.transfers != expected:
        _fail("transfer_count", what=what, found=counter.transfers)
    if isinstance(result, torch.Tensor) and _device_of(result).type != "cpu" and expected:
        held = result.numel() * result.element_size()
        if counter.bytes < held:
            _fail("transfer_narrowed", what=what, found=counter.bytes, expected=held)


def assert_made_on_device(counter, result, what):
    """A `probes.count_transfers()` counter saw `result` made, and no copy between devices: `result` was
    created on its device, not made on the CPU and moved there. (Inputs made before counting are fine.)"""
    __tracebackhide__ = True
    if not counter.saw(result):
        _fail("transfer_unseen", what=what)
    if counter.transfers:
        _fail("created_then_moved", what=what, device=result.device, found=counter.transfers)


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


def sampled_shard(what, size, make_sampler, *args):
    """The indices (`sampled_indices`) of the sampler `make_sampler(*args)` returns, where neither that call
    nor iterating the sampler may change the global random number generator (`assert_global_rng_kept`).
    Both run with global generators of their own, as each rank of a real job is a process of its own."""
    __tracebackhide__ = True
    with _global_generators_of(args):
        sampler, kept = call(what, global_rng_kept, make_sampler, *args)
        assert_global_rng_kept(kept, what)
        indices, kept = call(what, global_rng_kept, list, sampler)
        assert_global_rng_kept(kept, what)
    return sampled_indices(indices, size, what)


@contextlib.contextmanager
def _global_generators_of(args):
    """PyTorch's, Python's and NumPy's global generators seeded from the call's integer arguments (rank, epoch,
    seed), as they were after. A sampler that shuffled with a global generator and put it back gave every rank
    the same order when all ranks drew from one state (attacks-slicing.toml,
    make-sampler-shuffles-with-pythons-global-generator-put-back); ranks of a real job draw from their own."""
    key = zlib.crc32(repr([value for value in args if type(value) is int]).encode())
    with random_state_kept():
        torch.default_generator.manual_seed(key)
        random.seed(key)
        numpy.random.seed(key)
        yield


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


def assert_shuffled(order, size, epoch, what):
    """The indices of one epoch, every rank's shard in turn, are not the data set's order turned, reversed or
    strided: no one step (modulo `size`) between neighbours makes a quarter of them. A shuffle of 40 or more
    indices has such a step with a chance under one in a million; a rotation has it almost everywhere."""
    __tracebackhide__ = True
    steps = [(int(after) - int(before)) % size for before, after in zip(order, order[1:])]
    if len(steps) < 3:
        return
    step, count = collections.Counter(steps).most_common(1)[0]
    if 4 * count >= len(steps):
        _fail("not_shuffled", what=what, epoch=epoch, step=step, size=size, count=count, steps=len(steps))


def assert_same_shard(first, second, rank, what):
    """Two calls with the same arguments gave rank `rank` the same indices in the same order."""
    __tracebackhide__ = True
    if list(first) != list(second):
        _fail("shard_not_repeatable", what=what, rank=rank)


def assert_global_rng_kept(kept, what):
    """`kept` (probes.global_rng_kept): the call left the global random number generators (PyTorch's, Python's,
    NumPy's) as they were."""
    __tracebackhide__ = True
    if kept is not True:
        _fail("global_rng_changed", what=what)


def assert_seeds_differ(first, second, seeds, what):
    """The shards drawn with two different seeds differ."""
    __tracebackhide__ = True
    if list(first) == list(second):
        _fail("shard_ignores_seed", what=what, first=seeds[0], second=seeds[1])


OVERLAPPED_COPY = ["non-blocking copy", "work", "synchronize"]


def assert_overlapped_copy(events, what):
    """`events` (autograder.probes.HostCopyStandIn): one non-blocking copy to the host, then the CPU work,
    then the wait before the result is read."""
    __tracebackhide__ = True
    if events == OVERLAPPED_COPY:
        return
    found = " → ".join(events) or "—"
    if "non-blocking copy" in events and "synchronize" not in events:
        _fail("practice_copy_not_awaited", what=what, found=found)
    _fail("practice_copy_overlap", what=what, found=found, expected=" → ".join(OVERLAPPED_COPY))
