"""The grading sandbox itself (course/kernels/sandbox.py), for a kernel started as a new process and for one
forked from the fork server (course/kernels/forkserver.py): seen from inside, it can write only its own
folder, read nothing of the course or other students, reach no network, has no capabilities and a clean
environment; seen from outside, nothing it started outlives it and nothing it left can trip the grader.
Plain `nbgrader validate` from a course folder is sandboxed too, and grading refuses to run where the
sandbox cannot start unless the instructor turns it off explicitly.
"""
import asyncio
import errno
import json
import logging
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

import nbformat
import pytest
from traitlets.config import Config

from course import classroom
from course.kernels import sandbox
from course.kernels.manager import GradingKernelManager
from support.kernels import printed_by
from support.messages import fingerprint
from support.paths import BIN, with_bin_on_path
from support.system_tools import missing


@pytest.fixture(autouse=True)
def a_sandbox_can_start(request):
    """A missing sandbox never passes silently (tests/system_tools.py); the one test of what happens
    without bwrap needs none."""
    if sandbox.problem() is not None and "without_bwrap" not in request.node.name:
        missing("a working bubblewrap sandbox", f"make bubblewrap; here: {sandbox.problem()}", "COURSE_SKIP_SANDBOX")
CANARY = "COURSE_SANDBOX_CANARY"


class ForkedKernelManager(GradingKernelManager):
    fork_server = True


MODES = {"new process": GradingKernelManager, "forked": ForkedKernelManager}


class Kernel:
    """A grading kernel (sandboxed) working in `work_dir`, driven synchronously."""

    def __init__(self, manager_class, work_dir, config=None):
        self.loop = asyncio.new_event_loop()
        self.manager = manager_class(kernel_name="python3", config=config or Config())
        self.run(self.manager.start_kernel(cwd=str(work_dir), env=dict(os.environ)))
        self.client = self.manager.client()
        self.client.start_channels()
        self.run(self.client.wait_for_ready(timeout=180))

    def run(self, coroutine):
        return self.loop.run_until_complete(coroutine)

    def evaluate(self, code):
        """Run `code`, which must print one line `RESULT <json>`; return the decoded value."""
        printed = printed_by(self.client, textwrap.dedent(code), timeout=120, run=self.run)
        line = next(line for line in printed.splitlines() if line.startswith("RESULT "))
        return json.loads(line.removeprefix("RESULT "))

    def shutdown(self):
        self.client.stop_channels()
        self.run(self.manager.shutdown_kernel(now=True))
        self.run(self.manager.cleanup_resources())  # as nbclient does after shutting down
        self.loop.close()


@pytest.fixture(scope="module")
def course_folder(tmp_path_factory):
    """A course folder with everything a kernel must not see, and the kernel's own grading folder."""
    root = tmp_path_factory.mktemp("course")
    (root / "nbgrader_config.py").write_text("c = get_config()\n")
    (root / "gradebook.db").write_bytes(b"SQLite format 3\0")
    for folder, content in [("source/a1", "BEGIN HIDDEN TESTS"), ("submitted/other/a1", "other's answer"),
                            ("autograded/other/a1", "other's graded notebook")]:
        (root / folder).mkdir(parents=True)
        (root / folder / "a1.ipynb").write_text(content)
    work = root / "autograded" / "me" / "a1"
    work.mkdir(parents=True)
    for name in ("submission_secret.txt", "timestamp.txt"):  # what nbgrader submit wrote, copied in by autograde
        (work / name).write_text(f"{name} of the submission")
    (work / "a1.ipynb").write_text("BEGIN HIDDEN TESTS")  # nbgrader's autograde writes it there, test cells put back
    return root


@pytest.fixture(scope="module")
def listener():
    server = socket.create_server(("127.0.0.1", 0))
    yield server.getsockname()[1]
    server.close()


@pytest.fixture(scope="module", params=MODES)
def kernel(request, course_folder):
    with pytest.MonkeyPatch.context() as grader_environment:  # module scope: no monkeypatch fixture
        grader_environment.setenv(CANARY, "the grader's secret")
        started = Kernel(MODES[request.param], course_folder / "autograded" / "me" / "a1")
    yield started
    started.shutdown()


def keyctl(*arguments):
    import ctypes
    import platform

    from autograder.kernel import KEYCTL

    return ctypes.CDLL(None, use_errno=True).syscall(KEYCTL[platform.machine()], *arguments)


