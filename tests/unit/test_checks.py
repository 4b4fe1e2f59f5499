"""The assertion helpers pass right answers and name each classic mistake, on every grading device."""
import copy
import io
import logging
import sys
import warnings
from collections import OrderedDict, namedtuple
from pathlib import Path

import pytest
import torch
from torch import nn

from autograder import checks, has_data, integrity
from autograder.checks import training
from autograder.messages import message, text
from autograder.probes import NormBlock, count_transfers, save_as_if_from_cuda
from autograder.simulate import simulated_accelerator
from support.messages import shows

CHECKS_FOLDER = Path(checks.__file__).parent  # every module of the checks' namespace


Pair = namedtuple("Pair", "first second")


def failure(key, function, *args, **kwargs):
    """`function(*args, **kwargs)` fails with message `key`: (the message shown, the fields `_fail` got or None).

    Every frame of autograder/checks.py on the way sets `__tracebackhide__` (so a student sees their own
    code, not the grader's), and `_fail` got a value for each field: a helper that passed None, or the
    wrong argument, as `what`, `found`, a hint… would show a broken diagnostic.
    """
    with pytest.raises(AssertionError) as raised:
        function(*args, **kwargs)
    shown, given = str(raised.value), None
    assert shows(shown, key), f"expected message {key!r}, got:\n{shown}"
    traceback = raised.tb
    while traceback is not None:
        frame = traceback.tb_frame
        if Path(frame.f_code.co_filename).parent == CHECKS_FOLDER:
            assert frame.f_locals.get("__tracebackhide__") is True, f"{frame.f_code.co_name} does not hide its frame"
            fields = frame.f_locals.get("fields")
            if "key" in frame.f_locals and isinstance(fields, dict):  # the frame of `_fail(key, **fields)`
                assert frame.f_locals["key"] == key
                assert not [name for name, value in fields.items() if value is None], f"{key}: empty field in {fields}"
                assert isinstance(fields.get("what", ""), str), f"{key}: `what` is {fields['what']!r}"
                given = fields
        traceback = traceback.tb_next
    return shown, given


def fails_with(key, function, *args, **kwargs):
    """`function(*args, **kwargs)` fails with message `key` (see `failure`); returns the message shown."""
    return failure(key, function, *args, **kwargs)[0]


def fails_showing(key, fields, function, *args, **kwargs):
    """Like `fails_with`, with exactly these `fields`: the message shows what was expected and found.

    Fields the current text does not show yet are compared too, so a helper keeps passing them.
    """
    shown, given = failure(key, function, *args, **kwargs)
    assert shown == message(key, **fields), f"expected:\n{message(key, **fields)}\ngot:\n{shown}"
    assert given is None or given == fields, f"{key}: fields {given}, expected {fields}"
    return shown


class LooksLikeATensor:
    device = torch.device("cpu")
    dtype = torch.float32
    requires_grad = True
    is_leaf = True
    shape = torch.Size([2])


def test_an_imitation_is_not_a_tensor():
    fails_showing("not_a_tensor", dict(what="x", found="LooksLikeATensor"),
                  checks.assert_device, LooksLikeATensor(), "cpu", "x")
    fails_with("not_a_tensor", checks.assert_leaf, LooksLikeATensor(), "x")


TENSOR_HELPERS = [  # each helper that takes a tensor first, with the arguments that follow it
    (checks.assert_device, ("cpu",)), (checks.assert_dtype, (torch.float32,)), (checks.assert_shape, ((2,),)),
    (checks.assert_values, (torch.ones(2),)), (checks.assert_requires_grad, ()), (checks.assert_leaf, ()),
    (checks.assert_grad_connected, (torch.ones(2),)), (checks.assert_detached, ()), (checks.assert_random, ()),
]


@pytest.mark.parametrize("helper, args", TENSOR_HELPERS, ids=[helper.__name__ for helper, _ in TENSOR_HELPERS])
def test_every_tensor_helper_names_a_non_tensor(helper, args):
    fails_showing("not_a_tensor", dict(what="result", found="list"), helper, [1.0, 2.0], *args, "result")


def test_a_string_is_not_a_device():
    fails_showing("not_a_device", dict(what="pick_device()", found="str 'cpu'"),
                  checks.assert_torch_device, "cpu", "pick_device()")


def test_moved_tensor_passes(device):
    x = torch.arange(3.0)
    checks.assert_device(x.to(device), device, "x", original=x)


def test_forgotten_assignment_is_named(device):
    x = torch.arange(3.0, device="meta" if device.type == "cpu" else "cpu")  # `x.to(device)` result dropped
    fails_showing("forgot_assignment", dict(what="x", expected=device, found=x.device),
                  checks.assert_device, x, device, "x", original=x)


def test_wrong_device_is_named(device):
    elsewhere = torch.device("meta" if device.type == "cpu" else "cpu")
    fails_showing("wrong_device", dict(what="x", expected=device, found=elsewhere),
                  checks.assert_device, torch.ones(2, device=elsewhere), device, "x")
    # a new tensor on the wrong device is not a forgotten assignment, even when the original is known
    x = torch.ones(2, device=elsewhere)
    fails_with("wrong_device", checks.assert_device, x.clone(), device, "x", original=x)


def test_wrong_dtype_is_named(device):
    x = torch.ones(2, device=device)
    checks.assert_dtype(x, torch.float32, "x")
    checks.assert_dtype(x, torch.float32, "x", original=x)  # the same tensor back is fine when nothing changes
    fails_showing("wrong_dtype",
                  dict(what="x", expected=torch.float32, found=torch.float16, hint=text("dtype_hint_keep")),
                  checks.assert_dtype, x.half(), torch.float32, "x")
    fails_showing("wrong_dtype",
                  dict(what="x", expected=torch.float16, found=torch.float32, hint=text("dtype_hint_cast")),
                  checks.assert_dtype, x.clone(), torch.float16, "x", hint="dtype_hint_cast", original=x)
    fails_showing("forgot_assignment_dtype", dict(what="x", expected=torch.float16, found=torch.float32),
                  checks.assert_dtype, x, torch.float16, "x", original=x)


def test_values_are_compared_where_they_exist():
    checks.assert_values(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0], dtype=torch.float64), "x")
    fails_showing("wrong_values", dict(what="x", diff="0.5"),
                  checks.assert_values, torch.tensor([1.0, 2.5]), torch.tensor([1.0, 2.0]), "x")
    checks.assert_values(torch.tensor([1.0, 2.5]), torch.tensor([1.0, 2.0]), "x", atol=0.5)  # atol is inclusive
    checks.assert_values(torch.ones(0), torch.ones(0), "x")  # nothing to compare is no difference


