"""A sealed call (autograder/boundary.py): what the caller sends is all the judge sees, rebuilt from data.

Both sides run here in one process, over a real pipe: the Recorder runs the function on the arguments
and writes, the Judge reads and rebuilds with a deep copy of them (as a forked child has its own), and
the checks run on what the Judge returned.
"""
import copy
import io
import os
import pickle
from collections import OrderedDict, namedtuple

import pytest
import torch

from autograder import boundary, checks
from autograder.checks import core
from autograder.messages import shows

pytestmark = pytest.mark.unit
Sample = namedtuple("Sample", ["image", "label"])


@pytest.fixture
def pipe():
    reader, writer = os.pipe()
    yield reader, writer
    for fd in (reader, writer):
        try:
            os.close(fd)
        except OSError:
            pass


def sealed(pipe, function, *args, then=None, judged=None):
    """`checks.call` across the boundary: the caller's result as the judge rebuilds it. `judged`: the
    judge's own arguments, equal to the caller's (a deep copy of them unless given)."""
    reader, writer = pipe
    judged = copy.deepcopy(args) if judged is None else judged
    boundary.Recorder(writer).call("f(...)", function, args, {}, then, core._run)
    return boundary.Judge(reader).call("f(...)", function, judged, {}, then, core._run)


@pytest.mark.parametrize("value", [None, True, 3, 2.5, "text", torch.device("meta"), torch.bfloat16],
                         ids=["None", "bool", "int", "float", "str", "device", "dtype"])
def test_a_plain_value_comes_back_equal_and_of_its_type(pipe, value):
    back = sealed(pipe, lambda: value)
    assert back == value and type(back) is type(value)


@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_a_new_tensor_comes_back_with_its_device_dtype_and_values(pipe, device, dtype):
    x = torch.arange(6).reshape(2, 3).to(dtype)
    back = sealed(pipe, lambda t: t.to(device, copy=True), x)
    assert back is not x and back.device.type == device and back.dtype == dtype and back.shape == x.shape
    if device == "cpu":
        assert torch.equal(back, x)


def test_an_argument_returned_is_the_judges_own_argument(pipe):
    x, judged = torch.ones(3), torch.ones(3)
    assert sealed(pipe, lambda t: t.to("cpu"), x, judged=(judged,)) is judged


def test_an_argument_changed_in_place_is_changed_in_the_judge_too(pipe):
    x, judged = torch.ones(3), torch.ones(3)

    def cast_in_place(t):
        t.data = t.data.double() * 2
        return t

    assert sealed(pipe, cast_in_place, x, judged=(judged,)) is judged
    assert judged.dtype == torch.float64 and torch.equal(judged, torch.full((3,), 2.0, dtype=torch.float64))


def test_containers_keep_their_types_when_the_judge_knows_them(pipe):
    batch = {"pair": (torch.ones(1), [torch.zeros(2)]), "sample": Sample(torch.ones(2), 1), "extra": OrderedDict(n=7)}
    back = sealed(pipe, lambda b: b, batch)
    assert type(back) is dict and type(back["pair"]) is tuple and type(back["pair"][1]) is list
    assert type(back["sample"]) is Sample and back["sample"].label == 1
    assert type(back["extra"]) is OrderedDict and back["extra"]["n"] == 7


def test_an_object_the_judge_cannot_rebuild_stays_an_opaque_stand_in_named_as_the_students(pipe):
    class Everything(list):
        def __contains__(self, name):
            return True

    back = sealed(pipe, lambda: Everything([1]))
    assert type(back).__name__ == "Everything" and not isinstance(back, list)
    with pytest.raises(TypeError):
        "anything" in back


def test_a_tensor_computed_from_an_argument_stays_connected_to_it(pipe):
    w, judged = torch.linspace(-1, 1, 5, requires_grad=True), torch.linspace(-1, 1, 5, requires_grad=True)
    back = sealed(pipe, lambda t: t * 1, w, judged=(judged,))
    assert not back.is_leaf and back.requires_grad
    checks.assert_grad_connected(back, judged, "f(w)")


