"""Fixtures and hooks, found by pytest without an import; the helpers the tests import are tests/support/."""
import subprocess
from dataclasses import dataclass

import pytest
import torch
from support.paths import BIN
from support.services import CHROMIUM_FLAGS, chromium

from autograder import grading_devices
from course import classroom

TIERS = ("unit", "grading", "system")  # tests/unit/, tests/grading/, tests/system/ (pyproject.toml's markers)


def pytest_collection_modifyitems(items):
    """Each test is marked with its folder's tier, so `pytest -m unit` (`make test-fast`) is tests/unit/."""
    for item in items:
        if item.path.parent.name in TIERS:
            item.add_marker(item.path.parent.name)


@pytest.fixture(params=grading_devices(), ids=str)
def device(request) -> torch.device:
    """Each device the graders check on: cpu and meta always, cuda/mps when present."""
    return request.param


@pytest.fixture(params=[d for d in grading_devices() if d.type != "cpu"], ids=str)
def accelerator(request) -> torch.device:
    """Each device the graders check on other than the CPU, where `.to` really moves: meta always, cuda/mps
    when present."""
    return request.param


@dataclass
class DemoRun:
    """What `course demo` printed, and the class it graded with the real `nbgrader autograde`."""
    output: str
    graded: classroom.GradedClass


@pytest.fixture(scope="session")
def course():
    """`course(*arguments)`: this environment's `course` command line, run as an instructor would (`env`:
    its environment, this process's by default)."""
    def run(*arguments, timeout=900, env=None) -> subprocess.CompletedProcess:
        return subprocess.run([str(BIN / "course"), *map(str, arguments)], capture_output=True, text=True,
                              timeout=timeout, env=env)

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


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium driven by Playwright (no browser download), shared by a module's browser tests.

    Module scope, not session: while Playwright's sync API is running, its event loop stops
    jupyter_client's synchronous calls in later tests ("Cannot run the event loop while another loop
    is running")."""
    from playwright.sync_api import sync_playwright

    executable = chromium()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    yield context.new_page()
    context.close()


