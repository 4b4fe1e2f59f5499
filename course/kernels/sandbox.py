"""Every grading kernel in its own bubblewrap sandbox.

A submission is untrusted code. nbgrader runs it in a Jupyter kernel with all the rights of the grader:
it could read the hidden tests in `source/`, edit `gradebook.db`, rewrite other students' files or the
course's own code, reach the network, or leave processes behind. Here every grading kernel runs inside
bubblewrap (`bwrap`, Debian's `bubblewrap`, the sandbox under Flatpak), so that it has:

* its own user, PID, network, IPC, UTS and cgroup namespaces, no capabilities (`--cap-drop ALL`, the
  sandbox's uid is an unprivileged one even when grading as root) and no way to make new user
  namespaces; no network at all (only a loopback device of its own);
* a mount namespace that holds only the read-only runtime (`/usr`, the interpreter's prefix, the
  environment, and the `autograder` package folder, not the repository around it), a minimal `/etc`,
  its own `/proc` and `/dev`, small private `/tmp` and `/dev/shm`, and **one working folder**: a copy of nbgrader's
  working directory for the notebook (`autograded/STUDENT/ASSIGNMENT` when autograding) on a bounded tmpfs of its
  own, so that nothing it writes reaches the grader's disk;
* a clean environment (PATH, HOME on the private `/tmp`, the locale, and the few variables grading
  itself uses, `PASSED_VARIABLES`), not the grader's;
* where cgroups can be made, a cgroup of its own that bounds all its processes together: memory (shared
  mappings included) and the number of processes and threads (course/kernels/cgroups.py);
* a life no longer than the grading: the kernel is the sandbox's first process (or, with the fork
  server, joins its namespaces), the sandbox dies with the grading process (`--die-with-parent`), and
  when the kernel ends, the sandbox's PID namespace ends and takes every process it started with it.

Jupyter talks to the kernel over Unix sockets (`KernelManager.transport = "ipc"`). They live in a
1 MiB tmpfs of the sandbox's own, which the grader reaches through a link into the sandbox's mounts
(`/proc/PID/root/...`), so nothing the kernel writes there lands on the grader's disk; the connection
file is bound read-only. TCP cannot cross the network namespace. A seccomp filter refuses `ptrace` and
`process_vm_readv/writev` to every process of the sandbox (autograder/kernel.py), so the kernel cannot
trace even the sandbox's init.

After the sandbox is gone, before nbgrader writes into the working folder again, the folder (a verdict's, which
the sandbox binds) is made safe to handle: links, pipes and sockets the submission created are removed (nbgrader
would otherwise follow a symlink to `gradebook.db` when it writes the graded notebook there, or block on a pipe), and
set-user-ID bits are cleared.

`SandboxedProvisioner` is a jupyter_client kernel provisioner (entry point
`course-sandboxed-provisioner`): the sandbox replaces how the kernel process is created, nothing else.
`GradingKernelManager` (manager.py) chooses it for nbgrader (nbgrader_config.py: `use_for_nbgrader()`), or
`course.kernels.forkserver.ForkedKernelProvisioner` in `course grade`'s workers, which forks kernels from a
warm server into sandboxes of the same shape. Where the sandbox cannot start (no bwrap, no user
namespaces, not Linux), grading refuses to run unless the instructor explicitly turns the sandbox off:
`course grade --no-sandbox`, or `COURSE_NO_SANDBOX=1` for plain nbgrader (logged on every kernel). Both
set one configuration value, `Sandbox.enabled`, which every part of grading reads from the Config it was given.
Every other bound of a sandbox is a setting of the same class (`Sandbox`: its memory and processes as a whole,
the sizes of its /tmp and /dev/shm, the bwrap program), set in nbgrader_config.py as `c.Sandbox.memory_bytes`.
"""
import contextlib
import errno
import functools
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path

from jupyter_client.provisioning import LocalProvisioner
from traitlets import Bool, Integer, Unicode, default
from traitlets.config import Configurable

from autograder.kernel import MEMORY_BYTES, no_tracing_filter
from autograder.messages import message

from . import cgroups
from ..terminal import visible

