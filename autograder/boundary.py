"""A test cell, sealed: the student's functions run in one process, the checks decide in another.

In the verdict (autograder/verdict.py) every test cell has two processes:

* the *judge*, forked from the verdict's parent, which has run no student code, runs the whole cell, where
  the student's functions are stubs that are never called. Each `checks.call` that reaches the student's code
  is asked of the caller (autograder/calls.py: the function and what the test gives it, as data), and its
  result read back, rebuilt from data alone; every check of the cell runs on it. Only the judge's outcome is
  written to the grader. A call that failed in the caller is the judge's own diagnostic, made from its own
  label and the error's kind and text (`_reported`): no text the caller sends is shown as it is. A tensor
  argument changed in place fails the call (`ChangedArgument`);
* the *caller*, forked from the verdict's program process (the student's notebook as it ran), makes each
  call it is asked for with the student's namespace and sends what it returned, as data: tensors with their
  device, dtype, values and autograd state, devices, dtypes, numbers, strings and containers. It knows
  nothing of the test cell but what the test gives the student's functions.

So a function body can do anything in the caller (patch the checks, write a forged record, exit) and
still decide nothing: the judge reads its result as plain data, with an unpickler that builds no class
(`_DataOnly`), each tensor from its raw bytes, and rebuilds it from a closed set of kinds; an unreadable or missing
result fails the call. The caller's random number generators are the judge's at each call
(calls._draw_as_the_judge), and the judge's move on by a draw of their own after it (`_draws_on`), so that
what the student's code drew does not change the cell's later tensors.

What the judge cannot see it is told: whether a returned tensor is a leaf, requires grad, or is
computed from one of the call's arguments (the caller walks its autograd graph). Such a tensor is
rebuilt connected to the same arguments, with a backward that carries no gradient; a test that needs
the gradient itself asks for it with `checks.call(..., then=measure)`, which runs `measure(result,
*args)` in the caller right after the student's function (a function shipped in autograder.probes: no code
of the test's reaches the caller). These facts, and what a transfer counter saw (below), are measured in the
student's own process: a body written to lie about them can pass the checks that rest on them alone, in its
own test cell (README, "What a student's code can still misreport"); it cannot make a check of values,
devices or dtypes pass on data it did not return.

The arguments a student's function may change are mirrored too. After each call the caller sends the
state of every module among the arguments (each submodule's parameters with their gradients, buffers,
mode and plain data attributes), the data attributes of the other PyTorch objects there (an optimizer,
a GradScaler), a container argument it returned, and each file at an absolute path among the arguments
(a checkpoint it saved); the judge writes them into its own objects, which keep their identity, and at
its own paths. A module the call made comes back as a tree of PyTorch's classes and, for a class of the
student's, stand-ins named as the student's, with its state and the values of its properties. Every object a
result holds carries the caller's number for it (`encode`, `Handles`): a later call given the judge's
object gives the caller its own again. A transfer counter (probes.count_transfers) active around a call is
told what the caller's counter saw during it; an error the function raised is known by its text and the names
of its classes (`CallerError`).

Only a call that involves the student's code crosses: the student's function; or, among the function's
object (a module called, the object of a bound method) and the arguments, one of the student's functions,
an object the judge holds only as an opaque stand-in (`list(sampler)` on a student's sampler), a module
the student's code made, or a module that carries the student's code since a call (a hook, its own
`forward`). Any other call (`DataLoader(dataset, **kwargs)` on the kwargs a student returned) runs in the
judge as it is.
"""
import gc
import inspect
import io
import math
import os
import pickle
import re
import signal
import stat
import struct
import sys
import tempfile
import threading
from collections import OrderedDict, namedtuple
from collections.abc import Mapping, MutableMapping, MutableSequence

import numpy
import torch
from torch import nn
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

from .checks.core import GRAD_FN_NAME
from .checks.tensors import reaches
from . import integrity
from .devices import has_data
from .probes import TransferCounter, random_state_kept

FRAME_LIMIT = 64 * 2**20  # bytes of one call's result
CAUSE_LIMIT = 4000  # characters of the text of an error the student's function raised
LINE_LIMIT = 200  # characters of a source line of that error's traceback
FILE_LIMIT = 16 * 2**20  # bytes of a file the student's function wrote at a path it was given
DEPTH_LIMIT = 32  # nesting of a result's containers
NAME_LIMIT = 40  # characters of the name of a parameter or buffer of a module the call made
NODE_LIMIT = 100_000  # parts of one result
NAMES_LIMIT = 10_000  # names of the student's program the judge makes stubs for
_HEADER = struct.Struct("<Q")
# What sends a report: functions of C, bound when the boundary was imported, before any student cell ran, and
# none of which looks up a name that a cell can change as it runs. torch.save did, in torch.serialization's
# namespace, its registries, pickle and Tensor.__reduce_ex__: a cell that replaced any of them rewrote every
# report (attacks-machines.toml: torch-save-patched-in-a-cell-rewrites-every-callers-report,
# torch-saves-first-unwatched-step-rewrites-every-callers-report). So a report is plain data pickled by the C
# pickler, and each tensor of it raw bytes (`_wire`); the judge reads it back with an unpickler that builds no
# class (`_DataOnly`). What PyTorch's dispatcher runs inside an operation on a tensor (a kernel registered with
# torch.library) is the student's own process's, as in every caller (README, "What a student's code can still
# misreport").
_dumps, _write = pickle.dumps, os.write
_TENSOR = torch._C.TensorBase  # PyTorch's C type: its methods cannot be replaced (Tensor's can)
_TENSOR_DEVICE, _TENSOR_DTYPE, _TENSOR_LAYOUT = (_TENSOR.device.__get__, _TENSOR.dtype.__get__,
                                                  _TENSOR.layout.__get__)
_TENSOR_SIZE, _TENSOR_CPU, _TENSOR_TO_DENSE = _TENSOR.size, _TENSOR.cpu, _TENSOR.to_dense
# what writes the other side's state into a tensor (here and in calls.take): a cell that replaced `Tensor.grad`'s
# setter dropped the judge's stale gradients (attacks-slicing.toml,
# tensor-grad-setter-patched-in-a-cell-drops-the-judges-stale-gradients)
SET_DATA, SET_GRAD, REQUIRES_GRAD = _TENSOR.data.__set__, _TENSOR.grad.__set__, _TENSOR.requires_grad_
GET_GRAD = _TENSOR.grad.__get__
_TENSOR_RESOLVE_CONJ, _TENSOR_RESOLVE_NEG = _TENSOR.resolve_conj, _TENSOR.resolve_neg
_TENSOR_CLONE, _TENSOR_DETACH, _TENSOR_RESHAPE, _TENSOR_VIEW, _TENSOR_NUMPY = (_TENSOR.clone, _TENSOR.detach,
                                                                              _TENSOR.reshape, _TENSOR.view,
                                                                              _TENSOR.numpy)
_FROM_NUMPY, _FROM_BUFFER, _EMPTY = torch.from_numpy, torch.frombuffer, torch.empty
_OPEN, _IS_FILE = open, os.path.isfile  # what reads a file the call wrote (_file_state)
# a name as Python's own str: a class's name may be a str of the student's class, whose pickling runs its code
_STR = str.__str__


def _plain(text) -> str:
    return _STR(text) if isinstance(text, str) else "?"
