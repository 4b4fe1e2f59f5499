import pytest
import torch

from autograder import devices
from autograder.devices import grading_devices, has_data, same_device


def test_cpu_and_meta_are_always_grading_devices():
    assert grading_devices()[:2] == [torch.device("cpu"), torch.device("meta")]


@pytest.mark.parametrize("available", [True, False], ids=["with CUDA", "without CUDA"])
def test_cuda_is_a_grading_device_exactly_when_available(monkeypatch, available):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: available)
    monkeypatch.delenv(devices.REQUIRE_CUDA_VARIABLE, raising=False)
    assert [d for d in grading_devices() if d.type == "cuda"] == ([torch.device("cuda", 0)] if available else [])
    assert grading_devices()[:2] == [torch.device("cpu"), torch.device("meta")]


def test_require_cuda_fails_loudly_without_cuda(monkeypatch):
    monkeypatch.setenv(devices.REQUIRE_CUDA_VARIABLE, "1")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="COURSE_REQUIRE_CUDA=1") as raised:
        grading_devices()
    assert "CUDA 不可用" in str(raised.value)


def test_require_cuda_asks_nothing_of_a_simulated_machine(monkeypatch):
    """The verdict's tests run on the students' machine, simulated, even on a GPU runner that requires CUDA."""
    from autograder.simulate import simulated_accelerator

    monkeypatch.setenv(devices.REQUIRE_CUDA_VARIABLE, "2")
    with simulated_accelerator(None):
        assert [d.type for d in grading_devices()] == ["cpu", "meta"]


@pytest.mark.parametrize("value", ["", "0"])
def test_require_cuda_off_values(monkeypatch, value):
    monkeypatch.setenv(devices.REQUIRE_CUDA_VARIABLE, value)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert [d.type for d in grading_devices()][:2] == ["cpu", "meta"]


def test_meta_holds_no_data():
    assert has_data("cpu") and not has_data(torch.device("meta"))


@pytest.mark.parametrize("a, b, same", [
    ("cuda", "cuda:0", True), ("cuda:0", "cuda:1", False), ("cpu", "meta", False), ("mps", "mps:0", True),
])
def test_same_device_treats_unindexed_as_any_index(a, b, same):
    assert same_device(a, b) is same and same_device(b, a) is same
