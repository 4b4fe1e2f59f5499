"""The kernel manager of every grading kernel: sandboxed, and started as a new process or forked.

It stands above both ways of starting a kernel, a new process in a new sandbox (sandbox.py) and a
fork from a warm server into one (forkserver.py, whose provisioner extends the sandbox's), so that
neither module imports the other's user.
"""
import asyncio
import logging
import os
import stat
import time
import uuid

import zmq
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.channels import AsyncZMQSocketChannel
from jupyter_client.manager import AsyncKernelManager
from traitlets import Bool, Integer, Type

from autograder.kernel import CPU_SECONDS, MEMORY_BYTES, kernel_arguments
from autograder.messages import message

from .forkserver import ForkedKernelProvisioner
from .sandbox import SandboxedProvisioner


class ReadableMessagesOnly(AsyncZMQSocketChannel):
    """A channel from a grading kernel, whose messages are the student's (it holds the key that signs them): one that
    jupyter_client cannot read (content that is no JSON) or that is not of a message's shape (a header that is no
    dict) is dropped, with a warning, where it raised in nbclient's loops and stopped the notebook, with no grade."""

    async def _recv(self, **kwargs):
        frames = await self.socket.recv_multipart(**kwargs)
        try:
            _, signed = self.session.feed_identities(frames)
            received = None if _too_many_values(signed) else self.session.deserialize(signed)
        except Exception:  # noqa: BLE001: whatever the kernel's bytes make jupyter_client raise
            received = None
        if not _shaped_as_a_message(received):
            self.dropped = getattr(self, "dropped", 0) + 1
            if self.dropped <= LOGGED_DROPS:  # a flood of them makes no flood of lines
                logging.getLogger(__name__).warning(message("kernel_message_dropped"))
            return {"header": {}, "parent_header": {}, "metadata": {}, "content": {}, "msg_type": "", "msg_id": "",
                    "buffers": []}  # answers no request: nbclient passes it by
        return received


def _too_many_values(signed) -> bool:
    """Whether a message's JSON parts (its header, parent header, metadata and content: after the signature, before
    the buffers) may decode into more than MOST_VALUES values, each counted by the bracket or comma before it. JSON
    decodes `{}` of 3 bytes into a dict of 64: one message of 120 MB, under `largest_message`, made a grader of 4.4 GB
    (the twenty-second session's attacker). Commas in a text count too: a print of more than a million of them loses
    its output, with the warning, as an unreadable message does, never a point (the verdict decides those)."""
    return sum(part.count(mark) for part in signed[1:5] for mark in (b"{", b"[", b",")) > MOST_VALUES


def _shaped_as_a_message(received) -> bool:
    """A dict of a message's parts, and a reply that says how the cell ended (nbclient reads its status unasked)."""
    return (isinstance(received, dict) and all(isinstance(received.get(part), dict)
                                               for part in ("header", "parent_header", "metadata", "content"))
            and isinstance(received.get("msg_type"), str)
            and (received["msg_type"] != "execute_reply" or isinstance(received["content"].get("status"), str)))


class SocketsByInode:
    """Where a grading kernel's Unix sockets are reached: each by the socket the kernel bound, held open
    (`/proc/self/fd/N`), never by its path again. The kernel binds them in a folder it may write, which the grader
    reaches through the sandbox's root (sandbox.KernelSandbox._link_sockets): a kernel that put a link there in place
    of one of its sockets, and dropped that channel's connection, made the grader reconnect through the link, from
    outside the sandbox, as its own user, to any Unix socket of the machine it named (a hostile student's, the
    twenty-second session). A link, or anything but a socket, is refused: the channel then reaches nothing (a path no
    one can bind), as a kernel's that never started."""

    _held_sockets = None  # path → the descriptor of the socket found there (O_PATH), or None where none was

    def _make_url(self, channel: str) -> str:
        if self.transport != "ipc":
            return super()._make_url(channel)
        path = f"{self.ip}-{getattr(self, f'{channel}_port')}"
        if self._held_sockets is None:
            self._held_sockets = {}
        if path not in self._held_sockets:
            self._held_sockets[path] = _socket_at(path)
        fd = self._held_sockets[path]
        return f"ipc:///proc/self/fd/{fd}" if fd is not None else "ipc:///dev/null"

    def _release_sockets(self):
        held, self._held_sockets = self._held_sockets or {}, None
        for fd in held.values():
            if fd is not None:
                os.close(fd)


def _socket_at(path) -> int | None:
    """A descriptor (O_PATH) of the socket at `path` itself, not followed if a link; None if it is none."""
    try:
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    if stat.S_ISSOCK(os.fstat(fd).st_mode):
        return fd
    os.close(fd)
    return None