# Right answers that draw (issue 41): a pattern check must never refuse them, on any seed; and wrong ones that
# fill a pattern that it must refuse (attack-41's make_weight from torch.linspace; a tile of a few values, a
# constant plus tiny noise).
DRAWN = {
    "randn": lambda n: torch.randn(n),
    "rand": lambda n: torch.rand(n),
    "normal_": lambda n: torch.empty(n).normal_(),
    "kaiming_uniform_": lambda n: nn.init.kaiming_uniform_(torch.empty(n, 1)),
    "xavier_normal_": lambda n: nn.init.xavier_normal_(torch.empty(1, n)),
    "randn-float16": lambda n: torch.randn(n, dtype=torch.float16),
    "randn-bfloat16": lambda n: torch.randn(n, dtype=torch.bfloat16),
    "randn-float64": lambda n: torch.randn(n, dtype=torch.float64),
    "normal-around-one": lambda n: torch.empty(n).normal_(mean=1.0, std=0.02),  # as some norm layers' weights
    "randn-tiny-scale": lambda n: torch.randn(n) * 1e-6,
}
PATTERNS = {
    "linspace": lambda n: torch.linspace(-1, 1, n),
    "linspace-bfloat16": lambda n: torch.linspace(-1, 1, n, dtype=torch.bfloat16),
    "arange": lambda n: torch.arange(float(n)) / n,
    "shuffled-linspace": lambda n: torch.linspace(-1, 1, n)[torch.randperm(n)],
    "sorted-randn": lambda n: torch.randn(n).sort().values,
    "descending-rand": lambda n: torch.rand(n).sort(descending=True).values,
    "tiled-four-values": lambda n: torch.tensor([0.3, -1.2, 0.7, -0.1]).repeat(n)[:n],
    "each-value-twice": lambda n: torch.randn(n // 2 + 1).repeat_interleave(2)[:n],
    "shuffled-few-values": lambda n: torch.tensor([0.5, -0.5, 0.25]).repeat(n)[:n][torch.randperm(n)],
    "constant-plus-tiny-noise": lambda n: torch.full((n,), 0.5) + 1e-6 * torch.randn(n),
    "negative-constant-plus-noise": lambda n: torch.full((n,), -2.0) + 1e-4 * torch.rand(n),
}


@pytest.mark.parametrize("draw", DRAWN.values(), ids=DRAWN.keys())
def test_a_random_draw_is_never_taken_for_a_pattern(draw):
    for seed in range(300):
        torch.manual_seed(seed)
        for n in (12, 16, 64):
            checks.assert_random(draw(n), "w")


@pytest.mark.parametrize("fill", PATTERNS.values(), ids=PATTERNS.keys())
def test_a_pattern_is_not_random(fill):
    fails_showing("not_random_pattern", dict(what="w"), checks.assert_random, fill(16), "w")
    checks.assert_random(fill(3), "w")  # too few values to tell a pattern from a draw


def test_random_values_are_told_from_a_constant_fill():
    checks.assert_random(torch.randn(8), "w")
    checks.assert_random(torch.tensor([0.0, 0.0, 1.0]), "w")  # one value differs: not a constant fill
    fails_showing("not_random", dict(what="w", value="0"), checks.assert_random, torch.zeros(3, 2), "w")
    fails_showing("not_random", dict(what="w", value="1.5"), checks.assert_random, torch.full((4,), 1.5), "w")
    for bad in [torch.full((3,), float("nan")), torch.tensor([0.5, float("inf"), 1.0])]:  # NaN equals nothing
        fails_showing("not_finite", dict(what="w"), checks.assert_random, bad, "w")
    checks.assert_random(torch.zeros(3, device="meta"), "w")  # no values to judge
    checks.assert_random(torch.zeros(1), "w")  # a single value cannot show a fill
    fails_with("wrong_values", checks.assert_values, torch.tensor([float("nan")]), torch.tensor([1.0]), "x")
    checks.assert_values(torch.ones(2, device="meta"), torch.zeros(2), "x")  # no data on meta: shape only
    fails_showing("wrong_shape", dict(what="x", expected=(2,), found=(3,)),
                  checks.assert_values, torch.ones(3, device="meta"), torch.zeros(2), "x")


def test_standard_normal_noise_is_told_from_uniform_and_shifted_values():
    generator = torch.Generator().manual_seed(0)
    checks.assert_standard_normal(torch.randn(10_000, generator=generator), "w")
    checks.assert_standard_normal(torch.zeros(10_000, device="meta"), "w")  # no values to judge
    fails_showing("not_standard_normal", dict(what="w", count=4, mean="0.5", std="0.577"),
                  checks.assert_standard_normal, torch.tensor([0.0, 0.0, 1.0, 1.0]), "w")
    fails_with("not_standard_normal", checks.assert_standard_normal, torch.rand(10_000, generator=generator), "w")
    fails_with("not_standard_normal", checks.assert_standard_normal, torch.randn(10_000, generator=generator) + 0.5, "w")
    fails_with("not_standard_normal", checks.assert_standard_normal, torch.zeros(10_000), "w")
    fails_with("not_standard_normal", checks.assert_standard_normal, torch.full((10_000,), float("nan")), "w")


def test_a_function_that_switches_on_gradients_of_its_argument_is_named():
    x = torch.ones(3)
    checks.assert_grad_left_off(x, "f(x)")
    fails_showing("caller_requires_grad", dict(what="f(x)"), checks.assert_grad_left_off, x.requires_grad_(), "f(x)")


def test_a_tensor_made_on_the_cpu_and_moved_is_not_made_on_the_device():
    given = torch.zeros(3, device="meta")  # made before counting: an input, not a result
    with count_transfers() as counter:
        made = torch.randn_like(given)
    checks.assert_made_on_device(counter, made, "f(x)")
    with count_transfers() as counter:
        moved = torch.zeros(3).to("meta")
    fails_showing("created_then_moved", dict(what="f(x)", device=torch.device("meta"), found=1),
                  checks.assert_made_on_device, counter, moved, "f(x)")
    fails_with("transfer_unseen", checks.assert_made_on_device, counter, given, "f(x)")


def test_other_values_can_be_named_by_the_check():
    fails_showing("wrong_outputs", dict(what="f(x)", diff="1"),
                  lambda *args: checks.assert_values(*args, key="wrong_outputs"), torch.zeros(2), torch.ones(2), "f(x)")


def test_leaf_weight_passes_and_moved_weight_is_named(device):
    checks.assert_leaf(torch.randn(3, device=device, requires_grad=True), "w")
    checks.assert_leaf(nn.Parameter(torch.randn(3, device=device)), "w")
    moved = torch.randn(3, dtype=torch.float64, requires_grad=True).to(device, torch.float32)
    fails_showing("not_leaf", dict(what="w", grad_fn="ToCopyBackward0"), checks.assert_leaf, moved, "w")
    fails_with("no_requires_grad", checks.assert_leaf, torch.randn(3, device=device), "w")


def test_autograd_connection(device):
    w = torch.randn(3, dtype=torch.float64, requires_grad=True)
    checks.assert_grad_connected(w.to(device), w, "w")
    checks.assert_grad_connected(w, w, "w")
    fails_showing("grad_disconnected", dict(what="w", requires_grad=False, grad_fn="NoneType"),
                  checks.assert_grad_connected, w.detach().to(device), w, "w")


def test_autograd_connection_must_lead_back_to_the_source(device):
    w = torch.randn(3, dtype=torch.float64, requires_grad=True)
    # a fresh leaf moved to the device has a grad_fn (off the CPU), but gradients never reach `w`
    fails_with("grad_disconnected", checks.assert_grad_connected, w.detach().requires_grad_().to(device), w, "w")
    fails_showing("grad_disconnected", dict(what="w", requires_grad=True, grad_fn="MulBackward0"),
                  checks.assert_grad_connected, torch.ones(3, requires_grad=True) * 2, w, "w")
    computed = w * 2  # a source that is itself a result
    checks.assert_grad_connected((computed + 1).to(device), computed, "w")
    fails_with("grad_disconnected", checks.assert_grad_connected, (w * 2).to(device), computed, "w")


def test_autograd_connection_walks_a_shared_graph_once():
    w = torch.ones(1, requires_grad=True)
    x = w
    for _ in range(64):
        x = x + x  # each step reaches the one before twice: 2**64 paths, 65 nodes
    checks.assert_grad_connected(x, w, "x")
    fails_with("grad_disconnected", checks.assert_grad_connected, x, torch.ones(1, requires_grad=True), "x")


def test_device_choice_accepts_any_index_only_when_none_is_asked():
    checks.assert_device_choice(torch.device("cuda:0"), "cuda", "d", "device_hint_order")
    checks.assert_device_choice(torch.device("cuda:1"), "cuda:1", "d", "device_hint_prefer")
    fails_showing("wrong_device_type", dict(what="d", expected=torch.device("cuda:1"), found=torch.device("cuda"),
                                            hint=text("device_hint_prefer")),
                  checks.assert_device_choice, torch.device("cuda"), "cuda:1", "d", "device_hint_prefer")
    fails_with("wrong_device_type", checks.assert_device_choice, torch.device("cpu"), "mps", "d",
               "device_hint_order")
    fails_showing("not_a_device", dict(what="d", found="str 'cuda'"),
                  checks.assert_device_choice, "cuda", "cuda", "d", "device_hint_order")


def test_no_device_found_is_told_what_the_hint_says_not_to_wrap_a_name():
    shown = fails_showing("device_choice_none", dict(what="d", expected=torch.device("cpu"),
                                                    hint=text("hint_model_tensors")),
                          checks.assert_device_choice, None, "cpu", "d", "hint_model_tensors")
    assert not shows(shown, "not_a_device")


def nested_batch():
    return {"x": [torch.randn(2), (torch.ones(1), "tag")], "pair": Pair(torch.zeros(2), None),
            "extra": OrderedDict(n=3, mask=torch.tensor([True]))}


def move(batch, device):
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, dict):
        return type(batch)((k, move(v, device)) for k, v in batch.items())
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(move(v, device) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(move(v, device) for v in batch)
    return batch


def test_fully_moved_batch_passes(device):
    batch = nested_batch()
    checks.assert_batch_moved(move(batch, device), batch, device, "batch")


def test_batch_mistakes_are_named(accelerator):
    batch = nested_batch()
    top_only = {k: v.to(accelerator) if torch.is_tensor(v) else v for k, v in batch.items()}
    fails_showing("nested_not_moved",
                  dict(what="batch['x'][0]", expected=accelerator, found=torch.device("cpu")),
                  checks.assert_batch_moved, top_only, batch, accelerator, "batch")
    as_lists = move(batch, accelerator) | {"x": [batch["x"][0].to(accelerator), [torch.ones(1, device=accelerator), "tag"]]}
    fails_showing("wrong_type", dict(what="batch['x'][1]", expected="tuple", found="list"),
                  checks.assert_batch_moved, as_lists, batch, accelerator, "batch")
    dropped = move(batch, accelerator)
    del dropped["extra"]
    fails_showing("wrong_keys", dict(what="batch", expected=["x", "pair", "extra"], found=["x", "pair"]),
                  checks.assert_batch_moved, dropped, batch, accelerator, "batch")
    shorter = move(batch, accelerator) | {"x": [batch["x"][0].to(accelerator)]}
    fails_showing("wrong_length", dict(what="batch['x']", expected=2, found=1),
                  checks.assert_batch_moved, shorter, batch, accelerator, "batch")
    renamed = move(batch, accelerator) | {"pair": Pair(torch.zeros(2, device=accelerator), "None")}
    fails_showing("leaf_changed", dict(what="batch['pair'][1]", expected="None", found="'None'"),
                  checks.assert_batch_moved, renamed, batch, accelerator, "batch")


def test_batch_tensors_keep_dtype_and_values():
    batch = {"x": [torch.tensor([1.0, 2.0])], "tag": "train"}
    fails_showing("wrong_dtype", dict(what="batch['x'][0]", expected=torch.float32, found=torch.float16,
                                      hint=text("dtype_hint_keep")),
                  checks.assert_batch_moved, {"x": [batch["x"][0].half()], "tag": "train"}, batch, "cpu", "batch")
    fails_showing("wrong_values", dict(what="batch['x'][0]", diff="1"),
                  checks.assert_batch_moved, {"x": [batch["x"][0] + 1], "tag": "train"}, batch, "cpu", "batch")
    fails_showing("leaf_changed", dict(what="batch['tag']", expected="'train'", found="'TRAIN'"),
                  checks.assert_batch_moved, {"x": [batch["x"][0].clone()], "tag": "TRAIN"}, batch, "cpu", "batch")


def test_batch_depth_tells_a_forgotten_assignment_from_a_tensor_left_inside(accelerator):
    x = torch.ones(2)
    fails_with("forgot_assignment", checks.assert_batch_moved, x, x, accelerator, "batch")  # the batch is the tensor
    fails_showing("nested_not_moved", dict(what="batch['x']", expected=accelerator, found=torch.device("cpu")),
                  checks.assert_batch_moved, {"x": x}, {"x": x}, accelerator, "batch")
    fails_showing("nested_not_moved", dict(what="batch[0]", expected=accelerator, found=torch.device("cpu")),
                  checks.assert_batch_moved, [x], [x], accelerator, "batch")


def test_batch_leaves_may_be_equal_copies(accelerator):
    tag = "".join(["ta", "g"])  # equal to "tag", not the same object
    checks.assert_batch_moved({"t": torch.ones(1, device=accelerator), "tag": tag, "n": 3.0},
                              {"t": torch.ones(1), "tag": "tag", "n": 3.0}, accelerator, "batch")


class WithPlainTensor(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(2, 2)
        self.scale = torch.ones(2)  # not registered: Module.to will not move it


def test_module_on_device_passes(device):
    checks.assert_module_on(nn.BatchNorm1d(3).to(device), device, "model")


def test_module_mistakes_are_named(accelerator):
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    model[1].to(accelerator)
    fails_showing("module_tensor_device", dict(what="model", expected=accelerator, found=torch.device("cpu"),
                                               kind=text("kind_parameter"), name="0.weight"),
                  checks.assert_module_on, model, accelerator, "model")
    unregistered = dict(what="model", expected=accelerator, found=torch.device("cpu"), name="scale")
    fails_showing("unregistered_tensor", unregistered,
                  checks.assert_module_on, WithPlainTensor().to(accelerator), accelerator, "model")
    fails_showing("unregistered_tensor", unregistered | {"name": "0.scale"},
                  checks.assert_module_on, nn.Sequential(WithPlainTensor()).to(accelerator), accelerator, "model")
    fails_showing("not_a_module", dict(what="model", found="Tensor"),
                  checks.assert_module_on, torch.ones(2), "cpu", "model")


def elsewhere_than(device):
    return torch.device("meta" if device.type == "cpu" else "cpu")


def move_parameters_only(model, device):
    """What a hand-written loop over `model.parameters()` does: buffers stay where they were."""
    for module in model.modules():
        for name, param in list(module.named_parameters(recurse=False)):
            # a new tensor rather than a copy: meta has no data to copy
            module.register_parameter(name, nn.Parameter(torch.zeros_like(param, device=device)))
    return model


def test_module_on_checks_buffers_not_only_parameters(device):
    model = move_parameters_only(nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3)).to(elsewhere_than(device)), device)
    fails_showing("module_tensor_device", dict(what="model", expected=device, found=elsewhere_than(device),
                                               kind=text("kind_buffer"), name="1.running_mean"),
                  checks.assert_module_on, model, device, "model")


