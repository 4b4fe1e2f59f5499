"""A sealed test cell: the student's functions run in one process, the checks decide in another.

In the verdict (autograder/verdict.py) a sealed test cell runs twice, side by side, each time in a child
forked from the verdict's parent, which has run no student code:

* the *caller* runs the cell with the student's definitions. Each `checks.call` runs the student's
  function there and sends what it returned, as data, to the judge: tensors with their device, dtype,
  values and autograd state, devices, dtypes, numbers, strings and containers. Then the caller goes on
  with the cell as written;
* the *judge* runs the same cell, where the student's functions are stubs that are never called: each
  `checks.call` reads the caller's next result instead, rebuilt from data alone, and every check of the
  cell runs on it. Only the judge's outcome is written to the grader.

So a function body can do anything in the caller (patch the checks, write a forged record, exit) and
still decide nothing: the judge reads its result with `torch.load(weights_only=True)`, PyTorch's
loader for untrusted checkpoints, and rebuilds it from a closed set of kinds; an unreadable or missing
result fails the call. Both children start from the same state, so the cell's own tensors are the
same in both; the caller restores the random number generators after each student call, so that what
the student's code drew does not change the cell's later tensors.

What the judge cannot see it is told: whether a returned tensor is a leaf, requires grad, or is
computed from one of the call's arguments (the caller walks its autograd graph). Such a tensor is
rebuilt connected to the same arguments, with a backward that carries no gradient; a test that needs
the gradient itself asks for it with `checks.call(..., then=measure)`, which runs `measure(result,
*args)` in the caller right after the student's function. A body written for it can misreport these
facts about its own result; it cannot make a check pass on data it did not return.
"""
import io
import os
import re
import struct
from collections import OrderedDict
from collections.abc import Mapping

import torch

from .checks.core import GRAD_FN_NAME
from .checks.tensors import _reaches
from .devices import has_data

FRAME_LIMIT = 64 * 2**20  # bytes of one call's result
DEPTH_LIMIT = 32  # nesting of a result's containers
NODE_LIMIT = 100_000  # parts of one result
_HEADER = struct.Struct("<Q")
_CONTAINERS = {"list": list, "tuple": tuple, "dict": dict, "OrderedDict": OrderedDict}
_CONSTANTS = (type(None), bool, int, float, str)


class Recorder:
    """In the caller: run the student's function, then send its result to the judge."""

    def __init__(self, fd):
        self.fd = fd

    def call(self, what, function, args, kwargs, then, run):
        known = Known(args, kwargs)
        report = {"what": what}
        with torch.random.fork_rng(devices=_cuda_devices()):
            try:
                result = run(what, function, args, kwargs, then)
            except AssertionError as failure:  # the call's diagnostic (not answered, raised, ...)
                from .verdict import _typed

                fields = getattr(failure, "course_fields", None) or {}
                report["failed"] = {"key": str(getattr(failure, "course_key", "verdict_failed")),
                                    "fields": {str(k): _typed(v) for k, v in fields.items()}}
                self._send(report)
                raise
            payloads = []
            report["result"] = encode(result, known, payloads)
            report["payloads"] = payloads
        self._send(report)
        return result

    def _send(self, report):
        buffer = io.BytesIO()
        torch.save(report, buffer)
        data = buffer.getvalue()
        os.write(self.fd, _HEADER.pack(len(data)))
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]


class Judge:
    """In the judge: each call's result is the caller's, read and rebuilt from data alone."""

    def __init__(self, fd):
        self.fd = fd

    def call(self, what, function, args, kwargs, then, run):
        from .messages import diagnostic

        known = Known(args, kwargs)
        report = self._receive(what)
        if report.get("what") != what:
            raise diagnostic("verdict_call_unreadable", what=what)
        if "failed" in report:
            failure = report["failed"]
            raise _reported(failure.get("key"), failure.get("fields"))
        try:
            return decode(report["result"], known, report["payloads"])
        except (KeyError, IndexError, TypeError, ValueError, AttributeError, RuntimeError, RecursionError):
            raise diagnostic("verdict_call_unreadable", what=what) from None

    def _receive(self, what) -> dict:
        from .messages import diagnostic

        header = _read_exactly(self.fd, _HEADER.size)
        if header is None:
            raise diagnostic("verdict_call_lost", what=what)
        (size,) = _HEADER.unpack(header)
        data = _read_exactly(self.fd, size) if size <= FRAME_LIMIT else None
        if data is None:
            raise diagnostic("verdict_call_unreadable", what=what)
        try:
            report = torch.load(io.BytesIO(data), weights_only=True, map_location=None)
        except Exception:  # noqa: BLE001: whatever the caller wrote, it is not a result
            raise diagnostic("verdict_call_unreadable", what=what) from None
        if not isinstance(report, dict):
            raise diagnostic("verdict_call_unreadable", what=what)
        return report


