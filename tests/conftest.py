import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
import system_tools
import torch

from autograder import grading_devices
from course import classroom

# diagnostics of the catalogue that say what went wrong but not which point of the course: no one
# section teaches them (tests/unit/test_insights.py, tests/grading/test_insights_demo.py)
GENERIC_DIAGNOSTICS = {"raised", "verdict_call_raised", "wrong_values", "wrong_shape", "not_answered", "expected_error", "expected_none", "not_a_module",
                       "not_a_tensor"}


TIERS = ("unit", "grading", "system")  # tests/unit/, tests/grading/, tests/system/ (pyproject.toml's markers)


def pytest_collection_modifyitems(items):
    """Each test is marked with its folder's tier, so `pytest -m unit` (`make test-fast`) is tests/unit/."""
    for item in items:
        if item.path.parent.name in TIERS:
            item.add_marker(item.path.parent.name)


BIN = Path(sys.executable).parent  # this environment's commands: course, nbgrader, jupyter, alembic


def readme_steps(heading: str) -> list[str]:
    """The commands of the first bash block under `heading` in the README, comments dropped: what the tests
    of the instructor's steps run as written (test_instructor_workflow.py, test_exchange.py)."""
    readme = (classroom.ROOT / "README.md").read_text("utf-8")
    section = readme.split(f"\n{heading}\n", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, flags=re.DOTALL).group(1)
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.split("#", 1)[0].strip()]


def with_bin_on_path(env=None) -> dict:
    """`env` (default: this process's environment) with this environment's bin first on PATH, as in an
    activated environment: nbgrader runs `alembic` from there."""
    env = dict(os.environ if env is None else env)
    return {**env, "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}"}


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium() -> str:
    found = os.environ.get("COURSE_CHROMIUM") or shutil.which("chromium")
    if not found:
        system_tools.missing("Chromium", "make browser: apt-get install chromium", "COURSE_SKIP_BROWSER")
    return found


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


@contextlib.contextmanager
def jupyter(app: str, root: Path, base: Path, *arguments, program=None, env=None):
    """`jupyter lab` or `jupyter server` of this environment on a free loopback port, run in `root` with
    temporary configuration under `base`; yields its url and token. `program` replaces
    `jupyter APP` (a student's `python start.py`, which starts JupyterLab of its own environment), `env`
    this process's environment variables."""
    port, token = free_port(), "course-browser-test"
    env = {**with_bin_on_path(env), "JUPYTER_CONFIG_DIR": str(base / "config"), "JUPYTER_RUNTIME_DIR": str(base / "runtime")}
    server = subprocess.Popen(
        [*(program or [str(BIN / "jupyter"), app]), "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1",
         f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
         f"--ServerApp.root_dir={root}", *arguments],
        cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    pytest.fail(f"jupyter {app} did not start within 120 s")
                time.sleep(0.5)
        yield {"url": url, "token": token}
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
