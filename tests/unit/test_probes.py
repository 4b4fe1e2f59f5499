import numpy
import pytest
import torch
from torch import nn

from autograder.checks.core import _device_of
from autograder.probes import (autocast_seen, count_transfers, global_rng_kept, meta_copies_skipped, meta_standing_for,
                               on_stand_in, save_as_if_from_cuda)
from autograder.simulate import simulated_accelerator


@pytest.fixture
def tensors():
    return [torch.randn(3) for _ in range(5)]


def test_one_stacked_move_is_one_transfer(tensors):
    with count_transfers() as counter:
        torch.stack(tensors).to("meta")
    assert counter.transfers == 1


def test_per_tensor_moves_are_counted_each(tensors):
    with count_transfers() as counter:
        torch.stack([t.to("meta") for t in tensors])
    assert counter.transfers == len(tensors)


def test_copies_into_a_device_buffer_are_counted(tensors):
    with count_transfers() as counter:
        out = torch.empty(len(tensors), 3, device="meta")
        for i, t in enumerate(tensors):
            out[i] = t
    assert counter.transfers == len(tensors)


def test_casts_and_same_device_copies_are_not_transfers(tensors):
    with count_transfers() as counter:
        torch.stack(tensors).to(torch.float64).clone().to("cpu")
    assert counter.transfers == 0



@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32, torch.float64])
def test_a_transfer_that_keeps_the_dtype_moves_its_sources_bytes(dtype):
    """Lesson 7's exercise: a uint8 batch moved, then converted on the device, moves one byte per pixel."""
    images = torch.zeros(4, 3, 8, 8, dtype=dtype)
    with count_transfers() as counter:
        images.to("meta").float()
        images.to(torch.float64).to(torch.float32)  # conversions on one device move nothing
    assert counter.bytes == images.numel() * images.element_size()


@pytest.mark.parametrize("move, element_size", [
    (lambda x: x.to("meta", torch.float32), 4),                     # blocking: converted on the host first
    (lambda x: x.float().to("meta"), 4),
    (lambda x: x.to("meta", torch.float32, non_blocking=True), 1),  # non-blocking: converted on the device
    (lambda x: torch.empty(x.shape, device="meta").copy_(x), 4),    # copy_ converts like .to
    (lambda x: torch.empty(x.shape, device="meta").copy_(x, non_blocking=True), 1),
])
def test_a_transfer_that_converts_moves_the_bytes_of_the_side_that_converts(move, element_size):
    """As CUDA's copy does (autograder/probes.py, crossing_bytes): a blocking host-to-device `.to(device,
    dtype)` converts on the host and ships the new dtype, a non-blocking one ships the old dtype."""
    images = torch.zeros(4, 3, 8, 8, dtype=torch.uint8)
    with count_transfers() as counter:
        move(images)
    assert (counter.transfers, counter.bytes) == (1, images.numel() * element_size)


INDEX, MASK = torch.tensor([0, 2]), torch.tensor([True, False, True, False, True])


@pytest.mark.parametrize("operation, copies", [
    (lambda x: x[INDEX], 1),                                  # the index is moved to x's device
    (lambda x: x[MASK], 1),
    (lambda x: x.index_put_((INDEX,), torch.ones(2)), 2),     # the index and the values
    (lambda x: x.__setitem__(slice(0, 2), torch.ones(2)), 1), # x[0:2] = a CPU tensor
    (lambda x: x * torch.tensor(2.0), 0),                     # a 0-dim CPU tensor joins as a number
    (lambda x: x[INDEX.to(x.device)], 1),                     # the one explicit move
], ids=["cpu-index", "cpu-mask", "index_put_", "slice-assignment", "0-dim-scalar", "index-moved-first"])
def test_copies_inside_an_operation_are_counted(operation, copies):
    """Indexing a device tensor with a CPU index or mask raises nothing: the kernel copies it across."""
    with count_transfers() as counter:
        operation(torch.zeros(5, device="meta"))
    assert counter.transfers == copies


def test_an_operation_that_refuses_the_mix_copies_nothing():
    with count_transfers() as counter, pytest.raises(RuntimeError, match="expected device meta"):
        torch.zeros(5, device="meta") + torch.ones(5)
    assert counter.transfers == 0


@pytest.fixture
def cuda_checkpoint(tmp_path):
    path = tmp_path / "trained_on_gpu.pt"
    model = nn.Linear(3, 2)
    save_as_if_from_cuda(model.state_dict(), path)
    return path, model.state_dict()


