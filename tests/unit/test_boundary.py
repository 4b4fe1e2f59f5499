"""A sealed call (autograder/boundary.py, autograder/calls.py): what the caller sends is all the judge sees,
rebuilt from data.

Both sides run here in one process, over real pipes: the Judge asks for the call with its own arguments, the
caller makes it on its copies of them (as a forked child rebuilds them from the request) and writes its report,
the Judge reads and rebuilds it, and the checks run on what the Judge returned.
"""
import copy
import io
import os
import pickle
import re
from collections import OrderedDict, defaultdict, namedtuple
from collections.abc import Mapping

import pytest
import torch

from autograder import boundary, calls, checks, has_data
from autograder.devices import same_device
from autograder.checks import core
from autograder.probes import gradient_of_three_times
from support.sealed import judge_and_caller, pipe, sealed, told  # noqa: F401: pipe is a fixture
from support.messages import shows

Sample = namedtuple("Sample", ["image", "label"])


@pytest.mark.parametrize("value", [None, True, 3, 2.5, "text", torch.device("meta"), torch.bfloat16],
                         ids=["None", "bool", "int", "float", "str", "device", "dtype"])
def test_a_plain_value_comes_back_equal_and_of_its_type(pipe, value):
    back = sealed(pipe, lambda: value)
    assert back == value and type(back) is type(value)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_a_new_tensor_comes_back_with_its_device_dtype_and_values(pipe, device, dtype):
    x = torch.arange(6).reshape(2, 3).to(dtype)
    back = sealed(pipe, lambda t: t.to(device, copy=True), x)
    assert back is not x and same_device(back.device, device) and back.dtype == dtype and back.shape == x.shape
    if has_data(device):
        assert torch.equal(back.cpu(), x)


def test_a_module_made_on_a_device_comes_back_there_with_its_values(pipe, device):
    torch.manual_seed(0)
    back = sealed(pipe, lambda: torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.BatchNorm1d(3)).to(device).eval())
    checks.assert_module_on(back, device, "f()")
    torch.manual_seed(0)
    made_here = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.BatchNorm1d(3))
    if has_data(device):
        for name, tensor in made_here.state_dict().items():
            assert torch.equal(back.state_dict()[name].cpu(), tensor), name


def test_a_module_argument_moved_by_the_call_is_the_judges_own_now_on_that_device(pipe, device):
    model, judged = torch.nn.BatchNorm1d(3), torch.nn.BatchNorm1d(3)
    assert sealed(pipe, lambda m: m.to(device), model, judged=(judged,)) is judged
    checks.assert_module_on(judged, device, "f(model)")


def test_an_argument_returned_is_the_judges_own_argument(pipe):
    x, judged = torch.ones(3), torch.ones(3)
    assert sealed(pipe, lambda t: t.to("cpu"), x, judged=(judged,)) is judged


def test_an_argument_is_known_however_often_the_arguments_repeat_another(pipe):
    """Each object of the arguments is one position, found once: rows that repeat the same tensors do not use
    up the positions before the judge finds the tensor the call returns."""
    row = [torch.zeros(2)] * 400
    x, judged = torch.ones(3), torch.ones(3)
    assert sealed(pipe, lambda rows, t: t, [row] * 400, x, judged=([copy.deepcopy(row)] * 400, judged)) is judged


def cast_by_data(t):
    t.data = t.data.double() * 2
    return t


def moved_by_swap(t):
    torch.utils.swap_tensors(t, t.to("meta"))
    return t


def made_trainable(t):
    moved = t.to("cpu")  # the very tensor, where the device does not change
    moved.requires_grad_()
    return moved


@pytest.mark.parametrize("change", [cast_by_data, moved_by_swap, lambda t: t.mul_(2), made_trainable],
                         ids=["data", "swap", "in-place op", "requires grad"])
def test_a_tensor_argument_changed_in_place_fails_the_call(pipe, change):
    """A test computes what it expects from its arguments after the call: a function that overwrote its
    argument would make its own wrong result the expected one."""
    x, judged = torch.ones(3), torch.ones(3)
    with pytest.raises(AssertionError) as failure:
        sealed(pipe, change, x, judged=(judged,))
    assert failure.value.course_key == "changed_argument" and failure.value.course_fields["what"] == "f(...)" and torch.equal(judged, torch.ones(3))


def test_a_modules_parameter_changed_in_place_is_changed_in_the_judge_too(pipe):
    model, judged = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    judged.load_state_dict(model.state_dict())

    def cast(m):
        m.weight.data = m.weight.data.double() * 2
        return m

    expected = judged.weight.detach().double() * 2
    assert sealed(pipe, cast, model, judged=(judged,)) is judged
    assert judged.weight.dtype == torch.float64 and torch.equal(judged.weight.detach(), expected)


def test_containers_keep_their_types_when_the_judge_knows_them(pipe):
    batch = {"pair": (torch.ones(1), [torch.zeros(2)]), "sample": Sample(torch.ones(2), 1), "extra": OrderedDict(n=7)}
    back = sealed(pipe, lambda b: b, batch)
    assert type(back) is dict and type(back["pair"]) is tuple and type(back["pair"][1]) is list
    assert type(back["sample"]) is Sample and back["sample"].label == 1
    assert type(back["extra"]) is OrderedDict and back["extra"]["n"] == 7


@pytest.mark.parametrize("kind", [list, dict, OrderedDict])
def test_a_container_argument_returned_is_the_judges_own_changed_as_the_callers_was(pipe, kind):
    def rename_in_place(state):
        if isinstance(state, list):
            state.reverse()
        else:
            state["renamed"] = state.pop("module.w")
        return state

    given = kind([1, 2]) if kind is list else kind({"module.w": torch.ones(1), "b": 2})
    judged = copy.deepcopy(given)
    assert sealed(pipe, rename_in_place, given, judged=(judged,)) is judged
    assert list(judged) == ([2, 1] if kind is list else ["b", "renamed"])


def test_an_object_the_judge_cannot_rebuild_stays_an_opaque_stand_in_named_as_the_students(pipe):
    class Everything:
        def __contains__(self, name):
            return True

    back = sealed(pipe, lambda: Everything())
    assert type(back).__name__ == "Everything" and repr(back) == "<Everything>"  # as a diagnostic shows it
    with pytest.raises(TypeError):
        "anything" in back


class LoaderOptions(dict):
    __getattr__ = dict.__getitem__


class Everything(list):
    def __contains__(self, name):
        return True


Point = namedtuple("Point", ["x", "y"])