NO_SANDBOX_VARIABLE = "COURSE_NO_SANDBOX"  # overrides Sandbox.enabled (read by course.settings.from_environment)
BWRAP_VARIABLE = "COURSE_BWRAP"  # overrides Sandbox.bwrap (read by course.settings.from_environment)
SANDBOX_UID = SANDBOX_GID = 65534  # the sandbox's own view: "nobody", whoever grades
HOME = "/tmp/home"
# variables a grading kernel gets from the grader: the locale, nbgrader's own documented ones, and the
# ones grading itself reads (the GPU job's CUDA requirement, which GPU, how many threads)
PASSED_VARIABLES = ("LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "LC_NUMERIC", "TZ",
                    "NBGRADER_EXECUTION", "NBGRADER_VALIDATING", "COURSE_REQUIRE_CUDA",
                    "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "LD_LIBRARY_PATH")
HOST_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
HOST_ETC = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime")
# a working folder that holds one of these is (part of) a course folder: never writable by a kernel
COURSE_MARKERS = ("nbgrader_config.py", "gradebook.db", "source", "submitted", "autograded", "release")
OUTPUT_KEPT = 8192  # bytes of a kernel's own stdout/stderr kept for the grader's log
OUTPUT_LIMIT = 1 * 2**20  # bytes of a sandbox's own output kept for the log (a flood is read and dropped)
# A verdict's sandbox (autograder/verdict.py): the student's program may write anywhere in /tmp, as the grading kernel
# may, so the judges' temporary folder is a tmpfs beside it, so that no file a judge wrote can change under them; the
# verdict works in a tmpfs of its own too, and is handed its job as files with no name, so that no folder of the
# grader's disk is bound into it (on Linux before 5.13, without Landlock, its program wrote 1 GiB in the job's folder)
JUDGES_TMP = "/var/tmp"
JOB_FOLDER = "/var/job"
SOCKETS_BYTES = 1 * 2**20  # the sockets' own tmpfs: sockets take no space, nothing else belongs there
FOLDS_BYTES = 64 * 2**10  # a read-only tmpfs around mounts in /tmp (`_folders_around_mounts`): mount points only
PRIVATE_PREFIX = "course-kernel-"  # + the grading process's pid: a sandbox's private folder in /tmp


class SandboxError(RuntimeError):
    """Grading refuses to start a kernel (the message is bilingual and says what to do)."""


class Sandbox(Configurable):
    """The sandbox of every grading kernel and verdict (SandboxedProvisioner, ForkedKernelProvisioner,
    course.plugins.autograde.DecideGrades): whether there is one, and its bounds. Set in nbgrader_config.py
    (`c.Sandbox.memory_bytes = 4 * 2**30`); `course grade --no-sandbox` sets `enabled` in the Config the command
    passes down; COURSE_NO_SANDBOX and COURSE_BWRAP override `enabled` and `bwrap` (course/settings.py)."""

    enabled = Bool(True, help="Run every grading kernel and verdict in its own sandbox. Off, submissions "
                              "run with every right of the grading user (logged on every kernel). "
                              "COURSE_NO_SANDBOX=1 turns it off.").tag(config=True)
    memory_bytes = Integer(MEMORY_BYTES, help="Bytes of memory all processes of one sandbox may hold together (shared "
                                           "mappings and tmpfs pages included), where it gets a cgroup of its own "
                                           "(course/kernels/cgroups.py). Keep jobs × this below the machine's "
                                           "memory.").tag(config=True)
    processes = Integer(512, help="Processes and threads one sandbox may hold together, where it gets a "
                                  "cgroup of its own").tag(config=True)
    tmp_bytes = Integer(512 * 2**20, help="Size of a sandbox's private /tmp, and of a verdict's judges' "
                                          "/var/tmp (memory: a process's RLIMIT_DATA does not count tmpfs "
                                          "pages)").tag(config=True)
    shm_bytes = Integer(256 * 2**20, help="Size of a sandbox's private /dev/shm (DataLoader workers share "
                                          "tensors there)").tag(config=True)
    folder_bytes = Integer(512 * 2**20, help="Size of the tmpfs a grading kernel works in: a copy of its working "
                                             "folder, made before any cell runs. What the kernel writes there goes "
                                             "with the sandbox: no file of the grader's disk, and none nbgrader "
                                             "reads back (timestamp.txt, submission_secret.txt)").tag(config=True)
    gpus = Bool(False, help="Bind the machine's GPU devices (/dev/nvidia*, /dev/dri, and /sys read-only) into each "
                            "sandbox, so that the kernel's run of the visible tests uses the GPU. Off by default: the "
                            "verdict judges every notebook on simulated machines anyway, the same points on every "
                            "grader; a GPU's memory is bounded by no cgroup; and a notebook that sees no GPU cannot "
                            "tell a GPU grader from a CPU one").tag(config=True)
    bwrap = Unicode(help="The bubblewrap program (default: `bwrap` on PATH; COURSE_BWRAP overrides "
                         "it)").tag(config=True)

    @default("bwrap")
    def _bwrap_on_path(self):
        return shutil.which("bwrap") or ""


def enabled(config=None) -> bool:
    """Whether `config` (an nbgrader or `course` command's Config) keeps the sandbox on: the default."""
    return Sandbox(config=config).enabled


@functools.cache
def _problem(bwrap) -> str | None:
    if not sys.platform.startswith("linux"):
        return f"bubblewrap needs Linux, this is {sys.platform}"
    if not bwrap or not os.access(bwrap, os.X_OK):
        return "bwrap (bubblewrap) is not installed"
    try:
        done = subprocess.run([bwrap, *_isolation(), "--ro-bind", "/", "/", "--", "true"],
                              capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bwrap does not run: {error}"
    if done.returncode != 0:
        return (done.stderr.strip() or f"bwrap exited with status {done.returncode}").splitlines()[-1]
    return None


def problem(config=None) -> str | None:
    """Why a sandbox cannot start on this machine with `config`'s bwrap, or None when it can (checked once
    per process)."""
    return _problem(Sandbox(config=config).bwrap)


def require(config=None):
    """Raise SandboxError, saying what to install or enable, when the sandbox cannot start here."""
    found = problem(config)
    if found:
        raise SandboxError(message("sandbox_unavailable", reason=found))


def _isolation() -> list[str]:
    return ["--unshare-all", "--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_GID),
            "--disable-userns", "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv",
            "--hostname", "grading"]


@functools.cache
def runtime_paths() -> list[str]:
    """What a kernel needs read-only besides /usr: the interpreter's prefix, the environment, the
    `autograder` package folder (an editable install points into the repository: only the package
    is bound, never the repository around it), and any site-packages folder outside them, also those
    the environment's .pth files add (`make gpu-check` sees the machine's own PyTorch that way)."""
    import site

    import autograder

    candidates = [sys.base_prefix, sys.base_exec_prefix, sys.prefix, sys.exec_prefix,
                  str(Path(sys.executable).resolve().parent.parent),
                  str(Path(autograder.__file__).resolve().parent), *site.getsitepackages(),
                  *site_packages_added_by_pth_files(site.getsitepackages())]
    if site.ENABLE_USER_SITE:  # packages installed with `pip install --user` (never in a virtual environment)
        candidates.append(site.getusersitepackages())
    paths = sorted({os.path.realpath(p) for p in candidates if p and os.path.isdir(p)})
    # the fewest binds: drop a path inside another one
    return [p for p in paths if not any(p != q and p.startswith(q.rstrip("/") + "/") for q in paths)]


def site_packages_added_by_pth_files(folders) -> list[str]:
    """The package folders that .pth files in `folders` add to sys.path, and only those: a folder named
    site-packages or dist-packages (another environment's, whose packages this one uses). An editable
    install's .pth file names the repository, which no kernel may see."""
    added = []
    for pth in (path for folder in folders for path in sorted(Path(folder).glob("*.pth"))):
        for line in pth.read_text("utf-8", errors="replace").splitlines():
            line = line.strip()
            if os.path.isabs(line) and Path(line).name in ("site-packages", "dist-packages") and os.path.isdir(line):
                added.append(line)
    return added


def _folders_around_mounts(paths) -> list[str]:
    """The folders right in /tmp that hold one of `paths` (a mount of the sandbox's: the runtime where it lives in
    /tmp, as in a fresh clone; a kernel's sockets and working folder), each to be a small read-only tmpfs of its own.
    In /tmp, where the sandbox's processes may write, such a folder is theirs: a student's program renamed the folder
    around the bound runtime, put folders of its own where the mounts were, and a judge imported its code. A mount
    point cannot be renamed, nor a read-only one written."""
    folders = set()
    for path in paths:
        parts = Path(path).parts
        if len(parts) > 3 and parts[:2] == ("/", "tmp"):  # /tmp/x itself is a mount point already
            folders.add(os.path.join("/tmp", parts[2]))
    return sorted(folders - {HOME})


def too_wide(folder) -> str | None:
    """What `folder` holds that no kernel may write: part of a course (`source/`, `gradebook.db`, …),
    the runtime, the temporary folder where every sandbox keeps its sockets, the grader's home."""
    folder = os.path.realpath(folder)
    marker = next((name for name in COURSE_MARKERS if os.path.lexists(os.path.join(folder, name))), None)
    if marker:
        return marker
    within = folder.rstrip("/") + "/"
    for path in [*runtime_paths(), tempfile.gettempdir(), os.path.expanduser("~")]:
        path = os.path.realpath(path)
        if path == folder or path.startswith(within):
            return path
    return None


def environment(given=None, *, gpus) -> dict:
    """The kernel's whole environment: nothing of the grader's but PASSED_VARIABLES. `gpus`: whether the kernel
    sees the machine's GPUs (Sandbox.gpus); where it does not, it is shown no CUDA device (PyTorch then answers
    without trying the driver, which finds no device file and warns) and is not asked for CUDA (the GPU job's
    COURSE_REQUIRE_CUDA)."""
    given = os.environ if given is None else given
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin", "HOME": HOME,
           "LANG": "C.UTF-8", "USER": "student", "LOGNAME": "student", "TMPDIR": "/tmp"}
    env.update({name: given[name] for name in PASSED_VARIABLES if name in given})
    if not gpus:
        env.pop("COURSE_REQUIRE_CUDA", None)  # autograder.devices.REQUIRE_CUDA_VARIABLE (which imports torch)
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


class KernelSandbox:
    """One sandbox: its private folder (sockets, connection file, /etc files), its bwrap process, and
    the working folder it may write. `start(command)` runs a kernel command as the sandbox's first
    process; `start_holder()` starts a sandbox whose first process only holds it open, for a kernel
    forked from the fork server to join (course/kernels/forkserver.py)."""

    judges = False  # a verdict's sandbox: its judges' own tmpfs (JUDGES_TMP), its working folder a tmpfs at JOB_FOLDER

    def __init__(self, work_dir, log=None, config=None, judges=False):
        """`work_dir`: the folder a kernel works in, copied into the sandbox; None for a verdict's (`judges`)."""
        self.settings = Sandbox(config=config)  # the bounds: the grading command's Config, or the defaults
        self.judges = judges
        require(config)
        self.work_dir = None if judges else os.path.realpath(work_dir)
        self.log = log
        found = None if judges else too_wide(self.work_dir)
        if found:
            raise SandboxError(message("sandbox_course_folder", folder=self.work_dir, found=found))
        _remove_stale_private_folders()
        cgroups.remove_stale_groups()
        self.private = Path(tempfile.mkdtemp(prefix=f"{PRIVATE_PREFIX}{os.getpid()}-"))  # mode 0700
        # sockets: the kernel binds them in a small tmpfs of the sandbox's own; Jupyter reaches them
        # through the link made once the sandbox runs (`_link_sockets`)
        self.run_dir = self.private / "run"
        self.connection_file = str(self.private / "kernel.json")
        self.ipc_prefix = str(self.run_dir / "k")
        etc = self.private / "etc"
        etc.mkdir()
        (etc / "passwd").write_text(f"student:x:{SANDBOX_UID}:{SANDBOX_GID}:student:{HOME}:/bin/sh\n")
        (etc / "group").write_text(f"student:x:{SANDBOX_GID}:\n")
        (etc / "hosts").write_text("127.0.0.1 localhost grading\n::1 localhost\n")
        self.bwrap = self.init_pid = self.init_pidfd = self.first_pid = self.group = None
        self.output = deque(maxlen=OUTPUT_KEPT)
        self.closed = False

    @property
    def inside(self) -> str:
        """The working folder's path in the sandbox."""
        return JOB_FOLDER if self.judges else self.work_dir

    def arguments(self, env, command, info_fd, seccomp_fd=None) -> list[str]:
        args = [self.settings.bwrap, *_isolation(), "--info-fd", str(info_fd)]
        for path in HOST_DIRS:
            if os.path.islink(path):
                args += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                args += ["--ro-bind", path, path]
        args += ["--size", str(self.settings.tmp_bytes), "--tmpfs", "/tmp", "--dir", HOME]  # first: the runtime may live in /tmp
        around = _folders_around_mounts([*runtime_paths(), os.path.realpath(command[0]), str(self.run_dir),
                                         self.connection_file, self.inside])
        for folder in around:
            args += ["--size", str(FOLDS_BYTES), "--tmpfs", folder]
        if self.judges:
            args += ["--size", str(self.settings.tmp_bytes), "--tmpfs", JUDGES_TMP]
        for path in HOST_ETC:
            args += ["--ro-bind-try", path, path]
        for name in ("passwd", "group", "hosts"):
            args += ["--ro-bind", str(self.private / "etc" / name), f"/etc/{name}"]
        for path in runtime_paths():
            args += ["--ro-bind", path, path]
        executable = os.path.realpath(command[0])
        if not any(executable.startswith(p.rstrip("/") + "/") for p in [*HOST_DIRS, *runtime_paths()]):
            args += ["--ro-bind", executable, executable]  # a kernel spec's own launcher script
        args += ["--proc", "/proc", "--dev", "/dev"]
        gpus = sorted(str(p) for p in Path("/dev").glob("nvidia*")) + ["/dev/dri"] if self.settings.gpus else []
        for device in gpus:  # the machine's GPUs, only where the instructor asked for them (Sandbox.gpus)
            args += ["--dev-bind-try", device, device]
        if any(os.path.exists(d) for d in gpus[:-1]):
            args += ["--ro-bind-try", "/sys", "/sys"]
        else:
            args += ["--ro-bind-try", "/sys/devices/system/cpu", "/sys/devices/system/cpu"]
        args += ["--size", str(self.settings.shm_bytes), "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
                 "--size", str(SOCKETS_BYTES), "--tmpfs", str(self.run_dir)]
        # a kernel's: a bounded copy of its folder (`_copy_working_folder`), never the grader's disk; a verdict's, empty
        args += ["--size", str(self.settings.folder_bytes), "--tmpfs", self.inside]
        args += ["--chdir", self.inside]
        if os.path.exists(self.connection_file):
            args += ["--ro-bind", self.connection_file, self.connection_file]
        for folder in around:
            args += ["--remount-ro", folder]
        args += ["--remount-ro", "/"]
        if seccomp_fd is not None:
            args += ["--seccomp", str(seccomp_fd)]
        for name, value in env.items():
            args += ["--setenv", name, value]
        return [*args, "--", *command]

    def start(self, command, env, keep_fds=()) -> subprocess.Popen:
        """Run `command` as the sandbox's first process; the sandbox ends when it ends. `keep_fds`:
        descriptors it inherits (the verdict's result pipe, autograder/verdict.py)."""
        self._start(command, env, first_comm=None, keep_fds=keep_fds)
        return self.bwrap

    def start_holder(self, env) -> int:
        """A sandbox whose first process only holds it open; returns a pidfd of that process, whose
        namespaces a forked kernel joins (setns). The sandbox ends when `kill()` is called."""
        sleep = os.path.realpath(shutil.which("sleep", path="/usr/bin:/bin") or "/usr/bin/sleep")
        self._start([sleep, "infinity"], env, first_comm=os.path.basename(sleep))
        return os.pidfd_open(self.first_pid)

    def _start(self, command, env, first_comm, keep_fds=()):
        self.group = _new_group(self.settings, self.log)
        try:
            self._launch(command, env, first_comm, keep_fds)
        except BaseException:
            self.stop()  # a sandbox that did not start leaves no process and no cgroup behind
            raise

    def _launch(self, command, env, first_comm, keep_fds):
        info_reader, info_writer = os.pipe()
        output_reader, output_writer = os.pipe()
        seccomp = _filter_file()
        passed = [info_writer, *keep_fds, *([seccomp] if seccomp is not None else [])]
        try:
            self.bwrap = subprocess.Popen(  # bwrap, once its first process has joined the sandbox's group
                cgroups.wrap(self.arguments(env, command, info_writer, seccomp), self.group),
                pass_fds=passed, stdin=subprocess.DEVNULL, stdout=output_writer, stderr=output_writer,
                start_new_session=True, cwd="/", env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        finally:
            for fd in (info_writer, output_writer, seccomp):
                if fd is not None:
                    os.close(fd)
        collector = threading.Thread(target=self._collect, args=(output_reader,), daemon=True)
        collector.start()
        with os.fdopen(info_reader, "rb") as reader:
            info = reader.read()  # bwrap writes it once the namespaces exist, then closes it
        if not info:
            self.bwrap.wait()
            collector.join(5)
            raise SandboxError(message("sandbox_failed", output=self.output_text() or self.bwrap.returncode))
        self.init_pid = json.loads(info)["child-pid"]
        self.init_pidfd = os.pidfd_open(self.init_pid)
        self.first_pid = self._first_process(first_comm)
        if not self.judges:
            self._copy_working_folder()
        self._link_sockets()

    def _copy_working_folder(self):
        """The working folder's files, folders and links but its notebooks (`_not_copied`), copied into the kernel's
        own tmpfs before any cell runs (its first process is the kernel starting, or the holder a forked kernel
        joins). A submission once filled the grader's disk from its folder in a fraction of a second
        (`posix_fallocate`: no CPU time, no memory), and stopped the class; another rewrote the
        `submission_secret.txt` nbgrader had copied there, and `release_feedback` failed for every student after it.
        Now the folder on disk is only read. The copy reaches the sandbox's tree from outside, where a link made there
        would be followed against the grader's root, so it follows none (`_copy_into`), and the sandbox's only process
        is stopped meanwhile: nbgrader sends no cell before the kernel has started, but in a student's own folder a
        module of theirs can run at the kernel's start (validate)."""
        try:
            os.kill(self.first_pid, signal.SIGSTOP)
            target = os.open(f"/proc/{self.first_pid}/root{self.inside}", _FOLDER)
            try:
                _copy_into(self.work_dir, target)
            finally:
                os.close(target)
        except OSError as error:  # a kernel that ended already too
            raise SandboxError(message("sandbox_folder_not_copied", folder=self.work_dir,
                                       megabytes=self.settings.folder_bytes // 2**20, error=error)) from None
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.first_pid, signal.SIGCONT)

    def _link_sockets(self):
        """The sockets' folder, seen from outside: a link into the sandbox's own mounts (the same path
        inside and out, so the connection file holds one address). Nothing the kernel writes there
        reaches the grader's disk."""
        if self.run_dir.is_symlink():  # a sandbox started again (a fork server that failed): its new process
            self.run_dir.unlink()
        os.symlink(f"/proc/{self.first_pid}/root{self.run_dir}", self.run_dir)

    def _first_process(self, comm, timeout=30):
        """The outer pid of the sandbox's first process, once it runs `command` (every mount, the
        uid switch, the session and the capability drop come before that exec)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                pids = _children(self.init_pid)
                if pids:
                    with open(f"/proc/{pids[0]}/comm") as name:
                        running = name.read().strip()
                    if running != "bwrap" and (comm is None or running == comm):
                        return pids[0]
            except (FileNotFoundError, ProcessLookupError, ValueError):
                pass
            if self.bwrap.poll() is not None:
                raise SandboxError(message("sandbox_failed", output=self.output_text() or self.bwrap.returncode))
            time.sleep(0.002)
        self.kill()
        raise SandboxError(message("sandbox_failed", output=f"no process after {timeout} s"))

    def output_pipe(self) -> int:
        """The write end of a pipe whose output is kept like the sandbox's own (a forked kernel's
        stdout and stderr: never the grader's terminal)."""
        reader, writer = os.pipe()
        threading.Thread(target=self._collect, args=(reader,), daemon=True).start()
        return writer

    def _collect(self, reader):
        """Keep the first OUTPUT_LIMIT bytes of what the sandbox writes; read and drop the rest."""
        with os.fdopen(reader, "rb") as stream:
            while chunk := stream.read1(65536):
                self.output.extend(chunk[:max(0, OUTPUT_LIMIT - len(self.output))])

    def output_text(self) -> str:
        return bytes(self.output).decode("utf-8", "replace").strip()

    def kill(self):
        """End the sandbox: its PID namespace's first process dies, and the kernel takes every
        process of the namespace with it (the kernel too)."""
        if self.init_pidfd is not None:
            try:
                signal.pidfd_send_signal(self.init_pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def stop(self, reap=None):
        """Kill the sandbox and wait until every process in it is gone (`reap`: reap a kernel forked
        into it; its PID namespace waits for that before it ends)."""
        self.kill()
        if reap is not None:
            reap()
        if self.bwrap is not None:
            try:
                self.bwrap.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.bwrap.kill()
                self.bwrap.wait()
        if self.init_pidfd is not None:
            os.close(self.init_pidfd)
            self.init_pidfd = None
        if self.group is not None:
            self.group.remove()
            self.group = None

    def close(self, reap=None):
        """Stop the sandbox and remove its private folder (the working folder on disk it only read). Idempotent."""
        if self.closed:
            return
        self.closed = True
        self.stop(reap)
        shutil.rmtree(self.private, ignore_errors=True)


def _new_group(settings, log):
    """The cgroup of a new sandbox, or None where there are none. Which bound holds, and why, is said once per
    grading process: a warning where sandboxes are not bounded as a whole."""
    group = cgroups.create(settings.memory_bytes, settings.processes)
    if log is not None and not _said_which_bound:
        _said_which_bound.append(True)
        holds, line = cgroups.said(settings.memory_bytes, settings.processes)
        if holds and group is not None:
            log.info(line)
        else:
            log.warning(line if not holds else message("sandbox_no_group", reason="the group could not be made"))
    return group


_said_which_bound = []


def _filter_file() -> int | None:
    """A descriptor bwrap reads the seccomp filter from (autograder/kernel.py: no tracing)."""
    program = no_tracing_filter()
    if program is None:
        return None
    reader, writer = os.pipe()
    os.write(writer, program)  # a few dozen bytes: the pipe holds them
    os.close(writer)
    return reader


def _remove_stale_private_folders():
    """The private folders of sandboxes whose grading process died before cleaning up (killed)."""
    for folder in Path(tempfile.gettempdir()).glob(f"{PRIVATE_PREFIX}*-*"):
        try:
            owner = int(folder.name.removeprefix(PRIVATE_PREFIX).split("-")[0])
            if folder.stat().st_uid == os.getuid():
                os.kill(owner, 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except (ValueError, OSError):
            pass


def _children(pid) -> list[int]:
    # /proc read directly, not psutil (code review 5efd9e0, F: optional): two lines of the kernel's own
    # interface, where psutil would be one more compiled dependency of the grading runtime for them
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as children:
            return [int(p) for p in children.read().split()]
    except FileNotFoundError:  # a kernel built without CONFIG_PROC_CHILDREN
        found = []
        for entry in os.listdir("/proc"):
            try:
                with open(f"/proc/{entry}/stat") as status:
                    if entry.isdigit() and int(status.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
        return found


_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
DEEPEST = 32  # folders below a kernel's working folder that are copied into its sandbox, at most


def _copy_into(source, target, depth=0):
    """What `source` (a folder of the grader's) holds but `_not_copied`, into the folder open at descriptor `target`,
    never through a link there: each folder and file is made anew, relative to its folder's descriptor, and one
    already there (a link a process of the sandbox made) fails the copy. A kernel that validate starts in a student's
    folder imports a module of theirs before any cell runs (`autograder/`, first on `sys.path`), and the grader's copy
    had followed the links it made, writing files anywhere, as the grader. At most DEEPEST levels: each is a call."""
    if depth > DEEPEST:
        raise OSError(errno.ELOOP, f"more than {DEEPEST} folders deep", source)
    with os.scandir(source) as entries:
        names = {entry.name: entry for entry in entries}
    for name in set(names) - set(_not_copied(source, list(names))):
        entry = names[name]
        if entry.is_symlink():
            os.symlink(os.readlink(entry.path), name, dir_fd=target)
        elif entry.is_dir(follow_symlinks=False):
            os.mkdir(name, 0o755, dir_fd=target)
            inner = os.open(name, _FOLDER, dir_fd=target)
            try:
                _copy_into(entry.path, inner, depth + 1)
            finally:
                os.close(inner)
        else:
            mode = stat.S_IMODE(entry.stat(follow_symlinks=False).st_mode) & 0o755 | 0o600
            reading = os.fdopen(os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb")  # no pipe's wait
            with reading, os.fdopen(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode,
                                            dir_fd=target), "wb") as writing:
                shutil.copyfileobj(reading, writing, 1 << 20)


def _not_copied(parent, names) -> list[str]:
    """What `_copy_into` leaves out of a kernel's copy of its folder: pipes, sockets and device files (a pipe
    would block it), and notebooks. nbgrader's autograde writes the notebook it grades there before the kernel
    starts, with the instructor's test cells put back whole, hidden tests included (and an assignment's earlier
    notebooks as graded): a student's cell read it and printed every hidden test into its feedback. The kernel is
    sent the notebook's cells; a cell that reads a notebook file finds none, as in the verdict's program."""
    kept = (stat.S_ISREG, stat.S_ISDIR, stat.S_ISLNK)
    return [name for name in names if name.endswith(".ipynb")
            or not any(kind(os.lstat(os.path.join(parent, name)).st_mode) for kind in kept)]


class SandboxedProvisioner(LocalProvisioner):
    """LocalProvisioner, except that the kernel runs in a bubblewrap sandbox and Jupyter reaches it
    over Unix sockets. With the sandbox turned off (`Sandbox.enabled`, read from the kernel manager's
    Config), LocalProvisioner itself."""

    sandbox = None
    killed = False  # by Jupyter (shutdown, time-out): its output is then no news

    @property
    def sandboxed(self) -> bool:
        return enabled(self.config)

    async def pre_launch(self, **kwargs):
        if not self.sandboxed:
            self.log.warning(message("sandbox_disabled"))
            return await super().pre_launch(**kwargs)
        km = self.parent
        self.sandbox = KernelSandbox(kwargs.get("cwd") or os.getcwd(), log=self.log, config=self.config)
        # before the connection file is written: Unix sockets in the sandbox's own folder
        km.transport, km.cache_ports = "ipc", False
        km.connection_file, km.ip = self.sandbox.connection_file, self.sandbox.ipc_prefix
        kwargs["env"] = environment(kwargs.get("env"), gpus=self.sandbox.settings.gpus)
        return await super().pre_launch(**kwargs)

    async def launch_kernel(self, cmd, **kwargs):
        if self.sandbox is None:
            return await super().launch_kernel(cmd, **kwargs)
        self.process = self.sandbox.start(cmd, kwargs["env"])  # bwrap: ends when the kernel ends
        self.pid = self.sandbox.first_pid
        self.pgid = os.getpgid(self.pid)  # the kernel leads its own session (bwrap --new-session)
        self.cwd = self.sandbox.work_dir
        return self.connection_info

    async def kill(self, restart=False):
        if self.sandbox is None:
            return await super().kill(restart)
        self.killed = True
        self.sandbox.kill()  # the whole sandbox: the kernel and whatever it started

    async def cleanup(self, restart=False):
        await super().cleanup(restart)
        if self.sandbox is not None:
            self._close_sandbox()
            self.sandbox = None

    def _close_sandbox(self):
        sandbox = self.sandbox
        sandbox.close()
        self._log_output(sandbox, sandbox.bwrap.returncode if sandbox.bwrap else None)

    def _log_output(self, sandbox, returncode):
        """A kernel that ended on its own with an error: its last lines of output, for the grader's log."""
        if returncode in (0, None) or self.killed or not sandbox.output_text():
            return
        lines = [line for line in sandbox.output_text().splitlines() if not _ipykernel_banner(line)][-20:]
        if lines:
            self.log.warning("Kernel output (sandbox %s, exit status %s):\n%s", sandbox.work_dir, returncode,
                             "\n".join(f"  kernel> {visible(line[:500])}" for line in lines))


def _ipykernel_banner(line: str) -> bool:
    """A line of the note every kernel started by `ipykernel` prints (Ctrl-C, how to connect): no news."""
    from ipykernel.kernelapp import _ctrl_c_message

    return not line.strip() or line in _ctrl_c_message.splitlines() or bool(
        re.fullmatch(r"To connect another client to this kernel, use:|\s+--existing \S+", line))