_NDARRAY_TOBYTES = numpy.ndarray.tobytes
# PyTorch's own switches, of C, for what the boundary runs on tensors while a report is made or read: no mode and no
# `__torch_function__` of the student's sees it (a counter's, or one that runs code), and no Python of PyTorch's runs
# to enter them (torch.utils._python_dispatch._disable_current_modes did, and looked up helpers a cell could replace:
# attacks-machines.toml, the-mode-stack-helper-disable-current-modes-looks-up-rewrites-every-report)
_NO_DISPATCH, _NO_TORCH_FUNCTION = torch._C._DisableTorchDispatch, torch._C.DisableTorchFunction
# the dtypes a payload may have: what `_wire` sends, not PyTorch's quantized or bit-packed ones
_DTYPES = {str(dtype).removeprefix("torch."): dtype for dtype in vars(torch).values() if isinstance(dtype, torch.dtype)
           and not str(dtype).removeprefix("torch.").startswith(("q", "bits", "float4"))}
_GET_SIGNAL, _SET_SIGNAL, _RAISE_SIGNAL = signal.getsignal, signal.signal, signal.raise_signal
_EVERY_SIGNAL, _CALLABLE = signal.valid_signals(), callable
# what ends the student's watchers (_no_watchers), bound as the rest: a cell may replace sys.setprofile or gc.callbacks
_SET_PROFILE, _SET_TRACE = sys.setprofile, sys.settrace
_THREADS_SET_PROFILE, _THREADS_SET_TRACE = threading.setprofile, threading.settrace
_GC_CALLBACKS, _GC_DISABLE, _GC_ENABLE = gc.callbacks, gc.disable, gc.enable
_HELD = {}  # signal → the student's handler, set aside while a report is made (_no_watchers), back once it is sent
_ARRIVED = []  # the signals that came meanwhile, raised again then
_CONTAINERS = {"list": list, "tuple": tuple, "dict": dict, "OrderedDict": OrderedDict}
_CONSTANTS = (type(None), bool, int, float, str)
_NUMPY_SCALARS = {numpy.dtype(code).type for code in "?bhilqBefdFD"}  # the ones a tensor holds too


def _container_kind(kind) -> str | None:
    """Which of `_CONTAINERS` the judge rebuilds a container of type `kind` as: its own, or for a subclass
    (a `defaultdict`, a dict of the student's, a namedtuple) the nearest one it derives from, under its own
    name (`_container`), so that what `isinstance(result, dict)` says in the kernel it says in the judge."""
    if kind in _CONTAINERS.values():
        return kind.__name__
    return next((name for name, base in _CONTAINERS.items() if issubclass(kind, base)
                 and not (base is dict and issubclass(kind, OrderedDict))), None)


def _global_module_hooks() -> list:
    """The hooks PyTorch runs around every module's forward and backward (nn.modules.module.register_module_*)."""
    from torch.nn.modules import module

    return [module._global_forward_pre_hooks, module._global_forward_hooks, module._global_backward_pre_hooks,
            module._global_backward_hooks]


# what makes running a module run code of the student's, besides a class of the student's
_HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks", "_state_dict_hooks",
          "_state_dict_pre_hooks", "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks")


class _Side:
    """What the caller and the judge know alike: which modules carry the student's code.

    `carrying`: the modules among the arguments that carry the student's code (a hook, their own `forward`, a
    class of the student's) since a call that crossed: the caller saw it and told the judge, so both know the same."""

    def __init__(self, fd):
        self.fd = fd
        self.carrying = {}  # id → module

    def mark(self, known, carrying):
        """`carrying`: [held index, path] of each module that carries the student's code now."""
        modules = [known.held[index].get_submodule(str(path)) for index, path in carrying]
        for value in known.held:
            if isinstance(value, nn.Module):
                for module in value.modules():
                    self.carrying.pop(id(module), None)
        self.carrying.update((id(module), module) for module in modules)

    def mark_made(self, known, result):
        """A module the call made (not one of its arguments) carries the student's code, on both sides:
        in the judge it is rebuilt, a student's class as a stand-in whose forward never runs there."""
        for leaf in _leaves(result):
            if isinstance(leaf, nn.Module) and known.held_index(leaf) is None:
                self.carrying.update((id(module), module) for module in leaf.modules())


class Recorder(_Side):
    """In the caller: run the student's function the judge asked for (calls.py), then send its result to the judge.
    `what` is the request's number: the caller never learns the test's label."""

    def __init__(self, fd, handles=None):
        super().__init__(fd)
        self.sent = {}  # id → object sent as an opaque stand-in: the judge cannot run a call on it
        self.handles = handles  # Handles: what the judge knows by number

    def opaque(self, value) -> bool:
        return id(value) in self.sent and self.sent[id(value)] is value

    def call(self, what, function, args, kwargs, then, run):
        known = Known((_owner(function), args), kwargs, self.opaque)
        report = {"what": what}
        counters = _counters()
        try:
            with random_state_kept():  # the judge made no call: both sides draw on from the same state
                before = [counter.tally() for counter in counters]
                try:
                    integrity.verify(what)
                    try:  # checked here before and after, not also by `run` (a third of a caller's checks)
                        result = run(what, function, args, kwargs, then, verify=False)
                    finally:
                        _no_watchers()  # what the student's code set to watch this process ends before a report is made
                    integrity.verify(what)
                except AssertionError as failure:  # the call's diagnostic (not answered, raised, tampering, ...)
                    from .messages import typed_field

                    fields = getattr(failure, "course_fields", None) or {}
                    cause = failure.__cause__
                    kinds = [_STR(t.__name__) for t in type(cause).__mro__] if cause is not None else []
                    report["failed"] = {"key": _plain(getattr(failure, "course_key", "verdict_failed")),
                                        "fields": {_plain(k): typed_field(v) for k, v in fields.items()},
                                        "kinds": kinds,
                                        "cause": str(cause)[:CAUSE_LIMIT] if cause is not None else "",
                                        "lines": _traceback_lines(cause)}
                    self._send(report)
                    raise
                report["counters"] = [counter.since(tally, _tensors(result))
                                      for counter, tally in zip(counters, before)]
                with _NO_DISPATCH(), _NO_TORCH_FUNCTION():
                    payloads = Payloads(handles=self.handles)
                    report["result"] = encode(result, known, payloads, self.sent)
                    report["held"] = [held_state(value, known, payloads) for value in known.held]
                    report["files"] = [_file_state(path, payloads) for path in _paths(args, kwargs)]
                    report["payloads"] = list(payloads)
                    report["carrying"] = [[index, path] for index, value in enumerate(known.held)
                                          if isinstance(value, nn.Module)
                                          for path, module in value.named_modules() if self._carries_code(module)]
                    self.mark(known, report["carrying"])
                    self.mark_made(known, result)
            self._send(report)
        finally:
            _watchers_back()  # whatever ended the report (an error of encode's too), the student's watchers are back
        return result

    def unreadable(self, number):
        """The judge's request `number` could not be rebuilt here (the student's program changed what rebuilds
        it): the call fails, as one whose result the judge cannot read."""
        self._send({"what": number, "failed": {}})

    def send_names(self, names):
        """The first frame: the names the judge makes stubs for (autograder/verdict.py), and the global
        settings of PyTorch the student's cells left, which the judge takes (`torch_settings`)."""
        self._send({"names": list(names), "settings": torch_settings()})

    def _carries_code(self, module) -> bool:
        """Whether running `module` runs the student's code: its hooks, a `forward` of its own, a class of the
        student's (one made as the program ran and swapped in included: any class neither PyTorch's nor the
        course's), or a hook the student registered for every module (`register_module_forward_pre_hook`)."""
        kind = type(module).__module__ or ""
        return (any(getattr(module, hooks, None) for hooks in _HOOKS) or "forward" in vars(module)
                or not (kind == "torch" or kind.startswith(("torch.", "autograder.")))
                or any(_global_module_hooks()))

    def _send(self, report):
        try:
            if "payloads" in report:
                with _NO_DISPATCH(), _NO_TORCH_FUNCTION():
                    report = {**report, "payloads": [_wire(payload) for payload in report["payloads"]]}
            data = _dumps(report, protocol=5)
            _write(self.fd, _HEADER.pack(len(data)))
            view = memoryview(data)
            while view:
                view = view[_write(self.fd, view):]
        finally:
            _watchers_back()