# A container of a subclass (a defaultdict, a dict or list of the student's, their own namedtuple) is what
# its base is in the kernel (`isinstance(kwargs, dict)`): the judge rebuilds it as that base, named as the
# student's for a diagnostic, with its items and none of the student's methods (issue 41, attack-41).
SUBCLASSES = {
    "defaultdict": (lambda: defaultdict(bool, pin_memory=True), dict, {"pin_memory": True}),
    "dict-subclass": (lambda: LoaderOptions(pin_memory=False), dict, {"pin_memory": False}),
    "list-subclass": (lambda: Everything([1]), list, [1]),
    "namedtuple": (lambda: Point(1, torch.ones(1)), tuple, (1, torch.ones(1))),
}


@pytest.mark.parametrize("made, base, items", SUBCLASSES.values(), ids=SUBCLASSES.keys())
def test_a_container_of_a_subclass_is_its_base_in_the_judge_named_as_the_students(pipe, made, base, items):
    made_here = made()
    back = sealed(pipe, made)
    assert isinstance(back, base) and type(back).__name__ == type(made_here).__name__
    assert type(back) is not type(made_here)  # the judge's own type: none of the student's code
    assert list(back.items() if isinstance(back, dict) else back)[:1] == list(
        items.items() if isinstance(items, dict) else items)[:1]
    assert "anything" not in back
    if isinstance(made_here, Point):
        assert back.x == 1 and torch.equal(back.y, torch.ones(1))


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


@pytest.mark.parametrize("made", [lambda: torch.ones(3), lambda: torch.ones(3, dtype=torch.bfloat16),
                                  lambda: torch.arange(3), lambda: torch.ones(3, requires_grad=True).detach()],
                         ids=["float32", "bfloat16", "int64", "detached"])
def test_a_new_tensor_that_needs_no_gradient_needs_none_in_the_judge(pipe, made):
    back = sealed(pipe, made)
    assert not back.requires_grad and back.is_leaf


def test_a_gradient_is_measured_by_then_where_the_result_was_made(pipe):
    w = torch.ones(3, requires_grad=True)
    judged = torch.ones(3, requires_grad=True)
    assert torch.equal(sealed(pipe, lambda t: t.clone(), w, then=gradient_of_three_times, judged=(judged,)),
                       torch.full((3,), 3.0))
    assert judged.grad is None  # the judge's own tensor: nothing ran backward there


# ------------------------------------------------------------------ arguments the student's code changes

def test_a_module_changed_in_place_is_changed_in_the_judge_keeping_its_parameters(pipe):
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
    judged = copy.deepcopy(model)
    parameters = dict(judged.named_parameters())

    def cast_and_train(m):
        m[0].half()
        m[1].eval()
        m[0].weight.grad = torch.ones(2, 3, dtype=torch.float16)
        m[1].running_mean.add_(5)
        m.seen = {"forward": torch.zeros(1), "flag": True}
        return m

    assert sealed(pipe, cast_and_train, model, judged=(judged,)) is judged
    cast_and_train(model)  # as the caller changed its copy
    assert judged[0].weight is parameters["0.weight"] and judged[0].weight.dtype == torch.float16
    assert torch.equal(judged[0].weight, model[0].weight) and torch.equal(judged[0].weight.grad, model[0].weight.grad)
    assert judged.training and not judged[1].training
    assert torch.equal(judged[1].running_mean, torch.full((2,), 5.0))
    assert judged.seen["flag"] is True and torch.equal(judged.seen["forward"], torch.zeros(1))


def test_a_parameter_replaced_by_a_new_one_is_a_new_one_in_the_judge(pipe):
    model = torch.nn.Linear(2, 2)
    judged = copy.deepcopy(model)
    original = judged.weight

    def replace(m):
        m.weight = torch.nn.Parameter(m.weight.detach().double())

    sealed(pipe, replace, model, judged=(judged,))
    assert judged.weight is not original and type(judged.weight) is torch.nn.Parameter
    assert judged.weight.dtype == torch.float64


def test_a_modules_tensors_swapped_onto_a_device_are_the_judges_own_there(pipe, accelerator):
    """`model.to(device)` with PyTorch's swap on conversion keeps each parameter object and swaps its
    contents (cpu to meta, which `.data =` refuses): the judge's own parameters hold the caller's now."""
    model = torch.nn.BatchNorm1d(3)
    judged = copy.deepcopy(model)
    parameters = list(judged.parameters())

    def swapped_to(m):
        swapping = torch.__future__.get_swap_module_params_on_conversion()
        torch.__future__.set_swap_module_params_on_conversion(True)
        try:
            return m.to(accelerator)
        finally:
            torch.__future__.set_swap_module_params_on_conversion(swapping)

    assert sealed(pipe, swapped_to, model, judged=(judged,)) is judged
    assert all(mine is theirs for mine, theirs in zip(judged.parameters(), parameters, strict=True))
    assert all(type(p) is torch.nn.Parameter and p.requires_grad and p.shape == (3,) for p in parameters)
    checks.assert_module_on(judged, accelerator, "f(model)")


class Wrapper(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner


@pytest.mark.parametrize("name, shown", [("norm", "1.norm"), ("not a name!", "…")], ids=["plain", "odd-name"])
def test_a_layer_wrapped_by_the_call_fails_it_with_the_structure_diagnostic_and_changes_nothing(pipe, name, shown):
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.LayerNorm(2))
    judged = copy.deepcopy(model)

    def wrap(m):
        m[0].half()
        wrapper = torch.nn.Module()
        wrapper.add_module(name, m[1]) if name.isidentifier() else wrapper._modules.__setitem__(name, m[1])
        m[1] = wrapper

    with pytest.raises(AssertionError) as failure:
        sealed(pipe, wrap, model, judged=(judged,))
    assert failure.value.course_key == "module_restructured" and failure.value.course_fields["what"] == "f(...)"
    assert failure.value.course_fields["name"] == shown
    assert judged[0].weight.dtype == torch.float32 and type(judged[1]) is torch.nn.LayerNorm  # nothing written
    local = copy.deepcopy(judged)
    structure = checks.submodule_paths(local)
    wrap(local)
    with pytest.raises(AssertionError) as unsealed:  # the same diagnostic where no boundary is in between
        checks.assert_structure(local, structure, "f(...)")
    assert unsealed.value.course_key == "module_restructured"