@pytest.mark.parametrize("mode", MODES)
def test_a_grading_kernel_can_neither_read_nor_revoke_the_graders_keys(mode, course_folder):
    """The grader's session keyring holds a key; a grading kernel (as configured: it runs start_kernel
    first) has a session keyring of its own and cannot read or revoke the grader's key."""
    import ctypes

    secret = b"the grader's key"
    key = ctypes.CDLL(None, use_errno=True).syscall(248 if os.uname().machine == "x86_64" else 217,  # add_key
                                                     b"user", b"course-canary", secret, len(secret), -3)
    assert key > 0
    limits = Config()
    limits.GradingKernelManager.memory_bytes, limits.GradingKernelManager.cpu_seconds = 2**30, 60
    started = Kernel(MODES[mode], course_folder / "autograded" / "me" / "a1", limits)
    try:
        found = started.evaluate(f"""
            import ctypes, json, platform
            number = {{"x86_64": 250, "aarch64": 219}}[platform.machine()]
            libc = ctypes.CDLL(None, use_errno=True)
            buffer = ctypes.create_string_buffer(64)
            read = libc.syscall(number, 11, {key}, buffer, 64)  # KEYCTL_READ
            revoked = libc.syscall(number, 3, {key})  # KEYCTL_REVOKE
            print("RESULT", json.dumps([read, revoked, buffer.value.decode(errors="replace")]))
        """)
    finally:
        started.shutdown()
    assert found[0] == -1 and found[1] == -1 and secret.decode() not in found[2]
    try:
        assert keyctl(11, key, ctypes.create_string_buffer(64), 64) == len(secret)  # still there, unrevoked
    finally:
        keyctl(21, key)  # KEYCTL_INVALIDATE: the test's own key leaves the grader's keyring


def test_writes_only_its_own_folder(kernel, course_folder):
    import hashlib

    import autograder

    package = Path(autograder.__file__).parent
    creates = {"own folder": course_folder / "autograded/me/a1", "private tmp": Path("/tmp"), "course folder": course_folder,
               "other student": course_folder / "autograded/other/a1", "autograder package": package,
               "environment": Path(sys.prefix), "interpreter": Path(sys.base_prefix), "usr": Path("/usr"),
               "root": Path("/"), "etc": Path("/etc"), "dev": Path("/dev")}
    appends = {"course config": course_folder / "nbgrader_config.py", "checks/core.py": package / "checks" / "core.py",
               "own secret": course_folder / "autograded/me/a1/submission_secret.txt"}
    name = f"written-{uuid.uuid4().hex[:8]}"
    hashes = {path: hashlib.sha256(path.read_bytes()).hexdigest() for path in appends.values()}
    result = kernel.evaluate(f"""
        import json, os
        done = {{}}
        for what, path, flags in [*[(k, os.path.join(v, {name!r}), os.O_CREAT) for k, v in {
                {k: str(v) for k, v in creates.items()}!r}.items()],
                                  *[(k, v, os.O_APPEND) for k, v in {
                {k: str(v) for k, v in appends.items()}!r}.items()]]:
            try:
                written = os.open(path, os.O_WRONLY | flags)
                os.write(written, b"#")
                os.close(written)
                done[what] = True
            except OSError:
                done[what] = False
        print("RESULT", json.dumps(done))
    """)
    # seen from outside: nothing changed, not even its own folder, whose copy it works in (a bounded tmpfs), nor the
    # file nbgrader reads back from there (release_feedback failed for the class after one kernel rewrote it)
    assert [what for what, folder in creates.items() if (folder / name).exists()] == []
    assert hashes == {path: hashlib.sha256(path.read_bytes()).hexdigest() for path in appends.values()}
    # seen from inside: the runtime and the system are read-only (a course kept under /tmp shows as an
    # empty folder of the kernel's private /tmp: writing there changes nothing outside, as checked above)
    assert result["own folder"] and result["private tmp"] and result["own secret"]
    assert not any(result[what] for what in ("autograder package", "checks/core.py", "environment", "interpreter",
                                              "usr", "root", "etc", "dev", "other student"))


def test_reads_nothing_of_the_course_or_other_students(kernel, course_folder):
    runtime = sandbox.runtime_paths()
    home = [p for p in Path.home().iterdir() if not any(r.startswith(str(p)) for r in runtime)][:20]
    secrets = [course_folder / "source/a1/a1.ipynb", course_folder / "gradebook.db", course_folder / "nbgrader_config.py",
               course_folder / "submitted/other/a1/a1.ipynb", course_folder / "autograded/other/a1/a1.ipynb",
               course_folder / "autograded/me/a1/a1.ipynb",
               classroom.ROOT / "source", classroom.ROOT / "nbgrader_config.py", *home]
    seen = kernel.evaluate(f"""
        import json, os
        print("RESULT", json.dumps([p for p in {[str(p) for p in secrets]!r} if os.path.exists(p)]))
    """)
    assert seen == []
    course_seen = kernel.evaluate(f"""
        import json, os
        print("RESULT", json.dumps(sorted(os.listdir({str(course_folder)!r}))))
    """)
    assert [name for name in course_seen if not name.startswith("written-")] == ["autograded"]