def test_module_on_checks_non_persistent_and_nested_buffers(device):
    inner = nn.Linear(2, 2)
    inner.register_buffer("mask", torch.ones(2, 2), persistent=False)
    model = move_parameters_only(nn.Sequential(nn.Sequential(inner)).to(elsewhere_than(device)), device)
    fails_showing("module_tensor_device", dict(what="model", expected=device, found=elsewhere_than(device),
                                               kind=text("kind_buffer"), name="0.0.mask"),
                  checks.assert_module_on, model, device, "model")
    checks.assert_module_on(model.to_empty(device=device), device, "model")  # to_empty: meta holds no data


def test_module_on_names_a_parameter_left_behind(device):
    model = nn.Linear(2, 2).to(elsewhere_than(device))  # no buffers: the parameters are what is left behind
    fails_showing("module_tensor_device", dict(what="model", expected=device, found=elsewhere_than(device),
                                               kind=text("kind_parameter"), name="weight"),
                  checks.assert_module_on, model, device, "model")


def test_call_turns_errors_into_bilingual_failures():
    def unanswered():
        raise NotImplementedError()

    def silent():
        raise ValueError()

    def long():
        raise ValueError("first line\nsecond line")

    fails_showing("not_answered", dict(what="f()"), checks.call, "f()", unanswered)
    fails_showing("raised", dict(what="f()", error="ZeroDivisionError: division by zero"),
                  checks.call, "f()", lambda: 1 / 0)
    fails_showing("raised", dict(what="f()", error="ValueError: "), checks.call, "f()", silent)
    fails_showing("raised", dict(what="f()", error="ValueError: first line"), checks.call, "f()", long)
    assert checks.call("f()", lambda x: x + 1, 1) == 2
    assert checks.call("f()", lambda x, y=0: x + y, 1, y=2) == 3  # keyword arguments reach the student's function


@pytest.mark.parametrize("when", ["before", "during"])
def test_call_names_itself_when_it_sees_tampering(monkeypatch, when):
    monkeypatch.setattr(integrity, "_remembered", {})  # a fresh grading kernel
    monkeypatch.setattr(integrity, "_tampered", set())
    integrity.remember()

    def patch():
        monkeypatch.setattr(torch.Tensor, "to", lambda self, *args, **kwargs: self)
        return 1

    if when == "before":
        patch()
    fails_showing("tampering", dict(what="to_device(x)", names="torch.Tensor.to"), checks.call, "to_device(x)", patch)


def test_call_explains_device_mismatches_and_gpu_checkpoints(tmp_path, accelerator):
    fails_with("device_mismatch", checks.call, "f()", lambda: torch.ones(2, device=accelerator) + torch.ones(2))
    path = tmp_path / "gpu.pt"
    save_as_if_from_cuda({"w": torch.ones(2)}, path)
    with simulated_accelerator(None):
        fails_with("cuda_checkpoint", checks.call, "load()", torch.load, path)


def test_call_keeps_warnings_of_student_code_from_reaching_stderr():
    def noisy():
        warnings.warn("deprecated spelling", UserWarning)
        return 7

    with warnings.catch_warnings(record=True) as escaped:
        warnings.simplefilter("always")  # any warning that left `call` would be recorded here
        assert checks.call("f()", noisy) == 7
    assert escaped == []


def test_call_shows_what_student_code_writes_to_stderr_on_stdout(capsys):
    """nbgrader (and the grader's own_error) gives zero to a test cell with stderr output: a right answer that
    prints its progress to sys.stderr, or logs a warning with no handler of its own (logging's last resort
    writes to sys.stderr), lost its points in the kernel, and failed `nbgrader validate`."""
    log = logging.getLogger("students.helper")
    log.propagate = False  # as in a kernel: no handler anywhere, so logging's last resort writes to sys.stderr

    def chatty():
        print("made a weight", file=sys.stderr)
        log.warning("16-bit weights on the CPU are slow")
        return 7

    assert checks.call("f()", chatty) == 7
    shown = capsys.readouterr()
    assert shown.err == ""
    assert "made a weight" in shown.out and "16-bit weights on the CPU are slow" in shown.out
    print("after the call", file=sys.stderr)  # the test cell's own stderr is stderr again
    assert capsys.readouterr().err == "after the call\n"


def test_call_sends_what_a_handler_made_before_writes_on_the_kernels_stderr_as_output(monkeypatch):
    """A handler `logging.basicConfig()` made in a cell holds the kernel's stderr stream itself, which no
    redirection of sys.stderr reaches: the stream is named stdout for the call's time (ipykernel's names its
    output when it sends it), what it held before sent as stderr first, and stderr again after."""

    class OutStream(io.StringIO):  # as ipykernel's: what it holds is sent under its name when it flushes
        __module__ = "ipykernel.iostream"

        def __init__(self, name):
            super().__init__()
            self.name, self.sent = name, []

        def flush(self):
            if self.getvalue():
                self.sent.append((self.name, self.getvalue()))
            self.seek(0)
            self.truncate()

    stderr = OutStream("stderr")
    monkeypatch.setattr(sys, "stderr", stderr)
    log = logging.getLogger("students.basic_config")
    log.propagate = False
    log.addHandler(logging.StreamHandler(stderr))  # made in a cell, before the test
    log.setLevel(logging.INFO)
    stderr.write("a warning of an earlier cell\n")

    def logs():
        log.info("train_step on cpu")
        return 7

    assert checks.call("f()", logs) == 7
    stderr.write("the test cell's own\n")
    stderr.flush()
    assert stderr.sent == [("stderr", "a warning of an earlier cell\n"), ("stdout", "train_step on cpu\n"),
                           ("stderr", "the test cell's own\n")]


def test_assert_raises_keeps_warnings_of_student_code_from_reaching_stderr():
    def noisy_then_raises():
        warnings.warn("deprecated spelling", UserWarning)
        raise ValueError("split")

    with warnings.catch_warnings(record=True) as escaped:
        warnings.simplefilter("always")
        checks.assert_raises(ValueError, "f()", noisy_then_raises, hint="hint_split_devices")
    assert escaped == []


def test_numpy_mistakes_are_named():
    t = torch.arange(4.0).reshape(2, 2)
    checks.assert_ndarray(t.T.numpy(), t.T, "a")
    fails_showing("not_numpy", dict(what="a", found="list"), checks.assert_ndarray, t.tolist(), t, "a")
    fails_showing("numpy_dtype", dict(what="a", expected=t.numpy().dtype, found=t.double().numpy().dtype),
                  checks.assert_ndarray, t.double().numpy(), t, "a")
    fails_showing("wrong_shape", dict(what="a", expected=(2, 2), found=(4,)),
                  checks.assert_ndarray, t.flatten().numpy(), t, "a")
    fails_showing("wrong_values", dict(what="a", diff="1"), checks.assert_ndarray, (t + 1).numpy(), t, "a")
    fails_showing("wrong_values", dict(what="a", diff="1"), checks.assert_ndarray, (t - 1).numpy(), t, "a")
    fails_with("numpy_requires_grad", checks.call, "a", torch.ones(2, requires_grad=True).numpy)


def test_loader_kwargs_checks_pin_memory_and_type():
    checks.assert_loader_kwargs({"pin_memory": True, "num_workers": 2}, True, "k")
    checks.assert_loader_kwargs({}, False, "k")
    fails_showing("pin_memory", dict(what="k", expected=False, found=True),
                  checks.assert_loader_kwargs, {"pin_memory": True}, False, "k")
    fails_showing("pin_memory", dict(what="k", expected=True, found=False),  # a missing key means False
                  checks.assert_loader_kwargs, {"num_workers": 0}, True, "k")
    fails_showing("not_a_dict", dict(what="k", found="list"),
                  checks.assert_loader_kwargs, [("pin_memory", True)], True, "k")


