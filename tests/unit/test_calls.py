"""The judge's requests (autograder/calls.py): what a call of the student's code is given reaches the caller as
the judge holds it, once per object, with the state around the call, and no code of the test's."""
import pytest
import torch
from torch import nn

from autograder import boundary, calls, checks, probes, simulate
from autograder.checks import core
from support.sealed import judge_and_caller, pipe, sealed  # noqa: F401: pipe is a fixture

TEST_MODULE = {"__name__": "__main__", "nn": nn, "torch": torch}  # where a test cell's classes are defined (verdict)


def defined_by(source) -> dict:
    """What a test cell's source defines, as the judge runs it."""
    scope = dict(TEST_MODULE)
    exec(source, scope)
    return scope


def asked(judge, stub, *args, **kwargs):
    return judge.call("f(...)", stub, args, kwargs, None, core.run_here)


def test_the_caller_is_given_its_own_object_again_by_its_number(pipe):
    """A result the caller made, given to a later call, is the caller's own object: its identity, its hooks and
    whatever the judge cannot see of it stay."""
    class Made(nn.Linear):  # a student's class: the judge holds a stand-in
        pass

    def make():
        made = Made(2, 2)
        made.private = object()
        return made

    judge, stubs = judge_and_caller(pipe, make=make, same=lambda first, second: first is second,
                                    private=lambda module: module.private is not None)
    made = asked(judge, stubs["make"])
    assert asked(judge, stubs["same"], made, made) is True
    assert asked(judge, stubs["private"], made) is True


def test_an_object_the_judge_made_is_sent_once_and_the_same_object_afterwards(pipe):
    """An answer that caches per model sees the same model both times, as in the kernel."""
    seen = []
    judge, stubs = judge_and_caller(pipe, remember=lambda model: seen.append(model) or len({id(m) for m in seen}))
    model = nn.Linear(2, 2)
    assert asked(judge, stubs["remember"], model) == 1
    assert asked(judge, stubs["remember"], model) == 1
    assert asked(judge, stubs["remember"], nn.Linear(2, 2)) == 2


def test_what_the_judge_changed_in_an_object_since_reaches_the_caller(pipe):
    """a2's tests change a layer the caller made (its weights, its mode) and a model they made (stale gradients)
    between two calls: the caller's object is changed as the judge's was, and stays the same object."""
    def state(model):
        return [model.training, model.weight.detach().clone(), model.weight.grad, model.note, model.cache.clone()]

    judge, stubs = judge_and_caller(pipe, state=state)
    model = nn.Linear(2, 1)
    model.note, model.cache = "before", torch.zeros(2)
    asked(judge, stubs["state"], model)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[3.0, 4.0]]))
    model.eval()
    model.weight.grad = torch.full((1, 2), 100.0)
    model.note, model.cache = "after", torch.ones(2)
    training, weight, grad, note, cache = asked(judge, stubs["state"], model)
    assert training is False and note == "after" and torch.equal(cache, torch.ones(2))
    assert torch.equal(weight, torch.tensor([[3.0, 4.0]])) and torch.equal(grad, torch.full((1, 2), 100.0))


def test_a_gradient_set_before_the_first_call_reaches_the_caller(pipe):
    """Pickling drops a tensor's gradient: a train_step that forgets zero_grad must meet the stale one."""
    model = nn.Linear(2, 1)
    model.weight.grad = torch.full((1, 2), 100.0)
    assert torch.equal(sealed(pipe, lambda m: m.weight.grad, model), torch.full((1, 2), 100.0))


def test_a_class_of_the_test_cell_is_a_stand_in_of_its_name_with_its_parts(pipe):
    """The student's code reads its parameters, buffers and attributes, never its code."""
    defined = defined_by("class Statistics(nn.Sequential):\n    def __init__(self):\n"
                         "        super().__init__(nn.Linear(3, 3))\n"
                         "        self.register_buffer('mean', torch.zeros(3))\n        self.count = 7\n")

    def look(module):
        return [type(module).__name__, isinstance(module, nn.Sequential), type(module).__module__, module.count,
                sorted(dict(module.named_buffers()))]

    name, sequential, module, count, buffers = sealed(pipe, look, defined["Statistics"]())
    assert (name, sequential, count, buffers) == ("Statistics", True, 7, ["mean"])
    assert module != "__main__"


def test_a_namedtuple_of_the_test_cell_is_one_of_its_name_and_fields(pipe):
    defined = defined_by("from collections import namedtuple\nPair = namedtuple('Pair', 'first second')\n")
    back = sealed(pipe, lambda pair: [type(pair).__name__, pair._fields, pair.second], defined["Pair"](1, "two"))
    assert back == ["Pair", ("first", "second"), "two"]


