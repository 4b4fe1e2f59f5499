"""Grading kernels forked from a warm process that has already imported torch, each into its own sandbox.

Most of a submission's grading time is a new kernel importing torch and IPython. A fork server is a
process that imports them once and then forks a fresh kernel for every submission: each kernel is a
new process that never ran anyone's code, ready in a fraction of the time.

`ForkedKernelProvisioner` is a jupyter_client kernel provisioner (entry point
`course-forked-provisioner`; `course grade`'s workers use it through
`course.kernels.manager.GradingKernelManager`). It only replaces how the kernel process is created:
connection file, signals, interrupts and shutdown are jupyter_client's LocalProvisioner's. Anything it
cannot fork (another OS, another kernel command, redirected streams, a server that will not start) gets
`SandboxedProvisioner`'s launch: a new process in a new sandbox.

**Why the fork server is not a way out of the sandbox.** The server itself runs outside any sandbox,
so a forked kernel must enter one before it runs anything, and must carry nothing across:

1. For every kernel, the grading process first builds a complete sandbox with bubblewrap, exactly as
   for a kernel started as a new process (course/kernels/sandbox.py: namespaces, read-only runtime, one
   writable folder, private /tmp), around a holder process (`sleep`), and waits until the holder runs
   (bwrap has then finished every mount, the uid switch and the capability drop).
2. It passes the server a pidfd of the holder (SCM_RIGHTS). The server forks a middle process, which
   alone reads the request (the server never holds a student's folder or arguments in its memory),
   joins the sandbox's cgroup where it has one (course/kernels/cgroups.py), then all the holder's namespaces
   at once with `setns(pidfd, user|mnt|pid|net|ipc|uts|cgroup)` — its root becomes the sandbox's root, so every path outside the sandbox is gone — and forks the kernel,
   which is therefore inside the sandbox's PID namespace. The middle process exits.
3. The kernel, before any student code: drops every capability the join gave it in the sandbox's user
   namespace (bounding set, ambient, effective, permitted; no_new_privs) and checks that none is
   left, installs the sandbox's seccomp filter (no tracing, as bwrap's `--seccomp`), leads its own
   session, closes every inherited file descriptor except its standard streams
   (stdout and stderr go to a pipe read by the grader, not to the grader's terminal), takes the clean
   sandbox environment, and only then becomes `python -m ipykernel_launcher`. The server was started
   with that clean environment too, so even `/proc/self/environ` (the memory the fork copied) holds
   no grader variables.
4. The kernel is adopted by the grading process (a Linux "child subreaper": a process forked into a PID
   namespace from outside is reparented to the subreaper outside, not to the namespace's init), which
   waits for it and signals it like a kernel it started. When it ends, the grading process kills the
   sandbox's init: the PID namespace ends and takes with it everything the submission started. The
   holder's bwrap dies with the grading process (`--die-with-parent`), so nothing outlives grading.

Inside, the kernel sees what a sandboxed new process sees: only its sandbox's processes, no parent
(`os.getppid()` is 0), no network, no capabilities, the read-only runtime and its own folder.
What it shares with the server: the modules in PRELOADED, already imported, and the process's hash
seed. Random generators are reseeded in every kernel, as a fresh process would be.

With the sandbox turned off (`course grade --no-sandbox`), kernels are forked as before, unsandboxed:
each forked twice so that it leads its own session and is adopted by the grading process.
"""
import atexit
import ctypes
import importlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import traceback

from autograder.kernel import refuse_tracing
from autograder.linux import (PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, PR_CAPBSET_DROP, PR_SET_CHILD_SUBREAPER,
                              PR_SET_NO_NEW_PRIVS, close_all_but)

from . import cgroups, sandbox
from .sandbox import SandboxedProvisioner

NAME = "course-forked-provisioner"
# torch._dynamo: every optimizer's step and zero_grad import it on first use (torch._disable_dynamo), about
# 2 s and 800 modules (sympy among them) that each kernel and each verdict's test would otherwise import again.
# A forked kernel's RSS counts these shared pages (about 400 MB with the CUDA build's torch), though its
# cgroup is not charged for them: a sandbox's memory limit must be well above that (tests/system/test_sandbox.py).
PRELOADED = ("torch", "torch.nn", "torch.optim", "torch._dynamo", "numpy", "ipykernel.kernelapp",
             "autograder.checks", "autograder.kernel", "autograder.probes", "autograder.simulate")