def test_no_network(kernel, listener):
    result = kernel.evaluate(f"""
        import json, socket
        try:
            socket.create_connection(("127.0.0.1", {listener}), timeout=5).close()
            reached = True
        except OSError:
            reached = False
        print("RESULT", json.dumps([reached, [name for _, name in socket.if_nameindex()]]))
    """)
    assert result == [False, ["lo"]]


def test_no_capabilities_and_no_way_to_gain_them(kernel):
    status, uid, mounted, nested = kernel.evaluate("""
        import ctypes, json, os
        libc = ctypes.CDLL(None, use_errno=True)
        status = {k: v.strip() for k, v in (line.split(":", 1) for line in open("/proc/self/status"))
                  if k.startswith(("Cap", "NoNewPrivs"))}
        mounted = libc.mount(b"none", b"/tmp", b"tmpfs", 0, None) == 0 or \\
                  libc.mount(b"none", b"/usr", b"none", 32 | 4096, None) == 0  # MS_REMOUNT|MS_BIND: writable
        nested = libc.unshare(0x10000000) == 0  # a new user namespace, where it would have them
        # the kernel has threads, and a threaded process may never unshare its user namespace: try
        # from a single-threaded child too, where only bwrap's --disable-userns refuses it
        child = os.fork()
        if child == 0:
            os._exit(0 if libc.unshare(0x10000000) == 0 else 1)
        nested = nested or os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) == 0
        print("RESULT", json.dumps([status, os.getuid(), mounted, nested]))
    """)
    assert all(int(status[name], 16) == 0 for name in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")), status
    assert status["NoNewPrivs"] == "1"
    assert uid == sandbox.SANDBOX_UID and not mounted and not nested


def test_no_process_may_trace_or_read_another_not_even_the_sandboxs_init(kernel):
    """Without the seccomp filter both calls succeed (same user, and a parent may trace its child)."""
    attached, read = kernel.evaluate("""
        import ctypes, json, os, time
        libc = ctypes.CDLL(None, use_errno=True)
        child = os.fork()
        if child == 0:
            time.sleep(60)
            os._exit(0)
        attached = {}
        for name, pid in [("init", 1), ("own child", child)]:
            attached[name] = [libc.ptrace(16, pid, 0, 0), ctypes.get_errno()]  # PTRACE_ATTACH
        buffer = ctypes.create_string_buffer(8)
        local = (ctypes.c_void_p * 2)(ctypes.addressof(buffer), 8)
        read = [libc.process_vm_readv(child, local, 1, local, 1, 0), ctypes.get_errno()]
        os.kill(child, 9)
        os.waitpid(child, 0)
        print("RESULT", json.dumps([attached, read]))
    """)
    assert attached == {"init": [-1, errno.EPERM], "own child": [-1, errno.EPERM]}
    assert read == [-1, errno.EPERM]


def test_its_sockets_folder_takes_nothing_of_the_graders_disk(kernel, course_folder):
    """The kernel binds its sockets in a 1 MiB tmpfs of its own; the grader reaches them by a link."""
    folder, written = kernel.evaluate("""
        import glob, json, os
        folder = os.path.dirname(glob.glob("/tmp/course-kernel-*/run/k-1")[0])
        try:
            with open(os.path.join(folder, "filler"), "wb") as filler:
                filler.write(bytes(4 * 2**20))
            written = "all"
        except OSError as error:
            written = error.errno
        print("RESULT", json.dumps([folder, written]))
    """)
    assert written == errno.ENOSPC
    assert os.path.islink(folder) and os.readlink(folder).startswith("/proc/")


def test_its_working_folder_takes_nothing_of_the_graders_disk(kernel, course_folder):
    """The kernel works in a copy of its folder on a tmpfs of Sandbox.folder_bytes: `posix_fallocate`, which costs no
    CPU time and no memory on a disk, filled the grader's disk from there in a fraction of a second and stopped the
    class. It finds its folder's files, and what it writes stays in the sandbox."""
    found, reserved, written = kernel.evaluate("""
        import json, os
        found = open("timestamp.txt").read()
        with open("checkpoint.bin", "wb") as checkpoint:
            try:
                os.posix_fallocate(checkpoint.fileno(), 0, 2**30)
                reserved = "all"
            except OSError as error:
                reserved = error.errno
        os.remove("checkpoint.bin")
        with open("notes.txt", "w") as notes:
            written = notes.write("kept in the sandbox")
        print("RESULT", json.dumps([found, reserved, written]))
    """)
    work = course_folder / "autograded" / "me" / "a1"
    assert found == (work / "timestamp.txt").read_text()
    assert reserved == errno.ENOSPC and written > 0
    assert not (work / "notes.txt").exists()


def test_the_copy_of_a_kernels_folder_never_writes_through_a_link_made_there(tmp_path):
    """A kernel that validate starts in a student's folder runs a module of theirs before any cell (an `autograder/`
    first on `sys.path`): a link it made where the grader's copy goes had taken the copy, as the grader, anywhere."""
    source, target, outside = tmp_path / "folder", tmp_path / "sandbox", tmp_path / "outside"
    (source / "checkpoints").mkdir(parents=True)
    (source / "checkpoints" / "weights.pt").write_text("from the submission")
    target.mkdir()
    outside.mkdir()
    (target / "checkpoints").symlink_to(outside)  # made in the sandbox before the copy
    folder = os.open(target, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(FileExistsError):
            sandbox._copy_into(str(source), folder)
    finally:
        os.close(folder)
    assert list(outside.iterdir()) == []


def test_the_grader_takes_no_message_of_a_kernel_larger_than_its_setting(tmp_path):
    """zmq holds a message whole before anything reads it, in the grader, which no sandbox bounds: one larger than
    `GradingKernelManager.largest_message` is never taken, however large the kernel may make it (zmq ends that
    connection: under nbgrader, the cells from that one on earn nothing, as after a kernel that died)."""
    limited = Kernel(GradingKernelManager, tmp_path, Config({"GradingKernelManager": {"largest_message": 2**20}}))
    try:
        assert printed_by(limited.client, "print('small')", timeout=60, run=limited.run) == "small\n"
        with pytest.raises(TimeoutError):
            printed_by(limited.client, "print('x' * 3 * 2**20)", timeout=10, run=limited.run)
    finally:
        limited.shutdown()


def test_a_message_jupyter_cannot_read_is_dropped_and_the_kernel_heard_on(kernel, caplog):
    """A kernel signs its messages with its own key: content that is no JSON, or a parent header that is no dict,
    raised in nbclient's loops and stopped the notebook, with no grade (a hostile student's, the twenty-first
    session)."""
    sent = """
        kernel = get_ipython().kernel
        kernel.session.send(kernel.iopub_socket, "stream", b"\\xff{no json", parent=kernel.get_parent("shell"),
                            ident=kernel._topic("stream"))
        kernel.session.send(kernel.iopub_socket, "stream", {"name": "stdout", "text": "x"}, parent=[],
                            ident=kernel._topic("stream"))
        kernel.session.send(kernel.shell_stream, "execute_reply", {"execution_count": 1}, parent=kernel.get_parent("shell"),
                            ident=kernel._parent_ident["shell"])  # a reply that says not how the cell ended
        print("after")
    """
    assert printed_by(kernel.client, textwrap.dedent(sent), timeout=60, run=kernel.run) == "after\n"
    flood = """
        kernel = get_ipython().kernel
        for _ in range(50):
            kernel.session.send(kernel.iopub_socket, "stream", b"no json", parent=kernel.get_parent("shell"),
                                ident=kernel._topic("stream"))
        print("after")
    """
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="course.kernels.manager"):
        assert printed_by(kernel.client, textwrap.dedent(flood), timeout=60, run=kernel.run) == "after\n"
    assert len(caplog.records) <= 3  # a flood of them makes no flood of lines (a few per channel)


@pytest.mark.parametrize("channel", ["hb", "shell"])
@pytest.mark.parametrize("mode", MODES)
def test_the_grader_connects_to_no_socket_a_kernel_links_its_own_to(mode, channel, tmp_path):
    """A kernel binds its sockets in a folder it may write: it put a link to a Unix socket of the grader's machine in
    place of one of its own, then dropped that channel's connection, and the grader, reconnecting by the path from
    outside the sandbox, as its own user, followed the link (a hostile student's, the twenty-second session: 72
    connections in 6 s to a socket it named)."""
    work = tmp_path / "autograded" / "me" / "a1"
    work.mkdir(parents=True)
    host = socket.socket(socket.AF_UNIX)
    host.bind(str(tmp_path / "host.sock"))
    host.listen()
    host.setblocking(False)
    kernel = Kernel(MODES[mode], work)
    try:
        dropped = {"hb": "app.heartbeat.context.destroy(linger=0)",
                   "shell": "app.kernel.shell_stream.socket.unbind(app.kernel.shell_stream.socket.LAST_ENDPOINT)"}
        kernel.client.execute(textwrap.dedent(f"""
            import json, os, time
            from ipykernel.kernelapp import IPKernelApp
            app = IPKernelApp.instance()
            info = json.load(open(app.abs_connection_file))
            path = f"{{info['ip']}}-{{info['{channel}_port']}}"
            os.unlink(path)
            os.symlink({str(tmp_path / "host.sock")!r}, path)
            {dropped[channel]}
            time.sleep(3)
        """))
        time.sleep(5)
        with pytest.raises(BlockingIOError):
            host.accept()
    finally:
        kernel.shutdown()
        host.close()


def resident_bytes() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))