def test_cuda_checkpoint_needs_map_location_on_a_cpu_only_machine(cuda_checkpoint):
    path, _ = cuda_checkpoint
    with simulated_accelerator(None), pytest.raises(RuntimeError, match="CUDA"):
        torch.load(path, weights_only=True)


@pytest.mark.parametrize("target", ["cpu", "meta"])
def test_cuda_checkpoint_loads_with_map_location(cuda_checkpoint, target):
    path, original = cuda_checkpoint
    with simulated_accelerator(None):
        loaded = torch.load(path, map_location=target, weights_only=True)
    assert {t.device.type for t in loaded.values()} == {target}
    if target == "cpu":
        assert all(torch.equal(loaded[k], original[k]) for k in original)


def _load_then_move(path, model, device):
    model.load_state_dict(torch.load(path, map_location=device, weights_only=True))
    return model.to(device)


def _move_then_load(path, model, device):
    model.to(device).load_state_dict(torch.load(path, map_location=device, weights_only=True))
    return model


def _load_on_the_cpu_then_move(path, model, device):
    model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    return model.to(device)


def _load_without_moving(path, model, device):  # the classic mistake: load_state_dict copies into the CPU model
    model.load_state_dict(torch.load(path, map_location=device, weights_only=True))
    return model


@pytest.mark.parametrize("answer, ends_on", [(_load_then_move, "meta"), (_move_then_load, "meta"),
                                             (_load_on_the_cpu_then_move, "meta"), (_load_without_moving, "cpu")])
def test_a_checkpoint_mapped_to_meta_loads_into_a_cpu_model_and_stays_unless_moved(cuda_checkpoint, answer, ends_on):
    path, _ = cuda_checkpoint
    model = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    model[0].load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    torch.save(model.state_dict(), path)
    with pytest.raises(RuntimeError, match="meta"):  # what the probe is for
        _load_then_move(path, nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2)), "meta")
    with meta_copies_skipped():
        loaded = answer(path, model, torch.device("meta"))
    assert {_device_of(t).type for t in loaded.state_dict().values()} == {ends_on}


@pytest.mark.parametrize("answer, found", [
    (lambda t: t.detach().cpu().numpy(), "ndarray"),
    (lambda t: t.detach().to("cpu").numpy(), "ndarray"),
    (lambda t: t.numpy(force=True), "ndarray"),
    (lambda t: (t.detach().cpu() if t.device.type != "cpu" else t.detach()).numpy(), "ndarray"),  # reads cuda
    (lambda t: (t.detach().cpu() if t.is_cuda else t.detach()).numpy(), "ndarray"),  # lesson 13's `.is_cuda`
    (lambda t: numpy.array(t.detach().cpu().tolist()) * 0 + t.detach().sum().item(), "ndarray"),  # values read back
    (lambda t: t.detach().numpy(), "can't convert cuda:0 device type tensor to numpy"),  # the classic mistake
    (lambda t: t.numpy(), "can't convert cuda:0 device type tensor to numpy"),  # the device first, as PyTorch
    (lambda t: t.cpu().numpy(), "Can't call numpy() on Tensor that requires grad"),
    (lambda t: t.detach().to("cpu", copy=True).numpy(), "ndarray"),  # attack-8: to-numpy-copies-with-to-cpu-copy-true
    (lambda t: t.detach().to("cpu", torch.float32, False, True).numpy(), "ndarray"),  # copy, given by position
    (lambda t: numpy.full((2, 3), float(t.detach().sum())), "ndarray"),  # float() of a value on the GPU
], ids=["detach-cpu", "detach-to-cpu", "force", "asks-the-device", "asks-is-cuda", "item-and-tolist", "no-cpu",
        "no-cpu-no-detach", "no-detach", "copy-true", "copy-by-position", "float"])
def test_a_stand_in_for_a_gpu_tensor_reaches_numpy_only_through_the_cpu(answer, found):
    tensor = torch.ones(2, 3).requires_grad_().to("meta")
    try:
        result = on_stand_in("cuda", answer, tensor)
    except (TypeError, RuntimeError) as error:
        result = error
    if found == "ndarray":
        assert type(result).__name__ == "ndarray" and result.shape == (2, 3) and not result.any()
    else:
        assert found in str(result)


# The meta device standing in for an accelerator: what a CPU grader cannot run, seen from an answer's side.

@pytest.mark.parametrize("move", [lambda t, device: t.to(device), lambda t, device: t.to(device, non_blocking=True),
                                  lambda t, device: t.to(device=device, dtype=torch.float16),
                                  lambda t, device: t.cuda(), lambda t, device: t.to(torch.device(device.type))],
                         ids=["to", "non-blocking", "keywords", "cuda", "device-type"])
