"""Kernels forked from the warm fork server behave like freshly started ones, and share nothing.

The kernels are started through jupyter_client with a kernel spec that names the provisioner, the way
any Jupyter tool selects one; `course grade` selects it for its workers through the environment.
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

from autograder import forkserver

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
def start(kernel_specs):
    """start(**start_kernel_arguments) → (manager, client) of a ready forked kernel; all shut down after."""
    started = []

    def start_kernel(kernel_name="forked", **kwargs):
        manager = KernelManager(kernel_name=kernel_name, kernel_spec_manager=kernel_specs)
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
    printed = []

    def keep(message):
        if message["msg_type"] == "stream":
            printed.append(message["content"]["text"])

    reply = client.execute_interactive(f"print(repr({expression}))", timeout=60, output_hook=keep)
    assert reply["content"]["status"] == "ok", reply["content"]
    return ast.literal_eval("".join(printed))


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
        pid, parent, session = evaluate(client, "(__import__('os').getpid(), __import__('os').getppid(), "
                                                "__import__('os').getsid(0))")
        assert pid == manager.provisioner.pid and parent == os.getpid()
        assert session == pid == manager.provisioner.pgid  # leads its own session, as Popen's kernels do
        pids.add(pid)
    assert len(pids) == 2


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


def test_kernel_runs_in_its_own_folder_and_environment(start, tmp_path):
    _, client = start(cwd=str(tmp_path), env={**os.environ, "COURSE_PROBE": "here"})
    assert evaluate(client, "(__import__('os').getcwd(), __import__('os').environ['COURSE_PROBE'])") \
        == (str(tmp_path), "here")


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
    manager, client = start(kernel_name="no-server")
    assert not isinstance(manager.provisioner.process, forkserver.AdoptedProcess)
    assert evaluate(client, "__import__('os').getppid()") == os.getpid()
    assert "Fork server unavailable" in caplog.text


def test_server_and_kernels_end_with_the_grading_process(kernel_specs, tmp_path):
    """A grader that dies (Ctrl-C, out of memory) leaves no fork server and no kernel behind."""
    script = textwrap.dedent(f"""
        import os, sys
        from jupyter_client.kernelspec import KernelSpecManager
        from jupyter_client.manager import KernelManager
        from autograder import forkserver
        manager = KernelManager(kernel_name="forked",
                                kernel_spec_manager=KernelSpecManager(kernel_dirs={kernel_specs.kernel_dirs!r}))
        manager.start_kernel()
        manager.client().wait_for_ready(timeout=120)
        server = next(iter(forkserver._servers.values())).process.pid
        print(server, manager.provisioner.pid, flush=True)
        os._exit(0)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    pids = [int(pid) for pid in done.stdout.split()]
    deadline = time.monotonic() + 30
    while any(running(pid) for pid in pids) and time.monotonic() < deadline:
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
