"""Kernels forked from the warm fork server behave like freshly started ones, and share nothing.

The kernels are started through jupyter_client with a kernel spec that names the provisioner, the way
any Jupyter tool selects one (`course grade`'s workers use it through course.kernels.manager's
GradingKernelManager). Each forked kernel enters a sandbox of its own (tests/system/test_sandbox.py checks
the sandbox itself, forked and not); with the sandbox turned off, kernels are forked as before.
"""
import ast
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from traitlets.config import Config

from course.kernels import forkserver, sandbox
from support.kernels import printed_by

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork server is Linux-only")


@pytest.fixture(scope="module")
def kernel_specs(tmp_path_factory):
    """`forked`: this Python's ipykernel through the fork server. `no-server`: the same, through a Python
    that runs ipykernel but cannot run the fork server."""
    folder = tmp_path_factory.mktemp("kernels")
    only_kernels = folder / "python-without-fork-server"
    only_kernels.write_text(f'#!/bin/sh\n[ "$2" = ipykernel_launcher ] && exec {sys.executable} "$@"\nexit 1\n')
    only_kernels.chmod(0o755)
    for name, python in [("forked", sys.executable), ("no-server", str(only_kernels))]:
        (folder / name).mkdir()
        (folder / name / "kernel.json").write_text(json.dumps({
            "argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": name, "language": "python",
            "metadata": {"kernel_provisioner": {"provisioner_name": forkserver.NAME}},
        }))
    return KernelSpecManager(kernel_dirs=[str(folder)])


@pytest.fixture
def start(kernel_specs, tmp_path):
    """start(**start_kernel_arguments) → (manager, client) of a ready forked kernel; all shut down after.
    Kernels work in a fresh folder (never in a course folder, which the sandbox refuses)."""
    started = []

    def start_kernel(kernel_name="forked", config=None, **kwargs):
        kwargs.setdefault("cwd", str(tmp_path))
        manager = KernelManager(kernel_name=kernel_name, kernel_spec_manager=kernel_specs, config=config or Config())
        manager.start_kernel(**kwargs)
        client = manager.client()
        client.start_channels()
        client.wait_for_ready(timeout=120)
        started.append((manager, client))
        return manager, client

    yield start_kernel
    for manager, client in started:
        client.stop_channels()
        if manager.is_alive():
            manager.shutdown_kernel(now=True)


def evaluate(client, expression):
    """The value of a Python expression in the kernel (printed as its repr)."""
    return ast.literal_eval(printed_by(client, f"print(repr({expression}))", timeout=60))


def test_kernel_comes_forked_with_torch_already_imported(start):
    manager, client = start()
    assert isinstance(manager.provisioner, forkserver.ForkedKernelProvisioner)
    assert isinstance(manager.provisioner.process, forkserver.AdoptedProcess)
    assert evaluate(client, "'torch' in __import__('sys').modules")
    # intra-op threads start after the fork, in the kernel
    assert evaluate(client, "float((__import__('torch').ones(256, 256) @ __import__('torch').ones(256, 256)).sum())") \
        == 256.0 ** 3


def test_every_kernel_is_a_new_process_adopted_by_the_grader(start):
    pids = set()
    for _ in range(2):
        manager, client = start()
        pid = manager.provisioner.pid
        assert parent_of(pid) == os.getpid()  # adopted: this process waits for it and signals it
        assert os.getsid(pid) == pid == manager.provisioner.pgid  # leads its own session, as Popen's kernels do
        # inside its sandbox's PID namespace it leads its session too, and its parent is out of sight
        inside, parent, session = evaluate(client, "(__import__('os').getpid(), __import__('os').getppid(), "
                                                   "__import__('os').getsid(0))")
        assert session == inside and parent == 0
        pids.add(pid)
    assert len(pids) == 2


def parent_of(pid) -> int:
    with open(f"/proc/{pid}/status") as status:
        return int(next(line for line in status if line.startswith("PPid:")).split()[1])


def test_nothing_carries_over_from_one_kernel_to_the_next(start):
    _, first = start()
    first.execute_interactive("import torch, numpy, random\nleftover = 1\ntorch.nn.Module.to = None\n"
                              "draws = (numpy.random.randint(2**31), random.getrandbits(64))", timeout=60)
    first_draws = evaluate(first, "draws")
    _, second = start()
    assert evaluate(second, "'leftover' in globals()") is False
    assert evaluate(second, "__import__('torch').nn.Module.to is not None")
    second_draws = evaluate(second, "(__import__('numpy').random.randint(2**31), __import__('random').getrandbits(64))")
    assert first_draws[0] != second_draws[0] and first_draws[1] != second_draws[1]


