import contextlib
import os
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
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = "course-browser-test"
    env = {**(os.environ if env is None else env), "JUPYTER_CONFIG_DIR": str(base / "config"), "JUPYTER_RUNTIME_DIR": str(base / "runtime"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    server = subprocess.Popen(
        [*(program or [str(Path(sys.executable).parent / "jupyter"), app]), "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1",
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