def _wire(tensor) -> list:
    """A payload as the report carries it: [dtype, shape, device, its bytes (None on meta, which has none)], made
    with PyTorch's C methods alone (no `__torch_function__` of the student's runs). A sparse tensor goes dense: no
    check reads a layout."""
    with _NO_DISPATCH(), _NO_TORCH_FUNCTION():
        if _TENSOR_LAYOUT(tensor) is not torch.strided:
            tensor = _TENSOR_TO_DENSE(tensor)
        device, dtype, shape = _TENSOR_DEVICE(tensor), _TENSOR_DTYPE(tensor), list(_TENSOR_SIZE(tensor))
        if device.type == "meta":
            return [str(dtype).removeprefix("torch."), shape, "meta", None]
        resolved = _TENSOR_RESOLVE_NEG(_TENSOR_RESOLVE_CONJ(_TENSOR_CPU(tensor)))
        # a copy in row-major order: contiguous() keeps a one-element dimension's stride, which view() refuses
        flat = _TENSOR_RESHAPE(_TENSOR_CLONE(resolved, memory_format=torch.contiguous_format), (-1,))
        data = _NDARRAY_TOBYTES(_TENSOR_NUMPY(_TENSOR_VIEW(flat, torch.uint8)))
    return [str(dtype).removeprefix("torch."), shape, str(device), data]


def _unwired(item) -> torch.Tensor:
    """In the judge: the tensor `_wire` sent, checked as untrusted data (a known dtype, a shape of at most 64
    dimensions, exactly the bytes it needs)."""
    dtype_name, shape, device, data = item
    dtype = _DTYPES[dtype_name]
    if not (type(shape) is list and len(shape) <= 64 and all(type(size) is int and size >= 0 for size in shape)):
        raise ValueError("not a shape")
    if device == "meta":
        return torch.empty(shape, dtype=dtype, device="meta")
    if type(data) is not bytes or len(data) != math.prod(shape) * torch.empty((), dtype=dtype).element_size():
        raise ValueError("not the tensor's bytes")
    flat = torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else torch.empty(0, dtype=torch.uint8)
    tensor = flat.view(dtype).reshape(shape)
    return tensor if device == "cpu" else tensor.to(torch.device(device))


class _DataOnly(pickle.Unpickler):
    """Reads what the C pickler made of plain data (dicts, lists, str, bytes, numbers), and nothing else: it builds
    no class and calls no function, whatever the caller wrote (the recipe of Python's documentation for
    untrusted pickles, "Restricting Globals")."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"{module}.{name} is not data")


def _no_watchers():
    """End every profile and trace function the student's code set (`sys.setprofile` in a cell survives into
    each caller, and saw the report made: attacks-machines.toml,
    a-profile-hook-of-a-student-cell-rewrites-the-report-in-every-caller), and every garbage collector callback;
    the collector itself waits until the report is sent (a `__del__` of a cycle it collects runs the student's
    code), and so does every signal handler of the student's (an interval timer fires it between any two lines,
    in whichever thread the signal came: an-interval-timers-signal-handler-rewrites-the-report-after-the-call)."""
    _SET_PROFILE(None)
    _SET_TRACE(None)
    _THREADS_SET_PROFILE(None)
    _THREADS_SET_TRACE(None)
    _GC_CALLBACKS.clear()
    _GC_DISABLE()
    if not _HELD:
        for signum in _EVERY_SIGNAL:
            handler = _GET_SIGNAL(signum)
            if _CALLABLE(handler):
                _HELD[signum] = handler
                _SET_SIGNAL(signum, _arrived)


def _watchers_back():
    """Once the report is sent (or could not be made): the student's next call runs as in the kernel, its collector on
    and its signal handlers in place, and the signals that came meanwhile raised again (`_no_watchers`)."""
    _GC_ENABLE()
    held, arrived = list(_HELD.items()), list(dict.fromkeys(_ARRIVED))
    _HELD.clear()
    _ARRIVED.clear()
    for signum, handler in held:
        _SET_SIGNAL(signum, handler)
    for signum in arrived:
        _RAISE_SIGNAL(signum)


def _arrived(signum, frame):
    """The handler of every signal while a report is made: the student's own runs once the report is sent."""
    _ARRIVED.append(signum)


class TestCellCode(BaseException):
    """The test cell gives the student's code code of its own (a function, a class with its own `forward`): the
    caller runs no code of the test's. The instructor's error (verdict_test_cell_gives_code). A BaseException, so
    that no `except Exception` of the cell takes it for a student's error."""


class LostObject(Exception):
    """An object the judge rebuilt from what the caller sent, which the caller did not number: the judge cannot give
    it back (an opaque stand-in has nothing to send; a PyTorch module rebuilt without its `__init__` may not pickle:
    attacks-slicing.toml, rebuilt-lstm-in-an-unnumbered-module-blocks-grading-as-instructor-error). The call fails,
    as one whose result could not be read: the student's process sent it so."""


class Handles:
    """The objects one side knows the other's by, by number: the caller numbers what it makes (1, 2, ...),
    the judge what it sends (-1, -2, ...), so that neither takes the other's numbers. Each object is kept
    alive, so that its id is never another's."""

    def __init__(self, step):
        self.step, self.last = step, 0
        self.objects = {}  # number → object
        self.numbers = {}  # id → number
        self.parts = {}  # id → (object, number, path): a submodule of a module known by number
        self.received = {}  # id → object: what the judge rebuilt from the caller's data, numbered or not

    def number(self, value) -> int | None:
        number = self.numbers.get(id(value))
        return number if number is not None and self.objects[number] is value else None

    def own(self, value) -> int:
        """The number of `value`, given one now if it has none."""
        number = self.number(value)
        if number is None:
            self.last += self.step
            number = self.last
            self.take(number, value)
        return number

    def take(self, number, value):
        """`value` is known by `number` now (the judge: what the caller's report calls so)."""
        self.objects[number] = value
        self.numbers[id(value)] = number
        if isinstance(value, nn.Module):
            for path, module in value.named_modules():
                if path:
                    self.parts[id(module)] = (module, number, path)

    def rebuilt(self, value):
        """The judge rebuilt `value` from the caller's data (boundary.decode): sent back only by its number."""
        parts = value.modules() if isinstance(value, nn.Module) else [value]
        self.received.update((id(part), part) for part in parts)

    def reference(self, value):
        """How the other side finds `value`: ("handle", number), ("part", number, path), or None."""
        number = self.number(value)
        if number is not None:
            return ("handle", number)
        part = self.parts.get(id(value))
        if part is not None and part[0] is value:
            return ("part", part[1], part[2])
        return None

    def find(self, reference):
        if reference[0] == "handle":
            return self.objects[reference[1]]
        return self.objects[reference[1]].get_submodule(reference[2])