def test_what_a_kernel_sends_and_the_grader_does_not_read_takes_none_of_its_memory(kernel):
    """nbclient never reads the stdin channel, and zmq queued each message sent there, whole, in the grader: 25 of 200
    MB made a grader of 5 GB (a hostile student's, the twenty-first session)."""
    before = resident_bytes()
    sent = """
        import time
        kernel = get_ipython().kernel
        packed = kernel.session.pack({"prompt": "x" * 20_000_000, "password": False})
        for _ in range(20):
            kernel.session.send(kernel.stdin_socket, "input_request", packed, parent=kernel.get_parent("shell"),
                                ident=kernel._parent_ident["shell"])
        time.sleep(2)
        print("sent")
    """
    assert printed_by(kernel.client, textwrap.dedent(sent), timeout=120, run=kernel.run) == "sent\n"
    assert resident_bytes() - before < 100 * 2**20


def test_a_message_that_would_decode_into_millions_of_values_is_dropped_undecoded(kernel):
    """JSON decodes `{}` of 3 bytes into a dict of 64: one message of 120 MB, under the grader's largest message, made
    a grader of 4.4 GB (a hostile student's, the twenty-second session)."""
    before = resident_bytes()
    sent = """
        kernel = get_ipython().kernel
        kernel.session.send(kernel.iopub_socket, "stream", {"name": "stdout", "text": "padded", "pad": [{}] * 3_000_000},
                            parent=kernel.get_parent("shell"), ident=kernel._topic("stream"))
        print("after")
    """
    assert printed_by(kernel.client, textwrap.dedent(sent), timeout=120, run=kernel.run) == "after\n"
    assert resident_bytes() - before < 100 * 2**20


