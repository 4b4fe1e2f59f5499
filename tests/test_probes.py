import pytest
import torch
from torch import nn

from autograder.probes import count_transfers, save_as_if_from_cuda
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