class GradingKernelClient(SocketsByInode, AsyncKernelClient):
    """The grader's client of a grading kernel, whose messages are the student's. zmq holds a message whole before
    anything reads it, and queues what the grader has not read yet, in the grader, which no sandbox bounds (a kernel
    may make one of gigabytes, for an output then cut to 100,000 characters; 25 messages of 200 MB each on the stdin
    channel, which nbclient never reads, made a grader of 5 GB). So each channel takes no message larger than
    `largest_message` (stdin's and control's, which the grader does not read, none larger than a mebibyte) and
    queues at most QUEUED of them (the kernel's side queues the rest, in its sandbox, and drops them past its own
    bound); and a message Jupyter cannot read is dropped (ReadableMessagesOnly)."""

    largest_message = Integer(256 * 2**20)
    shell_channel_class = Type(ReadableMessagesOnly)
    iopub_channel_class = Type(ReadableMessagesOnly)
    stdin_channel_class = Type(ReadableMessagesOnly)
    control_channel_class = Type(ReadableMessagesOnly)

    def _create_connected_socket(self, channel, identity=None):
        unread = channel in ("stdin", "control")
        # the context's options are those of the sockets it makes next: the client's own context, its sockets alone
        self.context.setsockopt(zmq.MAXMSGSIZE, 2**20 if unread else self.largest_message)
        self.context.setsockopt(zmq.RCVHWM, 1 if unread else QUEUED)
        return super()._create_connected_socket(channel, identity)

    def stop_channels(self):
        super().stop_channels()
        self._release_sockets()


QUEUED = 4  # messages a channel of the grader's queues from its kernel, at most
CHANNELS = ("shell", "iopub", "stdin", "control", "hb")
SOCKETS_BOUND_S = 120  # seconds a kernel may take to bind its sockets (jupyter_client waits 60 for it to be ready)
LOGGED_DROPS = 3  # messages a channel drops that the log tells of, at most
MOST_VALUES = 1_000_000  # JSON values one message of a kernel's may decode into in the grader: about 100 MB at most


class GradingKernelManager(SocketsByInode, AsyncKernelManager):
    """The kernel manager of nbgrader's Execute preprocessors: every kernel sandboxed, started as a
    new process, or forked from this process's warm fork server (`fork_server`: the course's
    nbgrader_config.py sets it, `course grade --no-fork-server` unsets it)."""

    fork_server = Bool(False, config=True, help="Fork each kernel from this process's warm fork server "
                       "(course/kernels/forkserver.py) rather than start it as a new process.")
    # each process of a kernel alone (its sandbox as a whole: Sandbox.memory_bytes and .processes)
    memory_bytes = Integer(MEMORY_BYTES, config=True, help="RLIMIT_DATA of each process of a grading kernel (the "
                           "memory it writes to: the same limit with and without CUDA). The verdict's follow it.")
    cpu_seconds = Integer(CPU_SECONDS, config=True, help="RLIMIT_CPU of each process of a grading kernel. The "
                          "verdict's follow it.")

    largest_message = Integer(256 * 2**20, config=True, help="Bytes of the largest message the grader takes from a "
                              "grading kernel (outputs are cut far below it): zmq ends the connection of a kernel that "
                              "sends a larger one before it holds any of it, and the cell then runs out its time, as a "
                              "kernel that died does.")

    client_factory = Type(GradingKernelClient)

    def client(self, **kwargs):
        client = super().client(**kwargs)
        client.largest_message = self.largest_message
        return client

    async def _async_pre_start_kernel(self, **kw):
        # every grading kernel first remembers the real PyTorch and course functions (tampering is then
        # reported by the tests) and caps its own memory and CPU time (autograder/kernel.py)
        given, ours = list(kw.get("extra_arguments") or []), kernel_arguments(self.memory_bytes, self.cpu_seconds)
        kw["extra_arguments"] = given + [argument for argument in ours if argument not in given]  # (a restart: once)
        if self.provisioner is None:
            if self.fork_server:
                provisioner_class = ForkedKernelProvisioner
            else:
                provisioner_class = SandboxedProvisioner
            self.kernel_id = self.kernel_id or kw.pop("kernel_id", str(uuid.uuid4()))
            self.provisioner = provisioner_class(kernel_id=self.kernel_id, kernel_spec=self.kernel_spec,
                                                 parent=self)
        return await super()._async_pre_start_kernel(**kw)

    async def _async_post_start_kernel(self, **kw):
        await self._sockets_bound()  # before the first connection: each socket is then held as bound
        await super()._async_post_start_kernel(**kw)

    async def _sockets_bound(self, timeout=SOCKETS_BOUND_S):
        """Wait until the kernel has bound each of its Unix sockets, it ended, or `timeout` seconds passed."""
        if self.transport != "ipc":
            return
        paths = [f"{self.ip}-{getattr(self, f'{channel}_port')}" for channel in CHANNELS]
        deadline = time.monotonic() + timeout
        while not all(os.path.lexists(path) for path in paths) and time.monotonic() < deadline:
            if self.provisioner is not None and await self.provisioner.poll() is not None:
                return  # a kernel that ended binds nothing
            await asyncio.sleep(0.01)

    def _close_control_socket(self):
        super()._close_control_socket()
        self._release_sockets()


def use_for_nbgrader(**moved):
    """Make nbgrader's own Execute preprocessor (the one `nbgrader validate` runs; nbgrader lets neither its
    list nor its kernel manager be configured) start its kernels with GradingKernelManager. Called from
    nbgrader_config.py; autograde's SafeExecute asks for it directly.

    An older nbgrader_config.py passes `group_memory_bytes=…, group_processes=…`: they are settings now
    (`c.Sandbox.memory_bytes`, `c.Sandbox.processes`). Such a file still loads, and grades sandboxed with the
    settings' values; the log says the one-line fix (an error here would stop the file before its pipelines)."""
    from nbgrader.preprocessors import execute
    from traitlets.log import get_logger

    from autograder.messages import message

    if moved:
        get_logger().warning(message("sandbox_limits_moved", given=", ".join(f"{k}={v}" for k, v in sorted(moved.items()))))

    execute.AsyncKernelManager = GradingKernelManager