@pytest.mark.parametrize("source, given", [
    ("def helper(x):\n    return x\n", lambda d: d["helper"]),
    ("helper = lambda x: x\n", lambda d: d["helper"]),
    ("class Net(nn.Module):\n    def forward(self, x):\n        return x\n", lambda d: d["Net"]()),
    ("class Net(nn.Module):\n    pass\n", lambda d: d["Net"]),
], ids=["a-function", "a-lambda", "a-module-with-its-own-forward", "a-class-itself"])
def test_code_of_the_test_cell_never_reaches_the_caller(pipe, source, given):
    """The instructor's error (verdict_test_cell_gives_code): such a helper is shipped in autograder.probes."""
    with pytest.raises(boundary.TestCellCode):
        sealed(pipe, lambda value: None, given(defined_by(source)))


def test_a_then_shipped_in_the_course_runs_in_the_caller(pipe):
    w = torch.ones(3, requires_grad=True)
    judge, stubs = judge_and_caller(pipe, f=lambda t: t * 1)
    grad = judge.call("f(w)", stubs["f"], (w,), {}, probes.gradient_of_three_times, core.run_here)
    assert torch.equal(grad, torch.full((3,), 3.0)) and w.grad is None


def test_a_path_in_the_judges_temporary_folder_is_one_of_the_callers_with_the_file_the_test_wrote(pipe, tmp_path):
    import tempfile

    folder = tempfile.mkdtemp()
    path = f"{folder}/model.pt"
    torch.save({"w": torch.arange(3.0)}, path)
    where, loaded = sealed(pipe, lambda p: [p, torch.load(p, weights_only=True)["w"]], path)
    assert where != path and where.endswith(path[len(tempfile.gettempdir()):])
    assert torch.equal(loaded, torch.arange(3.0))


@pytest.mark.parametrize("around, seen", [
    (lambda: simulate.simulated_accelerator("cuda"), lambda: torch.cuda.is_available()),
    (lambda: torch.no_grad(), lambda: torch.is_grad_enabled()),
    (lambda: torch.autocast("cpu", dtype=torch.bfloat16), lambda: torch.is_autocast_enabled("cpu")),
    (lambda: probes.meta_copies_skipped(), lambda: probes.copies_skipped()),
    (lambda: core.host_reads_fail_on_meta(), lambda: core._VALUES_ON_META[-1]),
], ids=["simulated-machine", "no-grad", "autocast", "meta-copies-skipped", "host-reads-fail-on-meta"])
def test_the_call_runs_inside_what_the_judge_was_inside_of(pipe, around, seen):
    outside = sealed(pipe, seen)
    judge, stubs = judge_and_caller(pipe, f=seen)
    with around():
        inside = judge.call("f()", stubs["f"], (), {}, None, core.run_here)
    assert inside != outside


def test_the_caller_draws_from_where_the_test_cells_draws_left_off(pipe):
    torch.manual_seed(3)
    torch.randn(5)
    expected = torch.randn(2)
    torch.manual_seed(3)
    torch.randn(5)
    drawn = sealed(pipe, lambda: torch.randn(2))
    assert torch.equal(drawn, expected)


def test_two_calls_of_a_function_that_draws_draw_other_numbers(pipe):
    """As in the kernel, where the generators move on as the student's function draws (the third attacker's
    two-calls-of-a-right-random-function-draw-the-same-values-in-the-verdict)."""
    judge, stubs = judge_and_caller(pipe, f=lambda: torch.randn(2))
    torch.manual_seed(3)
    first, second = (judge.call("f()", stubs["f"], (), {}, None, core.run_here) for _ in range(2))
    assert not torch.equal(first, second)


def test_a_transfer_counter_around_the_call_counts_in_the_caller(pipe):
    with probes.count_transfers() as counter:
        sealed(pipe, lambda t: t.to("meta"), torch.ones(2))
    checks.assert_transfers(counter, 1, "f(t)")


class Unnumbered(boundary.Handles):
    """A caller's numbers as a hostile one sends them: none the judge takes."""

    def own(self, value):
        return -1


class Sampler:  # a student's object: held in the judge only as an opaque stand-in
    pass


class WithMemory(nn.Module):  # a student's module: rebuilt in the judge, its LSTM without the LSTM's __init__
    def __init__(self):
        super().__init__()
        self.memory = nn.LSTM(2, 2)


@pytest.mark.parametrize("made", [Sampler, WithMemory], ids=["an-opaque-object", "a-module-holding-an-lstm"])
def test_an_object_the_caller_sent_without_its_number_fails_the_call_not_the_test_cell(pipe, made):
    """A caller that leaves the numbers out (the student's process writes its report) leaves the judge an object it
    cannot give back: the later call that is given it fails, the student's, never the instructor's
    (attacks-slicing.toml, ...-blocks-grading-as-instructor-error)."""
    judge, stubs = judge_and_caller(pipe, Unnumbered(1), make=made, use=lambda value: 1)
    value = asked(judge, stubs["make"])
    with pytest.raises(AssertionError) as failure:
        asked(judge, stubs["use"], value)
    assert failure.value.course_key == "verdict_call_unreadable"