def test_clean_environment_and_its_own_home(kernel):
    names, home, environ_files, processes, cuda = kernel.evaluate(f"""
        import glob, json, os
        leaks = [p for p in ["/proc/self/environ", *glob.glob("/proc/[0-9]*/environ")]
                 if {CANARY!r}.encode() in open(p, "rb").read()]
        commands = [open(p, "rb").read().replace(b"\\0", b" ").decode() for p in glob.glob("/proc/[0-9]*/cmdline")]
        print("RESULT", json.dumps([sorted(os.environ), os.path.expanduser("~"), leaks, commands,
                                    os.environ.get("CUDA_VISIBLE_DEVICES")]))
    """)
    assert CANARY not in names and environ_files == []
    assert cuda == ""  # no GPU in a grading sandbox unless Sandbox.gpus, whatever the grader's machine
    set_by_ipykernel = {"CLICOLOR", "CLICOLOR_FORCE", "FORCE_COLOR", "GIT_PAGER", "MPLBACKEND", "PAGER", "PWD",
                        "PYDEVD_USE_FRAME_EVAL", "TERM"}
    assert set(names) <= set(sandbox.environment({}, gpus=False)) | set(sandbox.PASSED_VARIABLES) | set_by_ipykernel
    assert home == sandbox.HOME
    # only the sandbox's own processes: bwrap's init, the holder of a forked kernel's sandbox, the kernel
    this = Path("/proc/self/cmdline").read_bytes().replace(b"\0", b" ").decode()
    assert len(processes) <= 3 and this not in processes, processes


@pytest.mark.parametrize("mode", MODES)
def test_nothing_it_starts_outlives_it_and_nothing_it_leaves_trips_the_grader(mode, course_folder, tmp_path):
    work = tmp_path / "autograded" / "me" / "a1"
    work.mkdir(parents=True)
    (work / "data").mkdir()
    os.symlink("data", work / "kept")  # there before the kernel: stays
    tag = f"course-sandbox-test-{uuid.uuid4().hex[:8]}"
    kernel = Kernel(MODES[mode], work)
    started = kernel.evaluate(f"""
        import glob, json, os, subprocess, sys, time
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)  # {tag}"], start_new_session=True)
        if os.fork() == 0:  # a daemon of its own
            os.setsid()
            os.execv("/bin/sh", ["sh", "-c", "sleep 300; : {tag}"])
        os.symlink({str(course_folder / "nbgrader_config.py")!r}, "a1.ipynb")
        os.symlink("/", "data/root")
        os.mkfifo("pipe")
        open("tool", "w").close()
        os.chmod("tool", 0o4777)
        os.chmod(".", 0o777)

        def processes():  # the daemon's exec may come after fork() returns here: wait for it
            commands = []
            for path in glob.glob("/proc/[0-9]*/cmdline"):
                try:
                    commands.append(open(path, "rb").read().replace(b"\\0", b" ").decode())
                except OSError:
                    pass
            return commands
        deadline = time.monotonic() + 30
        while sum({tag!r} in command for command in processes()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        print("RESULT", json.dumps(processes()))
    """)
    assert sum(tag in command for command in started) == 2, started  # as the kernel sees them
    assert len(running(tag)) == 2
    kernel.shutdown()
    assert not running(tag)
    left = {str(p.relative_to(work)): p.lstat().st_mode for p in work.rglob("*")}
    assert set(left) == {"data", "kept"}  # what it made was in its copy of the folder
    assert stat.S_ISLNK(left["kept"])
    assert stat.S_IMODE(work.stat().st_mode) == 0o755