# One test per helper: a mistake in one helper's check does not hide another's (review E4).

def test_assert_updated_needs_a_parameter_the_step_changed():
    model = nn.Linear(2, 1)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    model(torch.ones(3, 2)).sum().backward()  # gradients there, no step taken
    fails_showing("not_updated", dict(what="m"), checks.assert_updated, before, model, "m")
    with torch.no_grad():
        model.bias += 1
    checks.assert_updated(before, model, "m")


@pytest.mark.parametrize("set_to_none", [True, False], ids=["grads-None", "grads-zero"])
def test_a_step_without_gradients_says_they_were_cleared_before_it(set_to_none):
    """zero_grad() between backward() and step(): the step applies nothing, and the message says why."""
    model = nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    model(torch.ones(3, 2)).sum().backward()
    optimizer.zero_grad(set_to_none=set_to_none)
    optimizer.step()
    fails_showing("gradients_gone_before_step", dict(what="m"), checks.assert_updated, before, model, "m")


def test_assert_gradients_refuses_gradients_accumulated_twice():
    model = nn.Linear(2, 1)
    model(torch.ones(1, 2)).sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    checks.assert_gradients(model, grads, "m")
    model(torch.ones(1, 2)).sum().backward()  # accumulated a second time
    fails_showing("stale_gradients", dict(what="m", diff="1", name="weight"),
                  checks.assert_gradients, model, grads, "m")


def test_assert_detached_refuses_a_tensor_with_history():
    model = nn.Linear(2, 1)
    loss = model(torch.ones(1, 2)).sum()
    fails_showing("not_detached", dict(what="m", grad_fn="SumBackward0", requires_grad=True),
                  checks.assert_detached, loss, "m")
    checks.assert_detached(loss.detach(), "m")


def test_assert_eval_needs_every_module_in_eval_mode():
    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout())
    fails_showing("not_eval", dict(what="m", name="model (Sequential)"), checks.assert_eval, model, "m")
    model[1].eval()
    fails_with("not_eval", checks.assert_eval, model, "m")  # the top module still training
    checks.assert_eval(model.eval(), "m")


def buffered_layer() -> nn.Linear:
    """A layer with a non-persistent buffer `kept`, a persistent `saved`, and a plain tensor attribute `plain`."""
    layer = nn.Linear(2, 2)
    layer.register_buffer("kept", torch.ones(1), persistent=False)
    layer.register_buffer("saved", torch.ones(1))
    layer.plain = torch.ones(1)
    return layer


def test_assert_buffer_tells_persistent_from_not_and_names_what_is_not_a_buffer():
    layer = buffered_layer()
    checks.assert_buffer(layer, "kept", "m", persistent=False)
    checks.assert_buffer(layer, "saved", "m", persistent=True)
    fails_showing("persistent_buffer", dict(what="m", name="saved"),
                  checks.assert_buffer, layer, "saved", "m", persistent=False)
    fails_showing("persistent_buffer", dict(what="m", name="kept"),
                  checks.assert_buffer, layer, "kept", "m", persistent=True)
    for name, kind in [("plain", "kind_plain_attribute"), ("weight", "kind_parameter"), ("absent", "kind_missing")]:
        fails_showing("not_a_buffer", dict(what="m", name=name, found=text(kind)),
                      checks.assert_buffer, layer, name, "m", persistent=False)


def test_assert_state_unchanged_names_a_changed_dtype():
    layer = buffered_layer()
    before = {k: v.clone() for k, v in layer.state_dict().items()}
    checks.assert_state_unchanged(layer, before, "m", "hint_autocast_keeps_model")
    layer.half()
    fails_showing("model_modified", dict(what="m", name="weight", expected=torch.float32, found=torch.float16,
                                         hint=text("hint_autocast_keeps_model")),
                  checks.assert_state_unchanged, layer, before, "m", "hint_autocast_keeps_model")


def test_assert_raises_needs_the_expected_error():
    def split():
        raise ValueError("two devices")

    checks.assert_raises(ValueError, "f()", split, hint="hint_split_devices")
    hint = text("hint_split_devices")
    fails_showing("expected_error", dict(what="f()", expected="ValueError", found=text("nothing_raised"), hint=hint),
                  checks.assert_raises, ValueError, "f()", lambda: None, hint="hint_split_devices")
    fails_showing("expected_error", dict(what="f()", expected="ValueError", found="ZeroDivisionError",
                                         hint=hint),
                  checks.assert_raises, ValueError, "f()", lambda: 1 / 0, hint="hint_split_devices")


def test_assert_none_refuses_any_other_value():
    checks.assert_none(None, "f()", "hint_no_tensors")
    fails_showing("expected_none", dict(what="f()", found="device(type='cpu')", hint=text("hint_no_tensors")),
                  checks.assert_none, torch.device("cpu"), "f()", "hint_no_tensors")


def test_eval_checks_every_submodule_not_only_the_top_flag():
    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout(), nn.Sequential(nn.BatchNorm1d(2)))
    model.training = False  # instead of model.eval(): the submodules still train
    fails_showing("not_eval", dict(what="m", name="model.0 (Linear)"), checks.assert_eval, model, "m")
    model.eval()
    model[2][0].train()  # one nested submodule back in training mode
    fails_showing("not_eval", dict(what="m", name="model.2.0 (BatchNorm1d)"), checks.assert_eval, model, "m")
    checks.assert_eval(model.eval(), "m")
    fails_showing("not_a_module", dict(what="m", found="OrderedDict"), checks.assert_eval, model.state_dict(), "m")


def test_state_unchanged_compares_values_not_only_dtypes(device):
    model = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3)).to(device)
    before = {name: t.clone() for name, t in model.state_dict().items()}
    with torch.no_grad():
        model[0].weight.add_(0.01)  # same dtype, other values
    if has_data(device):
        fails_showing("wrong_values", dict(what="m: 0.weight", diff="0.01"),
                      checks.assert_state_unchanged, model, before, "m", "hint_autocast_keeps_model")
    else:  # meta tensors hold no values: only dtypes can be compared there
        checks.assert_state_unchanged(model, before, "m", "hint_autocast_keeps_model")


def test_state_unchanged_sees_buffers_updated_by_a_training_forward(device):
    model = nn.BatchNorm1d(3).to(device)
    before = {name: t.clone() for name, t in model.state_dict().items()}
    model(torch.randn(4, 3, device=device))  # training mode: running statistics move
    if has_data(device):
        fails_with("wrong_values", checks.assert_state_unchanged, model, before, "m", "hint_autocast_keeps_model")


def test_state_unchanged_names_added_or_missing_entries():
    model = nn.Linear(2, 2)
    before = {name: t.clone() for name, t in model.state_dict().items()}
    model.register_buffer("cache", torch.zeros(1))
    fails_showing("wrong_keys",
                  dict(what="m: state_dict()", expected=["weight", "bias"], found=["weight", "bias", "cache"]),
                  checks.assert_state_unchanged, model, before, "m", "hint_autocast_keeps_model")
    del model.cache, before["bias"]
    fails_with("wrong_keys", checks.assert_state_unchanged, model, before, "m", "hint_autocast_keeps_model")


def test_detached_means_no_requires_grad_either(device):
    loss = (torch.ones(2, device=device, requires_grad=True) * 2).sum()
    # PyTorch's own copy-construct advice, clone().detach().requires_grad_(True): a new leaf, still tracked
    fails_showing("not_detached", dict(what="m", grad_fn="NoneType", requires_grad=True),
                  checks.assert_detached, loss.clone().detach().requires_grad_(True), "m")
    fails_with("not_detached", checks.assert_detached, loss, "m")
    checks.assert_detached(loss.detach(), "m")


def test_a_missing_gradient_is_not_the_right_gradient(device):
    model = nn.Linear(2, 1).to(device)
    expected = {name: torch.zeros(p.shape) for name, p in model.named_parameters()}
    assert all(p.grad is None for p in model.parameters())  # cleared after the step, or never computed
    fails_showing("missing_gradient", dict(what="m", name="weight"),
                  checks.assert_gradients, model, expected, "m")


def test_a_parameter_left_without_gradient_fails():
    model = nn.Linear(2, 1)
    model(torch.ones(1, 2)).sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    checks.assert_gradients(model, grads, "m")
    model.bias.grad = None  # the weight's gradient is right, the bias has none
    fails_showing("missing_gradient", dict(what="m", name="bias"),
                  checks.assert_gradients, model, grads, "m")


def test_gradients_tolerate_only_atol():
    model = nn.Linear(2, 1)
    model(torch.ones(1, 2)).sum().backward()
    grads = {n: p.grad.clone() + 0.5 for n, p in model.named_parameters()}  # gradients of 1.0: exactly 0.5 off
    fails_showing("stale_gradients", dict(what="m", diff="0.5", name="weight"),
                  checks.assert_gradients, model, grads, "m", atol=0.25)
    checks.assert_gradients(model, grads, "m", atol=0.5)  # atol is inclusive


class MaskKeptByHand(nn.Module):
    """A plain-attribute mask that the module converts itself: as right as a non-persistent buffer."""

    def __init__(self):
        super().__init__()
        self.mask = torch.ones(2)

    def _apply(self, fn, *args, **kwargs):
        super()._apply(fn, *args, **kwargs)
        self.mask = fn(self.mask)
        return self


