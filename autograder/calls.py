"""The judge's calls of the student's code, sent to the caller as requests (autograder/verdict.py).

The judge runs the whole test cell. Where a `checks.call` reaches the student's code (boundary.Judge), it
sends the caller a *request*: the function and what it is given, pickled, and the state around the call: the
machines simulated, grad mode and autocast, the transfer counters and probes active, the random number
generators. The caller, which waits on nothing else, makes the call and answers with its report
(boundary.Recorder). So no text of the test cell is ever in a process that runs the student's code: the
caller learns what the test gives the student's functions, as a student's function in a kernel does, and
nothing else; a label (`what`) is never sent, a request and its report are numbered instead.

Objects cross once, and each side knows the other's by number (`boundary.Handles`). What the caller made (a result,
its parts) comes back by its number, so the student's own object is given again, hooks and all; what the
judge made is pickled the first time and known by its number afterwards, the judge's changes to it since
(a tensor's values and gradient, a module's mode and plain attributes) sent along (`changes`, `take`).

The judge pickles what it made itself: PyTorch's objects and the test cell's. A class the test cell defined
travels as a stand-in of the same name on its nearest base of PyTorch's, with its state (the student's code
reads its parts, not its code); a namedtuple as one of the same name and fields. Code of the test cell's own
(a function, a module with its own `forward`) never travels: `TestCellCode`, the instructor's error; such a
helper is shipped in autograder.probes. The caller unpickles with the full pickler what it reads: the judge
wrote it, and the caller is the student's process anyway; the judge reads the caller only as data
(boundary.read_frame).
"""
import contextlib
import io
import os
import pathlib
import pickle
import random
import struct
import tempfile
import types

import numpy
import torch
from torch import nn

from . import boundary
from .boundary import LostObject, TestCellCode

_LENGTH = struct.Struct("<Q")
# bound at import, in the verdict's parent, before any student code: a cell that wrapped `pickle.loads` took the
# judge's stale gradients out of every request (attacks-slicing.toml,
# pickle-loads-patched-in-a-cell-strips-the-judges-stale-gradients)
_LOADS, _UNPICKLER = pickle.loads, pickle.Unpickler
TEST_MODULE = "__main__"  # the judge's namespace (verdict.run): what a test cell's classes and functions name as their module


# In the judge

class _Pickler(pickle.Pickler):
    """The judge's objects as the caller rebuilds them: what the caller knows by number, the student's functions by
    name, the test cell's classes as stand-ins; every reference met is noted (`met`)."""

    def __init__(self, file, handles, students):
        super().__init__(file, protocol=5)
        self.handles, self.students, self.met = handles, students, []

    def persistent_id(self, value):
        if type(value) is str and value.startswith(TEMPORARY[0]):  # a path of the test's: the caller's own
            return ("path", value[len(TEMPORARY[0]):])
        if isinstance(value, (str, bytes, int, float, bool, type(None))):
            return None
        name = self.students.get(id(value))
        if name is not None:
            return ("student", name)
        reference = self.handles.reference(value)
        if reference is not None:
            self.met.append((reference, value))
        return reference

    def reducer_override(self, value):
        if isinstance(value, pathlib.PurePath) and not isinstance(value, type):  # its text whole, for persistent_id
            return type(value), (os.fspath(value),)
        kind = value if isinstance(value, type) else type(value)
        if not isinstance(value, type) and _rebuilt_kind(kind):  # a copy the judge made of an object the caller sent
            return self._rebuilt(value, kind)
        if not isinstance(value, type) and (_opaque_kind(kind) or self.handles.received.get(id(value)) is value):
            raise LostObject(kind.__name__)  # the caller sent it without a number, which a right caller never does
        if getattr(kind, "__module__", None) != TEST_MODULE and not (
                isinstance(value, types.FunctionType) and value.__module__ == TEST_MODULE):
            return NotImplemented
        if isinstance(value, (type, types.FunctionType)):
            raise TestCellCode(getattr(value, "__qualname__", "?"))
        if isinstance(value, tuple) and hasattr(kind, "_fields"):
            return named_tuple, (kind.__name__, tuple(kind._fields), tuple(value))
        if isinstance(value, nn.Module):
            own = [cls for cls in kind.__mro__ if cls.__module__ == TEST_MODULE]
            if any("forward" in vars(cls) for cls in own):
                raise TestCellCode(f"{kind.__qualname__}.forward")
            base = next(cls for cls in kind.__mro__ if cls.__module__ != TEST_MODULE)
            return stand_in, (kind.__name__, base), value.__getstate__()
        raise TestCellCode(kind.__qualname__)

    @staticmethod
    def _rebuilt(value, kind):
        """An object the judge made from what the caller sent, and copied or derived since (it has no number): as
        the caller would see a new one, a stand-in module on nn.Module, a namedtuple of its name and fields, a
        container of its base."""
        if isinstance(value, nn.Module):
            return stand_in, (kind.__name__, nn.Module), value.__getstate__()
        if isinstance(value, tuple) and hasattr(kind, "_fields"):
            return named_tuple, (kind.__name__, tuple(kind._fields), tuple(value))
        base = next(cls for cls in kind.__mro__ if cls in (list, tuple, dict))
        return base, (dict(value) if base is dict else list(value),)