class Judge(_Side):
    """In the judge: each call of the student's code is asked of the caller (`ask`: calls.asker); its result is the
    caller's, read on `fd` and rebuilt from data alone. `students`: the stubs, by name (None: every call crosses);
    `handles`: what each side knows of the other's objects, shared with `ask`."""

    def __init__(self, fd, ask, students=None, handles=None):
        super().__init__(fd)
        self.students = None if students is None else {id(f) for f in students.values()}  # None: every call crosses
        # ask(number, function, args, kwargs, then, known): sends the caller the request (calls.asker)
        self.ask, self.handles, self.asked = ask, handles or Handles(-1), 0

    @staticmethod
    def opaque(value) -> bool:
        return type(value) in _OPAQUE.values()

    def crosses(self, function, known) -> bool:
        """Whether the call involves the student's code, and so is asked of the caller."""
        if self.students is None:
            return True
        involved = [function, *known.leaves]
        return any(id(value) in self.students or self.opaque(value) or self.carries(value) for value in involved)

    def carries(self, value) -> bool:
        return isinstance(value, nn.Module) and any(self.carrying.get(id(m)) is m for m in value.modules())

    def call(self, what, function, args, kwargs, then, run):
        from .messages import diagnostic

        known = Known((_owner(function), args), kwargs, self.opaque)
        if not self.crosses(function, known):  # no student code runs in the judge: nothing to look for
            return run(what, function, args, kwargs, then, verify=False)
        self.asked += 1
        try:
            self.ask(self.asked, function, args, kwargs, then, known)
        except LostObject:  # the caller sent it without its number: the student's process, not the test
            raise diagnostic("verdict_call_unreadable", what=what) from None
        except (pickle.PicklingError, TypeError, AttributeError) as error:  # something of the test's that cannot travel
            raise TestCellCode(f"{type(error).__name__}: {error}") from None
        with _NO_DISPATCH(), _NO_TORCH_FUNCTION():  # what rebuilding does is not the student's: no counter sees it
            _draws_on()
            report = self._receive(what)
        if report.get("what") != self.asked:
            raise diagnostic("verdict_call_unreadable", what=what)
        if "failed" in report:
            raise _reported(what, report["failed"])
        try:
            with _NO_DISPATCH(), _NO_TORCH_FUNCTION():
                if not isinstance(report["payloads"], list):
                    raise TypeError("not the payloads")
                payloads = Payloads(report["payloads"], self.handles)
                result = decode(report["result"], known, payloads)
                states = report["held"]
                if not isinstance(states, list) or len(states) != len(known.held):
                    raise ValueError("not the arguments' state")
                for value, state in zip(known.held, states):
                    apply_state(value, state, known, payloads)
                _write_files(_paths(args, kwargs), report["files"], payloads)
                self.mark(known, report["carrying"])
                self.mark_made(known, result)
            _count(report["counters"], result)
        except ChangedArgument:
            raise diagnostic("changed_argument", what=what) from None
        except ChangedStructure as changed:  # the path is the caller's words: shown only when it is a plain one
            name = str(changed) if _PLAIN_PATH.fullmatch(str(changed)) else "…"
            raise diagnostic("module_restructured", what=what, name=name) from None
        except (KeyError, IndexError, TypeError, ValueError, AttributeError, RuntimeError, RecursionError, OSError):
            raise diagnostic("verdict_call_unreadable", what=what) from None
        return result

    def _receive(self, what) -> dict:
        from .messages import diagnostic

        try:
            report = read_frame(self.fd)
        except ValueError:
            raise diagnostic("verdict_call_unreadable", what=what) from None
        if report is None:
            raise diagnostic("verdict_call_lost", what=what)
        return report


def _draws_on():
    """In the judge, once the caller has a request: its generators move on, as a kernel's do when the student's
    function draws, so that a second call of a function that draws draws other numbers (the attacker's
    two-calls-of-a-right-random-function-draw-the-same-values-in-the-verdict). Never to the state the caller
    ends in: a report would then choose the test's next inputs."""
    import random

    torch.rand(1, device="cpu")
    random.random()
    numpy.random.random()


def read_frame(fd) -> dict | None:
    """The caller's next frame, read as data only (`_DataOnly`, `_unwired`): None when the pipe ended first;
    ValueError when what came is not a frame of a dict."""
    header = read_exactly(fd, _HEADER.size)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    data = read_exactly(fd, size) if size <= FRAME_LIMIT else None
    try:
        frame = _DataOnly(io.BytesIO(data)).load()
        if type(frame) is dict and "payloads" in frame:
            frame["payloads"] = [_unwired(item) for item in frame["payloads"]]
    except Exception:  # noqa: BLE001: whatever the caller wrote, it is not a frame
        raise ValueError("not a frame") from None
    if not isinstance(frame, dict):
        raise ValueError("not a frame")
    return frame


