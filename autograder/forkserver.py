"""Grading kernels forked from a warm process that has already imported torch.

Most of a submission's grading time is a new kernel importing torch and IPython. A fork server is a
process that imports them once and then forks a fresh kernel for every submission: each kernel is a
new process that never ran anyone's code, ready in a fraction of the time.

`ForkedKernelProvisioner` is a jupyter_client kernel provisioner (registered as the entry point
`course-forked-provisioner`), so nbgrader's Execute preprocessor and nbclient use it unchanged; select
it with `JUPYTER_DEFAULT_PROVISIONER_NAME=course-forked-provisioner` (`course grade` does). It only
replaces how the process is created: connection file, ports, signals, interrupts and shutdown are
jupyter_client's LocalProvisioner's. Each kernel is forked twice by the server, so that it leads its
own session and becomes a child of the grading process itself (a Linux "child subreaper"), which can
then wait for it and signal it exactly like a kernel it started. Anything else (another OS, another
kernel command, redirected streams) gets LocalProvisioner's usual launch.

What a forked kernel shares with the server: the modules in PRELOADED, already imported, and the
process's hash seed. Random generators are reseeded in every kernel, as a fresh process would be.
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

from jupyter_client.provisioning import LocalProvisioner

NAME = "course-forked-provisioner"
PRELOADED = ("torch", "torch.nn", "numpy", "ipykernel.kernelapp", "autograder.checks",
             "autograder.kernel", "autograder.probes", "autograder.simulate")
_PR_SET_CHILD_SUBREAPER = 36
_servers = {}  # (process id, python, environment) → ForkServer: one per grading process, never shared over fork


class ForkedKernelProvisioner(LocalProvisioner):
    """LocalProvisioner, except that an ipykernel kernel is forked from a warm fork server."""

    async def launch_kernel(self, cmd, **kwargs):
        args = ipykernel_arguments(cmd)
        redirected = any(kwargs.get(stream) is not None for stream in ("stdin", "stdout", "stderr"))
        if args is None or redirected or kwargs.get("independent") or not sys.platform.startswith("linux"):
            return await super().launch_kernel(cmd, **kwargs)
        # as jupyter_client's launcher does: the kernel ends itself when this process goes away
        env = {**(kwargs.get("env") or os.environ), "JPY_PARENT_PID": str(os.getpid())}
        cwd = str(kwargs.get("cwd") or os.getcwd())
        try:
            self.process = fork_server(cmd[0], env).fork(args, env, cwd)
        except OSError as error:
            self.log.warning("Fork server unavailable (%s): starting the kernel the usual way", error)
            return await super().launch_kernel(cmd, **kwargs)
        self.pid = self.process.pid
        self.pgid = os.getpgid(self.pid)  # its own session and group, as LocalProvisioner's kernels
        self.cwd = cwd
        return self.connection_info


def ipykernel_arguments(cmd):
    """The arguments after `python -m ipykernel_launcher`, or None for any other kernel command."""
    return list(cmd[3:]) if len(cmd) >= 3 and cmd[1:3] == ["-m", "ipykernel_launcher"] else None


def fork_server(python, env):
    """This process's server for kernels of this Python and environment. The environment is part of
    the key because modules read it when imported (ipykernel its parent's pid, torch its threads)."""
    key = (os.getpid(), python, frozenset(env.items()))
    if key not in _servers or _servers[key].process.poll() is not None:
        _servers[key] = ForkServer(python, env)
    return _servers[key]


class ForkServer:
    """The grading process's end: starts the server, asks it for kernels, adopts them."""

    def __init__(self, python, env):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")
        ours, theirs = socket.socketpair()
        self.process = subprocess.Popen([python, "-m", "autograder.forkserver", str(theirs.fileno())],
                                        pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, env=env)
        theirs.close()
        self.channel, self.replies = ours, ours.makefile("r")

    def fork(self, args, env, cwd):
        self.channel.sendall((json.dumps({"args": args, "env": dict(env), "cwd": cwd}) + "\n").encode())
        reply = self.replies.readline()  # waits for the imports the first time
        if not reply:
            raise OSError(f"the fork server stopped (exit status {self.process.wait()})")
        pid = json.loads(reply)["pid"]
        if not pid:
            raise OSError("the fork server could not start a kernel")
        return AdoptedProcess(pid)


class AdoptedProcess:
    """What LocalProvisioner uses of a Popen, for a kernel this process adopted as subreaper."""

    stdin = stdout = stderr = None

    def __init__(self, pid):
        self.pid, self.returncode = pid, None

    def poll(self):
        return self._wait(os.WNOHANG)

    def wait(self):
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
        return self.returncode

    def send_signal(self, signum):
        if self.poll() is None:
            os.kill(self.pid, signum)

    def terminate(self):
        self.send_signal(signal.SIGTERM)

    def kill(self):
        self.send_signal(signal.SIGKILL)


# The server's end: `python -m autograder.forkserver FD`.

def serve(fd):
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C in the terminal ends it quietly
    for module in PRELOADED:
        importlib.import_module(module)
    channel = socket.socket(fileno=fd)
    for line in channel.makefile("r"):  # until the grading process closes its end
        pid = _fork_kernel(json.loads(line), channel)
        channel.sendall((json.dumps({"pid": pid}) + "\n").encode())


def _fork_kernel(request, channel):
    """Fork twice: the middle process exits at once, so the kernel is adopted by the grading process
    (the subreaper). The kernel sends its pid once it leads its own session, as Popen's would."""
    sys.stdout.flush(), sys.stderr.flush()
    pid_reader, pid_writer = os.pipe()
    middle = os.fork()
    if middle == 0:
        try:
            os.close(pid_reader)
            this = os.getpid()  # not the kernel's getppid(): this process may be gone by then
            if os.fork() == 0:
                _run_kernel(request, channel, pid_writer, middle=this)
        finally:
            os._exit(0)
    os.close(pid_writer)
    with os.fdopen(pid_reader) as reader:
        pid = int(reader.read() or 0)  # read to the end: the middle process and the kernel closed it
    os.waitpid(middle, 0)
    return pid


def _run_kernel(request, channel, pid_writer, middle):
    """Become `python -m ipykernel_launcher ARGS` in the requested directory and environment."""
    status = 1
    try:
        channel.close()
        os.setsid()  # like Popen(start_new_session=True): signals reach the kernel's whole group
        os.write(pid_writer, str(os.getpid()).encode())
        os.close(pid_writer)
        while os.getppid() == middle:  # until adopted: ipykernel exits when its parent is not JPY_PARENT_PID
            time.sleep(0.001)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # interrupts raise KeyboardInterrupt
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
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