_CLONE_NEWNS, _CLONE_NEWCGROUP, _CLONE_NEWUTS, _CLONE_NEWIPC = 0x20000, 0x2000000, 0x4000000, 0x8000000
_CLONE_NEWUSER, _CLONE_NEWPID, _CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
_NAMESPACES = (_CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWPID | _CLONE_NEWNET | _CLONE_NEWIPC | _CLONE_NEWUTS
               | _CLONE_NEWCGROUP)
_servers = {}  # (process id, python, environment) → ForkServer: one per grading process, never shared over fork


class ForkedKernelProvisioner(SandboxedProvisioner):
    """SandboxedProvisioner, except that an ipykernel kernel is forked from a warm fork server into
    its sandbox."""

    kernel_process = None

    async def launch_kernel(self, cmd, **kwargs):
        args = ipykernel_arguments(cmd)
        redirected = any(kwargs.get(stream) is not None for stream in ("stdin", "stdout", "stderr"))
        if args is None or redirected or kwargs.get("independent") or not sys.platform.startswith("linux"):
            return await super().launch_kernel(cmd, **kwargs)
        env = dict(kwargs.get("env") or os.environ)
        cwd = str(kwargs.get("cwd") or os.getcwd())
        try:
            if self.sandbox is None:
                # unsandboxed (--no-sandbox): as jupyter_client's launcher does, the kernel ends itself
                # when this process goes away
                env["JPY_PARENT_PID"] = str(os.getpid())
                self.process = fork_server(cmd[0], env).fork(args, env, cwd)
            else:
                self.process = self._fork_into_sandbox(cmd[0], args, env)
        except OSError as error:
            self.log.warning("Fork server unavailable (%s): starting the kernel the usual way", error)
            if self.sandbox is not None:
                self.sandbox.stop()
            return await super().launch_kernel(cmd, **kwargs)
        self.kernel_process = self.process
        self.pid = self.process.pid
        self.pgid = os.getpgid(self.pid)  # its own session and group, as LocalProvisioner's kernels
        self.cwd = self.sandbox.work_dir if self.sandbox else cwd
        return self.connection_info

    def _fork_into_sandbox(self, python, args, env):
        return fork_into(self.sandbox, python, args, env)

    def _close_sandbox(self):
        kernel, sandbox = self.kernel_process, self.sandbox
        if not isinstance(kernel, AdoptedProcess):
            return super()._close_sandbox()
        # the namespace waits for the kernel (forked into it from outside) to be reaped by this process
        sandbox.close(reap=kernel.wait)
        self._log_output(sandbox, kernel.returncode)


def fork_into(sandbox, python, args, env, kept=(), verdict=False):
    """A kernel (or, with `verdict`, the verdict process: autograder/verdict.py) forked from this
    process's fork server into `sandbox`, which is started around a holder for it. `kept`: descriptors
    it keeps (the verdict's result pipe and the files it is handed). The sandbox ends when the process does."""
    holder = sandbox.start_holder(env)
    output = sandbox.output_pipe()
    try:
        forked = fork_server(python, env).fork(args, env, sandbox.inside, fds=[holder, output, *kept],
                                               verdict=verdict, group=sandbox.group)
    finally:
        os.close(holder)
        os.close(output)
    forked.on_exit = sandbox.kill  # nothing the submission started outlives it
    return forked


def autograde_environment(config=None) -> dict:
    """What a sandboxed process's environment is while nbgrader autogrades: the kernels' and the
    verdict's, so that one fork server serves both. `config`: the command's Config (Sandbox.gpus)."""
    return sandbox.environment({**os.environ, "NBGRADER_EXECUTION": "autograde"},
                               gpus=sandbox.Sandbox(config=config).gpus)


def ipykernel_arguments(cmd):
    """The arguments after `python -m ipykernel_launcher`, or None for any other kernel command."""
    return list(cmd[3:]) if len(cmd) >= 3 and cmd[1:3] == ["-m", "ipykernel_launcher"] else None


def fork_server(python, env):
    """This process's server for kernels of this Python and environment. The environment is part of
    the key because modules read it when imported (torch its threads); sandboxed kernels all get the
    same clean environment, so one server serves them all."""
    key = (os.getpid(), python, frozenset(env.items()))
    if key not in _servers or _servers[key].process.poll() is not None:
        _servers[key] = ForkServer(python, env)
    return _servers[key]