def read_exactly(fd, size) -> bytes | None:
    """`size` bytes from `fd`; None when it ends first."""
    chunks, left = [], size
    while left:
        chunk = os.read(fd, min(left, 2**20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class ChangedArgument(Exception):
    """The student's function changed a tensor it was given in place (its device, dtype, shape or values):
    no exercise asks for it, and a test that computes what it expects from its arguments would be misled."""


class ChangedStructure(Exception):
    """A module argument came back with a submodule the judge's copy lacks (a layer wrapped or replaced by a
    container): its state cannot be written there, and the call fails with a diagnostic that says so."""


_PLAIN_PATH = re.compile(r"[A-Za-z0-9_.]{1,120}")


class CallerError(Exception):
    """The error the student's function raised in the caller, as its text and the names of its classes
    (`kinds`): the `__cause__` of the judge's diagnostic, which a test may read (an artefact of the meta
    device it forgives, checks.assert_raises), never shown as it is."""


def _reported(what, failure) -> AssertionError:
    """The diagnostic of a call that failed in the caller, made again here from the judge's own label and
    what the error was: the caller ran the test cell, so no text it sends is shown as it is. A raised
    error is known by the names of its classes (`kinds`) and its text, which the test may read
    (`CallerError`, checks.assert_raises) and the grader shows only as PyTorch's known words (render)."""
    from .checks.core import raised
    from .messages import diagnostic

    failure = failure if isinstance(failure, dict) else {}
    kinds, cause, lines = failure.get("kinds"), failure.get("cause"), failure.get("lines")
    kinds = [k for k in kinds if isinstance(k, str)] if isinstance(kinds, list) else []
    cause = cause if isinstance(cause, str) else ""
    lines = [line for line in lines if isinstance(line, str)][:8] if isinstance(lines, list) else []
    if kinds and kinds[0] == "NotImplementedError" and not cause:  # the release's stub
        error = diagnostic("not_answered", what=what)
    elif kinds:  # nothing is shown above it: the grader's run, not the student's, so not "raised"
        error = raised(what, kinds[0], cause, generic="verdict_call_raised")
        error.course_fields["lines"] = "\n".join(lines)  # which one is the student's, the grader decides
    elif failure.get("key") == "tampering":  # the names of what was patched, if they are the watched ones
        fields = failure.get("fields") if isinstance(failure.get("fields"), dict) else {}
        sent = fields.get("names", {}).get("str", "") if isinstance(fields.get("names"), dict) else ""
        watched = set(integrity.watched())
        names = [name for name in str(sent).split(", ") if name in watched]
        error = diagnostic("tampering", what=what, names=", ".join(names) or "…")
    else:
        error = diagnostic("verdict_call_unreadable", what=what)
    if kinds:
        error.__cause__ = CallerError(cause)
        error.__cause__.kinds = tuple(kinds)
    return error


def _traceback_lines(error, limit=8) -> list[str]:
    """The source lines where `error` was raised, innermost first: the grader shows the first that is a
    line of the student's own cells (diagnostics.render), never one of the test's."""
    import linecache
    import traceback

    if error is None:
        return []
    frames = traceback.extract_tb(error.__traceback__)[::-1][:limit]
    return [linecache.getline(frame.filename, frame.lineno).strip()[:LINE_LIMIT] for frame in frames]


def read_names(fd) -> tuple[list[str], dict] | None:
    """In the judge: the first frame of the caller, the student's names and the caller's PyTorch settings
    (`torch_settings`); None when there is none (the program ended first)."""
    try:
        frame = read_frame(fd)
    except ValueError:  # whatever the program wrote, it is not the names
        return [], {}
    if frame is None:
        return None
    names, settings = frame.get("names"), frame.get("settings")
    if not isinstance(names, list):
        return [], {}
    return ([name for name in names[:NAMES_LIMIT] if isinstance(name, str) and name.isidentifier()
             and not name.startswith("__")], settings if isinstance(settings, dict) else {})


# The global settings of PyTorch that decide how a test cell makes and prints its own tensors, which a
# student's cell may change as any notebook does (`torch.set_default_dtype(torch.float64)`,
# `torch.set_grad_enabled(False)`, ...). In the student's kernel the test cell runs with them, expected
# values included, so the judge takes the caller's: what it makes is what the kernel's test made. They are
# a few closed values a student's cell may set honestly anyway, so a caller that misreports them buys
# nothing it could not have set. The default device is not among them: the program runs on a CPU machine,
# where any other (`meta`) makes the judge's checks of values vacuous.
_DEFAULT_DTYPES = ("float32", "float64", "float16", "bfloat16")
_PRINT_OPTIONS = {"precision": int, "threshold": (int, float), "edgeitems": int, "linewidth": int}


def torch_settings() -> dict:
    """In the caller, before the test cell: PyTorch's global settings there, as data."""
    from torch._tensor_str import PRINT_OPTS

    return {"default_dtype": str(torch.get_default_dtype()).removeprefix("torch."),
            "grad_enabled": torch.is_grad_enabled(),
            "deterministic": torch.are_deterministic_algorithms_enabled(),
            "deterministic_warn_only": torch.is_deterministic_algorithms_warn_only_enabled(),
            "print": {name: getattr(PRINT_OPTS, name) for name in [*_PRINT_OPTIONS, "sci_mode"]}}


def take_torch_settings(settings):
    """In the judge: the caller's settings (`torch_settings`), each only if it is one PyTorch accepts."""
    if settings.get("default_dtype") in _DEFAULT_DTYPES:
        torch.set_default_dtype(getattr(torch, settings["default_dtype"]))
    if type(settings.get("grad_enabled")) is bool:
        torch.set_grad_enabled(settings["grad_enabled"])
    if type(settings.get("deterministic")) is bool:
        warn_only = settings.get("deterministic_warn_only") is True
        torch.use_deterministic_algorithms(settings["deterministic"], warn_only=warn_only)
    printed = settings.get("print")
    if isinstance(printed, dict):
        options = {name: value for name, value in printed.items()
                   if name in _PRINT_OPTIONS and type(value) in _as_tuple(_PRINT_OPTIONS[name]) and value >= 0}
        if printed.get("sci_mode") in (None, True, False):
            options["sci_mode"] = printed.get("sci_mode")
        torch.set_printoptions(**options)


def _as_tuple(kinds) -> tuple:
    return kinds if isinstance(kinds, tuple) else (kinds,)


def same_draws(seed):
    """Seed the random number generators a test cell draws from, in the judge (each request carries them to the
    caller: calls._draw_as_the_judge), so that the cell's unseeded tensors are the same on every grader and every
    regrade. A right answer passes on any draws; the student's own seed (`torch.manual_seed(42)` in a cell) decides
    nothing here. The verdict derives `seed` from the test cell's grade id and released text (verdict._seed), never
    from its hidden tests: the caller can read it back from the generators it is sent."""
    import random

    torch.manual_seed(seed)
    random.seed(seed)
    numpy.random.seed(seed)


class JudgeOnlyCall(BaseException):
    """A test cell called a student's function (a stub in the judge) other than through `checks.call`: the test
    cell's mistake, which the instructor is told of. A BaseException, so that no `except Exception` of the cell
    takes it for a student's error."""


def _paths(args, kwargs) -> list[str]:
    """The call's arguments that name a file in this process's temporary folder, where a test keeps its files and
    the student's function may save: named plainly, no `..` and no link on the way. No other string is a file of
    the call's: one a student's function returned, passed on by the test, named the judge's own result pipe
    (`/proc/self/cwd/../…/proc/self/fd/4`), and the judge wrote the caller's bytes there (attacks-slicing.toml,
    loader-kwargs-path-makes-the-judge-write-its-own-result-pipe)."""
    root = os.path.join(tempfile.gettempdir(), "")
    named = [os.fspath(value) for value in [*args, *kwargs.values()] if isinstance(value, (str, os.PathLike))]
    return [path for path in named if type(path) is str and _plain_path_in(path, root)]


def _plain_path_in(path, root) -> bool:
    """`path` lies in the folder `root` (ending with a separator), with no `..` and no link on the way."""
    return (path.startswith(root) and ".." not in path.split(os.sep)
            and os.path.realpath(path).startswith(os.path.join(os.path.realpath(root), "")))


def _file_state(path, payloads) -> dict:
    """In the caller, after the call: whether a file is at `path`, and its bytes."""
    if not _IS_FILE(path):
        return {"exists": False}
    with _OPEN(path, "rb") as file:
        data = file.read(FILE_LIMIT + 1)
    if len(data) > FILE_LIMIT:
        return {"exists": True, "payload": None}
    payloads.append(_FROM_BUFFER(bytearray(data), dtype=torch.uint8) if data else _EMPTY(0, dtype=torch.uint8))
    return {"exists": True, "payload": len(payloads) - 1}


def _write_files(paths, files, payloads):
    """In the judge: the files at its own paths are as the caller's were after the call."""
    if not isinstance(files, list) or len(files) != len(paths):
        raise ValueError("not the call's files")
    for path, state in zip(paths, files):
        if state["exists"] is True:
            payload = payloads[state["payload"]]
            if type(payload) is not torch.Tensor or payload.dtype != torch.uint8 or payload.ndim != 1:
                raise TypeError("not a file")
            with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600), "wb") as file:
                file.write(payload.numpy().tobytes())
        elif os.path.lexists(path) and stat.S_ISREG(os.lstat(path).st_mode):
            os.remove(path)


def _counters() -> list:
    """The transfer counters (probes.count_transfers) active around this call, innermost last."""
    return [mode for mode in _get_current_dispatch_mode_stack() if isinstance(mode, TransferCounter)]


def _count(counted, result):
    """In the judge: each active counter is told what the caller's saw during the call."""
    counters = _counters()
    if not isinstance(counted, list) or len(counted) != len(counters):
        raise ValueError("not the active counters")
    for counter, seen in zip(counters, counted):
        counter.add(seen, _tensors(result))


def _leaves(value, depth=0) -> list:
    """What a result holds, in its order: the result itself, or the leaves of the containers the judge
    rebuilds as they are (so the caller and the judge find the same leaves)."""
    if depth < DEPTH_LIMIT and (_container_kind(type(value)) is not None
                                or isinstance(value, tuple) and hasattr(type(value), "_fields")):
        items = value.values() if isinstance(value, Mapping) else value
        return [leaf for item in items for leaf in _leaves(item, depth + 1)]
    return [value]


def _tensors(value) -> list:
    return [leaf for leaf in _leaves(value) if isinstance(leaf, torch.Tensor)]