def _rebuilt_kind(kind) -> bool:
    """Whether `kind` is one of the types the judge makes for what the caller sent (boundary: a stand-in module, a
    namedtuple or container subclass of the student's)."""
    return kind in boundary._STAND_IN_MODULES.values() or kind in boundary._NAMEDTUPLES.values() or any(
        kind in made.values() for made in boundary._SUBCLASSES.values())


def _opaque_kind(kind) -> bool:
    return kind in boundary._OPAQUE.values()


def request(asked, function, args, kwargs, then, known, handles, students) -> bytes:
    """The frame of the judge's call number `asked`: (1) what is around it, as plain data, and (2) the call itself. The
    objects the call gives that the caller does not know yet are numbered once sent (`known`: boundary.Known)."""
    call = io.BytesIO()
    new = [value for value in [*(v for v in known.objects if isinstance(v, torch.Tensor)), *known.held]
           if handles.reference(value) is None]
    numbers = [handles.last + handles.step * (i + 1) for i in range(len(new))]
    pickler = _Pickler(call, handles, students)
    pickler.dump((function, args, kwargs, then, list(zip(numbers, new))))
    for number, value in zip(numbers, new):
        handles.take(number, value)
    if numbers:
        handles.last = numbers[-1]
    changed = [(reference, changes(value)) for reference, value in dict(pickler.met).items()]
    changed += [(("handle", number), changes(value)) for number, value in zip(numbers, new)]
    around = pickle.dumps({"number": asked, "around": _around(), "changes": changed, "files": _files(args, kwargs)},
                          protocol=5)
    return b"".join([_LENGTH.pack(len(around)), around, _LENGTH.pack(len(call.getvalue())), call.getvalue()])


TEMPORARY = [os.path.join(tempfile.gettempdir(), "")]  # where the judge's temporary files are: none is the caller's


def _files(args, kwargs) -> list:
    """The files the test wrote at the paths the call is given (a checkpoint to load): [relative path, bytes]."""
    files = []
    for path in boundary._paths(args, kwargs):  # plain paths in this folder only: `/tmp/../…` named any file
        if path.startswith(TEMPORARY[0]) and os.path.isfile(path):
            with open(path, "rb") as file:
                files.append([path[len(TEMPORARY[0]):], file.read()])
    return files


def asker(send, handles, students):
    """The judge's `ask` (boundary.Judge): each call of the student's code as a request (`request`), sent with
    `send`; `students`: id of each stub → the student's name for it."""
    def ask(number, function, args, kwargs, then, known):
        with boundary._NO_DISPATCH(), boundary._NO_TORCH_FUNCTION():  # no counter sees the pickling
            frame = request(number, function, args, kwargs, then, known, handles, students)
        send(frame)
    return ask