def test_an_optimizer_and_a_grad_scaler_changed_by_the_call_are_changed_in_the_judge(pipe):
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=8.0, growth_interval=1)
    judged = copy.deepcopy((model, optimizer, scaler))

    def step(m, opt, s):
        s.scale(m(torch.ones(1, 2)).sum()).backward()
        s.step(opt)
        s.update()
        opt.param_groups[0]["lr"] = 0.5

    sealed(pipe, step, model, optimizer, scaler, judged=judged)
    step(model, optimizer, scaler)  # as the caller changed its copies
    judged_model, judged_optimizer, judged_scaler = judged
    assert judged_scaler.get_scale() == 16.0
    assert judged_optimizer.param_groups[0]["lr"] == 0.5
    assert judged_optimizer.param_groups[0]["params"][0] is judged_model.weight  # still the judge's parameters
    assert torch.equal(judged_model.weight, model.weight) and judged_model.weight.grad is not None


class Options(Mapping):
    """A mapping of the student's that is not a dict: the judge has no type to rebuild it as."""

    def __getitem__(self, key):
        return {"pin_memory": True}[key]

    def __iter__(self):
        return iter(["pin_memory"])

    def __len__(self):
        return 1


def nested(depth):
    return [] if depth == 0 else [nested(depth - 1)]


# what a module argument may be given that the judge cannot rebuild as it was
UNREBUILDABLE = {
    "a-students-object": lambda: Options,
    "a-students-mapping": Options,
    "nested-too-deep": lambda: nested(boundary.DEPTH_LIMIT + 8),
}


@pytest.mark.parametrize("made", UNREBUILDABLE.values(), ids=UNREBUILDABLE.keys())
def test_an_attribute_the_judge_cannot_rebuild_stays_out_and_the_others_still_cross(pipe, made):
    """An opaque stand-in written into the judge's module would be called there as if it were the
    student's object; the judge keeps its own attribute instead, and still takes every other one."""
    model = torch.nn.Linear(2, 2)
    judged = copy.deepcopy(model)

    def configure(m):
        m.extra = made()  # first: what comes after it is mirrored all the same
        m.flag = True

    sealed(pipe, configure, model, judged=(judged,))
    assert "extra" not in vars(judged) and judged.flag is True


@pytest.mark.parametrize("state, broken", [
    ("held", []),
    ("attributes", ["__class__", {"kind": "constant", "value": 1}]),
    ("attributes", ["_parameters", {"kind": "constant", "value": None}]),
    ("attributes", ["training", {"kind": "constant", "value": "yes"}]),
    ("parameters", ["weight", {"kind": "constant", "value": 1}]),
], ids=["no-state", "a-dunder", "a-private-attribute", "training", "a-parameter-not-a-tensor"])
def test_a_forged_state_of_an_argument_fails_the_call(pipe, state, broken):
    reader, writer = pipe
    model = torch.nn.Linear(2, 2)
    before = dict(model._parameters)
    module = {"training": True, "parameters": [], "grads": [], "buffers": [], "non_persistent": [], "attributes": []}
    report = {"what": "f()", "result": {"kind": "constant", "value": None}, "payloads": [], "counters": [],
              "held": [{"modules": [["", module]]}], "files": [], "carrying": []}  # all but the forged part
    if state == "held":
        report["held"] = broken
    else:
        module[state] = [broken]
    os.write(writer, forged(report))
    with pytest.raises(AssertionError) as failure:
        told(reader).call("f()", None, (model,), {}, None, core.run_here)
    assert failure.value.course_key == "verdict_call_unreadable" and failure.value.course_fields["what"] == "f()"
    assert model._parameters == before and model.training  # nothing written


@pytest.mark.parametrize("saves", ["checkpoint", "empty", None], ids=["saved", "empty", "not-saved"])
def test_a_file_saved_at_a_path_argument_is_at_the_judges_own_path(pipe, tmp_path, saves):
    """Caller and judge have folders of their own (a test's tempfile): the file goes by argument position.
    The function returns a tensor too: its data crosses beside the file's."""
    (tmp_path / "caller").mkdir()
    (tmp_path / "judge").mkdir()
    judged = tmp_path / "judge" / "model.pt"
    judged.write_bytes(b"stale")  # a file the student's function removed, or never wrote, is not there

    def save(state, path, device):
        if saves == "checkpoint":
            torch.save(state, path)
        elif saves == "empty":
            open(path, "wb").close()
        elif os.path.exists(path):
            os.remove(path)
        return state["w"] * 2

    state = {"w": torch.arange(3.0)}
    back = sealed(pipe, save, state, str(tmp_path / "caller" / "model.pt"), "cpu", judged=(state, str(judged), "cpu"))
    assert torch.equal(back, torch.arange(3.0) * 2)
    assert judged.exists() is (saves is not None)
    if saves == "checkpoint":
        assert torch.equal(torch.load(judged, weights_only=True)["w"], torch.arange(3.0))
    if saves == "empty":
        assert judged.read_bytes() == b""



@pytest.mark.parametrize("named, plain", [
    ("{tmp}/model.pt", True),
    ("{tmp}/../{name}/model.pt", False),  # the same file, by a way round
    ("{tmp}/link/fd/4", False),  # a link on the way: to /proc/self
    ("/proc/self/cwd/model.pt", False),  # a place of each process's own
    ("model.pt", False),
], ids=["plain", "dot-dot", "link", "proc", "relative"])
def test_only_a_plain_path_in_the_temporary_folder_is_a_file_of_the_call(tmp_path, named, plain):
    """attacks-slicing.toml, loader-kwargs-path-makes-the-judge-write-its-own-result-pipe: a string the student's
    function returned, passed on by the test, named the judge's own result pipe, where the judge wrote the
    caller's bytes."""
    os.symlink("/proc/self", tmp_path / "link")
    path = named.format(tmp=tmp_path, name=tmp_path.name)
    assert boundary._paths((path,), {"also": path}) == ([path, path] if plain else [])


def test_a_file_of_the_call_is_written_in_the_judge_without_following_a_link(tmp_path):
    target, link = tmp_path / "target", tmp_path / "model.pt"
    os.symlink(target, link)
    with pytest.raises(OSError):
        boundary._write_files([str(link)], [{"exists": True, "payload": 0}], [torch.zeros(3, dtype=torch.uint8)])
    assert not target.exists()
    boundary._write_files([str(link)], [{"exists": False}], [])
    assert link.is_symlink()  # only a file is removed

def test_the_error_the_callers_function_raised_is_the_cause_of_the_judges_diagnostic(pipe):
    def on_meta(t):
        return t.to("meta").cpu()

    with pytest.raises(AssertionError) as failure:
        sealed(pipe, on_meta, torch.ones(2))
    assert "Cannot copy out of meta tensor" in str(failure.value.__cause__)


