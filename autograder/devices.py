"""Which devices the graders check on.

`x.to("cpu")` on a CPU tensor is a no-op, so a CPU-only check cannot tell `x = x.to(device)` from a
forgotten assignment. The `meta` device is a real PyTorch device with shapes and dtypes but no data, so
every check also runs there; CUDA and MPS join when they are really present.
"""
import os

import torch

from .messages import message
from .simulate import simulations

REQUIRE_CUDA_VARIABLE = "COURSE_REQUIRE_CUDA"


def cuda_required() -> bool:
    return os.environ.get(REQUIRE_CUDA_VARIABLE, "") not in ("", "0")


def grading_devices() -> list[torch.device]:
    """`cpu` and `meta` always, then `cuda` and `mps` when present.

    With COURSE_REQUIRE_CUDA=1 a missing CUDA is an error, so a GPU job never passes on the CPU alone; not
    on a simulated machine, which the verdict's tests run on whatever the grader's (autograder/verdict.py).
    """
    devices = [torch.device("cpu"), torch.device("meta")]
    if torch.cuda.is_available():
        devices.append(torch.device("cuda", 0))
    elif cuda_required() and not simulations():
        raise RuntimeError(message("cuda_required", torch_version=torch.__version__,
                                   cuda_version=torch.version.cuda))
    if torch.backends.mps.is_available():
        devices.append(torch.device("mps", 0))
    return devices


def has_data(device) -> bool:
    """Whether tensors on `device` hold values that can be compared (meta tensors do not)."""
    return torch.device(device).type != "meta"


def same_device(a, b) -> bool:
    """Device equality where an unindexed device means the current one (`cuda` == `cuda:0`)."""
    a, b = torch.device(a), torch.device(b)
    if a.type != b.type:
        return False
    return a.index is None or b.index is None or a.index == b.index