@pytest.mark.parametrize("on", ["cpu", "meta"])
def test_a_tensor_moved_to_the_device_stood_for_is_one_more_stand_in(move, on):
    """attack-8: scaled-train-step-moves-the-batch-to-the-models-device. `batch.to(model_device)`, where the model's
    device reads as the GPU stood for, gives a meta tensor, as a GPU's would be there, whether the tensor was on
    the GPU already (meta) or on the CPU."""
    model = nn.Linear(3, 2).to("meta")

    def answer(model, x):
        device = next(model.parameters()).device
        return move(x, device), device

    moved, device = on_stand_in("cuda", answer, model, torch.ones(4, 3, device=on))
    assert device == torch.device("cuda", 0) and _device_of(moved) == torch.device("meta") and moved.shape == (4, 3)


@pytest.mark.parametrize("stood_for", ["cuda", "cuda:0", "mps"])
def test_a_stand_ins_device_has_its_index_as_a_real_gpus_tensor_does(stood_for):
    """A real GPU's tensor reports `cuda:0`, never `cuda`: an answer that compared `t.device` to
    `torch.device("cuda")`, false on every GPU, kept its points (the twenty-second session)."""
    found = on_stand_in(stood_for, lambda t: t.device, torch.ones(2, device="meta"))
    assert found.index == 0 and found.type == torch.device(stood_for).type
    assert found != torch.device(torch.device(stood_for).type)


@pytest.mark.parametrize("mode", [torch.no_grad, torch.inference_mode, torch.enable_grad])
def test_a_stand_ins_copy_to_the_cpu_requires_grad_only_where_grad_mode_is_on(mode):
    """As a real copy: a right to_numpy copied under torch.no_grad() and called .numpy(), which the stand-in's copy
    refused, since it required grad whatever the mode (the twenty-second session)."""
    def copied(t):
        with mode():
            return t.to("cpu").requires_grad

    assert on_stand_in("cuda", copied, torch.ones(2, device="meta", requires_grad=True)) is (mode is torch.enable_grad)


def test_a_tensor_moved_to_another_gpu_than_the_one_stood_for_is_not_on_the_stand_in():
    """Standing in for cuda:1, `.to("cuda:0")` (or `.cuda()`, the first GPU) is a move to a GPU the grader has not
    got: it fails there as it does on any CPU grader, not silently on the stand-in."""
    if torch.cuda.is_available():
        pytest.skip("a GPU grader has cuda:0")
    for move in [lambda t: t.to("cuda:0"), lambda t: t.to("cuda"), lambda t: t.cuda()]:
        with pytest.raises((RuntimeError, AssertionError)):
            on_stand_in("cuda:1", move, torch.ones(2, device="meta"))
    assert _device_of(on_stand_in("cuda:1", lambda t: t.to("cuda:1"), torch.ones(2))) == torch.device("meta")


def test_a_logged_loss_and_foreach_clipping_run_on_the_stand_in():
    """attack-8: a learning curve kept with float(loss) and f"{loss:.4f}", and clip_grad_norm_(foreach=True): a
    GPU runs them, so the stand-in does (zeros for the values it has not got)."""
    model = nn.Linear(3, 2).to("meta")

    def step(model, x):
        loss = model(x).sum()
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
        return float(loss), f"{loss:.4f}", int(loss), bool(loss), loss.item(), float(norm)

    assert on_stand_in("cuda", step, model, torch.ones(4, 3, device="meta")) == (0.0, "0.0000", 0, False, 0.0, 0.0)
    with pytest.raises(Exception):  # outside, none of it exists
        float(torch.ones((), device="meta"))


def test_a_meta_tensor_reads_as_the_stood_for_device_only_inside():
    weight = torch.ones(2, device="meta")
    with meta_standing_for("cuda:1"):
        assert weight.device == torch.device("cuda", 1)
        assert nn.Parameter(weight).device == torch.device("cuda", 1)
        assert torch.ones(2).device == torch.device("cpu")  # only meta stands in
        assert _device_of(weight) == torch.device("meta")  # what the checks read
        assert torch.cuda.is_available()  # the machine has the accelerator too
    assert weight.device == torch.device("meta") and not torch.cuda.is_available()


def test_pytorchs_own_code_still_computes_on_meta():
    """A meta kernel written in Python reads `.device` too: it must see meta, or it allocates on CUDA."""
    model = nn.Sequential(nn.Linear(3, 4), nn.GELU(), nn.Linear(4, 2)).to("meta")
    with meta_standing_for("cuda"):
        out = model(torch.randn(5, 3, device="meta"))
    assert _device_of(out) == torch.device("meta") and out.shape == (5, 2)