@pytest.mark.parametrize("raised, passes", [(ValueError, True), (type("SplitError", (ValueError,), {}), True),
                                            (RuntimeError, False), (None, False)],
                         ids=["ValueError", "a-subclass", "another-error", "nothing"])
def test_the_judge_knows_the_error_the_callers_function_raised_by_its_classes(pipe, monkeypatch, raised, passes):
    """checks.assert_raises in a sealed test: the error was raised in the caller, the judge decides."""
    def model_device(model):
        if raised is not None:
            raise raised("split over several devices")

    judge, stubs = judge_and_caller(pipe, model_device=model_device)
    monkeypatch.setattr(core, "boundary", judge)
    try:
        checks.assert_raises(ValueError, "model_device(split)", stubs["model_device"], torch.ones(1),
                             hint="hint_split_devices")
        outcome = True
    except AssertionError as failure:
        outcome = failure
    assert outcome is True if passes else outcome.course_key == "expected_error"


@pytest.mark.parametrize("tensor", [torch.arange(6.0).reshape(2, 3).T, torch.tensor(2.5, dtype=torch.float64),
                                    torch.tensor([True, False]), torch.arange(3, dtype=torch.int16)],
                         ids=["transposed", "0-dim", "bool", "int16"])
def test_a_numpy_array_comes_back_with_its_dtype_shape_and_values(pipe, tensor):
    back = sealed(pipe, lambda t: t.numpy(), tensor)
    checks.assert_ndarray(back, tensor, "f(t)")


def test_an_array_of_python_objects_is_an_opaque_stand_in(pipe):
    import numpy

    back = sealed(pipe, lambda: numpy.array([object()]))
    with pytest.raises(AssertionError):
        checks.assert_ndarray(back, torch.zeros(1), "f()")


@pytest.mark.parametrize("function, transfers", [
    (lambda ts, device: torch.stack(ts).to(device), 1),
    (lambda ts, device: torch.stack([t.to(device) for t in ts]), 3),
], ids=["one-transfer", "one-per-tensor"])
def test_a_transfer_counter_around_a_call_counts_what_the_callers_counter_saw(pipe, accelerator, function, transfers):
    from functools import partial

    from autograder.probes import count_transfers

    function = partial(function, device=accelerator)
    tensors = [torch.ones(2) for _ in range(3)]
    with count_transfers() as here:
        function(copy.deepcopy(tensors))
    with count_transfers() as judge:  # the caller counts inside a counter of its own: the judge's is told
        moved = sealed(pipe, function, tensors)
    assert here.transfers == judge.transfers == transfers
    checks.assert_transfers(judge, transfers, "f()", result=moved)


def test_a_result_made_out_of_the_callers_sight_is_unseen_by_the_judges_counter(pipe):
    from torch.utils._python_dispatch import _disable_current_modes

    
    from autograder.probes import count_transfers

    def hidden(t):
        with _disable_current_modes():
            return t.to("meta")

    with count_transfers() as judge:
        moved = sealed(pipe, hidden, torch.ones(2))
    with pytest.raises(AssertionError) as failure:
        checks.assert_transfers(judge, 1, "f()", result=moved)
    assert failure.value.course_key == "transfer_unseen"


def test_only_a_call_that_involves_the_students_code_crosses(pipe):
    """`DataLoader(dataset, **kwargs)` runs on each side; a call on a student's object runs where it lives."""
    class Sampler:  # a student's object: the judge holds it as an opaque stand-in
        def __iter__(self):
            return iter([2, 0, 1])

    def make_sampler():
        return Sampler()

    def total(values):  # the test's own function
        return sum(values)

    judge, stubs = judge_and_caller(pipe, make_sampler=make_sampler)
    assert judge.call("len()", len, ([1, 2],), {}, None, core.run_here) == 2  # nothing asked
    assert judge.call("total()", total, ([1, 2],), {}, None, core.run_here) == 3
    assert judge.asked == 0
    stand_in = judge.call("make_sampler()", stubs["make_sampler"], (), {}, None, core.run_here)
    assert judge.call("list(sampler)", list, (stand_in,), {}, None, core.run_here) == [2, 0, 1]  # on the caller's


def test_a_call_on_a_mapping_of_the_students_class_that_a_call_returned_crosses(pipe):
    """The judge holds it as an opaque stand-in: `len(options)` runs in the caller, on the student's object."""
    def make_options():
        return Options()

    judge, stubs = judge_and_caller(pipe, make_options=make_options)
    stand_in = judge.call("make_options()", stubs["make_options"], (), {}, None, core.run_here)
    assert judge.call("len(options)", len, (stand_in,), {}, None, core.run_here) == 1
    assert judge.asked == 2


def test_a_module_that_carries_the_students_hooks_runs_in_the_caller(pipe, monkeypatch):
    """cast_floating's answer hooks the norms: the check's forward pass then runs where the hooks are."""
    def cast_floating(model, dtype):
        model.to(dtype)
        model[1].float().register_forward_pre_hook(lambda m, args: (args[0].float(),))
        model[1].register_forward_hook(lambda m, args, out: out.to(dtype))
        return model

    judged = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4)).eval()
    x = torch.randn(2, 3, dtype=torch.bfloat16)
    judge, stubs = judge_and_caller(pipe, cast_floating=cast_floating)
    monkeypatch.setattr(core, "boundary", judge)
    assert checks.call("cast_floating(model, torch.bfloat16)", stubs["cast_floating"], judged, torch.bfloat16) is judged
    assert judge.carries(judged) and not judged[1]._forward_hooks  # the hooks stay in the caller
    checks.assert_16_bit_forward(judged, x, torch.bfloat16, "<cast model>(x)")  # run there, read here


class Masked(torch.nn.Module):
    """A student's module: a non-persistent buffer behind a property, and a forward of its own."""

    def __init__(self, mask):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(2, 3))
        self.register_buffer("_mask", mask, persistent=False)
        self.scale = 2.0

    @property
    def mask(self):
        return self._mask

    def forward(self, x):
        return x @ (self.weight * self.mask).T * self.scale


