"""The assertion helpers pass right answers and name each classic mistake, on every grading device."""
import warnings
from collections import OrderedDict, namedtuple

import pytest
import torch
from torch import nn

from autograder import checks
from autograder.messages import shows
from autograder.probes import save_as_if_from_cuda
from autograder.simulate import simulated_accelerator

Pair = namedtuple("Pair", "first second")


def fails_with(key, function, *args, **kwargs):
    with pytest.raises(AssertionError) as raised:
        function(*args, **kwargs)
    assert shows(str(raised.value), key), f"expected message {key!r}, got:\n{raised.value}"


class LooksLikeATensor:
    device = torch.device("cpu")
    dtype = torch.float32
    requires_grad = True
    is_leaf = True
    shape = torch.Size([2])


def test_an_imitation_is_not_a_tensor():
    fails_with("not_a_tensor", checks.assert_device, LooksLikeATensor(), "cpu", "x")
    fails_with("not_a_tensor", checks.assert_leaf, LooksLikeATensor(), "x")


def test_a_string_is_not_a_device():
    fails_with("not_a_device", checks.assert_torch_device, "cpu", "pick_device()")


def test_moved_tensor_passes(device):
    x = torch.arange(3.0)
    checks.assert_device(x.to(device), device, "x", original=x)


def test_forgotten_assignment_is_named(device):
    x = torch.arange(3.0, device="meta" if device.type == "cpu" else "cpu")  # `x.to(device)` result dropped
    fails_with("forgot_assignment", checks.assert_device, x, device, "x", original=x)


def test_wrong_device_is_named(device):
    elsewhere = torch.device("meta" if device.type == "cpu" else "cpu")
    fails_with("wrong_device", checks.assert_device, torch.ones(2, device=elsewhere), device, "x")


def test_wrong_dtype_is_named(device):
    x = torch.ones(2, device=device)
    checks.assert_dtype(x, torch.float32, "x")
    fails_with("wrong_dtype", checks.assert_dtype, x.half(), torch.float32, "x")
    fails_with("forgot_assignment_dtype", checks.assert_dtype, x, torch.float16, "x", original=x)


def test_values_are_compared_where_they_exist():
    checks.assert_values(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0], dtype=torch.float64), "x")
    fails_with("wrong_values", checks.assert_values, torch.tensor([1.0, 2.5]), torch.tensor([1.0, 2.0]), "x")
    fails_with("wrong_values", checks.assert_values, torch.tensor([float("nan")]), torch.tensor([1.0]), "x")
    checks.assert_values(torch.ones(2, device="meta"), torch.zeros(2), "x")  # no data on meta: shape only
    fails_with("wrong_shape", checks.assert_values, torch.ones(3, device="meta"), torch.zeros(2), "x")


def test_leaf_weight_passes_and_moved_weight_is_named(device):
    checks.assert_leaf(torch.randn(3, device=device, requires_grad=True), "w")
    checks.assert_leaf(nn.Parameter(torch.randn(3, device=device)), "w")
    moved = torch.randn(3, dtype=torch.float64, requires_grad=True).to(device, torch.float32)
    fails_with("not_leaf", checks.assert_leaf, moved, "w")
    fails_with("no_requires_grad", checks.assert_leaf, torch.randn(3, device=device), "w")


def test_autograd_connection(device):
    w = torch.randn(3, dtype=torch.float64, requires_grad=True)
    checks.assert_grad_connected(w.to(device), w, "w")
    checks.assert_grad_connected(w, w, "w")
    fails_with("grad_disconnected", checks.assert_grad_connected, w.detach().to(device), w, "w")


def test_device_choice_accepts_any_index_only_when_none_is_asked():
    checks.assert_device_choice(torch.device("cuda:0"), "cuda", "d", "device_hint_order")
    checks.assert_device_choice(torch.device("cuda:1"), "cuda:1", "d", "device_hint_prefer")
    fails_with("wrong_device_type", checks.assert_device_choice, torch.device("cuda"), "cuda:1", "d",
               "device_hint_prefer")
    fails_with("wrong_device_type", checks.assert_device_choice, torch.device("cpu"), "mps", "d",
               "device_hint_order")


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


def test_batch_mistakes_are_named():
    batch = nested_batch()
    top_only = {k: v.to("meta") if torch.is_tensor(v) else v for k, v in batch.items()}
    fails_with("nested_not_moved", checks.assert_batch_moved, top_only, batch, "meta", "batch")
    as_lists = move(batch, "meta") | {"x": [batch["x"][0].to("meta"), [torch.ones(1, device="meta"), "tag"]]}
    fails_with("wrong_type", checks.assert_batch_moved, as_lists, batch, "meta", "batch")
    dropped = move(batch, "meta")
    del dropped["extra"]
    fails_with("wrong_keys", checks.assert_batch_moved, dropped, batch, "meta", "batch")
    renamed = move(batch, "meta") | {"pair": Pair(torch.zeros(2, device="meta"), "None")}
    fails_with("leaf_changed", checks.assert_batch_moved, renamed, batch, "meta", "batch")


