"""The grader reaches a grading kernel's Unix sockets by the socket the kernel bound, held open, never by their path
again (course.kernels.manager.SocketsByInode): the kernel may write the folder they are in."""
import os
import socket

import pytest

from course.kernels.manager import GradingKernelClient, GradingKernelManager


@pytest.fixture(params=[GradingKernelClient, GradingKernelManager])
def connecting(request, tmp_path):
    """The grader's client of a kernel, or its manager (the control channel), for sockets `k-1` … in `tmp_path`."""
    made = request.param(transport="ipc", ip=str(tmp_path / "k"), shell_port=1, control_port=1)
    yield made
    made._release_sockets()


def bound(path) -> socket.socket:
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    return server


def test_a_socket_is_reached_by_the_socket_found_there_even_once_a_link_replaced_it(connecting, tmp_path):
    server = bound(tmp_path / "k-1")
    url = connecting._make_url("control")
    held = int(url.removeprefix("ipc:///proc/self/fd/"))
    assert os.path.samestat(os.fstat(held), os.stat(tmp_path / "k-1"))
    os.unlink(tmp_path / "k-1")
    os.symlink(str(tmp_path / "elsewhere"), tmp_path / "k-1")
    assert connecting._make_url("control") == url
    client = socket.socket(socket.AF_UNIX)
    client.connect(url.removeprefix("ipc://"))  # the socket as bound, whatever is at its path now
    server.accept()[0].close()
    client.close()
    server.close()


@pytest.mark.parametrize("found", ["a link to a socket", "a file", "nothing"])
def test_a_link_or_anything_but_a_socket_is_refused(connecting, tmp_path, found):
    elsewhere = bound(tmp_path / "elsewhere.sock")
    if found == "a link to a socket":
        os.symlink(str(tmp_path / "elsewhere.sock"), tmp_path / "k-1")
    elif found == "a file":
        (tmp_path / "k-1").write_text("")
    assert connecting._make_url("control") == "ipc:///dev/null"  # a path no one can bind
    elsewhere.close()


def test_the_held_sockets_are_closed_once_released(connecting, tmp_path):
    server = bound(tmp_path / "k-1")
    held = int(connecting._make_url("control").removeprefix("ipc:///proc/self/fd/"))
    connecting._release_sockets()
    with pytest.raises(OSError):
        os.fstat(held)
    server.close()


def test_a_kernel_over_tcp_keeps_its_address():
    client = GradingKernelClient(transport="tcp", ip="127.0.0.1", shell_port=5555)
    assert client._make_url("shell") == "tcp://127.0.0.1:5555"