@pytest.mark.parametrize("mode", MODES)
def test_a_killed_grader_leaves_no_sandbox_behind(mode, tmp_path):
    """The grader dies without cleaning up (SIGKILL): its sandboxes die with it (--die-with-parent)."""
    work = tmp_path / "autograded" / "me" / "a1"
    work.mkdir(parents=True)
    tag = f"course-sandbox-test-{uuid.uuid4().hex[:8]}"
    spawn = f"import subprocess; subprocess.Popen(['/bin/sh', '-c', 'sleep 300; : {tag}'], start_new_session=True)"
    grader = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        sys.path[:0] = [{str(Path(__file__).parent)!r}, {str(Path(__file__).parents[1])!r}]  # this file, conftest
        from test_sandbox import MODES, Kernel
        kernel = Kernel(MODES[{mode!r}], {str(work)!r})
        kernel.evaluate({spawn + '; print("RESULT 1")'!r})
        print("ready", flush=True)
        time.sleep(300)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert grader.stdout.readline().strip() == "ready"
        assert running(tag)
    finally:
        grader.kill()
        grader.wait()
    deadline = time.monotonic() + 20
    while running(tag) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not running(tag)


def need_cgroups():
    """A cgroup per sandbox, or a failure that says why (tests/system_tools.py)."""
    from course.kernels import cgroups

    if cgroups.problem():
        missing("a cgroup for each sandbox", f"grade as root, or in a delegated cgroup: {cgroups.problem()}",
                "COURSE_SKIP_CGROUPS")


@pytest.fixture
def bounded(request, tmp_path, monkeypatch):
    """A kernel whose sandbox as a whole may hold 1 GiB and 48 processes or threads.

    The group is well above a forked kernel's own resident size, as in a real configuration (6 GiB): the
    pages it shares with the fork server (torch and torch._dynamo, preloaded, about 400 MB on the CUDA
    build) count in its RSS though not in its group, and the OOM killer picks the process with the largest
    RSS, which in a group that small would be the kernel instead of the process that filled the group."""
    need_cgroups()
    bounds = Config()
    bounds.Sandbox.memory_bytes, bounds.Sandbox.processes = 2**30, 48
    work = tmp_path / "autograded" / "me" / "a1"
    work.mkdir(parents=True)
    started = Kernel(MODES[request.param], work, bounds)
    yield started
    started.shutdown()


@pytest.mark.parametrize("bounded", MODES, indirect=True)
def test_a_kernel_is_bounded_as_a_whole(bounded):
    """Each process alone passes its own limits; together they meet the sandbox's (its cgroup)."""
    shared, threads = bounded.evaluate("""
        import json, subprocess, sys, threading, time
        # a shared anonymous mapping (RLIMIT_DATA does not count it) in a child, larger than the group
        child = subprocess.run([sys.executable, "-c", "import mmap; m = mmap.mmap(-1, 1536 * 2**20); "
                                "[m.__setitem__(i, 1) for i in range(0, len(m), 4096)]"])
        stop, started = threading.Event(), 0
        try:
            for _ in range(200):
                threading.Thread(target=stop.wait, daemon=True).start()
                started += 1
        except RuntimeError:
            pass
        stop.set()
        print("RESULT", json.dumps([child.returncode, started]))
    """)
    assert shared == -9  # the OOM killer, in that group only
    assert threads < 48


def test_a_sandboxs_group_is_gone_with_it(tmp_path):
    need_cgroups()
    box = sandbox.KernelSandbox(tmp_path)
    box.start(["/bin/sleep", "30"], sandbox.environment(gpus=False))
    folders = list(box.group.folders)
    assert box.first_pid in box.group.pids() and all(f.exists() for f in folders)
    box.close()
    assert not any(f.exists() for f in folders)


def test_where_groups_hold_the_grader_says_so_once_and_which(tmp_path, monkeypatch, caplog):
    need_cgroups()
    monkeypatch.setattr(sandbox, "_said_which_bound", [])
    with caplog.at_level(logging.INFO):
        for _ in range(2):
            box = sandbox.KernelSandbox(tmp_path, log=logging.getLogger("test"))
            box.start(["/bin/sleep", "30"], sandbox.environment(gpus=False))  # still running when the sandbox looks for it
            box.close()
    assert caplog.text.count(fingerprint("sandbox_group").en) == 1 and fingerprint("sandbox_group").zh in caplog.text
    from course.kernels import cgroups

    version, parents = cgroups._places()
    assert f"cgroup v{version}" in caplog.text and all(str(parent) in caplog.text for parent in parents)
    assert fingerprint("sandbox_no_group").en not in caplog.text