def _read_exactly(fd, size) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = os.read(fd, min(left, 2**20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _reported(key, fields) -> AssertionError:
    """The caller's diagnostic of a call, raised again by the judge: key and typed fields as sent (the
    grader renders them from checked parts only, autograder/verdict.py: render)."""
    from .messages import message

    failure = AssertionError(message("verdict_failed"))
    failure.course_key = key if isinstance(key, str) else "verdict_failed"
    failure.course_fields = fields if isinstance(fields, dict) else {}
    failure.course_typed = True
    return failure


def _cuda_devices() -> list[int]:
    return list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []


class Known:
    """What a result may refer to by position: the call's arguments (their tensors, and every container
    and container type found in them), the same in the caller and in the judge, taken before the call."""

    def __init__(self, args, kwargs):
        self.objects, self.types, self._positions = [], [], {}
        pending = [args, kwargs]
        while pending and len(self.objects) < NODE_LIMIT:
            value = pending.pop()
            if id(value) in self._positions or not isinstance(value, (torch.Tensor, list, tuple, Mapping)):
                continue
            self._positions[id(value)] = len(self.objects)
            self.objects.append(value)
            if not isinstance(value, torch.Tensor):
                if type(value) not in self.types:
                    self.types.append(type(value))
                pending.extend(reversed(list(value.values() if isinstance(value, Mapping) else value)))

    def index(self, value):
        return self._positions.get(id(value))


def encode(value, known, payloads, depth=0):
    """`value` as plain data (dicts, lists, constants, tensors) that `torch.load(weights_only=True)` reads."""
    if depth > DEPTH_LIMIT or len(payloads) > NODE_LIMIT:
        raise RecursionError("result too deep")
    if type(value) in _CONSTANTS:
        return {"kind": "constant", "value": value}
    if type(value) is torch.device:
        return {"kind": "device", "value": str(value)}
    if type(value) is torch.dtype:
        return {"kind": "dtype", "value": str(value).removeprefix("torch.")}
    if type(value) in (torch.Tensor, torch.nn.Parameter):
        payloads.append(value.detach().clone())
        sources = [i for i, arg in enumerate(known.objects)
                   if isinstance(arg, torch.Tensor) and arg.requires_grad and _reaches(value.grad_fn, arg)]
        return {"kind": "tensor", "payload": len(payloads) - 1, "same": known.index(value),
                "parameter": type(value) is torch.nn.Parameter, "requires_grad": value.requires_grad,
                "leaf": value.is_leaf, "sources": sources, "grad_fn": type(value.grad_fn).__name__}
    if isinstance(value, (list, tuple, Mapping)):
        items = list(value.items()) if isinstance(value, Mapping) else list(value)
        if isinstance(value, Mapping):
            parts = [[encode(k, known, payloads, depth + 1), encode(v, known, payloads, depth + 1)] for k, v in items]
        else:
            parts = [encode(v, known, payloads, depth + 1) for v in items]
        kind = type(value).__name__ if type(value) in _CONTAINERS.values() else None
        shape = "mapping" if isinstance(value, Mapping) else "sequence"
        return {"kind": "container", "type": kind, "known_type": _type_index(type(value), known),
                "shape": shape, "items": parts, "name": type(value).__qualname__}
    return {"kind": "other", "name": type(value).__qualname__}


def _type_index(kind, known):
    return next((i for i, seen in enumerate(known.types) if seen is kind), None)


def decode(node, known, payloads):
    """A result rebuilt from `encode`'s data: only the kinds it writes, and types the judge knows."""
    if not isinstance(node, dict):
        raise TypeError("not a node")
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
    if kind == "container":
        return _container(node, known, payloads)
    return opaque(node.get("name"))()


def _tensor(node, known, payloads):
    payload = payloads[node["payload"]]
    if type(payload) is not torch.Tensor:
        raise TypeError("not a tensor")
    same = node.get("same")
    if same is not None:
        original = known.objects[same]
        if not isinstance(original, torch.Tensor):
            raise TypeError("not a tensor argument")
        if _differs(original, payload):  # changed in place by the student's code: so here too
            with torch.no_grad():
                original.data = payload
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
        kind = _CONTAINERS[node["type"]]
    else:
        return opaque(node.get("name"))()
    if node["shape"] == "mapping":
        return kind(pairs) if issubclass(kind, Mapping) else opaque(node.get("name"))()
    if issubclass(kind, tuple) and hasattr(kind, "_fields"):  # a namedtuple the judge knows
        return kind(*values)
    return kind(values) if issubclass(kind, (list, tuple)) else opaque(node.get("name"))()


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


def opaque(name):
    """A stand-in type for an object the judge cannot rebuild, named as the student's (for a diagnostic)."""
    name = _identifier(name.rpartition(".")[2] if isinstance(name, str) else None)
    if name not in _OPAQUE:
        _OPAQUE[name] = type(name, (), {"__repr__": lambda self: f"<{type(self).__name__}>"})
    return _OPAQUE[name]


def stub(name):
    """What a student's function is in the judge: never called (a sealed test calls it through checks.call)."""
    def never_called(*args, **kwargs):
        raise RuntimeError(f"a sealed test called {name} outside checks.call")
    never_called.__name__ = never_called.__qualname__ = name
    return never_called
