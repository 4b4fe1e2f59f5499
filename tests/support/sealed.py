"""Both sides of a sealed call in one process (autograder/boundary.py, autograder/calls.py), over real pipes: a
judge whose every request a caller answers at once. Test helpers, so not in the package the students get."""
import fcntl
import os

import pytest
from torch.utils._python_dispatch import _disable_current_modes

from autograder import boundary, calls
from autograder.checks import core

PIPE_SIZE = 2**20  # so that one side writes a whole frame before the other reads it (F_SETPIPE_SZ)


def _pipe():
    reader, writer = os.pipe()
    fcntl.fcntl(writer, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
    return reader, writer


@pytest.fixture
def pipe():
    """A pipe (reader, writer) large enough for a whole frame, closed after the test."""
    reader, writer = _pipe()
    yield reader, writer
    for fd in (reader, writer):
        try:
            os.close(fd)
        except OSError:
            pass


class Caller:
    """The caller's side, answering each request as soon as it is sent (calls.answer); `students`: the student's
    functions and classes by name."""

    def __init__(self, writer, students, handles=None):
        self.handles, self.scope = handles or boundary.Handles(1), dict(students)
        self.recorder = boundary.Recorder(writer, self.handles)

    def answer(self, frame):
        reader, writer = _pipe()
        try:
            calls.sender(writer)(frame)
            os.close(writer)
            with _disable_current_modes():  # the judge's counters are not the caller's (a process of its own)
                calls.answer(calls.read_request(reader), self.recorder, self.handles, self.scope, core.run_here)
        finally:
            os.close(reader)


def told(reader, students=None):
    """A judge that reads what was written on `reader` as the report of its first call (its request goes nowhere);
    `students`: the stubs, by name (None: every call crosses)."""
    return boundary.Judge(reader, lambda *request: None, students)


def judge_and_caller(pipe, caller_handles=None, **students):
    """A judge whose every request a caller answers here at once; `students`: the student's functions and classes
    by name, which the judge holds as stubs (the second value returned, by name) and the caller as they are;
    `caller_handles`: how the caller numbers what it sends (boundary.Handles)."""
    reader, writer = pipe
    stubs = {name: boundary.stub(name) for name in students}
    handles = boundary.Handles(-1)
    ask = calls.asker(Caller(writer, students, caller_handles).answer, handles,
                      {id(stub): name for name, stub in stubs.items()})
    return boundary.Judge(reader, ask, stubs, handles), stubs


def sealed(pipe, function, *args, then=None, judged=None):
    """`checks.call` across the boundary: the caller's result as the judge rebuilds it. `judged`: the judge's own
    arguments (`args` unless given), which the caller receives as copies."""
    judge, stubs = judge_and_caller(pipe, f=function)
    return judge.call("f(...)", stubs["f"], args if judged is None else judged, {}, then, core.run_here)
