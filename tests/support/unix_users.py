"""Real Unix users for the tests of a class on one shared machine (test_exchange.py, test_jupyterhub.py).

Each user gets its own home; every user is removed again when the `users` context ends, also when a
test fails. Creating users needs root (CI runs as root); elsewhere the tests that need them skip.
"""
import importlib.metadata
import os
import secrets
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest


def require_root():
    if os.geteuid() != 0 or not (shutil.which("useradd") and shutil.which("runuser")):
        pytest.skip("needs root, useradd and runuser to create the students' Unix users / "
                    "需要 root 权限以及 useradd 和 runuser 来创建学生的 Unix 用户")


def world_readable_folder(prefix: str) -> Path:
    """A temporary folder other users can enter (pytest's tmp_path is private to the test's user)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    folder.chmod(0o755)
    return folder


@contextmanager
def users(names, homes: Path):
    """Create one Unix user per name (a random suffix keeps parallel runs apart), each with a home in
    `homes`; yields {name: user}. Removes them at the end, also after a failure."""
    suffix = secrets.token_hex(3)
    created = {}
    try:
        for name in names:
            user = f"tto-{name}-{suffix}"
            subprocess.run(["useradd", "--create-home", "--home-dir", str(homes / name), "--shell", "/bin/sh",
                            "--user-group", user], check=True, capture_output=True)
            created[name] = user
        yield created
    finally:
        for user in created.values():
            kill_processes_of(user)
            subprocess.run(["userdel", "--force", user], capture_output=True)


def kill_processes_of(user: str):
    """End what a test user still runs (a single-user server the hub did not stop), by process id."""
    import pwd
    import signal

    uid = pwd.getpwnam(user).pw_uid
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            uids = next(line for line in status.read_text().splitlines() if line.startswith("Uid:"))
            if int(uids.split()[1]) == uid:
                os.kill(int(status.parent.name), signal.SIGKILL)
        except (OSError, StopIteration, ValueError):
            pass  # the process ended meanwhile


def home_of(user: str) -> Path:
    import pwd

    return Path(pwd.getpwnam(user).pw_dir)


def shared_python(folder: Path) -> Path:
    """A Python that every user can run, with this environment's packages: the environment itself when
    other users can reach it; otherwise (a venv whose interpreter lives in root's private home, as with
    pyenv) a small venv of the system's interpreter of the same version that adds this environment's
    site-packages, as an administrator would install the course's environment for everyone."""
    if _others_can_run(sys.executable, "import nbgrader"):
        return Path(sys.executable)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    system_python = next((p for p in (f"/usr/bin/{version}", f"/usr/local/bin/{version}") if _others_can_run(p)),
                         None)
    if system_python is None:
        pytest.skip(f"no {version} that other users can run / 没有其他用户可以运行的 {version}")
    venv = folder / "shared-env"
    subprocess.run([system_python, "-m", "venv", "--without-pip", str(venv)], check=True)
    site_packages = Path(sysconfig.get_paths(vars={"base": str(venv), "platbase": str(venv)})["purelib"])
    # addsitedir, not a bare path: it also runs the environment's .pth files (the editable `autograder`)
    (site_packages / "course-environment.pth").write_text(
        f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    for shared in ("etc", "share"):  # Jupyter's configuration and data (server and lab extensions)
        if (Path(sys.prefix) / shared).is_dir():
            (venv / shared).symlink_to(Path(sys.prefix) / shared)
    # the environment's commands (nbgrader runs `alembic` from PATH), started with this interpreter
    for entry in importlib.metadata.entry_points(group="console_scripts"):
        script = venv / "bin" / entry.name
        if not script.exists():
            module, _, function = entry.value.partition(":")
            function = function.split("[")[0].strip()
            script.write_text(f"#!{venv / 'bin' / 'python'}\nimport sys\nfrom {module.strip()} import "
                              f"{function.split('.')[0]}\nsys.exit({function}())\n")
            script.chmod(0o755)
    return venv / "bin" / "python"


def _others_can_run(path, code="pass") -> bool:
    """Whether `nobody` can run `code` with Python `path`: every folder on the way must let others in."""
    done = subprocess.run(["runuser", "-u", "nobody", "--", str(path), "-c", code],
                          capture_output=True)
    return done.returncode == 0


def run_as(user: str, command, cwd: Path, env=None, timeout=120) -> subprocess.CompletedProcess:
    """Run `command` as `user` in `cwd`, with a clean environment of that user plus `env`."""
    home = home_of(user)
    base = {"HOME": str(home), "USER": user, "LOGNAME": user, "LANG": "C.UTF-8",
            "PATH": "/usr/local/bin:/usr/bin:/bin", **(env or {})}
    return subprocess.run(["runuser", "-u", user, "--", "env", "-i", *[f"{k}={v}" for k, v in base.items()],
                           *map(str, command)], cwd=cwd, capture_output=True, text=True, timeout=timeout)