def test_fixed_tensor_accepts_any_mechanism_that_is_neither_saved_nor_trained():
    layer = nn.Linear(2, 2)
    layer.register_buffer("kept", torch.ones(2), persistent=False)
    layer.plain = torch.ones(2)
    def leaves_it_out(module, state, prefix, meta):
        del state[prefix + "dropped"]

    hooked = nn.Linear(2, 2)  # a saved buffer that the module's own state-dict hook leaves out
    hooked.register_buffer("dropped", torch.ones(2))
    hooked._register_state_dict_hook(leaves_it_out)
    for module, name in [(layer, "kept"), (layer, "plain"), (MaskKeptByHand().to("meta"), "mask"), (hooked, "dropped")]:
        checks.assert_fixed_tensor(module, name, "m")
    layer.register_buffer("saved", torch.ones(2))
    layer.frozen = nn.Parameter(torch.ones(2), requires_grad=False)
    layer.learnt = nn.Parameter(torch.ones(2))
    for name in ["saved", "frozen"]:
        fails_showing("persistent_buffer", dict(what="m", name=name), checks.assert_fixed_tensor, layer, name, "m")
    fails_showing("trained_tensor", dict(what="m", name="learnt"), checks.assert_fixed_tensor, layer, "learnt", "m")
    layer.listed = [1.0, 0.0]
    for name, found in [("absent", "NoneType"), ("listed", "list")]:
        fails_showing("missing_tensor_attribute", dict(what="m", name=name, found=found),
                      checks.assert_fixed_tensor, layer, name, "m")


def with_gradients(grads):
    """A Linear(2, 1) whose `.grad`s are `grads` (name → tensor)."""
    model = nn.Linear(2, 1)
    for name, param in model.named_parameters():
        param.grad = grads[name].clone()
    return model


RAW = {"weight": torch.tensor([[3.0, 4.0]]), "bias": torch.tensor([0.0])}  # total norm 5


@pytest.mark.parametrize("max_norm", [2.5, 50.0], ids=["clipping", "no clipping"])
def test_amp_gradients_name_each_scaler_mistake(max_norm):
    scale, coef = 1024.0, min(1.0, max_norm / 5)
    right = {n: g * coef for n, g in RAW.items()}
    checks.assert_amp_gradients(with_gradients(right), RAW, scale, max_norm, "s")
    scaled_coef = max_norm / (5 * scale)  # the scaled norm, 5120, is always above max_norm
    clipped_scaled = {n: g * scaled_coef for n, g in RAW.items()}
    shown = fails_with("amp_clipped_scaled", checks.assert_amp_gradients, with_gradients(clipped_scaled), RAW, scale,
                       max_norm, "s")
    assert f"{coef / scaled_coef:.3g}" in shown
    fails_showing("amp_unscaled_backward", dict(what="s", scale="1024"), checks.assert_amp_gradients,
                  with_gradients({n: g / scale for n, g in RAW.items()}), RAW, scale, max_norm, "s")
    stale = {n: g + 100 / scale for n, g in right.items()}
    fails_showing("stale_gradients", dict(what="s", diff=f"{100 / scale:.3g}", name="weight"),
                  checks.assert_amp_gradients, with_gradients(stale), RAW, scale, max_norm, "s")


def test_amp_gradients_blame_stale_gradients_only_when_they_are_stale():
    scale, max_norm = 1024.0, 2.5
    accumulated = {n: g + 100.0 / scale for n, g in RAW.items()}  # no zero_grad: the old 100 unscaled, added in
    not_cleared = {n: g.float() for n, g in training._clipped(accumulated, max_norm).items()}
    fails_with("stale_gradients", checks.assert_amp_gradients, with_gradients(not_cleared), RAW, scale, max_norm,
               "s", stale=100.0)
    halved = {n: g * 0.5 * min(1.0, max_norm / 5) for n, g in RAW.items()}  # wrong, and not for want of zero_grad
    fails_with("amp_wrong_gradients", checks.assert_amp_gradients, with_gradients(halved), RAW, scale, max_norm,
               "s", stale=100.0)


def test_amp_gradients_name_a_missing_clip_and_a_missing_gradient():
    fails_showing("amp_not_clipped", dict(what="s", name="weight", diff="2"), checks.assert_amp_gradients,
                  with_gradients(RAW), RAW, 1024.0, 2.5, "s")
    model = with_gradients(RAW)
    model.bias.grad = None
    fails_showing("missing_gradient", dict(what="s", name="bias"), checks.assert_amp_gradients, model, RAW, 1.0, 50.0, "s")
    checks.assert_amp_gradients(with_gradients(RAW), RAW, 1.0, 50.0, "s")  # a disabled scaler: scale 1


def test_scale_and_skipped_step_checks():
    scaler = torch.amp.GradScaler("cpu", init_scale=8.0, growth_interval=1)
    scaler.scale(torch.ones(()))
    checks.assert_scale(scaler, 8.0, "s")
    fails_showing("amp_scale_not_updated", dict(what="s", expected="16", found="8"), checks.assert_scale, scaler, 16.0, "s")
    model = nn.Linear(2, 1)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    checks.assert_step_skipped(before, model, "s")
    with torch.no_grad():
        model.bias.fill_(float("nan"))
    fails_showing("amp_nonfinite_step", dict(what="s", name="bias"), checks.assert_step_skipped, before, model, "s")


@pytest.mark.parametrize("inside", [True, False])
def test_a_backward_hook_sees_whether_autocast_is_still_on(inside):
    """The graders' probe relies on this: a tensor hook runs with the autocast state of the backward call."""
    seen = []
    x = torch.ones(2, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x * 2
        y.register_hook(lambda grad: seen.append(torch.is_autocast_enabled("cpu")))
        if inside:
            y.sum().backward()
    if not inside:
        y.sum().backward()
    assert seen == [inside]
    if inside:
        fails_showing("amp_backward_in_autocast", dict(what="s"), checks.assert_outside_autocast, seen[0], "s")
    else:
        checks.assert_outside_autocast(seen[0], "s")


def test_scaler_and_bfloat16_errors_are_explained():
    model = nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.ones(1, 2)).sum().backward()
    fails_with("amp_scale_not_used", checks.call, "s", torch.amp.GradScaler("cpu").unscale_, optimizer)
    b = torch.tensor([0.5, 300.0], dtype=torch.bfloat16)
    fails_with("numpy_bfloat16", checks.call, "a", b.numpy)
    checks.assert_ndarray(b.float().numpy(), b, "a")  # NumPy has no bfloat16: float32 holds its values exactly
    fails_showing("numpy_dtype", dict(what="a", expected=b.float().numpy().dtype, found=b.double().numpy().dtype),
                  checks.assert_ndarray, b.double().numpy(), b, "a")


def test_is_accepts_only_the_very_same_object():
    model = nn.Linear(2, 2)
    checks.assert_is(model, model, "f(model)", "same_object_hint_module")
    fails_showing("not_same_object", dict(what="f(model)", expected_type="Linear", found_type="Linear",
                                          hint=text("same_object_hint_module")),
                  checks.assert_is, copy.deepcopy(model), model, "f(model)", "same_object_hint_module")
    fails_showing("not_same_object", dict(what="f(model)", expected_type="Linear", found_type="OrderedDict",
                                          hint=text("same_object_hint_module")),
                  checks.assert_is, model.state_dict(), model, "f(model)", "same_object_hint_module")
    fails_with("not_same_object", checks.assert_is, [1], [1], "f(x)", "same_object_hint_module")  # equal, not same


def test_transfers_must_be_exactly_the_expected_count(accelerator):
    device = accelerator
    tensors = [torch.randn(3) for _ in range(3)]
    with count_transfers() as one:
        torch.stack(tensors).to(device)
    checks.assert_transfers(one, 1, "stack_and_move()")
    with count_transfers() as each:
        torch.stack([t.to(device) for t in tensors])
    fails_showing("transfer_count", dict(what="stack_and_move()", found=3),
                  checks.assert_transfers, each, 1, "stack_and_move()")
    with count_transfers() as none:
        torch.stack(tensors)
    fails_showing("transfer_count", dict(what="stack_and_move()", found=0),
                  checks.assert_transfers, none, 1, "stack_and_move()")
    checks.assert_transfers(none, 0, "stack_and_move()")


def test_a_transfer_that_narrowed_the_values_on_the_way_fails(accelerator):
    """attacks-machines.toml, stack-and-move-that-sends-float16-off-the-cpu-is-never-caught: one transfer, the
    dtype asked for, and half the bytes crossed (every value rounded to float16)."""
    tensors = [torch.randn(3) for _ in range(3)]
    with count_transfers() as whole:
        moved = torch.stack(tensors).to(accelerator)
    checks.assert_transfers(whole, 1, "stack_and_move()", result=moved)
    with count_transfers() as narrowed:
        moved = torch.stack(tensors).half().to(accelerator).float()
    fails_showing("transfer_narrowed", dict(what="stack_and_move()", found=18, expected=36),
                  checks.assert_transfers, narrowed, 1, "stack_and_move()", result=moved)


class SubclassWithFakeDevice(torch.Tensor):
    @property
    def device(self):
        return torch.device("meta")


def test_a_tensor_subclass_faking_its_device_is_not_accepted():
    fake = torch.ones(2).as_subclass(SubclassWithFakeDevice)
    assert fake.device.type == "meta"  # what a naive check would believe
    fails_with("not_a_tensor", checks.assert_device, fake, "meta", "x")


def test_a_patched_tensor_device_does_not_fool_the_checks(monkeypatch):
    monkeypatch.setattr(torch.Tensor, "device", property(lambda self: torch.device("meta")))
    fails_with("wrong_device", checks.assert_device, torch.ones(2), "meta", "x")


# ------------------------------------------------------------------ a4_several_devices


class Audited(nn.Module):
    """Every kind of tensor an audit must see: parameters, buffers (one non-persistent), a plain attribute."""

    def __init__(self, device, other):
        super().__init__()
        self.fc = nn.Linear(2, 2, device=device)
        self.bn = nn.BatchNorm1d(2, device=device)
        self.register_buffer("scale", torch.ones(2, device=other), persistent=False)
        self.bn.mean = torch.zeros(2, device=other)


def audited(device):
    other = torch.device("meta" if device.type != "meta" else "cpu")
    model = Audited(device, other)
    batch = {"x": [torch.ones(2, device=device, dtype=torch.float64), (torch.ones(2, device=other), "tag")],
             "y": torch.zeros(2, dtype=torch.long, device=device)}
    return model, batch, ["scale", "bn.mean", "batch['x'][0]", "batch['x'][1][0]"]


