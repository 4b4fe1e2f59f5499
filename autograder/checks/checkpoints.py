"""Checks of checkpoints across devices and ranks: where `map_location` sends each storage, the
rank-0 checkpoint, and loading on a rank, all without a GPU.
"""
from collections.abc import Mapping
from os.path import exists as _exists  # bound once: a submission that replaces os.path.exists fools nothing

import torch

from ..devices import has_data
from ..messages import text
from ..probes import restored_locations, saved_as_if_from
from .core import _device_of, _dtype_of, _fail, _name
from .tensors import assert_dtype, assert_values


def assert_map_location(map_location, rank, world_size, folder, what):
    """A dict that sends tensors saved from each of "cuda:0" … "cuda:<world_size-1>" to "cuda:<rank>",
    and leaves tensors saved from the CPU on the CPU: checked by loading checkpoints saved as if from there."""
    __tracebackhide__ = True
    import pathlib

    if not isinstance(map_location, dict):
        _fail("map_not_dict", what=what, found=f"{_name(map_location)} {map_location!r}")
    for saved in [f"cuda:{index}" for index in range(world_size)] + ["cpu"]:
        path = pathlib.Path(folder) / f"saved_from_{saved.replace(':', '_')}.pt"
        with saved_as_if_from(saved):
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
    refused = False
    try:
        saved = torch.load(path, weights_only=True)
    except Exception:  # noqa: BLE001: a pickled module object is refused, and never unpickled here
        refused = True
    if refused:  # what the file pickles, named from its globals without running them
        found = _pickled_type(path)
        if found is None:  # nothing to name: a pickle weights-only loading cannot read (`pickle_protocol=4`)
            _fail("checkpoint_unreadable", what=what)
        _fail("checkpoint_not_state_dict", what=what, found=found)
    if not isinstance(saved, Mapping) or not all(isinstance(v, torch.Tensor) for v in saved.values()):
        _fail("checkpoint_not_state_dict", what=what, found=_name(saved))
    if set(saved) != set(expected):  # the instructions ask for the state dict, not for its order
        _fail("checkpoint_keys", what=what, expected=list(expected), found=list(saved))
    for key, tensor in expected.items():
        assert_dtype(saved[key], _dtype_of(tensor), f"{what}: {key}")
        if has_data(_device_of(tensor)) and not has_data(_device_of(saved[key])):
            # assert_values skips a tensor with no values, as a simulated GPU's stand-in is; one read from a file is
            # not: a checkpoint of meta tensors (the right keys, shapes and dtypes, no weights) kept this test's points
            _fail("no_values", what=f"{what}: {key}")
        assert_values(saved[key], tensor, f"{what}: {key}")


def _pickled_type(path) -> str | None:
    """The class of the object a checkpoint pickles (`Sequential` for a whole model), read from its
    pickle's opcodes without unpickling it: the first global that weights-only loading refuses; None when
    it refuses none, or cannot read the file."""
    import pickletools
    import zipfile

    try:
        refused = set(torch.serialization.get_unsafe_globals_in_checkpoint(path))
        with zipfile.ZipFile(path) as archive:
            data = archive.read(next(n for n in archive.namelist() if n.endswith("/data.pkl")))
        for opcode, argument, _ in pickletools.genops(data):
            if opcode.name == "GLOBAL" and argument.replace(" ", ".") in refused:
                return argument.rpartition(" ")[2]
        return sorted(refused)[0].rpartition(".")[2] if refused else None
    except Exception:  # noqa: BLE001: not a checkpoint torch.save wrote, or a pickle protocol it cannot read
        return None


def assert_loads_on_rank(path, map_location, rank, world_size, what):
    """Every storage of the checkpoint at `path` would load onto "cuda:<rank>" with this `map_location`."""
    __tracebackhide__ = True
    places = restored_locations(path, map_location)
    wrong = [place for place in places if place != f"cuda:{rank}"]
    if wrong:
        _fail("map_wrong_target", what=what, saved=text("saved_checkpoint"), found=repr(wrong[0]), rank=rank,
              last=world_size - 1)
