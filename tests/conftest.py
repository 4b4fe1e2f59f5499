from pathlib import Path

import pytest
import torch

from autograder import grading_devices

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(params=grading_devices(), ids=str)
def device(request) -> torch.device:
    """Each device the graders check on: cpu and meta always, cuda/mps when present."""
    return request.param