def test_audit_passes_the_exact_names_in_any_order(device):
    model, batch, expected = audited(device)
    checks.assert_audit(list(reversed(expected)), expected, model, batch, "audit()")
    checks.assert_audit([], [], model, batch, "audit()")


@pytest.mark.parametrize("missed, hint", [("scale", "audit_hint_buffer"), ("bn.mean", "audit_hint_attribute"),
                                          ("batch['x'][1][0]", "audit_hint_batch"),
                                          ("batch['x'][0]", "audit_hint_rule")])  # right device, wrong dtype
def test_audit_names_each_missed_tensor_by_its_kind(device, missed, hint):
    model, batch, expected = audited(device)
    tensor = {"scale": model.scale, "bn.mean": model.bn.mean, "batch['x'][1][0]": batch["x"][1][0],
              "batch['x'][0]": batch["x"][0]}[missed]
    found = [name for name in expected if name != missed]
    fails_showing("audit_missed", dict(what="audit()", name=missed, device=tensor.device, dtype=tensor.dtype,
                                       hint=text(hint)),
                  checks.assert_audit, found, expected, model, batch, "audit()")


def test_audit_names_extra_duplicate_and_malformed_reports(device):
    model, batch, expected = audited(device)
    fails_showing("audit_extra", dict(what="audit()", name="batch['y']", hint=text("audit_hint_integer")),
                  checks.assert_audit, expected + ["batch['y']"], expected, model, batch, "audit()")
    fails_showing("audit_extra", dict(what="audit()", name="batch.y", hint=text("audit_hint_names")),
                  checks.assert_audit, expected + ["batch.y"], expected, model, batch, "audit()")
    fails_showing("audit_extra", dict(what="audit()", name="fc.weight", hint=text("audit_hint_names")),
                  checks.assert_audit, expected + ["fc.weight"], expected, model, batch, "audit()")
    fails_showing("audit_twice", dict(what="audit()", name="scale"),
                  checks.assert_audit, expected + ["scale"], expected, model, batch, "audit()")
    fails_with("audit_not_names", checks.assert_audit, set(expected), expected, model, batch, "audit()")
    fails_with("audit_not_names", checks.assert_audit, [model.scale], expected, model, batch, "audit()")


def test_stripped_state_dict_must_be_new_ordered_and_hold_the_same_tensors(device):
    state = OrderedDict([("module.z", torch.ones(1, device=device)), ("module.sub.module.w", torch.ones(1)),
                         ("module.mlp.b", torch.zeros(1))])
    before = list(state.items())
    good = {"z": state["module.z"], "sub.module.w": state["module.sub.module.w"], "mlp.b": state["module.mlp.b"]}
    checks.assert_stripped(good, state, before, "strip()")
    checks.assert_stripped(OrderedDict(good), state, before, "strip()")
    fails_showing("not_a_state_dict", dict(what="strip()", found="list"),
                  checks.assert_stripped, list(good), state, before, "strip()")
    fails_showing("state_dict_same_object", dict(what="strip()"), checks.assert_stripped, state, state, before, "strip()")
    fails_showing("wrong_order", dict(what="strip()", expected=list(good), found=sorted(good)),
                  checks.assert_stripped, {k: good[k] for k in sorted(good)}, state, before, "strip()")
    fails_showing("prefix_key", dict(what="strip()", name="module.sub.module.w", expected="sub.module.w", found="sub.w"),
                  checks.assert_stripped, {"z": good["z"], "sub.w": good["sub.module.w"], "mlp.b": good["mlp.b"]},
                  state, before, "strip()")
    fails_showing("value_touched", dict(what="strip()", name="z"),
                  checks.assert_stripped, {**good, "z": good["z"].clone()}, state, before, "strip()")
    fails_showing("prefix_key", dict(what="strip()", name="extra", expected=text("kind_missing"), found="extra"),
                  checks.assert_stripped, {**good, "extra": good["z"]}, state, before, "strip()")
    changed = OrderedDict(state)
    changed["module.z"] = torch.ones(1)  # the original edited: another tensor under the same key
    fails_with("state_dict_input_changed", checks.assert_stripped, good, changed, before, "strip()")


def test_a_batch_left_as_it_was_passes_and_any_change_inside_it_fails():
    """a1's move_batch: the caller's batch, at any depth, after the call (review A2)."""
    def batch():
        return {"x": [torch.ones(2), ("id", 0.5)], "y": OrderedDict(mask=torch.zeros(1, dtype=torch.bool))}

    original = batch()
    before = checks.batch_items(original)
    checks.assert_batch_unchanged(original, before, "move()")
    original["x"][1] = ("id", 0.5)  # rebuilt as equal objects, as a sealed call does: still the same batch
    checks.assert_batch_unchanged(original, before, "move()")
    for change in (lambda b: b["x"].__setitem__(0, b["x"][0].to("meta")),   # a moved tensor written back
                   lambda b: b["y"].__setitem__("mask", b["y"]["mask"].clone()),
                   lambda b: b.__setitem__("x", tuple(b["x"])),               # a container of another type
                   lambda b: b["x"].append(1),
                   lambda b: setattr(b["x"][0], "data", b["x"][0].double())):      # the same tensor, cast in place
        changed = batch()
        before = checks.batch_items(changed)
        change(changed)
        fails_with("batch_changed", checks.assert_batch_unchanged, changed, before, "move()")


def test_restored_locations_reads_where_each_storage_would_go_without_a_gpu(tmp_path):
    path = tmp_path / "ckpt.pt"
    save_as_if_from_cuda({"w": torch.ones(2), "b": torch.zeros(1)}, path)
    assert checks.restored_locations(path, None) == ["cuda:0", "cuda:0"]
    assert checks.restored_locations(path, {"cuda:0": "cuda:3"}) == ["cuda:3", "cuda:3"]
    assert checks.restored_locations(path, "cpu") == ["cpu", "cpu"]


def test_map_location_sends_every_gpu_of_the_job_to_the_rank_and_keeps_the_cpu(tmp_path):
    good = {"cuda:0": "cuda:2", "cuda:1": "cuda:2", "cuda:2": "cuda:2", "cuda:3": "cuda:2"}
    checks.assert_map_location(good, 2, 4, tmp_path, "m")
    fails_showing("map_not_dict", dict(what="m", found="str 'cuda:2'"),
                  checks.assert_map_location, "cuda:2", 2, 4, tmp_path, "m")
    fails_showing("map_wrong_target", dict(what="m", saved="'cuda:1'", found="'cuda:1'", rank=2, last=3),
                  checks.assert_map_location, {"cuda:0": "cuda:2"}, 2, 4, tmp_path, "m")
    fails_showing("map_wrong_target", dict(what="m", saved="'cuda:0'", found=repr(torch.device("cuda", 2)), rank=2, last=3),
                  checks.assert_map_location, dict.fromkeys(good, torch.device("cuda", 2)), 2, 4, tmp_path, "m")
    fails_showing("map_moves_cpu", dict(what="m", found="'cuda:2'"),
                  checks.assert_map_location, {**good, "cpu": "cuda:2"}, 2, 4, tmp_path, "m")


def test_rank_zero_checkpoint_holds_the_plain_state_dict_and_only_rank_zero_writes(tmp_path, device):
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2)).to(device)
    state = model.state_dict()
    path = tmp_path / "ckpt.pt"
    checks.assert_rank_zero_checkpoint(path, 1, state, "save(rank=1)")  # nothing written: right for rank 1
    fails_showing("not_saved", dict(what="save(rank=0)"), checks.assert_rank_zero_checkpoint, path, 0, state, "save(rank=0)")
    torch.save(state, path)
    checks.assert_rank_zero_checkpoint(path, 0, state, "save(rank=0)")
    torch.save(OrderedDict(reversed(state.items())), path)  # the instructions ask for no order
    checks.assert_rank_zero_checkpoint(path, 0, state, "save(rank=0)")
    fails_showing("saved_on_other_rank", dict(what="save(rank=1)", rank=1),
                  checks.assert_rank_zero_checkpoint, path, 1, state, "save(rank=1)")
    torch.save(OrderedDict((f"module.{k}", v) for k, v in state.items()), path)
    fails_showing("checkpoint_keys", dict(what="save(rank=0)", expected=list(state), found=[f"module.{k}" for k in state]),
                  checks.assert_rank_zero_checkpoint, path, 0, state, "save(rank=0)")
    torch.save(model, path)
    fails_showing("checkpoint_not_state_dict", dict(what="save(rank=0)", found="Sequential"),
                  checks.assert_rank_zero_checkpoint, path, 0, state, "save(rank=0)")
    # no class to name (it said "the checkpoint holds ?" and "not the model object"): a protocol weights-only
    # loading cannot read, a file torch.save did not write
    torch.save(state, path, pickle_protocol=4)
    fails_showing("checkpoint_unreadable", dict(what="save(rank=0)"),
                  checks.assert_rank_zero_checkpoint, path, 0, state, "save(rank=0)")
    path.write_bytes(b"not a checkpoint")
    fails_showing("checkpoint_unreadable", dict(what="save(rank=0)"),
                  checks.assert_rank_zero_checkpoint, path, 0, state, "save(rank=0)")
    if has_data(device):
        torch.save({k: v + 1 if v.is_floating_point() else v for k, v in state.items()}, path)
        fails_with("wrong_values", checks.assert_rank_zero_checkpoint, path, 0, state, "save(rank=0)")