def test_a_module_of_the_students_class_is_a_stand_in_whose_calls_cross(pipe, accelerator):
    """a2's MaskedLinear: built, called and moved through checks.call; the judge holds a stand-in."""
    judge, stubs = judge_and_caller(pipe, Masked=Masked)
    judged_mask = torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])
    stand_in = judge.call("Masked(mask)", stubs["Masked"], (judged_mask,), {}, None, core.run_here)
    assert type(stand_in).__name__ == "Masked" and isinstance(stand_in, torch.nn.Module)
    assert stand_in.mask is stand_in._buffers["_mask"] is judged_mask  # the property's value, the same tensor
    assert stand_in._non_persistent_buffers_set == {"_mask"} and stand_in.scale == 2.0
    checks.assert_fixed_tensor(stand_in, "mask", "Masked(mask)")
    out = judge.call("layer(x)", stand_in, (torch.ones(1, 3),), {}, None, core.run_here)  # ran in the caller
    assert torch.equal(out, torch.tensor([[4.0, 4.0]]))
    assert judge.call("layer.to(device)", stand_in.to, (accelerator,), {}, None, core.run_here) is stand_in
    checks.assert_module_on(stand_in, accelerator, "layer.to(device)")


def test_a_module_of_pytorchs_class_made_by_the_call_is_one_again(pipe):
    torch.manual_seed(0)
    back = sealed(pipe, lambda: torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.BatchNorm1d(3)).eval())
    assert [type(m) for m in back] == [torch.nn.Linear, torch.nn.BatchNorm1d] and not back.training
    assert back[0].in_features == 2 and back[1].num_batches_tracked.dtype == torch.int64


@pytest.mark.parametrize("made", [lambda: torch.ones(2), lambda: torch.nn.Parameter(torch.ones(2)),
                                  lambda: torch.ones(2, requires_grad=True) * 2],
                         ids=["tensor", "parameter", "computed"])
def test_a_tensor_found_twice_in_a_result_is_one_tensor_in_the_judge(pipe, made):
    back = sealed(pipe, lambda: (lambda t: [t, {"again": t}])(made()))
    assert back[0] is back[1]["again"]


@pytest.mark.parametrize("wrap", [lambda inner: [inner], lambda inner: {"inner": inner}], ids=["list", "dict"])
def test_a_result_nested_as_deep_as_the_limit_comes_back_and_no_deeper(pipe, wrap):
    result = 1
    for _ in range(boundary.DEPTH_LIMIT):
        result = wrap(result)
    assert sealed(pipe, lambda: result) == result
    with pytest.raises(RecursionError):  # the caller sends nothing: the judge's call is lost
        boundary.Recorder(pipe[1]).call(1, lambda: wrap(result), (), {}, None, core.run_here)


def test_a_tensor_computed_in_the_call_from_none_of_its_arguments_still_requires_grad(pipe):
    back = sealed(pipe, lambda: torch.ones(2, requires_grad=True) * 2)
    assert back.requires_grad and not back.is_leaf


def test_a_failed_calls_diagnostic_is_the_judges_own(pipe):
    """The caller ran the test cell: what it says of a failure (its fields, its text) is not shown. The
    judge makes the diagnostic again from its own label and the error's kind and text."""
    def unanswered():
        raise NotImplementedError()

    judge, stubs = judge_and_caller(pipe, unanswered=unanswered)
    with pytest.raises(AssertionError) as failure:
        judge.call("f()", stubs["unanswered"], (), {}, None, core.run_here)
    assert failure.value.course_key == "not_answered" and failure.value.course_fields == {"what": "f()"}


@pytest.mark.parametrize("kinds, cause, key", [
    (["ValueError", "Exception"], "split over meta and cpu", "verdict_call_raised"),
    (["RuntimeError"], "Expected all tensors to be on the same device, but found cuda:0 and cpu", "device_mismatch"),
    ([], "", "verdict_call_unreadable"),
    (["ValueError"], 5, "verdict_call_raised"),
], ids=["another-error", "a-known-mistake", "no-error", "a-text-not-a-string"])
def test_a_raised_error_is_known_by_its_kind_and_pytorchs_words(kinds, cause, key):
    failure = boundary._reported("f(x)", {"key": "raised", "fields": {"what": {"str": "hidden words"}},
                                          "kinds": kinds, "cause": cause})
    assert failure.course_key == key and failure.course_fields["what"] == "f(x)"
    assert (failure.__cause__ is not None) == bool(kinds)
    if kinds:
        assert failure.course_fields["error"] == f"{kinds[0]}: {cause if isinstance(cause, str) else ''}".split("\n")[0]


@pytest.mark.parametrize("sent, shown", [("torch.Tensor.to, builtins.isinstance", "torch.Tensor.to, builtins.isinstance"),
                                         ("torch.Tensor.to, <your grade: 100>", "torch.Tensor.to"),
                                         ("<your grade: 100>", "…")],
                         ids=["watched-names", "a-forged-name", "no-watched-name"])
def test_tampering_seen_in_the_caller_is_the_judges_diagnostic_naming_only_watched_names(pipe, sent, shown):
    """The caller's integrity check saw a patched function: the judge says so in its own words, and names
    only what it watches itself (the caller's text could say anything)."""
    from autograder.messages import diagnostic

    def tampered(what, *call, **options):
        raise diagnostic("tampering", what=what, names=sent)

    reader, writer = pipe
    with pytest.raises(AssertionError):
        boundary.Recorder(writer).call(1, None, (), {}, None, tampered)
    with pytest.raises(AssertionError) as failure:
        told(reader).call("f()", None, (), {}, None, core.run_here)
    assert failure.value.course_key == "tampering" and failure.value.course_fields == {"what": "f()", "names": shown}


def recursing(depth):
    if depth == 0:
        raise ValueError("the innermost frame")
    return recursing(depth - 1)


def test_a_raised_error_crosses_with_the_source_lines_of_its_innermost_frames_only(pipe):
    """The grader shows the first of them that is a line of the student's cells (verdict.render): the
    innermost ones are where the student's mistake is; the outer ones, the test's, do not cross."""
    reader, writer = pipe
    with pytest.raises(AssertionError):
        boundary.Recorder(writer).call(1, recursing, (20,), {}, None, core.run_here)
    lines = boundary.read_frame(reader)["failed"]["lines"]
    assert lines == ['raise ValueError("the innermost frame")', *["return recursing(depth - 1)"] * 7]


def test_the_judge_shows_no_more_source_lines_than_an_honest_caller_sends(pipe):
    reader, writer = pipe
    lines = [f"line_{i} = {i}" for i in range(20)]
    os.write(writer, forged({"what": 1, "failed": {"kinds": ["ValueError"], "cause": "", "lines": lines}}))
    with pytest.raises(AssertionError) as failure:
        told(reader).call("f()", None, (), {}, None, core.run_here)
    assert failure.value.course_fields["lines"].splitlines() == lines[:8]