def _owner(function):
    """The object a call runs on: a module called, or the object of a bound method (`layer.to`)."""
    return function if isinstance(function, nn.Module) else getattr(function, "__self__", None)


def _held(value) -> bool:
    """An argument whose state the student's function may change: a module, or another PyTorch object
    with attributes (an optimizer, a GradScaler, a data set)."""
    return isinstance(value, nn.Module) or (type(value).__module__.split(".")[0] == "torch"
                                            and isinstance(getattr(value, "__dict__", None), dict))


class Payloads(list):
    """The tensors of one report, in order: the caller remembers which it encoded (`memo`), the judge
    which it rebuilt (`rebuilt`), so that a tensor found twice is one tensor on both sides. `handles`
    (Handles): the caller numbers each object it sends, the judge knows its rebuilt object by that number."""

    def __init__(self, items=(), handles=None):
        super().__init__(items)
        self.memo, self.rebuilt, self.handles = {}, {}, handles


class Known:
    """What a result may refer to by position, the same in the caller and in the judge, taken before the
    call: the call's arguments (their tensors, and every container and container type found in them) and
    the parameters and buffers of the modules among them; `held`, the modules and other PyTorch objects
    among them, whose state is mirrored; `leaves`, every argument that is neither a tensor nor a
    container nor a constant, or that the side holds as opaque (what decides whether a call crosses)."""

    def __init__(self, args, kwargs, opaque=lambda value: False):
        self.objects, self.types, self.held, self.leaves, self._positions = [], [], [], [], {}
        self.given = set()  # positions of the tensors given as they are (not a module's parameter or buffer)
        pending, seen, of_modules = [args, kwargs], set(), set()
        while pending and len(self.objects) < NODE_LIMIT:
            value = pending.pop()
            if id(value) in seen or type(value) in _CONSTANTS:
                continue
            seen.add(id(value))
            # a container the judge holds as an opaque stand-in (a Mapping of the student's class) is a leaf
            # on both sides, so that both find the same positions and a call on it crosses on both
            if isinstance(value, (torch.Tensor, list, tuple, Mapping)) and not opaque(value):
                self._positions[id(value)] = len(self.objects)
                if isinstance(value, torch.Tensor) and id(value) not in of_modules:
                    self.given.add(len(self.objects))
                self.objects.append(value)
                if not isinstance(value, torch.Tensor):
                    if type(value) not in self.types:
                        self.types.append(type(value))
                    pending.extend(reversed(list(value.values() if isinstance(value, Mapping) else value)))
                continue
            self.leaves.append(value)
            if _held(value) and not opaque(value):  # what the judge holds as a stand-in has no state there
                self.held.append(value)
                if isinstance(value, nn.Module):
                    tensors = [*value.parameters(), *value.buffers()]
                    of_modules.update(map(id, tensors))
                    pending.extend(reversed(tensors))

    def index(self, value):
        return self._positions.get(id(value))

    def held_index(self, value):
        return next((i for i, held in enumerate(self.held) if held is value), None)


def encode(value, known, payloads, sent=None, depth=0):
    """`value` as plain data (dicts, lists, constants, tensors) that the judge reads (`_send`, `read_frame`).
    What the judge will hold only as an opaque stand-in is added to `sent`. An object the judge may give back in a
    later call carries its number (`handle`: Payloads.handles)."""
    node = _encoded(value, known, payloads, sent, depth)
    if payloads.handles is not None and node["kind"] in _NUMBERED and "handle" not in node:
        node["handle"] = payloads.handles.own(value)
    return node


_NUMBERED = ("tensor", "module", "container", "other")  # what a later call may be given again, by number


def _encoded(value, known, payloads, sent=None, depth=0):
    if depth > DEPTH_LIMIT or len(payloads) > NODE_LIMIT:
        raise RecursionError("result too deep")
    if type(value) in _CONSTANTS:
        return {"kind": "constant", "value": value}
    if type(value) is torch.device:
        return {"kind": "device", "value": str(value)}
    if type(value) is torch.dtype:
        return {"kind": "dtype", "value": str(value).removeprefix("torch.")}
    if type(value) in (torch.Tensor, torch.nn.Parameter):
        memo = payloads.memo
        if id(value) in memo:  # the same tensor twice in one report (a buffer and a property): one node
            return memo[id(value)][1]
        payloads.append(_TENSOR_CLONE(_TENSOR_DETACH(value)))  # PyTorch's C methods: Tensor's a cell can replace
        sources = [i for i, arg in enumerate(known.objects)
                   if isinstance(arg, torch.Tensor) and arg.requires_grad and reaches(value.grad_fn, arg)]
        node = {"kind": "tensor", "payload": len(payloads) - 1, "same": known.index(value),
                "parameter": type(value) is torch.nn.Parameter, "requires_grad": value.requires_grad,
                "leaf": value.is_leaf, "sources": sources, "grad_fn": _STR(type(value.grad_fn).__name__)}
        memo[id(value)] = (value, node)  # the tensor kept alive, so that its id is not another's
        return node
    if type(value) is numpy.ndarray:
        try:
            payloads.append(_FROM_NUMPY(value.copy(order="C")))
            return {"kind": "ndarray", "payload": len(payloads) - 1, "dtype": value.dtype.str}
        except (TypeError, ValueError, RuntimeError):  # object arrays, a byte order torch does not hold
            pass
    elif type(value) in _NUMPY_SCALARS:  # `numpy.int64(3)`: what a NumPy shuffle's indices are
        array = numpy.array([value])
        payloads.append(_FROM_NUMPY(array))
        return {"kind": "numpy_scalar", "payload": len(payloads) - 1, "dtype": array.dtype.str}
    elif (held := known.held_index(value)) is not None:
        return {"kind": "held", "index": held}
    elif isinstance(value, nn.Module):  # a module the call made: its tree, its classes and its state
        return {"kind": "module", "modules": [[path, *_module_class(module)] for path, module in value.named_modules()],
                "state": held_state(value, known, payloads)}
    elif isinstance(value, (list, tuple, Mapping)):
        items = list(value.items()) if isinstance(value, Mapping) else list(value)
        if isinstance(value, Mapping):
            parts = [[encode(k, known, payloads, sent, depth + 1), encode(v, known, payloads, sent, depth + 1)]
                     for k, v in items]
        else:
            parts = [encode(v, known, payloads, sent, depth + 1) for v in items]
        kind = _container_kind(type(value))
        known_type = _type_index(type(value), known)
        if kind is None and known_type is None and sent is not None:
            sent[id(value)] = value
        shape = "mapping" if isinstance(value, Mapping) else "sequence"
        fields = ([_STR(field) if isinstance(field, str) else "?" for field in type(value)._fields]
                  if isinstance(value, tuple) and hasattr(type(value), "_fields") else None)
        return {"kind": "container", "type": kind, "known_type": known_type, "same": known.index(value),
                "shape": shape, "items": parts, "name": _STR(type(value).__qualname__),
                "subclass": kind is not None and type(value) is not _CONTAINERS[kind], "fields": fields}
    if sent is not None:
        sent[id(value)] = value
    return {"kind": "other", "name": _STR(type(value).__qualname__)}


def _rebuildable(node) -> bool:
    """Whether the judge rebuilds `node` as what it was (no opaque stand-in anywhere in it)."""
    if node["kind"] == "other":
        return False
    if node["kind"] != "container":
        return True
    if node["type"] is None and node["known_type"] is None:
        return False
    return all(_rebuildable(part) for item in node["items"] for part in (item if node["shape"] == "mapping" else [item]))