def test_shards_must_be_disjoint_equal_and_indices():
    checks.assert_shards({0: [3, 0], 1: [1, 4]}, 5, "s")  # sample 2 dropped
    fails_showing("shard_overlap", dict(what="s", index=0, ranks="0, 1"),
                  checks.assert_shards, {0: [3, 0], 1: [0, 4]}, 5, "s")
    fails_showing("shard_size", dict(what="s", rank=0, found=3, expected=2, size=5, world_size=2),
                  checks.assert_shards, {0: [3, 0, 2], 1: [1, 4, 3]}, 5, "s")
    fails_showing("not_indices", dict(what="s rank 1", last=4, found="[1, 5]"),
                  checks.assert_shards, {0: [3, 0], 1: [1, 5]}, 5, "s")
    fails_with("not_indices", checks.assert_shards, {0: [3.0, 0.0]}, 5, "s")
    checks.assert_shards({0: [torch.tensor(1), 2, 0]}, 3, "s")  # a 0-dim integer tensor is an index too
    fails_with("not_indices", checks.assert_shards, {0: [torch.tensor(1.0), 2, 0]}, 3, "s")
    checks.assert_epochs_differ([0, 1], [1, 0], (0, 1), 0, "s")
    fails_showing("shard_same_every_epoch", dict(what="s", first=0, second=1, rank=0),
                  checks.assert_epochs_differ, [0, 1], [0, 1], (0, 1), 0, "s")


@pytest.mark.parametrize("seed", range(20))
def test_a_shuffle_is_shuffled(seed):
    order = torch.randperm(40, generator=torch.Generator().manual_seed(seed)).tolist()
    checks.assert_shuffled(order, 40, 0, "s")


@pytest.mark.parametrize("order, step, count", [
    ([*range(13, 40), *range(13)], 1, 39),  # turned
    (list(range(39, -1, -1)), 39, 39),  # reversed
    ([i * 7 % 40 for i in range(1, 41)], 7, 39),  # strided
    ([*range(13, 40, 2), *range(14, 40, 2), 0, 2, 4, 6, 1, 3, 5], 2, 31),  # turned, then split between two ranks
])
def test_a_turned_or_strided_order_is_not_shuffled(order, step, count):
    fails_showing("not_shuffled", dict(what="s", epoch=1, step=step, size=40, count=count, steps=len(order) - 1),
                  checks.assert_shuffled, order, 40, 1, "s")



def _shuffled_with_the_global_generator_put_back(dataset, rank, world_size, epoch, seed=0):
    import random

    state = random.getstate()
    order = list(range(len(dataset)))
    random.shuffle(order)
    random.setstate(state)
    per = len(dataset) // world_size
    return order[rank * per:(rank + 1) * per]


def _shuffled_with_its_own_generator(dataset, rank, world_size, epoch, seed=0):
    order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(seed + epoch)).tolist()
    per = len(dataset) // world_size
    return order[rank * per:(rank + 1) * per]


@pytest.mark.parametrize("make_sampler, overlap", [(_shuffled_with_the_global_generator_put_back, True),
                                                   (_shuffled_with_its_own_generator, False)],
                         ids=["global-generator-put-back", "own-generator"])
def test_each_ranks_shard_is_drawn_with_global_generators_of_its_own(make_sampler, overlap):
    """attacks-slicing.toml, make-sampler-shuffles-with-pythons-global-generator-put-back: ranks of a real job are
    processes of their own; one global state for all gave every rank the same order."""
    import random

    before = torch.get_rng_state(), random.getstate()
    shards = {rank: checks.sampled_shard("s", 50, make_sampler, range(50), rank, 2, 0) for rank in (0, 1)}
    if overlap:
        fails_with("shard_overlap", checks.assert_shards, shards, 50, "s")
    else:
        checks.assert_shards(shards, 50, "s")
    assert torch.equal(torch.get_rng_state(), before[0]) and random.getstate() == before[1]  # the test's own draws

def test_a_sampler_without_a_process_group_is_diagnosed():
    from torch.utils.data import DistributedSampler

    fails_with("no_process_group", checks.call, "make_sampler()", DistributedSampler, range(4))


def test_loads_on_rank_names_the_first_storage_left_elsewhere(tmp_path):
    path = tmp_path / "ckpt.pt"
    save_as_if_from_cuda({"w": torch.ones(2)}, path)
    checks.assert_loads_on_rank(path, {"cuda:0": "cuda:1"}, 1, 2, "m")
    fails_showing("map_wrong_target", dict(what="m", saved=text("saved_checkpoint"), found="'cuda:0'", rank=1, last=1),
                  checks.assert_loads_on_rank, path, {}, 1, 2, "m")


def test_a_shard_must_repeat_for_the_same_arguments_and_change_with_the_seed():
    checks.assert_same_shard([2, 0], [2, 0], 1, "s")
    fails_showing("shard_not_repeatable", dict(what="s", rank=1), checks.assert_same_shard, [2, 0], [0, 2], 1, "s")
    checks.assert_seeds_differ([2, 0], [0, 2], (0, 5), "s")
    fails_showing("shard_ignores_seed", dict(what="s", first=0, second=5),
                  checks.assert_seeds_differ, [2, 0], [2, 0], (0, 5), "s")


def test_transfers_made_while_the_counter_is_switched_off_are_seen(accelerator):
    device = accelerator
    from torch.utils._python_dispatch import _disable_current_modes

    tensors = [torch.randn(3) for _ in range(3)]
    with count_transfers() as counter:
        first = tensors[0].to(device)
        with _disable_current_modes():
            rest = [t.to(device) for t in tensors[1:]]
        stacked = torch.stack([first, *rest])  # the counter sees device tensors it never saw made
    fails_showing("transfer_unseen", dict(what="stack_and_move()"), checks.assert_transfers, counter, 1,
                  "stack_and_move()", result=stacked)
    with count_transfers() as counter:
        first = tensors[0].to(device)
        with _disable_current_modes():
            hidden = torch.stack([first, *(t.to(device) for t in tensors[1:])])  # all of it unseen
    fails_showing("transfer_unseen", dict(what="stack_and_move()"), checks.assert_transfers, counter, 1,
                  "stack_and_move()", result=hidden)


NORMS = (nn.BatchNorm1d, nn.GroupNorm, nn.LayerNorm)


def cast_but_norms(model, dtype, feed=None, give_back=None):
    """The 16-bit recipe, with what each kept norm does about its input and its output."""
    for module in model.modules():
        if isinstance(module, NORMS):
            if feed:
                module.register_forward_pre_hook(lambda m, args: tuple(a.to(feed) for a in args))
            if give_back:
                module.register_forward_hook(lambda m, args, out: out.to(give_back))
        else:
            module._apply(lambda t: t.to(dtype) if t.is_floating_point() else t, recurse=False)
    return model.eval()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_16_bit_model_whose_norms_compute_on_float32_passes(device, dtype):
    model = cast_but_norms(NormBlock().to(device), dtype, feed=torch.float32, give_back=dtype)
    checks.assert_16_bit_forward(model, torch.randn(5, 2, 4, device=device, dtype=dtype), dtype, "model(x)")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_norms_fed_16_bit_are_named_on_every_device(device, dtype):
    """The CPU-only recipe: it runs here (and on meta), and would raise at LayerNorm on a CUDA GPU."""
    model = cast_but_norms(NormBlock().to(device), dtype)
    x = torch.randn(5, 2, 4, device=device, dtype=dtype)
    shown, fields = failure("norm_fed_16_bit", checks.assert_16_bit_forward, model, x, dtype, "model(x)")
    assert fields["found"] == dtype and "batch_norm" in fields["kernel"]
    # CUDA's words for this dtype (review W2): "Half" only for float16
    scalar = {torch.float16: "Half", torch.bfloat16: "BFloat16"}[dtype]
    assert f"expected scalar type {scalar} but found Float" in shown and "batch_norm" in shown


def test_a_forward_that_skips_the_norms_is_named(device):
    """attacks-slicing.toml, cast-floating-without-hooks-replaces-model-forward-with-identity: a forward replaced by
    nn.Identity returns 16 bits and feeds no norm 16 bits, since none runs."""
    model = cast_but_norms(NormBlock().to(device), torch.float16)
    model.__dict__["forward"] = nn.Identity()
    x = torch.randn(5, 2, 4, device=device, dtype=torch.float16)
    shown, fields = failure("norm_layer_skipped", checks.assert_16_bit_forward, model, x, torch.float16, "model(x)")
    assert fields["layer"] == "BatchNorm1d" and "BatchNorm1d" in shown


def test_a_norm_that_keeps_float32_output_is_named_before_the_next_layer_raises(device):
    model = cast_but_norms(NormBlock().to(device), torch.float16, feed=torch.float32)
    x = torch.randn(5, 2, 4, device=device, dtype=torch.float16)
    shown, fields = failure("norm_output_dtype", checks.assert_16_bit_forward, model, x, torch.float16, "model(x)")
    # the layer, named by the process that ran the model, is a field of its own: never part of the label
    assert fields["what"] == "model(x)" and fields["layer"] == "BatchNorm1d" and "BatchNorm1d" in shown


# ------------------------------------------------------------------ what `make mutation` found unpinned
# Each test below kills mutants of checks.py that survived the run of 2026-12-02: a field of a diagnostic
# that could go missing, a boundary, a helper with no unit test at all (assert_modes, assert_rows_of).

def test_call_names_a_notimplementederror_with_a_message_as_what_it_raised():
    def not_here():
        raise NotImplementedError("float8 is not supported on this device\nsee the docs")

    fails_showing("raised", dict(what="f()", error="NotImplementedError: float8 is not supported on this device"),
                  checks.call, "f()", not_here)


def test_two_equal_values_are_a_fill_not_random_values():
    fails_showing("not_random", dict(what="w", value="5"), checks.assert_random, torch.full((2,), 5.0), "w")


def test_a_fixed_tensor_also_registered_under_another_name_is_saved():
    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.mask = torch.ones(2)
            self.register_buffer("saved_mask", self.mask)  # the very same tensor, in state_dict() as "saved_mask"

    fails_showing("persistent_buffer", dict(what="m", name="mask"), checks.assert_fixed_tensor, Layer(), "mask", "m")


def test_amp_gradients_name_the_parameter_that_is_furthest_off():
    raw = {"weight": torch.tensor([[1.0, 0.0]]), "bias": torch.tensor([0.0])}
    off = {"weight": torch.tensor([[0.9, 0.0]]), "bias": torch.tensor([0.5])}  # bias is off most; weight is larger
    fails_showing("stale_gradients", dict(what="s", diff="0.5", name="bias"), checks.assert_amp_gradients,
                  with_gradients(off), raw, 1024.0, 50.0, "s")