def test_what_the_students_code_drew_does_not_change_the_judges_later_tensors(pipe):
    later = []
    for count in (1, 1000):
        torch.manual_seed(0)
        sealed(pipe, lambda: torch.randn(count))
        later.append(torch.randn(3))
    assert torch.equal(*later)


def frame(data: bytes) -> bytes:
    return boundary._HEADER.pack(len(data)) + data


def forged(report: dict) -> bytes:
    """A frame a caller could write: any plain data, its tensors as the caller sends them (`boundary._wire`)."""
    if "payloads" in report:
        report = {**report, "payloads": [boundary._wire(p) if isinstance(p, torch.Tensor) else p
                                         for p in report["payloads"]]}
    return frame(pickle.dumps(report, protocol=5))


@pytest.mark.parametrize("tensor", [
    torch.arange(6.0).reshape(2, 3).T, torch.tensor(2.5, dtype=torch.bfloat16), torch.tensor([True, False]),
    torch.empty(0, 3, dtype=torch.float16), torch.tensor([1 + 2j]).conj(), -torch.arange(3), torch.zeros(2, 5, device="meta"),
    torch.eye(3).to_sparse(), torch.randn(2, 2, dtype=torch.float64).requires_grad_(), torch.randn(1, 5)[:, 0],
    torch.randn(8, 3)[::4][:1],
], ids=["transposed", "bfloat16-0-dim", "bool", "empty-float16", "conjugate", "int64", "meta", "sparse", "float64",
        "one-element-column", "one-row-of-a-strided-view"])
def test_a_tensor_crosses_as_its_bytes_and_comes_back_equal(tensor):
    """What the caller sends is made by PyTorch's C methods alone, and what the judge rebuilds is the same tensor:
    device, dtype, shape and values (strides and layout are no check's)."""
    back = boundary._unwired(pickle.loads(pickle.dumps(boundary._wire(tensor.detach()))))
    assert (back.device, back.dtype, back.shape) == (tensor.device, tensor.dtype, tensor.shape)
    if tensor.device.type != "meta":
        assert torch.equal(back, tensor.detach().resolve_conj().resolve_neg().to_dense())


def test_the_report_is_sent_whatever_a_cell_replaced_of_torch_save(pipe, monkeypatch):
    """attacks-machines.toml: torch-saves-first-unwatched-step-rewrites-every-callers-report. Nothing that sends a
    report looks up a name a cell can change: torch.save, torch.serialization, pickle.Pickler and
    Tensor.__reduce_ex__ replaced by code that would rewrite the report are never called."""
    reader, writer = pipe

    def rewrite(*args, **kwargs):
        raise AssertionError("the student's replacement ran")

    for owner, name in [(torch, "save"), (torch.serialization, "_check_dill_version"), (torch.serialization, "_save"),
                        (pickle, "Pickler"), (torch.Tensor, "__reduce_ex__"), (torch.Tensor, "__torch_function__")]:
        monkeypatch.setattr(owner, name, rewrite)
    boundary.Recorder(writer).call(1, lambda: torch.arange(3.0), (), {}, None, core.run_here)
    monkeypatch.undo()
    back = told(reader).call("f()", None, (), {}, None, core.run_here)
    assert torch.equal(back, torch.arange(3.0))


@pytest.mark.parametrize("payload", [
    ["float32", [3], "cpu", b"\0" * 11], ["float32", [3], "cpu", None], ["no_such_dtype", [1], "cpu", b"\0"],
    ["uint8", [-1], "cpu", b""], ["uint8", [1] * 65, "cpu", b"\0"], ["uint8", [1.5], "cpu", b"\0"],
    ["uint8", [1], "nowhere", b"\0"], "not a payload",
], ids=["too-few-bytes", "no-bytes", "unknown-dtype", "negative-size", "too-many-dimensions", "float-size",
        "unknown-device", "a-string"])
def test_a_payload_that_is_not_a_tensors_bytes_fails_the_call(pipe, payload):
    reader, writer = pipe
    os.write(writer, forged({"what": 1, "result": {"kind": "tensor", "payload": 0, "same": None, "parameter": False,
                                                       "requires_grad": False, "leaf": True, "sources": [],
                                                       "grad_fn": "NoneType"},
                             "payloads": [payload], "held": [], "counters": [], "files": [], "carrying": []}))
    with pytest.raises(AssertionError) as failure:
        told(reader).call("f()", None, (), {}, None, core.run_here)
    assert failure.value.course_key == "verdict_call_unreadable" and failure.value.course_fields["what"] == "f()"


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
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")  # the judge asks for data only, whatever torch's default
    reader, writer = pipe
    os.write(writer, sent)
    os.close(writer)
    with pytest.raises(AssertionError) as failure:
        told(reader).call("f()", None, (), {}, None, core.run_here)
    assert failure.value.course_key in ("verdict_call_lost", "verdict_call_unreadable")
    assert failure.value.course_fields["what"] == "f()"  # the judge's own label
    assert not (tmp_path / "planted").exists()


def test_a_result_for_another_call_fails_the_call(pipe):
    reader, writer = pipe
    boundary.Recorder(writer).call(2, lambda: 1, (), {}, None, core.run_here)  # the report of request 2
    with pytest.raises(AssertionError) as failure:
        told(reader).call("f()", None, (), {}, None, core.run_here)  # request 1
    assert failure.value.course_key == "verdict_call_unreadable" and failure.value.course_fields["what"] == "f()"


def test_a_result_of_an_unknown_kind_fails_the_call(pipe):
    reader, writer = pipe
    os.write(writer, forged({"what": 1, "result": {"kind": "function", "value": "os.system"}, "payloads": [],
                             "held": [], "counters": [], "files": [], "carrying": []}))
    back = told(reader).call("f()", None, (), {}, None, core.run_here)
    assert type(back).__module__ == boundary.__name__  # an opaque stand-in, which no check accepts
    with pytest.raises(AssertionError):
        checks.assert_tensor(back, "f()")


# ------------------------------------------------------------------ the first frame: names and PyTorch's settings

@pytest.fixture
def settings_restored():
    """PyTorch's global settings as they were, after the test changed them."""
    before = boundary.torch_settings()
    yield
    boundary.take_torch_settings(before)


STUDENT_SETTINGS = {"default_dtype": "float64", "grad_enabled": False, "deterministic": True,
                    "deterministic_warn_only": True,
                    "print": {"precision": 2, "threshold": 10, "edgeitems": 1, "linewidth": 40, "sci_mode": True}}