def test_an_answer_that_keeps_the_index_and_one_that_drops_it():
    def devices(model):
        return {t.device for t in [*model.parameters(), *model.buffers()]}

    def device_types(model):
        return {torch.device(t.device.type) for t in [*model.parameters(), *model.buffers()]}

    model = nn.BatchNorm1d(3).to("meta")
    assert on_stand_in("cuda:1", devices, model) == {torch.device("cuda", 1)}
    assert on_stand_in("cuda:1", device_types, model) == {torch.device("cuda")}


def right_autocast(model, x):
    kind = next(model.parameters()).device.type
    with torch.autocast(kind, dtype=torch.bfloat16 if kind == "cpu" else torch.float16):
        return model(x)


def cpu_autocast(model, x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return model.forward(x)  # forward itself: the layers' hooks see it all the same


def bfloat16_where_native(model, x):
    device = next(model.parameters()).device
    native = device.type == "cpu" or torch.cuda.is_bf16_supported(including_emulation=False)
    with torch.autocast(device.type, dtype=torch.bfloat16 if native else torch.float16):
        return model(x)


@pytest.mark.parametrize("answer, seen", [(right_autocast, {"cuda": torch.float16}),
                                          (cpu_autocast, {"cpu": torch.bfloat16}),
                                          (bfloat16_where_native, {"cuda": torch.bfloat16})],
                         ids=lambda v: getattr(v, "__name__", ""))
def test_autocast_seen_records_the_autocast_of_each_layer_on_a_stand_in_gpu(answer, seen):
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)).to("meta")
    out, recorded = on_stand_in("cuda", autocast_seen, answer, model, torch.randn(5, 3, device="meta"))
    assert recorded == [seen, seen]  # the two layers with parameters
    assert _device_of(out) == torch.device("meta")
    assert not any(m._forward_pre_hooks for m in model.modules())  # the recorder leaves no hook behind


def test_autocast_seen_on_the_cpu_records_the_cpus_autocast():
    model = nn.Linear(3, 2)
    out, recorded = autocast_seen(right_autocast, model, torch.randn(4, 3))
    assert recorded == [{"cpu": torch.bfloat16}] and out.dtype == torch.bfloat16


def draws_from_a_generator_of_its_own(n):
    return torch.randperm(n, generator=torch.Generator().manual_seed(3)).tolist()


def reseeds(n):
    torch.manual_seed(3)
    return torch.randperm(n).tolist()


def reseeds_inside_fork_rng(n):
    with torch.random.fork_rng():
        return reseeds(n)


def reseeds_pythons(n):
    import random

    random.seed(3)
    order = list(range(n))
    random.shuffle(order)
    return order


def draws_from_numpys(n):
    import numpy

    return numpy.random.permutation(n).tolist()


def draws_from_a_python_generator_of_its_own(n):
    import random

    order = list(range(n))
    random.Random(3).shuffle(order)
    return order


@pytest.mark.parametrize("shuffle, kept", [(draws_from_a_generator_of_its_own, True), (reseeds, False),
                                           (reseeds_inside_fork_rng, True), (reseeds_pythons, False),
                                           (draws_from_numpys, False), (draws_from_a_python_generator_of_its_own, True)],
                         ids=lambda v: getattr(v, "__name__", ""))
def test_global_rng_kept_sees_a_reseeded_global_generator(shuffle, kept):
    """PyTorch's, Python's and NumPy's: a sampler that reseeded Python's (`random.seed(seed * 1000 + epoch)`) kept its
    points where the same with `torch.manual_seed` lost them (the fourth style tester's)."""
    import random

    import numpy

    torch.manual_seed(0), random.seed(0), numpy.random.seed(0)
    result, found = global_rng_kept(shuffle, 10)
    torch.manual_seed(0), random.seed(0), numpy.random.seed(0)
    assert (result, found) == (shuffle(10), kept)