def changes(value):
    """What the judge holds of an object the caller knows: a tensor's values and gradient, each submodule's mode,
    tensors and plain attributes (numbers, strings, tensors); None for any other object (an optimizer, a data set:
    sent as they were). A submodule the judge added or replaced since is not sent (no test does it)."""
    if isinstance(value, torch.Tensor):
        return _tensor_state(value)
    if isinstance(value, nn.Module):
        return [[path, module.training,
                 {name: _tensor_state(t) for name, t in [*module._parameters.items(), *module._buffers.items()]
                  if t is not None},
                 {name: _tensor_state(part) if isinstance(part, torch.Tensor) else part
                  for name, part in vars(module).items() if not name.startswith("_") and name != "training"
                  and (type(part) in (bool, int, float, str) or isinstance(part, torch.Tensor))}]
                for path, module in value.named_modules()]
    return None


def _tensor_state(tensor):
    grad = tensor.grad if tensor.is_leaf else None
    return [tensor.detach().clone(), tensor.requires_grad, None if grad is None else grad.detach().clone()]


def _around() -> dict:
    """What the judge is inside of now, that the student's call must be inside of too."""
    from . import simulate
    from .checks import core
    from .probes import AUTOCAST_DEVICE_TYPES, copies_skipped

    return {"simulated": list(simulate._SIMULATED[_outside[0]:]),
            "grad": torch.is_grad_enabled(),
            "autocast": [[kind, str(torch.get_autocast_dtype(kind)).removeprefix("torch.")]
                         for kind in AUTOCAST_DEVICE_TYPES if torch.is_autocast_enabled(kind)],
            "counters": len(boundary._counters()),
            "copies_skipped": copies_skipped(),
            "values_on_meta": core._VALUES_ON_META[-1],
            "random": [torch.get_rng_state(), random.getstate(), numpy.random.get_state()]}


_outside = [0]  # the simulations entered around the whole verdict (a grader's machine): not the test's


def outside_now():
    """Called where the verdict starts a test: the machines simulated so far are not the test's to send."""
    from . import simulate

    _outside[0] = simulate.simulations()


# In the caller

def read_request(fd):
    """The judge's next request: (its plain part, the pickled call), or None when the judge has ended."""
    parts = []
    for _ in range(2):
        header = boundary.read_exactly(fd, _LENGTH.size)
        data = boundary.read_exactly(fd, _LENGTH.unpack(header)[0]) if header is not None else None
        if data is None:
            return None
        parts.append(data)
    return _LOADS(parts[0]), parts[1]


class _Unpickler(_UNPICKLER):
    def __init__(self, file, handles, scope):
        super().__init__(file)
        self.handles, self.scope = handles, scope

    def persistent_load(self, reference):
        if reference[0] == "student":
            return self.scope[reference[1]]
        if reference[0] == "path":
            return _here(reference[1])
        return self.handles.find(reference)


