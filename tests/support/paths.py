"""This environment's commands and a free port: what the tests that start commands and servers share."""
import os
import socket
import sys
from pathlib import Path

BIN = Path(sys.executable).parent  # this environment's commands: course, nbgrader, jupyter, alembic


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