def test_amp_gradients_see_an_unscaled_backward_at_any_scale_but_one():
    fails_showing("amp_unscaled_backward", dict(what="s", scale="2"), checks.assert_amp_gradients,
                  with_gradients({n: g / 2 for n, g in RAW.items()}), RAW, 2.0, 50.0, "s")


def test_a_16_bit_forward_names_the_call_when_the_model_raises_or_returns_float32():
    class Raises(nn.Module):
        def forward(self, x):
            raise RuntimeError("no kernel for this dtype")

    fails_showing("raised", dict(what="model(x)", error="RuntimeError: no kernel for this dtype"),
                  checks.assert_16_bit_forward, Raises(), torch.ones(2, dtype=torch.float16), torch.float16, "model(x)")
    fed_then_raises = nn.Sequential(nn.LayerNorm(2), Raises())  # the norm computed on 16 bits: the likely cause
    shown, fields = failure("norm_fed_16_bit", checks.assert_16_bit_forward, fed_then_raises,
                            torch.ones(3, 2, dtype=torch.float16), torch.float16, "model(x)")
    assert fields["what"] == "model(x)"
    widened = nn.Sequential(nn.Identity())
    widened.register_forward_hook(lambda m, args, out: out.float())  # no norm at all, yet float32 comes back
    fails_showing("wrong_dtype", dict(what="model(x)", expected=torch.float16, found=torch.float32,
                                      hint=text("dtype_hint_norm_output")),
                  checks.assert_16_bit_forward, widened, torch.ones(2, dtype=torch.float16), torch.float16, "model(x)")


@pytest.mark.parametrize("dtype", [torch.float64, torch.int64, torch.bool], ids=str)
def test_an_ndarray_keeps_every_dtype_numpy_has(dtype):
    t = (torch.arange(6.0) / 3).reshape(2, 3).to(dtype)
    checks.assert_ndarray(t.numpy(), t, "a")


def test_audit_names_what_it_got_and_why_a_missed_tensor_of_each_kind_counts(device):
    model, batch, expected = audited(device)
    fails_showing("audit_not_names", dict(what="audit()", found="set"),
                  checks.assert_audit, set(expected), expected, model, batch, "audit()")
    fails_showing("audit_not_names", dict(what="audit()", found=repr([model.scale])[:120]),
                  checks.assert_audit, [model.scale], expected, model, batch, "audit()")
    other = model.scale.device
    model.mean = torch.zeros(2, device=other)                        # a plain attribute of the model itself
    model.head = nn.Linear(2, 2, device=other)                       # parameters on the other device
    batch["ids"] = torch.arange(2, device=other)                     # an integer tensor, missed for its device
    expected = expected + ["mean", "head.weight", "head.bias", "batch['ids']"]
    for missed, hint in [("mean", "audit_hint_attribute"), ("head.weight", "audit_hint_rule"),
                         ("batch['ids']", "audit_hint_rule")]:
        tensor = {"mean": model.mean, "head.weight": model.head.weight, "batch['ids']": batch["ids"]}[missed]
        fails_showing("audit_missed", dict(what="audit()", name=missed, device=tensor.device, dtype=tensor.dtype,
                                           hint=text(hint)),
                      checks.assert_audit, [n for n in expected if n != missed], expected, model, batch, "audit()")


def test_a_stripped_state_dict_that_lost_a_key_says_it_is_missing():
    state = OrderedDict([("module.a", torch.ones(1)), ("module.b", torch.zeros(1))])
    before = list(state.items())
    fails_showing("prefix_key", dict(what="strip()", name="module.b", expected="b", found=text("kind_missing")),
                  checks.assert_stripped, {"a": state["module.a"]}, state, before, "strip()")


def test_a_rank_zero_checkpoint_in_another_dtype_names_the_key(tmp_path):
    state = nn.Linear(2, 1).state_dict()
    torch.save({k: v.half() for k, v in state.items()}, tmp_path / "ckpt.pt")
    fails_showing("wrong_dtype", dict(what="save(rank=0): weight", expected=torch.float32, found=torch.float16,
                                      hint=text("dtype_hint_keep")),
                  checks.assert_rank_zero_checkpoint, tmp_path / "ckpt.pt", 0, state, "save(rank=0)")


def test_sampled_indices_name_the_call_when_the_sampler_raises():
    class Broken:
        def __iter__(self):
            raise ValueError("num_replicas must be positive")

    fails_showing("raised", dict(what="make_sampler()", error="ValueError: num_replicas must be positive"),
                  checks.sampled_indices, Broken(), 10, "make_sampler()")


def test_modes_must_be_those_the_caller_left():
    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout()).eval()
    checks.assert_modes(model, False, "predict(model, x)")
    model[1].train()
    fails_showing("mode_changed", dict(what="predict(model, x)", name="model.1", expected="eval()", found="train()"),
                  checks.assert_modes, model, False, "predict(model, x)")
    fails_showing("mode_changed", dict(what="step(model)", name="model", expected="train()", found="eval()"),
                  checks.assert_modes, nn.Sequential(nn.Linear(2, 2)).eval(), True, "step(model)")


def test_rows_must_be_rows_of_the_table_each_at_most_once():
    table = torch.arange(12.0).reshape(4, 3)
    checks.assert_rows_of(table[[2, 0, 3]], table, "rows")  # shuffled, one dropped: fine
    fails_showing("rows_not_from_dataset", dict(what="rows"), checks.assert_rows_of, table[[0, 0, 1]], table, "rows")
    fails_showing("rows_not_from_dataset", dict(what="rows"), checks.assert_rows_of, table[:2] + 0.5, table, "rows")
    one_foreign = torch.stack([table[0], table[1] + 0.5])  # a row of the table and one that is not
    fails_showing("rows_not_from_dataset", dict(what="rows"), checks.assert_rows_of, one_foreign, table, "rows")
    fails_showing("wrong_shape", dict(what="rows", expected=("N", 3), found=(4, 2)), checks.assert_rows_of,
                  table[:, :2], table, "rows")
    fails_showing("not_a_tensor", dict(what="rows", found="list"), checks.assert_rows_of, table.tolist(), table, "rows")


# The autocast each layer ran under (autograder.probes.autocast_seen): the model's device type, with its dtypes.
CUDA_DTYPES = [torch.float16, torch.bfloat16]


def test_assert_autocast_passes_the_model_device_types_autocast():
    checks.assert_autocast([{"cuda": torch.float16}, {"cuda": torch.bfloat16, "cpu": torch.bfloat16}], "cuda",
                           CUDA_DTYPES, "f")


def test_assert_autocast_names_the_autocast_of_another_device_type():
    fails_showing("autocast_device_type", dict(what="f", found="cpu (torch.bfloat16)", device_type="cuda"),
                  checks.assert_autocast, [{"cpu": torch.bfloat16}], "cuda", CUDA_DTYPES, "f")


def test_assert_autocast_names_a_layer_run_without_autocast():
    fails_showing("autocast_off", dict(what="f", hint=text("dtype_hint_autocast")),
                  checks.assert_autocast, [{"cuda": torch.float16}, {}], "cuda", CUDA_DTYPES, "f")


def test_assert_autocast_names_a_model_never_run():
    fails_showing("autocast_not_run", dict(what="f"), checks.assert_autocast, [], "cuda", CUDA_DTYPES, "f")


def test_assert_autocast_names_a_dtype_the_device_type_does_not_use():
    fails_showing("wrong_dtype", dict(what="f: torch.autocast('cuda')", expected=torch.float16, found=torch.float32,
                                      hint=text("dtype_hint_autocast")),
                  checks.assert_autocast, [{"cuda": torch.float32}], "cuda", CUDA_DTYPES, "f")


def test_assert_global_rng_kept_refuses_a_call_that_changed_the_generator():
    checks.assert_global_rng_kept(True, "s")
    fails_showing("global_rng_changed", dict(what="s"), checks.assert_global_rng_kept, False, "s")


def test_sampled_shard_refuses_a_sampler_that_reseeds_the_global_generator_when_made_or_iterated():
    from torch.utils.data import DistributedSampler

    def right(dataset, rank, world_size):
        return DistributedSampler(dataset, num_replicas=world_size, rank=rank, seed=3, drop_last=True)

    def reseeds(dataset, rank, world_size):
        torch.manual_seed(3)
        return torch.randperm(len(dataset))[rank::world_size].tolist()

    def reseeds_lazily(dataset, rank, world_size):  # a generator: the reseeding happens inside `list()`
        yield from reseeds(dataset, rank, world_size)

    dataset = list(range(10))
    assert checks.sampled_shard("s", 10, right, dataset, 0, 2) == list(right(dataset, 0, 2))
    for wrong in [reseeds, reseeds_lazily]:
        torch.manual_seed(0)  # not the state a reseeding leaves: the probe compares the states before and after
        fails_showing("global_rng_changed", dict(what="s"), checks.sampled_shard, "s", 10, wrong, dataset, 0, 2)


@pytest.mark.parametrize("device", ["meta", "cpu"])
def test_a_training_step_keeps_the_anomaly_detection_a_student_left_on(device):
    """Anomaly mode reads each gradient's values to find a NaN, and a meta tensor (a GPU's stand-in) has none:
    there the call checks none, elsewhere it finds a NaN as it would, and the student's setting stays on."""
    model = nn.Linear(4, 2).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.full((3, 4), float("nan") if device == "cpu" else 1.0, device=device)

    def step(model, x):
        optimizer.zero_grad()
        model(x).sqrt().sum().backward()
        optimizer.step()
        return model.weight.grad

    with torch.autograd.set_detect_anomaly(True):
        if has_data(device):
            with pytest.raises(AssertionError):
                checks.call("step(model, x)", step, model, x)
        else:
            assert checks.call("step(model, x)", step, model, x).shape == (2, 4)
        assert torch.is_anomaly_enabled() and torch.is_anomaly_check_nan_enabled()