def test_the_groups_of_dead_graders_are_removed(tmp_path):
    from course.kernels import cgroups

    need_cgroups()
    gone = subprocess.Popen(["/bin/true"])
    gone.wait()  # a grader that was killed before it could remove its groups
    _, parents = cgroups._places()
    stale = [parent / f"{cgroups.PREFIX}{gone.pid}-1" for parent in parents]
    for folder in stale:
        folder.mkdir()
    sandbox.KernelSandbox(tmp_path).close()  # every new sandbox clears what dead graders left
    assert not any(folder.exists() for folder in stale)


def test_without_cgroups_grading_goes_on_and_says_what_holds(tmp_path, monkeypatch, caplog):
    from course.kernels import cgroups

    monkeypatch.setattr(cgroups, "_places", lambda: "no cgroup here (test)")
    monkeypatch.setattr(sandbox, "_said_which_bound", [])
    box = sandbox.KernelSandbox(tmp_path, log=logging.getLogger("test"))
    with caplog.at_level(logging.WARNING):
        box.start(["/bin/sh", "-c", "echo ran; sleep 30"], sandbox.environment(gpus=False))
    ran = printed(box)
    box.close()
    assert box.group is None and ran == "ran"
    assert fingerprint("sandbox_no_group").en in caplog.text and fingerprint("sandbox_no_group").zh in caplog.text
    assert "no cgroup here (test)" in caplog.text


def printed(box, timeout=10) -> str:
    """What a sandbox's first process printed, once it printed something (its output is read by a thread of the
    sandbox's; what it writes in its folder stays in the sandbox)."""
    deadline = time.monotonic() + timeout
    while not box.output_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    return box.output_text()


def running(tag) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and tag.encode() in (entry / "cmdline").read_bytes():
                found.append(entry.name)
        except OSError:
            pass
    return found


@pytest.mark.parametrize("folder", ["course", "temporary folder", "root"])
def test_a_folder_that_holds_the_course_or_other_sandboxes_is_never_a_kernel_folder(course_folder, folder):
    """A kernel may write its folder: never one that holds a course, the runtime, or the temporary
    folder where every sandbox keeps its sockets and connection file."""
    path = {"course": course_folder, "temporary folder": Path(tempfile.gettempdir()), "root": Path("/")}[folder]
    with pytest.raises(sandbox.SandboxError) as refused:
        sandbox.KernelSandbox(path)
    assert fingerprint("sandbox_course_folder").en in str(refused.value)
    assert fingerprint("sandbox_course_folder").zh in str(refused.value)


def test_without_bwrap_grading_refuses_and_says_what_to_do(tmp_path):
    elsewhere = Config()
    elsewhere.Sandbox.bwrap = str(tmp_path / "no-bwrap")
    assert "not installed" in sandbox.problem(elsewhere)
    with pytest.raises(sandbox.SandboxError) as refused:
        sandbox.require(elsewhere)
    shown = str(refused.value)
    assert "apt-get install bubblewrap" in shown and "apparmor_restrict_unprivileged_userns" in shown
    assert fingerprint("sandbox_unavailable").zh in shown


@pytest.fixture(scope="module")
def tiny_course(tmp_path_factory):
    """A course folder (this repository's nbgrader_config.py) with an empty assignment and a notebook
    whose one test cell passes only inside the sandbox."""
    root = tmp_path_factory.mktemp("tiny")
    (root / "nbgrader_config.py").write_text((classroom.ROOT / "nbgrader_config.py").read_text("utf-8"))
    (root / "source" / "a1").mkdir(parents=True)
    (root / "check").mkdir()
    test = nbformat.v4.new_code_cell(
        "import os\nassert os.getuid() == 65534 and not os.path.exists('../nbgrader_config.py'), 'not sandboxed'",
        metadata={"nbgrader": {"grade": True, "grade_id": "sandboxed", "locked": True, "points": 1,
                               "schema_version": 3, "solution": False, "task": False}})
    nbformat.write(nbformat.v4.new_notebook(cells=[test], metadata={"kernelspec": {
        "name": "python3", "display_name": "Python 3", "language": "python"}}), root / "check" / "check.ipynb")
    return root