def test_a_detached_copy_is_not_connected_and_the_diagnostic_names_the_callers_grad_fn(pipe):
    w, judged = torch.linspace(-1, 1, 5, requires_grad=True), torch.linspace(-1, 1, 5, requires_grad=True)
    back = sealed(pipe, lambda t: t.detach().requires_grad_().to(torch.float64), w, judged=(judged,))
    with pytest.raises(AssertionError) as failure:
        checks.assert_grad_connected(back, judged, "f(w)")
    assert shows(str(failure.value), "grad_disconnected") and "ToCopyBackward0" in str(failure.value)


def test_a_leaf_that_requires_grad_stays_one(pipe):
    back = sealed(pipe, lambda: torch.randn(3, requires_grad=True))
    checks.assert_leaf(back, "f()")
    assert type(sealed(pipe, lambda: torch.nn.Parameter(torch.ones(2)))) is torch.nn.Parameter


def test_a_gradient_is_measured_by_then_where_the_result_was_made(pipe):
    w = torch.ones(3, requires_grad=True)

    def gradient(moved, w):
        (moved * 3).sum().backward()
        return w.grad

    judged = torch.ones(3, requires_grad=True)
    assert torch.equal(sealed(pipe, lambda t: t.clone(), w, then=gradient, judged=(judged,)), torch.full((3,), 3.0))
    assert judged.grad is None  # the judge's own tensor: nothing ran backward there


def test_the_callers_diagnostic_is_raised_again_by_the_judge(pipe):
    def unanswered():
        raise NotImplementedError()

    reader, writer = pipe
    with pytest.raises(AssertionError):
        boundary.Recorder(writer).call("f()", unanswered, (), {}, None, core._run)
    with pytest.raises(AssertionError) as failure:
        boundary.Judge(reader).call("f()", unanswered, (), {}, None, core._run)
    assert failure.value.course_key == "not_answered" and failure.value.course_typed


def test_what_the_students_code_drew_does_not_change_the_callers_later_tensors(pipe):
    torch.manual_seed(0)
    expected = torch.randn(3)
    torch.manual_seed(0)
    sealed(pipe, lambda: torch.randn(1000))
    assert torch.equal(torch.randn(3), expected)


def frame(data: bytes) -> bytes:
    return boundary._HEADER.pack(len(data)) + data


class Planted:
    def __reduce__(self):
        return (os.system, ("touch planted",))


@pytest.mark.parametrize("sent", [
    b"",
    b"\x05\x00",
    frame(b'{"passed": true}\n'),
    frame(pickle.dumps({"what": "f()", "result": Planted()}, protocol=2)),
    boundary._HEADER.pack(boundary.FRAME_LIMIT + 1),
], ids=["nothing", "half-a-header", "a-forged-record", "a-pickle-that-runs-code", "too-large"])
def test_whatever_else_the_caller_sends_fails_the_call(pipe, sent, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    reader, writer = pipe
    os.write(writer, sent)
    os.close(writer)
    with pytest.raises(AssertionError) as failure:
        boundary.Judge(reader).call("f()", None, (), {}, None, core._run)
    assert failure.value.course_key in ("verdict_call_lost", "verdict_call_unreadable")
    assert not (tmp_path / "planted").exists()


def test_a_result_for_another_call_fails_the_call(pipe):
    reader, writer = pipe
    boundary.Recorder(writer).call("g()", lambda: 1, (), {}, None, core._run)
    with pytest.raises(AssertionError) as failure:
        boundary.Judge(reader).call("f()", None, (), {}, None, core._run)
    assert failure.value.course_key == "verdict_call_unreadable"


def test_a_result_of_an_unknown_kind_fails_the_call(pipe):
    reader, writer = pipe
    buffer = io.BytesIO()
    torch.save({"what": "f()", "result": {"kind": "module", "value": "os.system"}, "payloads": []}, buffer)
    os.write(writer, frame(buffer.getvalue()))
    back = boundary.Judge(reader).call("f()", None, (), {}, None, core._run)
    assert type(back).__module__ == boundary.__name__  # an opaque stand-in, which no check accepts
    with pytest.raises(AssertionError):
        checks.assert_tensor(back, "f()")