def _mirrored(value) -> list:
    """The attributes of a held argument that the judge mirrors: a module's public ones (its parameters,
    buffers and submodules are mirrored on their own), all but dunder ones of another object; and of a
    module the judge holds as a stand-in, the values of its class's public properties, read here (the
    judge cannot run them)."""
    module = isinstance(value, nn.Module)
    found = [(name, part) for name, part in vars(value).items()
             if not name.startswith("__") and not (module and (name.startswith("_") or name == "training"))]
    if module and _module_class(value)[0] == "stand-in":
        for name in dir(type(value)):
            if name.startswith("_") or hasattr(nn.Module, name) or name in vars(value):
                continue
            if isinstance(inspect.getattr_static(type(value), name, None), property):
                try:
                    found.append((name, getattr(value, name)))
                except Exception:  # noqa: BLE001: a property that raises is not there
                    pass
    return found


def _attributes(value, known, payloads) -> list:
    """The mirrored attributes of `value` that the judge can rebuild, as [name, node] pairs."""
    attributes = []
    for name, part in _mirrored(value):
        try:
            node = encode(part, known, payloads)
        except RecursionError:
            continue
        if _rebuildable(node):
            attributes.append([name, node])
    return attributes


def held_state(value, known, payloads) -> dict:
    """In the caller, after the call: the state of a held argument, as `apply_state` writes it."""
    if not isinstance(value, nn.Module):
        return {"attributes": _attributes(value, known, payloads)}
    modules = []
    for path, module in value.named_modules():
        parameters = module._parameters
        modules.append([path, {
            "training": module.training,
            "parameters": [[name, encode(p, known, payloads)] for name, p in parameters.items()],
            "grads": [[name, encode(p.grad, known, payloads)] for name, p in parameters.items() if p is not None],
            "buffers": [[name, encode(b, known, payloads)] for name, b in module._buffers.items()],
            "non_persistent": sorted(module._non_persistent_buffers_set),
            "attributes": _attributes(module, known, payloads)}])
    return {"modules": modules}


def apply_state(value, state, known, payloads, made=False):
    """In the judge: write a held argument's state, as the caller sent it, into the judge's own object.
    Everything is read and checked first; a state that does not fit the object changes nothing in it.
    Tensor names are the caller's words, and a test may show them in a label: plain identifiers only. A
    tensor may go and one may come (a step counter a right `train_step` registered as a buffer)."""
    if not isinstance(value, nn.Module):
        for name, part in _read_attributes(value, state["attributes"], known, payloads):
            vars(value)[name] = part
        return
    if not made:  # a submodule the call added (a layer wrapped) fails it with a diagnostic of its own
        paths = {name for name, _ in value.named_modules()}
        added = next((path for path, _ in state["modules"] if path not in paths), None)
        if added is not None:
            raise ChangedStructure(str(added))
    writes = []
    for path, part in state["modules"]:
        module = value.get_submodule(str(path))
        parameters = {str(name): decode(node, known, payloads) for name, node in part["parameters"]}
        buffers = {str(name): decode(node, known, payloads) for name, node in part["buffers"]}
        if not all(t is None or isinstance(t, torch.Tensor) for t in [*parameters.values(), *buffers.values()]):
            raise TypeError("not a tensor")
        grads = [(parameters[str(name)], decode(node, known, payloads)) for name, node in part["grads"]]
        if not all(type(grad) is torch.Tensor or grad is None for _, grad in grads):
            raise TypeError("not a gradient")
        taken = {*parameters, *buffers, *module._modules}
        if not all(name.isidentifier() and len(name) <= NAME_LIMIT for name in [*parameters, *buffers]):
            raise ValueError("not the module's tensor names")
        attributes = _read_attributes(module, part["attributes"], known, payloads, taken)
        non_persistent = {name for name in part["non_persistent"] if isinstance(name, str)}
        writes.append((module, parameters, buffers, grads, attributes, non_persistent, part["training"] is True))
    for module, parameters, buffers, grads, attributes, non_persistent, training in writes:
        module._parameters.clear()
        module._parameters.update(parameters)
        module._buffers.clear()
        module._buffers.update(buffers)
        module._non_persistent_buffers_set = non_persistent
        module.training = training
        for parameter, grad in grads:
            if parameter is not None:
                parameter.grad = grad
        for name, part in attributes:
            vars(module)[name] = part


def _read_attributes(value, attributes, known, payloads, taken=frozenset()) -> list:
    """The attributes as sent, rebuilt: data only, under names that are plain attributes of `value`. One that
    would hide a method of its class here (a `forward` set on the instance in the caller) is not written: the
    judge's object keeps its class's code, and the caller's, which holds it, is where a call on it runs."""
    module = isinstance(value, nn.Module)
    read = []
    for name, node in attributes:
        if not (isinstance(name, str) and name.isidentifier() and not name.startswith("__")) or name in taken \
                or module and (name.startswith("_") or name == "training"):
            raise ValueError("not an attribute")
        rebuilt = decode(node, known, payloads)
        if not hasattr(type(value), name):
            read.append((name, rebuilt))
    return read


def _type_index(kind, known):
    return next((i for i, seen in enumerate(known.types) if seen is kind), None)


def decode(node, known, payloads):
    """A result rebuilt from `encode`'s data: only the kinds it writes, and types the judge knows. What carries a
    number is known by it (Payloads.handles): a later call gives the caller its own object again."""
    if not isinstance(node, dict):
        raise TypeError("not a node")
    value = _decoded(node, known, payloads)
    number = node.get("handle")
    if payloads.handles is not None and node["kind"] in _NUMBERED and node.get("same") is None:
        payloads.handles.rebuilt(value)
        if type(number) is int and number > 0:
            payloads.handles.take(number, value)
    return value


def _decoded(node, known, payloads):
    kind = node["kind"]
    if kind == "constant":
        if type(node["value"]) not in _CONSTANTS:
            raise TypeError("not a constant")
        return node["value"]
    if kind == "device":
        return torch.device(str(node["value"]))
    if kind == "dtype":
        dtype = getattr(torch, str(node["value"]), None)
        if type(dtype) is not torch.dtype:
            raise ValueError("not a dtype")
        return dtype
    if kind == "tensor":
        return _tensor(node, known, payloads)
    if kind in ("ndarray", "numpy_scalar"):
        payload = payloads[node["payload"]]
        if type(payload) is not torch.Tensor:
            raise TypeError("not an array")
        array = payload.numpy()
        if array.dtype.str != node["dtype"]:
            raise ValueError("not its dtype")
        if kind == "numpy_scalar":
            if array.shape != (1,):
                raise ValueError("not a scalar")
            return array[0]
        return array
    if kind == "held":
        return known.held[int(node["index"])]
    if kind == "module":
        return _module(node, known, payloads)
    if kind == "container":
        return _container(node, known, payloads)
    return opaque(node.get("name"))()


def _tensor(node, known, payloads):
    rebuilt = getattr(payloads, "rebuilt", {})
    if node.get("same") is None and node["payload"] in rebuilt:  # the tensor already rebuilt for this report
        return rebuilt[node["payload"]]
    tensor = _new_tensor(node, known, payloads)
    if node.get("same") is None:
        rebuilt[node["payload"]] = tensor
    return tensor