@pytest.mark.parametrize("how", ["sandboxed", "sandbox turned off", "no bwrap"])
def test_nbgrader_validate_from_the_course_folder_is_sandboxed(tiny_course, how):
    env = {**os.environ, sandbox.NO_SANDBOX_VARIABLE: "1" if how == "sandbox turned off" else "0"}
    if how == "no bwrap":
        env[sandbox.BWRAP_VARIABLE] = "/nonexistent/bwrap"
    done = subprocess.run([str(BIN / "nbgrader"), "validate", "check/check.ipynb"],
                          cwd=tiny_course, env=env, capture_output=True, text=True, timeout=300)
    shown = done.stdout + done.stderr
    if how == "sandboxed":
        assert "Success! Your notebook passes all the tests." in shown, shown
    elif how == "sandbox turned off":  # the same check fails outside the sandbox, and the log says so
        assert "VALIDATION FAILED" in shown and fingerprint("sandbox_disabled").en in shown
    else:  # no kernel runs: the error says what to install
        assert "Success!" not in shown and fingerprint("sandbox_unavailable").en in shown
        assert fingerprint("sandbox_unavailable").zh in shown


def test_course_grade_refuses_without_a_sandbox_unless_told(tiny_course, course):
    env = with_bin_on_path({**os.environ, sandbox.BWRAP_VARIABLE: "/nonexistent/bwrap"})
    refused = course("grade", "a1", "--root", tiny_course, env=env, timeout=300)
    assert refused.returncode == 2 and fingerprint("sandbox_unavailable").en in refused.stdout
    assert fingerprint("sandbox_unavailable").zh in refused.stdout
    allowed = course("grade", "a1", "--root", tiny_course, "--no-sandbox", env=env, timeout=300)
    assert fingerprint("sandbox_disabled").en in allowed.stdout and fingerprint("sandbox_disabled").zh in allowed.stdout
    # past the sandbox, grading goes on to its next check: this course never ran `course setup`
    assert fingerprint("sandbox_unavailable").en not in allowed.stdout
    assert allowed.returncode == 2 and fingerprint("not_registered").en in allowed.stdout, allowed.stdout + allowed.stderr


def test_private_folders_of_dead_graders_are_removed(tmp_path):
    """A grading process killed before it cleaned up leaves its sandboxes' socket folders: the next
    sandbox removes them (only those whose grading process is gone)."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    stale = Path(tempfile.gettempdir()) / f"{sandbox.PRIVATE_PREFIX}{gone.pid}-test"
    alive = Path(tempfile.gettempdir()) / f"{sandbox.PRIVATE_PREFIX}{os.getpid()}-test"
    stale.mkdir(), alive.mkdir()
    try:
        box = sandbox.KernelSandbox(tmp_path)
        box.close()
        assert not stale.exists() and alive.exists() and not box.private.exists()
    finally:
        shutil.rmtree(stale, ignore_errors=True), shutil.rmtree(alive, ignore_errors=True)


def test_no_process_may_move_or_fill_the_folders_around_its_mounts_in_tmp(tmp_path, monkeypatch):
    """A fresh clone's runtime lives in /tmp, where the sandbox's processes may write: a student's program renamed
    the folder around the bound runtime, made one of its own in its place, and a judge imported its code. The
    folders around the mounts are read-only mount points (sandbox._folders_around_mounts); the rest of /tmp is the
    sandbox's own."""
    if Path(tmp_path).parts[:2] != ("/", "tmp"):
        pytest.skip("this grader's temporary folder is not /tmp")
    runtime = tmp_path / "clone" / "runtime"  # bound read-only, as a fresh clone's environment is
    runtime.mkdir(parents=True)
    work = tmp_path / "work"
    work.mkdir()
    real = sandbox.runtime_paths()
    monkeypatch.setattr(sandbox, "runtime_paths", lambda: [*real, str(runtime)])
    top, middle = Path("/tmp", tmp_path.parts[2]), runtime.parent
    attempts = {"rename the folder around the mounts": f"os.rename({str(top)!r}, '/tmp/moved')",
                "rename a folder inside it": f"os.rename({str(middle)!r}, {str(middle)!r} + '.moved')",
                "add a file beside the mounts": f"open({str(middle / 'planted.py')!r}, 'w').close()",
                "add a file to the runtime": f"open({str(runtime / 'planted.py')!r}, 'w').close()",
                "write elsewhere in /tmp": "open('/tmp/mine', 'w').close()"}
    script = "import json, os\ndone = {}\n" + "".join(
        f"try:\n    {code}\n    done[{what!r}] = True\nexcept OSError:\n    done[{what!r}] = False\n"
        for what, code in attempts.items()) + "print(json.dumps(done))\n"
    box = sandbox.KernelSandbox(work)
    try:
        box.start([sys.executable, "-c", script], sandbox.environment(gpus=False)).wait(timeout=60)
        done = json.loads(printed(box))
    finally:
        box.close()
    assert [what for what, written in done.items() if written] == ["write elsewhere in /tmp"]