def test_the_judge_takes_the_pytorch_settings_the_students_cells_left(pipe, settings_restored):
    """The test cell makes its own tensors in the judge as it did in the student's kernel."""
    reader, writer = pipe
    torch.set_default_dtype(torch.float64)  # what the student's cells set, in the caller
    torch.set_grad_enabled(False)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.set_printoptions(precision=2, threshold=10, edgeitems=1, linewidth=40, sci_mode=True)
    boundary.Recorder(writer).send_names(["move", "Net"])
    torch.set_default_dtype(torch.float32)  # the judge's parent, which ran none of the student's cells
    torch.set_grad_enabled(True)
    torch.use_deterministic_algorithms(False)
    torch.set_printoptions(profile="default")
    names, settings = boundary.read_names(reader)
    boundary.take_torch_settings(settings)
    assert names == ["move", "Net"] and boundary.torch_settings() == STUDENT_SETTINGS
    assert torch.ones(1).dtype == torch.float64 and not torch.is_grad_enabled()


FORGED_SETTINGS = {
    "a-dtype-not-a-default": {"default_dtype": "int64"},
    "not-booleans": {"grad_enabled": "no", "deterministic": 1},
    "print-options-out-of-range": {"print": {"precision": -1, "threshold": "all", "linewidth": 2.5, "sci_mode": "yes"}},
    "not-a-mapping": {"print": ["precision", 2]},
}


@pytest.mark.parametrize("forged_settings", FORGED_SETTINGS.values(), ids=FORGED_SETTINGS.keys())
def test_a_setting_pytorch_would_not_accept_is_not_taken(settings_restored, forged_settings):
    before = boundary.torch_settings()
    boundary.take_torch_settings(forged_settings)
    assert boundary.torch_settings() == before


@pytest.mark.parametrize("sent, names", [
    ({"names": ["move", "__import__", "not a name", 3, "Net"], "settings": "fast"}, (["move", "Net"], {})),
    ({"names": "move"}, ([], {})),
    ({"settings": {}}, ([], {})),
], ids=["odd-names-and-settings", "names-not-a-list", "no-names"])
def test_the_judge_takes_only_plain_names_of_the_caller_for_its_stubs(pipe, sent, names):
    reader, writer = pipe
    os.write(writer, forged(sent))
    assert boundary.read_names(reader) == names


@pytest.mark.parametrize("sent, names", [(b"", None), (frame(b"not a frame"), ([], {}))], ids=["nothing", "garbage"])
def test_a_program_that_sent_no_names_or_garbage_gives_the_judge_none(pipe, sent, names):
    reader, writer = pipe
    os.write(writer, sent)
    os.close(writer)
    assert boundary.read_names(reader) == names


def test_a_signal_handler_of_the_students_never_runs_while_the_report_is_made(pipe):
    """attacks-machines.toml: an-interval-timers-signal-handler-rewrites-the-report-after-the-call. A handler of the
    student's runs between any two lines of the caller: every signal is held from the student's return until the
    report is written (and the collector too), and the student's own handler is back afterwards."""
    import gc
    import signal

    reader, writer = pipe
    making = {"encode", "held_state", "_wire", "_file_state"}  # not _send's putting the handlers back at its end
    seen = []

    def handler(signum, frame):
        if frame.f_code is handler.__code__:  # the timer came again while it ran
            return
        names = []  # the boundary's own functions it ran inside (os.environ has an `encode` too)
        while frame is not None:
            if frame.f_code.co_filename == boundary.__file__:  # under mutmut, encode runs as x_encode__mutmut_orig
                names.append(re.sub(r"^x_(.+?)__mutmut_\w+$", r"\1", frame.f_code.co_name))
            frame = frame.f_back
        seen.append(names)

    def answer():
        signal.setitimer(signal.ITIMER_REAL, 1e-4, 1e-4)
        return [torch.randn(4, 4) for _ in range(200)]  # the pipe holds it all (64 KiB)

    previous = signal.signal(signal.SIGALRM, handler)
    try:
        for _ in range(3):
            boundary.Recorder(writer).call(1, answer, (), {}, None, core.run_here)
            assert len(told(reader).call("f()", None, (), {}, None, core.run_here)) == 200
            assert signal.getsignal(signal.SIGALRM) is handler and gc.isenabled()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert seen and not [names for names in seen if making & set(names)], seen  # it ran, never inside the report


def test_a_call_that_stays_in_the_judge_runs_then_and_labels_its_error(pipe):
    """A call that involves no student's code (a library's function on the test's own data) runs in the judge as it
    is, `then` included, and an error it raises is labelled with the test's call; nothing is asked of the caller."""
    made, _ = judge_and_caller(pipe)
    assert made.call("len(x)", len, ([1, 2],), {}, lambda result, *args: result * 10, core.run_here) == 20
    with pytest.raises(AssertionError) as failure:
        made.call("int('x')", int, ("x",), {}, None, core.run_here)
    assert failure.value.course_fields["what"] == "int('x')" and made.asked == 0


def test_a_name_that_is_not_a_string_is_sent_as_a_mark_without_running_its_code():
    """A failed call's key and field names go as Python's own str: a str subclass's, or another object's
    __str__, would run the student's code while the report is made."""
    ran = []

    class Name(str):
        def __str__(self):
            ran.append(True)
            return "forged"

    class Other:
        def __str__(self):
            ran.append(True)
            return "forged"

    assert boundary._plain(Name("what")) == "what" and type(boundary._plain(Name("what"))) is str
    assert boundary._plain(Other()) == "?" and ran == []


@pytest.mark.parametrize("item, accepted", [
    (["float32", [1] * 64, "cpu", bytes(4)], True),  # at the limit of dimensions
    (["float32", [1] * 65, "cpu", bytes(4)], False),
    (["float32", [1], "cpu", [0, 0, 0, 0]], False),  # the right length, but not bytes
    (["float32", [1], "cpu:0", bytes(4)], True),  # a device named otherwise than "cpu": moved there
    (["int64", [0, 3], "cpu", b""], True),  # nothing in it
], ids=["64-dimensions", "65-dimensions", "a-list-of-numbers", "another-device-name", "empty"])
def test_a_payload_is_accepted_only_as_a_tensors_exact_bytes(item, accepted):
    if not accepted:
        with pytest.raises(ValueError):
            boundary._unwired(item)
        return
    tensor = boundary._unwired(item)
    assert tensor.dtype == getattr(torch, item[0]) and list(tensor.shape) == item[1] and tensor.device.type == "cpu"