def _here(relative) -> str:
    """Where a path of the judge's temporary folder is in the caller: in a folder of its own, which it may write,
    the folder around it made."""
    path = os.path.join(tempfile.gettempdir(), "judged", relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return path


def the_call(plain, data, handles, scope):
    """The request's call as this side makes it: (function, args, kwargs, then), what the judge changed taken."""
    function, args, kwargs, then, new = _Unpickler(io.BytesIO(data), handles, scope).load()
    for number, value in new:
        handles.take(number, value)
    for reference, state in plain["changes"]:
        take(handles.find(reference), state)
    for relative, data in plain["files"]:
        with open(_here(relative), "wb") as file:
            file.write(data)
    return function, args, kwargs, then


def take(value, state):
    """Write the judge's `changes` into this side's object, where they differ: its identity, and everything the
    judge does not see (the student's hooks, attributes, caches), stay."""
    if state is None:
        return
    if isinstance(value, torch.Tensor):
        _take_tensor(value, state)
        return
    for path, training, tensors, attributes in state:
        try:
            module = value.get_submodule(path)
        except AttributeError:
            continue
        module.training = training
        for name, tensor_state in tensors.items():
            tensor = module._parameters.get(name, module._buffers.get(name))
            if isinstance(tensor, torch.Tensor):
                _take_tensor(tensor, tensor_state)
        for name, part in attributes.items():
            if name not in vars(module) and hasattr(type(module), name):  # a property of the caller's class: its own
                continue
            held = vars(module).get(name, _MISSING)
            if isinstance(part, list) and isinstance(held, torch.Tensor):  # a tensor attribute: changed in place
                _take_tensor(held, part)
            elif isinstance(part, list):
                vars(module)[name] = part[0].requires_grad_(part[1] and part[0].is_floating_point())
            elif held is _MISSING or type(held) is not type(part) or held != part:
                vars(module)[name] = part


_MISSING = object()


def _take_tensor(tensor, state):
    """PyTorch's C methods alone (boundary.SET_GRAD, ...): a cell of the student's may have replaced Tensor's."""
    payload, requires_grad, grad = state
    if boundary._differs(tensor, payload):
        boundary._replace_data(tensor, payload)
    leaf = torch._C.TensorBase.is_leaf.__get__(tensor)
    if leaf and torch._C.TensorBase.requires_grad.__get__(tensor) != requires_grad and payload.is_floating_point():
        boundary.REQUIRES_GRAD(tensor, requires_grad)
    held = boundary.GET_GRAD(tensor)
    if leaf and ((grad is None) != (held is None) or grad is not None and boundary._differs(held, grad)):
        boundary.SET_GRAD(tensor, grad)


@contextlib.contextmanager
def around(plain):
    """Inside what the judge was inside of at its call (`_around`)."""
    from .checks import core
    from .probes import TransferCounter, meta_copies_skipped
    from .simulate import simulated_accelerator

    state = plain["around"]
    with contextlib.ExitStack() as stack:
        for kind, built in state["simulated"]:
            stack.enter_context(simulated_accelerator(kind, built))
        stack.enter_context(torch.set_grad_enabled(state["grad"]))
        for kind, dtype in state["autocast"]:
            stack.enter_context(torch.autocast(kind, dtype=getattr(torch, dtype)))
        for _ in range(state["counters"]):
            stack.enter_context(TransferCounter())
        if state["copies_skipped"]:
            stack.enter_context(meta_copies_skipped())
        if not state["values_on_meta"]:
            stack.enter_context(core.host_reads_fail_on_meta())
        yield


def _draw_as_the_judge(plain):
    """The random number generators as the judge's were at its call: the student's function draws what it would
    have drawn there in the kernel (set after the call is rebuilt, which may run the student's cells again)."""
    generator, python, legacy = plain["around"]["random"]
    torch.set_rng_state(generator)
    random.setstate(python)
    numpy.random.set_state(legacy)


_STAND_INS = {}


def stand_in(name, base):
    """A module of the test cell's class `name`, on its nearest base of PyTorch's (`base`): its parts are the
    test's, its code PyTorch's."""
    if (name, base) not in _STAND_INS:
        _STAND_INS[name, base] = type(name, (base,), {"__module__": "autograder.test"})
    kind = _STAND_INS[name, base]
    return kind.__new__(kind)


_NAMED_TUPLES = {}


def named_tuple(name, fields, values):
    from collections import namedtuple

    if (name, fields) not in _NAMED_TUPLES:
        _NAMED_TUPLES[name, fields] = namedtuple(name, fields)
    return _NAMED_TUPLES[name, fields](*values)


def sender(fd):
    """The judge's `ask`: a request written whole on `fd`; none when the caller has ended (its report is missing)."""
    def send(frame):
        view = memoryview(frame)
        with contextlib.suppress(OSError):
            while view:
                view = view[os.write(fd, view):]
    return send


def answer(asked, recorder, handles, scope, run):
    """The caller's answer to one request (`read_request`): the call made inside what the judge was inside of,
    its report sent by `recorder` (boundary.Recorder), a failed call's too."""
    plain, data = asked
    with around(plain):
        try:
            function, args, kwargs, then = the_call(plain, data, handles, scope)
        except Exception:  # noqa: BLE001: the student's program broke what rebuilds the call
            recorder.unreadable(plain["number"])
            return
        _draw_as_the_judge(plain)
        try:
            recorder.call(plain["number"], function, args, kwargs, then, run)
        except AssertionError:  # sent to the judge as the call's failure
            pass