def prestart_for_autograde(config):
    """Start this process's fork server for sandboxed autograde kernels now, so that its imports
    overlap nbgrader's work on the first submission (the first kernel would start it anyway). `config`:
    the command's Config (whether the sandbox is on)."""
    if sys.platform.startswith("linux") and sandbox.enabled(config) and not sandbox.problem(config):
        # what a sandboxed kernel's environment will be while nbgrader autogrades (the server's key)
        fork_server(sys.executable, autograde_environment(config))


class ForkServer:
    """The grading process's end: starts the server, asks it for kernels, adopts them."""

    def __init__(self, python, env):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")
        ours, theirs = socket.socketpair()
        # the server's environment is the kernels' (clean in a sandbox): a forked kernel inherits the
        # server's memory, /proc/self/environ included
        self.process = subprocess.Popen([python, "-m", "course.kernels.forkserver", str(theirs.fileno())],
                                        pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, env=env, cwd="/")
        theirs.close()
        self.channel, self.replies = ours, ours.makefile("r")

    def fork(self, args, env, cwd, fds=(), verdict=False, group=None):
        """A kernel forked from the server; `fds`: the sandbox holder's pidfd, the kernel's output, and
        descriptors the process keeps. With `verdict`, the verdict process instead of a kernel: `args`
        are its arguments after the descriptors it keeps. `group`: the
        sandbox's cgroup (course/kernels/cgroups.py), which the process joins before it enters the sandbox."""
        request = json.dumps({"args": args, "env": dict(env), "cwd": cwd, "sandboxed": bool(fds),
                              "verdict": verdict, "group": group.procs_files if group else []})
        try:
            socket.send_fds(self.channel, [b"F"], list(fds))
            self.channel.sendall((request + "\n").encode())
        except OSError as error:
            raise OSError(f"the fork server stopped ({error})") from error
        reply = self.replies.readline()  # waits for the imports the first time
        if not reply:
            raise OSError(f"the fork server stopped (exit status {self.process.wait()})")
        reply = json.loads(reply)
        if not reply["pid"]:
            raise OSError(f"the fork server could not start a kernel: {reply.get('error')}")
        return AdoptedProcess(reply["pid"])


class AdoptedProcess:
    """What LocalProvisioner uses of a Popen, for a kernel this process adopted as subreaper."""

    stdin = stdout = stderr = None
    on_exit = None  # called once, when the kernel is seen to have ended

    def __init__(self, pid):
        self.pid, self.returncode = pid, None

    def poll(self):
        return self._wait(os.WNOHANG)

    def wait(self, timeout=None):
        return self._wait(0)

    def _wait(self, options):
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, options)
            except ChildProcessError:
                self.returncode = 1  # reaped elsewhere: gone, exit status unknown
            else:
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
            if self.returncode is not None and self.on_exit:
                on_exit, self.on_exit = self.on_exit, None
                on_exit()
        return self.returncode

    def send_signal(self, signum):
        if self.poll() is None:
            os.kill(self.pid, signum)

    def terminate(self):
        self.send_signal(signal.SIGTERM)

    def kill(self):
        self.send_signal(signal.SIGKILL)


# The server's end: `python -m course.kernels.forkserver FD`.

def serve(fd):
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C in the terminal ends it quietly
    for module in PRELOADED:
        importlib.import_module(module)
    channel = socket.socket(fileno=fd)
    while True:  # until the grading process closes its end
        command, fds, _, _ = socket.recv_fds(channel, 1, 8)
        if not command:
            break
        try:
            reply = _fork_kernel(channel, fds)
        finally:
            for passed in fds:
                os.close(passed)
        channel.sendall((json.dumps(reply) + "\n").encode())


def _fork_kernel(channel, fds):
    """Fork the middle process, which reads the request, enters the sandbox and forks the kernel.
    Returns {"pid": the kernel's pid} once the middle process has exited, so that the kernel is
    already adopted by the grading process (the subreaper)."""
    sys.stdout.flush(), sys.stderr.flush()
    reply_reader, reply_writer = os.pipe()
    middle = os.fork()
    if middle == 0:
        try:
            os.close(reply_reader)
            _middle(channel, fds, reply_writer)
        except BaseException as error:
            traceback.print_exc()
            os.write(reply_writer, json.dumps({"pid": 0, "error": repr(error)}).encode())
        finally:
            os._exit(0)
    os.close(reply_writer)
    with os.fdopen(reply_reader) as reader:
        reply = reader.read()  # to the end: the middle process and the kernel closed it
    os.waitpid(middle, 0)
    return json.loads(reply) if reply else {"pid": 0, "error": "no reply from the forked process"}