def _new_tensor(node, known, payloads):
    payload = payloads[node["payload"]]
    if type(payload) is not torch.Tensor:
        raise TypeError("not a tensor")
    same = node.get("same")
    if same is not None:
        original = known.objects[same]
        if not isinstance(original, torch.Tensor):
            raise TypeError("not a tensor argument")
        if _differs(original, payload):  # changed in place by the student's code
            if same in known.given:  # a tensor it was given: its caller's data is gone (swap_tensors, .data =)
                raise ChangedArgument(same)
            _replace_data(original, payload)  # a module's parameter or buffer: so here too
        requires_grad = node["requires_grad"] is True
        if original.is_leaf and original.requires_grad != requires_grad and payload.is_floating_point():
            if same in known.given:  # a tensor it was given, made trainable or frozen: the caller's tensor is changed
                raise ChangedArgument(same)
            original.requires_grad_(requires_grad)
        return original
    requires_grad = node["requires_grad"] is True
    if node["leaf"] is True or not requires_grad:
        rebuilt = payload.requires_grad_(requires_grad and payload.is_floating_point())
        return torch.nn.Parameter(rebuilt, requires_grad=rebuilt.requires_grad) if node["parameter"] is True else rebuilt
    sources = [known.objects[i] for i in node["sources"]]
    if not all(isinstance(s, torch.Tensor) and s.requires_grad for s in sources):
        raise TypeError("not a source")
    rebuilt = Computed.apply(payload, *(sources or [torch.zeros((), requires_grad=True)]))
    rebuilt.__dict__[GRAD_FN_NAME] = _identifier(node.get("grad_fn"))
    return rebuilt


def _replace_data(original, payload):
    """`original` now holds `payload`'s data, keeping its identity (a move between devices that `.data =`
    refuses, cpu to meta, is a swap of the two tensors' contents)."""
    with torch.no_grad():
        try:
            SET_DATA(original, payload)
        except RuntimeError:
            if type(original) is torch.nn.Parameter:
                payload = torch.nn.Parameter(payload, requires_grad=original.requires_grad)
            torch.utils.swap_tensors(original, payload)


def _differs(original, payload) -> bool:
    if (original.device, original.dtype, original.shape) != (payload.device, payload.dtype, payload.shape):
        return True
    return has_data(payload.device) and not torch.equal(original.detach(), payload)


def _container(node, known, payloads):
    items = node["items"]
    if not isinstance(items, list) or len(items) > NODE_LIMIT:
        raise TypeError("not a container")
    if node["shape"] == "mapping":
        pairs = [(decode(k, known, payloads), decode(v, known, payloads)) for k, v in items]
    else:
        values = [decode(v, known, payloads) for v in items]
    if node.get("known_type") is not None:
        kind = known.types[node["known_type"]]
    elif node.get("type") in _CONTAINERS:
        kind = _subclass(node) if node.get("subclass") is True else _CONTAINERS[node["type"]]
    else:
        return opaque(node.get("name"))()
    if node.get("same") is not None:  # an argument returned: the judge's own, changed as the caller's was
        return _same_container(known.objects[node["same"]], kind, pairs if node["shape"] == "mapping" else values)
    if node["shape"] == "mapping":
        return kind(pairs) if issubclass(kind, Mapping) else opaque(node.get("name"))()
    if issubclass(kind, tuple) and hasattr(kind, "_fields"):  # a namedtuple the judge knows
        return kind(*values)
    return kind(values) if issubclass(kind, (list, tuple)) else opaque(node.get("name"))()


def _module_class(module) -> list:
    """How the judge makes this module: PyTorch's class of that name, or a stand-in for any other."""
    name = type(module).__name__
    if getattr(nn, name, None) is type(module):
        return ["torch", _STR(name)]
    return ["stand-in", _STR(type(module).__qualname__)]


def _module(node, known, payloads):
    """A module the call made, rebuilt: each submodule of PyTorch's class or a stand-in, then its state."""
    root = None
    for path, kind, name in node["modules"]:
        module = _new_module(kind, name)
        if root is None:
            if path != "":
                raise ValueError("not a module tree")
            root = module
        else:
            parent, _, child = str(path).rpartition(".")
            if not child.isidentifier() and not child.isdigit():
                raise ValueError("not a submodule name")
            root.get_submodule(parent)._modules[child] = module
    apply_state(root, node["state"], known, payloads, made=True)
    return root


def _new_module(kind, name):
    if kind == "torch":
        cls = getattr(nn, str(name), None)
        if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
            raise TypeError("not a PyTorch module")
        module = cls.__new__(cls)
        nn.Module.__init__(module)
        return module
    return stand_in_module(name)()


def _never_forward(self, *args, **kwargs):
    raise RuntimeError(f"a sealed test ran {type(self).__name__} outside checks.call")


_STAND_IN_MODULES = {}


def stand_in_module(name):
    """A module class named as the student's, whose forward never runs in the judge: a module of the
    student's carries the student's code, so a call on it crosses to the caller."""
    return _named_type(_STAND_IN_MODULES, name, (nn.Module,), {"forward": _never_forward})


def _same_container(original, kind, items):
    if type(original) is not kind:
        raise TypeError("not that argument")
    if isinstance(original, MutableMapping):
        original.clear()
        original.update(items)
    elif isinstance(original, MutableSequence):
        original[:] = items
    return original


class Computed(torch.autograd.Function):
    """A rebuilt result computed from the call's arguments: connected to them, carrying no gradient."""

    @staticmethod
    def forward(ctx, payload, *sources):
        return payload.clone()

    @staticmethod
    def backward(ctx, grad):
        return (None, *(None for _ in ctx.needs_input_grad[1:]))


def _identifier(name) -> str:
    return name if isinstance(name, str) and re.fullmatch(r"[A-Za-z_]\w{0,59}", name) else "Node"


_OPAQUE = {}
_SUBCLASSES = {name: {} for name in _CONTAINERS}
_NAMEDTUPLES = {}
FIELDS_LIMIT = 64  # fields of a namedtuple the judge makes


def _subclass(node):
    """The judge's type for a container of a subclass: a namedtuple of the same name and fields, or a plain
    subclass of its base named as the student's (for a diagnostic), none of the student's code in it."""
    fields = node.get("fields")
    if node["type"] == "tuple" and isinstance(fields, list):
        if not (0 < len(fields) <= FIELDS_LIMIT and all(isinstance(f, str) and f.isidentifier()
                                                        and not f.startswith("_") for f in fields)):
            raise TypeError("not a namedtuple's fields")
        name = _identifier(str(node.get("name")).rpartition(".")[2])
        key = (name, tuple(fields))
        if key not in _NAMEDTUPLES:
            _NAMEDTUPLES[key] = namedtuple(name, fields)
        return _NAMEDTUPLES[key]
    return _named_type(_SUBCLASSES[node["type"]], node.get("name"), (_CONTAINERS[node["type"]],), {})


def opaque(name):
    """A stand-in type for an object the judge cannot rebuild, named as the student's (for a diagnostic)."""
    return _named_type(_OPAQUE, name, (), {"__repr__": lambda self: f"<{type(self).__name__}>"})


def _named_type(made, name, bases, namespace):
    """The judge's type of that name (the last part of the student's qualified name, a plain identifier),
    made once per name into `made`."""
    name = _identifier(name.rpartition(".")[2] if isinstance(name, str) else None)
    if name not in made:
        made[name] = type(name, bases, namespace)
    return made[name]


def stub(name):
    """What a student's function is in the judge: never called (a sealed test calls it through checks.call). A
    test cell that calls it directly made no call in the caller either: the instructor's mistake (JudgeOnlyCall),
    never the student's error."""
    def never_called(*args, **kwargs):
        raise JudgeOnlyCall(f"{name}(...) outside checks.call")
    never_called.__name__ = never_called.__qualname__ = name
    return never_called
