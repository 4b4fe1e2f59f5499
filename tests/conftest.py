import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from autograder import classroom, grading_devices


@pytest.fixture(params=grading_devices(), ids=str)
def device(request) -> torch.device:
    """Each device the graders check on: cpu and meta always, cuda/mps when present."""
    return request.param


@dataclass
class DemoRun:
    """What `course demo` printed, and the class it graded with the real `nbgrader autograde`."""
    output: str
    graded: classroom.GradedClass


@pytest.fixture(scope="session")
def course():
    """`course(*arguments)`: this environment's `course` command line, run as an instructor would."""
    def run(*arguments, timeout=900) -> subprocess.CompletedProcess:
        command = [str(Path(sys.executable).parent / "course"), *map(str, arguments)]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout)

    return run


@pytest.fixture(scope="session")
def demo(course, tmp_path_factory):
    """`demo(assignment)`: `course demo` run once per assignment and session, as an instructor would."""
    runs = {}

    def run(assignment) -> DemoRun:
        if assignment not in runs:
            root = tmp_path_factory.mktemp(assignment)
            done = course("demo", "--root", root, "--assignment", assignment)
            assert done.returncode == 0, done.stdout + done.stderr
            runs[assignment] = DemoRun(done.stdout, classroom.grade_demo_class(root, assignment, reuse=True))
        return runs[assignment]

    return run