def test_kernel_runs_in_its_own_folder_and_clean_environment(start, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    _, client = start(cwd=str(work), env={**os.environ, "COURSE_PROBE": "here", "NBGRADER_EXECUTION": "autograde"})
    assert evaluate(client, "(__import__('os').getcwd(), __import__('os').environ.get('COURSE_PROBE'), "
                            "__import__('os').environ['NBGRADER_EXECUTION'], __import__('os').environ['HOME'])") \
        == (str(work), None, "autograde", sandbox.HOME)


def test_interrupt_stops_a_running_cell(start):
    manager, client = start()
    message_id = client.execute("import time\ntime.sleep(120)")
    time.sleep(1)
    manager.interrupt_kernel()
    reply = client.get_shell_msg(timeout=30)
    assert reply["parent_header"]["msg_id"] == message_id
    assert reply["content"]["ename"] == "KeyboardInterrupt"


def test_kernel_that_exits_is_seen_dead_with_its_exit_status(start):
    manager, client = start()
    client.execute("import os; os._exit(3)")
    deadline = time.monotonic() + 30
    while manager.is_alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not manager.is_alive()
    assert manager.provisioner.process.returncode == 3
    with pytest.raises(ProcessLookupError):  # reaped by this process, not left a zombie
        os.kill(manager.provisioner.pid, 0)


def test_without_a_fork_server_the_kernel_starts_the_usual_way(start, caplog):
    """As a new process, in a new sandbox of its own (whose init is its parent)."""
    manager, client = start(kernel_name="no-server")
    assert not isinstance(manager.provisioner.process, forkserver.AdoptedProcess)
    assert sandbox.Sandbox().bwrap in manager.provisioner.process.args  # after the shell that joins its cgroup
    assert evaluate(client, "__import__('os').getppid()") == 1
    assert "Fork server unavailable" in caplog.text


def test_with_the_sandbox_off_kernels_are_forked_unsandboxed(start, monkeypatch):
    """`course grade --no-sandbox`: the fork server as before, adopted by this process, over TCP. The
    setting comes from the kernel manager's Config, not from this process's environment."""
    monkeypatch.delenv(sandbox.NO_SANDBOX_VARIABLE, raising=False)
    manager, client = start(config=Config({"Sandbox": {"enabled": False}}))
    assert isinstance(manager.provisioner.process, forkserver.AdoptedProcess)
    assert manager.transport == "tcp" and manager.provisioner.sandbox is None
    assert evaluate(client, "__import__('os').getppid()") == os.getpid()


def test_server_and_kernels_end_with_the_grading_process(kernel_specs, tmp_path):
    """A grader that dies (Ctrl-C, out of memory) leaves no fork server, no sandbox and no kernel behind."""
    script = textwrap.dedent(f"""
        import os, sys
        from jupyter_client.kernelspec import KernelSpecManager
        from jupyter_client.manager import KernelManager
        from course.kernels import forkserver
        manager = KernelManager(kernel_name="forked",
                                kernel_spec_manager=KernelSpecManager(kernel_dirs={kernel_specs.kernel_dirs!r}))
        manager.start_kernel(cwd={str(tmp_path)!r})
        manager.client().wait_for_ready(timeout=120)
        server = next(iter(forkserver._servers.values())).process.pid
        sandbox = manager.provisioner.sandbox
        print(server, manager.provisioner.pid, sandbox.bwrap.pid, sandbox.init_pid, flush=True)
        os._exit(0)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    pids = [int(pid) for pid in done.stdout.split()]
    deadline = time.monotonic() + 30
    while any(running(pid) for pid in pids) and time.monotonic() < deadline:
        # the orphaned kernel goes to the nearest subreaper: this process, if an earlier test made it
        # one. Reap it, as a subreaper does: its sandbox's PID namespace ends once it is reaped.
        try:
            os.waitpid(pids[1], os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.2)
    assert not any(running(pid) for pid in pids)


def running(pid) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("command, expected", [
    ([sys.executable, "-m", "ipykernel_launcher", "-f", "k.json"], ["-f", "k.json"]),
    ([sys.executable, "-m", "other_kernel", "-f", "k.json"], None),
    (["R", "--slave", "-f", "k.json"], None),
])
def test_only_ipykernel_commands_are_forked(command, expected):
    assert forkserver.ipykernel_arguments(command) == expected