@pytest.mark.parametrize("failed", [
    ["not", "a", "dict"],
    {"kinds": "NotImplementedError"},  # not a list: no kind at all, not its letters
    {"key": "tampering", "fields": ["names"]},
    {"key": "tampering", "fields": {"names": "torch.Tensor.to"}},  # not a typed field
], ids=["not-a-dict", "kinds-not-a-list", "fields-not-a-dict", "names-not-a-typed-field"])
def test_a_failure_the_caller_reports_in_another_shape_is_unreadable_or_names_nothing(failed):
    failure = boundary._reported("f()", failed)
    assert failure.course_fields["what"] == "f()"
    if isinstance(failed, dict) and failed.get("key") == "tampering":
        assert failure.course_key == "tampering" and failure.course_fields["names"] == "…"
    else:
        assert failure.course_key == "verdict_call_unreadable" and failure.__cause__ is None


@pytest.mark.parametrize("extra, read", [(0, True), (1, False)], ids=["at-the-limit", "past-the-limit"])
def test_a_frame_is_read_up_to_its_limit_and_no_further(pipe, monkeypatch, extra, read):
    reader, writer = pipe
    data = pickle.dumps({"what": "f()"}, protocol=5)
    monkeypatch.setattr(boundary, "FRAME_LIMIT", len(data) - extra)
    os.write(writer, frame(data))
    os.close(writer)
    if read:
        assert boundary.read_frame(reader) == {"what": "f()"}
    else:
        with pytest.raises(ValueError):
            boundary.read_frame(reader)


@pytest.mark.parametrize("size, sent", [(4, True), (5, False)], ids=["at-the-limit", "past-the-limit"])
def test_a_file_the_call_wrote_is_sent_up_to_its_limit(tmp_path, monkeypatch, size, sent):
    monkeypatch.setattr(boundary, "FILE_LIMIT", 4)
    path = tmp_path / "model.pt"
    path.write_bytes(bytes(range(size)))
    payloads = boundary.Payloads()
    state = boundary._file_state(str(path), payloads)
    if sent:
        assert state == {"exists": True, "payload": 0} and bytes(payloads[0].tolist()) == bytes(range(size))
    else:
        assert state == {"exists": True, "payload": None} and len(payloads) == 0  # the judge's call then fails
    assert boundary._file_state(str(tmp_path / "missing.pt"), payloads) == {"exists": False}


@pytest.mark.parametrize("count, encoded", [(4, True), (5, False)], ids=["at-the-limit", "past-the-limit"])
def test_a_result_of_more_parts_than_the_limit_is_refused(monkeypatch, count, encoded):
    monkeypatch.setattr(boundary, "NODE_LIMIT", 3)  # checked before each part: a fourth tensor is still sent
    result = [torch.zeros(1) for _ in range(count)]
    if encoded:
        assert len(boundary.encode(result, boundary.Known((), {}), boundary.Payloads())["items"]) == count
    else:
        with pytest.raises(RecursionError):
            boundary.encode(result, boundary.Known((), {}), boundary.Payloads())




def test_a_buffer_the_call_registered_on_a_held_module_is_the_judges_too(pipe):
    """A right `train_step` that counts its steps in a buffer of its own (persistent=False): the judge could not
    read the module back."""
    def counts_its_steps(model):
        if "steps_taken" not in model._buffers:
            model.register_buffer("steps_taken", torch.zeros((), dtype=torch.long), persistent=False)
        model.steps_taken += 1

    model = torch.nn.Linear(2, 1)
    sealed(pipe, counts_its_steps, model)
    assert model.steps_taken.item() == 1 and "steps_taken" not in model.state_dict()


def test_a_module_carries_the_students_code_by_its_class_or_a_hook_for_every_module():
    """Answers of cast_floating that kept float32 norms by a class swapped in as they ran, or by hooks registered
    for every module, lost their points: the forward ran in the judge, without their code."""
    recorder = boundary.Recorder(None)
    plain = torch.nn.BatchNorm1d(2)
    assert not recorder._carries_code(plain)
    swapped = torch.nn.BatchNorm1d(2)
    swapped.__class__ = type("Float32BatchNorm1d", (torch.nn.BatchNorm1d,), {})  # made in a cell's function
    assert recorder._carries_code(swapped)
    handle = torch.nn.modules.module.register_module_forward_pre_hook(lambda module, args: None)
    try:
        assert recorder._carries_code(plain)
    finally:
        handle.remove()

def test_numpy_scalars_come_back_as_numpy_scalars_of_their_dtype(pipe):
    """A sampler's indices drawn with NumPy (`numpy.random.default_rng(seed).permutation(n)`) are numpy.int64s,
    which a kernel's check takes as integers: they came back as objects the judge could not read."""
    import numpy

    sent = [numpy.int64(3), numpy.int32(-2), numpy.uint8(7), numpy.float32(0.5), numpy.float64(2.25), numpy.bool_(True)]
    back = sealed(pipe, lambda: sent)
    assert [type(value) for value in back] == [type(value) for value in sent] and back == sent

def test_containers_come_back_of_their_own_types_and_an_array_after_a_tensor_with_its_values(pipe):
    import numpy

    back = sealed(pipe, lambda: ([1], (2,), {"a": 3}, torch.zeros(2), numpy.arange(3.0)))
    assert [type(part) for part in back[:3]] == [list, tuple, dict]
    assert numpy.array_equal(back[4], numpy.arange(3.0))


class Opaque:
    """An object of the student's class: the judge holds it as a stand-in, on which a later call crosses."""


def test_an_object_the_judge_holds_as_a_stand_in_is_one_wherever_the_result_holds_it(pipe):
    _, writer = pipe
    recorder = boundary.Recorder(writer)  # every call crosses
    in_list, as_key, as_value = Opaque(), Opaque(), Opaque()
    recorder.call("f()", lambda: [in_list, {as_key: as_value}], (), {}, None, core.run_here)
    assert all(recorder.opaque(value) for value in (in_list, as_key, as_value))


def test_an_attribute_that_would_hide_a_method_stays_in_the_caller(pipe):
    """A `forward` set on the instance (nn.Identity, which the judge could rebuild) is not written into the judge's
    module: its class's code stays, and the module carries the student's code, so a call on it runs in the caller."""
    def replace_forward(model):
        model.__dict__["forward"] = torch.nn.Identity()  # not a submodule: an instance attribute
        return model

    judge, stubs = judge_and_caller(pipe, replace_forward=replace_forward)
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    assert judge.call("f(model)", stubs["replace_forward"], (model,), {}, None, core.run_here) is model
    assert "forward" not in vars(model) and judge.carries(model)
