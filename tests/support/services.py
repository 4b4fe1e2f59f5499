"""Jupyter servers and the browser that the system tests start (the browser fixture is tests/conftest.py's)."""
import contextlib
import os
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from support import system_tools
from support.paths import BIN, free_port, with_bin_on_path


CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium() -> str:
    found = os.environ.get("COURSE_CHROMIUM") or shutil.which("chromium")
    if not found:
        system_tools.missing("Chromium", "make browser: apt-get install chromium", "COURSE_SKIP_BROWSER")
    return found


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