class WithPlainTensor(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(2, 2)
        self.scale = torch.ones(2)  # not registered: Module.to will not move it


def test_module_on_device_passes(device):
    checks.assert_module_on(nn.BatchNorm1d(3).to(device), device, "model")


def test_module_mistakes_are_named():
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    model[1].to("meta")
    fails_with("module_tensor_device", checks.assert_module_on, model, "meta", "model")
    fails_with("unregistered_tensor", checks.assert_module_on, WithPlainTensor().to("meta"), "meta", "model")
    fails_with("not_a_module", checks.assert_module_on, torch.ones(2), "cpu", "model")


def test_mixed_devices_are_named():
    checks.assert_one_device({"a": torch.ones(1), "b": torch.ones(1)}, "batch")
    fails_with("mixed_devices", checks.assert_one_device, {"a": torch.ones(1), "b": torch.ones(1, device="meta")},
               "batch")


def test_call_turns_errors_into_bilingual_failures():
    def unanswered():
        raise NotImplementedError()

    fails_with("not_answered", checks.call, "f()", unanswered)
    fails_with("raised", checks.call, "f()", lambda: 1 / 0)
    assert checks.call("f()", lambda x: x + 1, 1) == 2


def test_call_explains_device_mismatches_and_gpu_checkpoints(tmp_path):
    fails_with("device_mismatch", checks.call, "f()", lambda: torch.ones(2, device="meta") + torch.ones(2))
    path = tmp_path / "gpu.pt"
    save_as_if_from_cuda({"w": torch.ones(2)}, path)
    with simulated_accelerator(None):
        fails_with("cuda_checkpoint", checks.call, "load()", torch.load, path)


@pytest.mark.parametrize("kind", [None, "cuda", "mps"])
def test_simulated_accelerator_is_consistent_across_apis(kind):
    with simulated_accelerator(kind):
        assert torch.cuda.is_available() == (kind == "cuda")
        assert torch.backends.mps.is_available() == (kind == "mps")
        assert torch.accelerator.is_available() == (kind is not None)
        current = torch.accelerator.current_accelerator()
        assert (current.type if current else None) == kind
    assert torch.accelerator.is_available() == (torch.cuda.is_available() or torch.backends.mps.is_available())


def test_call_keeps_warnings_of_student_code_from_reaching_stderr():
    def noisy():
        warnings.warn("deprecated spelling", UserWarning)
        return 7

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning that escaped `call` would raise here
        assert checks.call("f()", noisy) == 7


def test_numpy_mistakes_are_named():
    t = torch.arange(4.0).reshape(2, 2)
    checks.assert_ndarray(t.T.numpy(), t.T, "a")
    fails_with("not_numpy", checks.assert_ndarray, t.tolist(), t, "a")
    fails_with("numpy_dtype", checks.assert_ndarray, t.double().numpy(), t, "a")
    fails_with("wrong_shape", checks.assert_ndarray, t.flatten().numpy(), t, "a")
    fails_with("wrong_values", checks.assert_ndarray, (t + 1).numpy(), t, "a")
    fails_with("numpy_requires_grad", checks.call, "a", torch.ones(2, requires_grad=True).numpy)


def test_loader_kwargs_checks_pin_memory_and_type():
    checks.assert_loader_kwargs({"pin_memory": True, "num_workers": 2}, True, "k")
    checks.assert_loader_kwargs({}, False, "k")
    fails_with("pin_memory", checks.assert_loader_kwargs, {"pin_memory": True}, False, "k")
    fails_with("pin_memory", checks.assert_loader_kwargs, {"num_workers": 0}, True, "k")
    fails_with("not_a_dict", checks.assert_loader_kwargs, [("pin_memory", True)], True, "k")


def test_training_checks():
    model = nn.Linear(2, 1)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    fails_with("not_updated", checks.assert_updated, before, model, "m")
    with torch.no_grad():
        model.bias += 1
    checks.assert_updated(before, model, "m")
    model(torch.ones(1, 2)).sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    checks.assert_gradients(model, grads, "m")
    model(torch.ones(1, 2)).sum().backward()  # accumulated a second time
    fails_with("stale_gradients", checks.assert_gradients, model, grads, "m")
    loss = model(torch.ones(1, 2)).sum()
    fails_with("not_detached", checks.assert_detached, loss, "m")
    checks.assert_detached(loss.detach(), "m")


def test_eval_buffer_and_state_checks():
    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout())
    fails_with("not_eval", checks.assert_eval, model, "m")
    model[1].eval()
    fails_with("not_eval", checks.assert_eval, model, "m")  # a submodule still training
    checks.assert_eval(model.eval(), "m")
    layer = nn.Linear(2, 2)
    layer.register_buffer("kept", torch.ones(1), persistent=False)
    layer.register_buffer("saved", torch.ones(1))
    layer.plain = torch.ones(1)
    checks.assert_buffer(layer, "kept", "m", persistent=False)
    fails_with("persistent_buffer", checks.assert_buffer, layer, "saved", "m", persistent=False)
    fails_with("not_a_buffer", checks.assert_buffer, layer, "plain", "m", persistent=False)
    fails_with("not_a_buffer", checks.assert_buffer, layer, "weight", "m", persistent=False)
    fails_with("not_a_buffer", checks.assert_buffer, layer, "absent", "m", persistent=False)
    before = {k: v.clone() for k, v in layer.state_dict().items()}
    checks.assert_state_unchanged(layer, before, "m", "hint_autocast_keeps_model")
    layer.half()
    fails_with("model_modified", checks.assert_state_unchanged, layer, before, "m", "hint_autocast_keeps_model")


def test_raises_and_none_checks():
    def split():
        raise ValueError("two devices")

    checks.assert_raises(ValueError, "f()", split, hint="hint_split_devices")
    fails_with("expected_error", checks.assert_raises, ValueError, "f()", lambda: None, hint="hint_split_devices")
    fails_with("expected_error", checks.assert_raises, ValueError, "f()", lambda: 1 / 0, hint="hint_split_devices")
    checks.assert_none(None, "f()", "hint_no_tensors")
    fails_with("expected_none", checks.assert_none, torch.device("cpu"), "f()", "hint_no_tensors")


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