def test_a_number_read_from_a_meta_tensor_is_what_the_call_computed():
    """attacks-machines.toml, train-step-prints-the-loss-on-the-bare-meta-device and the three after it: on the meta
    device standing in for a GPU, a training step's `loss.item()`, `assert torch.isfinite(loss)` and a NaN check read
    the numbers the same operations give on the CPU (a model made before the call: zeros), while the tensors stay
    on meta and copies to the CPU still fail as PyTorch's do."""
    from autograder.probes import MetaValues

    model = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 3)).to("meta")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    inputs, targets = torch.randn(6, 4), torch.randint(0, 3, (6,))
    draws = torch.get_rng_state()
    with MetaValues():
        loss = nn.CrossEntropyLoss()(model(inputs.to("meta")), targets.to("meta"))
        loss.backward()
        optimizer.step()
        assert f"{loss.item():.4f}" == "1.0986" and torch.isfinite(loss)  # log 3: a zero model's logits are equal
        assert not torch.isnan(model[0].weight).any() and float(model[2].bias.grad.sum()) == pytest.approx(0.0, abs=1e-6)
        noise = torch.randn(3, device="meta")
        assert torch.equal(torch.get_rng_state(), draws)  # a draw on meta takes none of the CPU's
        assert bool((noise == noise).all())
        with pytest.raises(NotImplementedError):
            loss.cpu()
    assert _device_of(loss).type == "meta" and _device_of(model[0].weight).type == "meta"
    with pytest.raises(RuntimeError):  # outside a call, a meta tensor has no value, as in PyTorch
        loss.item()


@pytest.mark.parametrize("answer, landed", [
    ("t.to('cpu', non_blocking=True).numpy()", False),  # lesson 08's race: read before it landed
    ("(lambda host: (torch.cuda.synchronize(), host.numpy())[1])(t.to('cpu', non_blocking=True))", True),
    ("(lambda host: (torch.cuda.current_stream().synchronize(), host.numpy())[1])(t.to('cpu', non_blocking=True))", True),
    ("(lambda host: (t.sum().item(), host.numpy())[1])(t.to('cpu', non_blocking=True))", True),  # a read waits too
    ("t.to('cpu').numpy()", True),
    ("torch.empty(4).copy_(t, non_blocking=True).numpy()", True),  # into pageable memory: there when it returns
    ("torch.empty(4, pin_memory=True).copy_(t, non_blocking=True).numpy()", False),  # page-locked: in flight
    ("torch.empty(4).pin_memory().copy_(t, non_blocking=True).numpy()", False),
    ("(lambda host: (torch.cuda.synchronize(), host.numpy())[1])"
     "(torch.empty(4, pin_memory=True).copy_(t, non_blocking=True))", True),
    ("(lambda host, done: (done.record(), done.query(), host.numpy())[2])"
     "(t.to('cpu', non_blocking=True), torch.cuda.Event())", True),  # polled until done
], ids=["non-blocking-unsynchronized", "synchronize", "stream-synchronize", "a-value-read", "blocking", "copy-into-host",
        "copy-into-pinned-factory", "copy-into-pinned-memory", "copy-into-pinned-then-synchronize", "event-query"])
def test_a_non_blocking_copy_from_a_stand_in_lands_only_once_the_gpu_is_waited_for(answer, landed):
    t = torch.arange(4.0).to("meta")
    with meta_standing_for("cuda"):
        found = eval(answer, {"torch": torch, "t": t})
    assert numpy.array_equal(found, numpy.zeros(4)) is landed


def test_computed_values_leave_the_students_generators_and_cpu_tensors_as_the_operation_did():
    """MetaValues runs each operation on CPU values too: a generator of the student's draws once (the CPU copy
    draws from a copy of it), and a CPU tensor that an in-place operation with a meta one leaves as it was (PyTorch
    writes nothing there) stays so."""
    from autograder.probes import MetaValues

    drawn, kept = torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)
    total = torch.tensor(1.0)
    with MetaValues():
        torch.empty(3, device="meta").uniform_(generator=drawn)
        total.add_(torch.ones((), device="meta"))
    torch.empty(3, device="meta").uniform_(generator=kept)
    assert torch.equal(torch.rand(2, generator=drawn), torch.rand(2, generator=kept)) and total.item() == 1.0


def test_a_stand_ins_copy_to_the_cpu_holds_what_the_call_computed():
    """The second reader of attack-10's fixes: on the meta device standing in for a GPU, `assert torch.isfinite(loss)`
    read zeros (False) although the loss the call computed is finite."""
    from autograder.probes import MetaValues

    model, given = nn.Linear(4, 3).to("meta"), torch.ones(2, device="meta")
    with meta_standing_for("cuda"), MetaValues():
        loss = nn.MSELoss()(model(torch.ones(2, 4, device="meta")), torch.ones(2, 3, device="meta"))
        assert torch.isfinite(loss) and loss.item() == 1.0  # a zero model against ones
        assert numpy.array_equal(torch.ones(2, device="meta").cpu().numpy(), numpy.ones(2))  # made in the call
        assert numpy.array_equal(given.cpu().numpy(), numpy.zeros(2))  # made before it: zeros