def _middle(channel, fds, reply_writer):
    request = json.loads(_read_line(channel))
    channel.close()
    holder, output, *kept = fds if request["sandboxed"] else (None, None)
    cgroups.join(request.get("group", []))  # the sandbox's cgroup first: /sys/fs/cgroup is not in the sandbox
    if holder is not None:
        # every namespace of the sandbox at once; the root and the working directory become the sandbox's
        if ctypes.CDLL(None, use_errno=True).setns(holder, _NAMESPACES) != 0:
            raise OSError(ctypes.get_errno(), "setns into the sandbox failed")
        os.close(holder)
    ready_reader, ready_writer = os.pipe()
    this = os.getpid()  # not the kernel's getppid(): this process may be gone by then
    kernel = os.fork()
    if kernel == 0:
        os.close(ready_reader), os.close(reply_writer)
        _run_kernel(request, ready_writer, output, middle=this, kept=kept)
    os.close(ready_writer)
    if os.read(ready_reader, 1) == b"1":
        os.write(reply_writer, json.dumps({"pid": kernel}).encode())
    else:
        os.waitpid(kernel, 0)  # a sandbox's namespace waits until this child is reaped
        os.write(reply_writer, json.dumps({"pid": 0, "error": "the kernel failed to start"}).encode())


def _read_line(channel) -> bytes:
    """One request line, read unbuffered (nothing after it is taken from the socket)."""
    line = b""
    while not line.endswith(b"\n"):
        chunk = channel.recv(65536)
        if not chunk:
            raise EOFError("the grading process closed the channel")
        line += chunk
    return line


def _drop_privileges():
    """Joining the sandbox's user namespace gave this process every capability in it: drop them all,
    for good, and check that none is left."""
    libc = ctypes.CDLL(None, use_errno=True)
    with open("/proc/sys/kernel/cap_last_cap") as last:
        for capability in range(int(last.read()) + 1):
            if libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), "PR_CAPBSET_DROP failed")
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    if libc.capset(ctypes.byref(Header(0x20080522, 0)), (Data * 2)()) != 0:  # _LINUX_CAPABILITY_VERSION_3
        raise OSError(ctypes.get_errno(), "capset failed")
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS failed")
    with open("/proc/self/status") as status:
        left = [line for line in status if line.startswith(("CapPrm", "CapEff", "CapBnd", "CapAmb"))
                and int(line.split()[1], 16)]
    if left:
        raise OSError(f"capabilities left after dropping them: {left}")


def _run_kernel(request, ready_writer, output, middle, kept=()):
    """Become `python -m ipykernel_launcher ARGS` (or the verdict process) in the requested directory
    and environment."""
    status = 1
    try:
        if request["sandboxed"]:
            _drop_privileges()
            refuse_tracing()  # what bwrap's --seccomp gives a kernel it starts itself
        os.setsid()  # like Popen(start_new_session=True): signals reach the kernel's whole group
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        if output is not None:
            os.dup2(output, 1), os.dup2(output, 2)
        close_all_but([ready_writer, *kept])  # nothing of the server's passes on
        os.write(ready_writer, b"1")
        os.close(ready_writer)
        if not request["sandboxed"]:
            while os.getppid() == middle:  # until adopted: ipykernel exits when its parent is not JPY_PARENT_PID
                time.sleep(0.001)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # interrupts raise KeyboardInterrupt
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        if request.get("verdict"):
            from autograder import verdict  # as `python -I -m autograder.verdict FD ARGS`: no folder on sys.path
            sys.argv = [verdict.__file__, *map(str, kept), *request["args"]]  # its records' pipe, then its files
            verdict.main()
            status = 0
            return
        sys.argv = [importlib.util.find_spec("ipykernel_launcher").origin, *request["args"]]
        sys.path[0] = request["cwd"]
        import numpy
        numpy.random.seed()  # Python's random reseeds itself after fork; numpy's does not

        from ipykernel import kernelapp
        kernelapp.launch_new_instance()
        status = 0
    except SystemExit as exit:
        status = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        atexit._run_exitfuncs()
        sys.stdout.flush(), sys.stderr.flush()
        os._exit(status)


if __name__ == "__main__":
    serve(int(sys.argv[1]))
