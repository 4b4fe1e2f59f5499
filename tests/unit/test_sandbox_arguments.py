"""The bubblewrap command line of a sandbox (course/kernels/sandbox.py: KernelSandbox.arguments), built here
without bwrap: what the kernel may see, what it may write, and what of the grader's environment it gets.
tests/system/test_sandbox.py starts real sandboxes; this file pins the policy itself, option by option, so
that a change to it fails fast (and `make mutation` can judge the builder)."""
import fnmatch
import os
import sys
from pathlib import Path

import pytest

from course.kernels import sandbox

# how many operands each bwrap option the builder uses takes (bwrap(1))
OPERANDS = {"--unshare-all": 0, "--unshare-user": 0, "--disable-userns": 0, "--die-with-parent": 0,
            "--new-session": 0, "--clearenv": 0, "--uid": 1, "--gid": 1, "--cap-drop": 1, "--hostname": 1,
            "--info-fd": 1, "--seccomp": 1, "--size": 1, "--tmpfs": 1, "--dir": 1, "--proc": 1, "--dev": 1,
            "--remount-ro": 1, "--chdir": 1, "--symlink": 2, "--ro-bind": 2, "--ro-bind-try": 2, "--bind": 2,
            "--dev-bind-try": 2, "--setenv": 2}
BWRAP = "/opt/bubblewrap/bin/bwrap"
PYTHON = os.path.realpath(sys.executable)  # inside the runtime paths
MOUNTS = ("--symlink", "--ro-bind", "--ro-bind-try", "--bind", "--dev-bind-try", "--tmpfs", "--dir", "--proc", "--dev")


def options(args) -> tuple[list[tuple], list[str]]:
    """bwrap's options as (option, *operands), in order, and the command after `--`."""
    assert args[0] == BWRAP
    found, i = [], 1
    while args[i] != "--":
        assert args[i] in OPERANDS, f"an option this test does not know: {args[i]}"
        n = OPERANDS[args[i]]
        found.append(tuple(args[i:i + 1 + n]))
        i += 1 + n
    return found, args[i + 1:]


@pytest.fixture
def box(tmp_path, monkeypatch):
    """A KernelSandbox's folders, without starting one (its __init__ needs bwrap and clears stale sandboxes)."""
    made = object.__new__(sandbox.KernelSandbox)
    made.settings = sandbox.Sandbox(bwrap=BWRAP)  # the defaults of every bound, with this bwrap
    made.work_dir = str(tmp_path / "course")
    made.private = tmp_path / "private"
    made.run_dir = made.private / "run"
    made.connection_file = str(made.private / "kernel.json")
    made.private.mkdir()
    return made


def built(box, env=None, command=(PYTHON, "-m", "ipykernel"), seccomp_fd=None) -> tuple[list[tuple], list[str]]:
    return options(box.arguments(env or {}, list(command), 7, seccomp_fd))


def writable(found) -> list[tuple]:
    """The mounts a sandbox's processes may write, in order: not those remounted read-only."""
    return [o for o in found if o[0] in ("--bind", "--tmpfs", "--dir") and ("--remount-ro", o[-1]) not in found]


@pytest.fixture
def no_gpu(monkeypatch):
    """A machine without NVIDIA devices, whatever this one has."""
    real = sandbox.Path
    monkeypatch.setattr(sandbox, "Path", lambda p: type("Dev", (), {"glob": lambda self, _: []})()
                        if p == "/dev" else real(p))


def test_the_sandbox_shares_nothing_and_keeps_no_right(box):
    found, _ = built(box)
    for isolation in [("--unshare-all",), ("--unshare-user",), ("--disable-userns",), ("--die-with-parent",),
                      ("--new-session",), ("--clearenv",), ("--cap-drop", "ALL"), ("--uid", "65534"),
                      ("--gid", "65534"), ("--hostname", "grading"), ("--info-fd", "7")]:
        assert isolation in found, isolation
    assert [o for o in found if o[0] == "--cap-drop"] == [("--cap-drop", "ALL")]


def test_the_kernel_writes_only_its_working_folder_and_its_own_small_filesystems(box):
    """Everything is bound read-only, then / remounted read-only: what is writable is the tmpfs's of the sandbox's
    own memory, its working folder among them (a copy of the submission's folder: nothing of the grader's disk), and
    the devices bound for CUDA."""
    found, _ = built(box)
    assert writable(found) == [("--tmpfs", "/tmp"), ("--dir", sandbox.HOME), ("--tmpfs", "/dev/shm"),
                        ("--tmpfs", str(box.run_dir)), ("--tmpfs", box.work_dir)]
    assert found.index(("--remount-ro", "/")) > max(i for i, o in enumerate(found) if o[0] in MOUNTS)
    assert found.index(("--remount-ro", "/dev")) > found.index(("--tmpfs", "/dev/shm"))
    assert ("--chdir", box.work_dir) in found


def test_a_verdicts_sandbox_keeps_its_judges_and_its_job_outside_tmp_and_off_the_graders_disk(box):
    """The student's program may write anywhere in /tmp (autograder/verdict.py: judges_tmp): the judges get a sized
    tmpfs of their own beside it, and the verdict works in a sized tmpfs of its own; no folder of the grader's is bound
    (without Landlock, a program fallocated 1 GiB in the job's folder, then bound from the grader's disk). A kernel's
    sandbox has no judges' tmpfs (the test above)."""
    box.judges, box.work_dir = True, None
    found, _ = built(box)
    assert writable(found) == [("--tmpfs", "/tmp"), ("--dir", sandbox.HOME), ("--tmpfs", sandbox.JUDGES_TMP),
                        ("--tmpfs", "/dev/shm"), ("--tmpfs", str(box.run_dir)), ("--tmpfs", sandbox.JOB_FOLDER)]
    assert not [o for o in found if o[0] == "--bind"]
    assert ("--chdir", sandbox.JOB_FOLDER) in found
    sizes = {found[i + 1][1]: int(found[i][1]) for i, o in enumerate(found) if o[0] == "--size"}
    assert sizes[sandbox.JUDGES_TMP] == box.settings.tmp_bytes
    assert sizes[sandbox.JOB_FOLDER] == box.settings.folder_bytes
    assert not any(folder.startswith("/tmp/") for folder in (sandbox.JUDGES_TMP, sandbox.JOB_FOLDER))


def test_a_folder_in_tmp_around_a_mount_is_a_small_read_only_tmpfs(box, monkeypatch):
    """A runtime in /tmp (a fresh clone's environment and `autograder/`): a student's program that may write anywhere
    in /tmp renamed the folder around its mounts and put a runtime of its own in their place, which a judge then
    imported. That folder is a mount point now, read-only once the mounts inside it are made; /tmp/x itself, or the
    sandbox's home, is none."""
    runtime = ["/tmp/clone/.venv", "/tmp/clone/autograder", "/tmp/alone"]
    monkeypatch.setattr(sandbox, "runtime_paths", lambda: runtime)
    found, _ = built(box, command=("/tmp/clone/.venv/bin/python", "-m", "ipykernel"))
    assert ("--tmpfs", "/tmp/clone") in found and ("--tmpfs", "/tmp/alone") not in found
    made = found.index(("--tmpfs", "/tmp/clone"))
    binds = [i for i, o in enumerate(found) if o[0] == "--ro-bind" and o[1].startswith("/tmp/clone/")]
    assert found.index(("--tmpfs", "/tmp")) < made < min(binds) and max(binds) < found.index(("--remount-ro", "/tmp/clone"))
    assert found[made - 1] == ("--size", str(sandbox.FOLDS_BYTES))
    assert ("--tmpfs", "/tmp/clone") not in writable(found)
    assert sandbox._folders_around_mounts([f"{sandbox.HOME}/x", "/tmp/y"]) == []


@pytest.mark.parametrize("sizes", [{}, {"tmp_bytes": 3 * 2**20, "shm_bytes": 5 * 2**20, "folder_bytes": 7 * 2**20}],
                         ids=["defaults", "configured"])
def test_each_tmpfs_is_sized(box, sizes):
    """As the Sandbox settings say (c.Sandbox.tmp_bytes / shm_bytes / folder_bytes in nbgrader_config.py)."""
    box.settings = sandbox.Sandbox(bwrap=BWRAP, **sizes)
    found, _ = built(box)
    sizes = {found[i + 1][1]: int(found[i][1]) for i, o in enumerate(found) if o[0] == "--size"}
    own = {"/tmp": box.settings.tmp_bytes, "/dev/shm": box.settings.shm_bytes, str(box.run_dir): sandbox.SOCKETS_BYTES,
           box.work_dir: box.settings.folder_bytes}
    assert {path: size for path, size in sizes.items() if path in own} == own
    # the rest: the folders in /tmp around the mounts (the test's own folders, a runtime in a fresh clone), read-only
    assert all(size == sandbox.FOLDS_BYTES and ("--remount-ro", path) in found
               for path, size in sizes.items() if path not in own)
    assert all(found[i + 1][0] == "--tmpfs" for i, o in enumerate(found) if o[0] == "--size")
    assert found.index(("--tmpfs", "/tmp")) < min(i for i, o in enumerate(found) if o[0] == "--ro-bind" and
                                                 o[1] in sandbox.runtime_paths())  # the runtime may live in /tmp


def test_the_host_system_is_read_only_and_the_users_are_the_sandboxs_own(box):
    found, _ = built(box)
    for path in sandbox.HOST_DIRS:
        if os.path.islink(path):
            assert ("--symlink", os.readlink(path), path) in found
        elif os.path.isdir(path):
            assert ("--ro-bind", path, path) in found
        else:
            assert not [o for o in found if path in o[1:]]
    for path in sandbox.HOST_ETC:
        assert ("--ro-bind-try", path, path) in found
    for name in ("passwd", "group", "hosts"):
        assert ("--ro-bind", str(box.private / "etc" / name), f"/etc/{name}") in found
    for path in sandbox.runtime_paths():
        assert ("--ro-bind", path, path) in found
    assert ("--proc", "/proc") in found and ("--dev", "/dev") in found


def test_a_launcher_outside_the_runtime_is_bound_read_only_and_one_inside_is_not(box, tmp_path):
    launcher = tmp_path / "launch-kernel"
    launcher.write_text("#!/bin/sh\n")
    found, command = built(box, command=(str(launcher), "--flag"))
    assert ("--ro-bind", str(launcher), str(launcher)) in found and command == [str(launcher), "--flag"]
    found, command = built(box)
    assert ("--ro-bind", PYTHON, PYTHON) not in found and command == [PYTHON, "-m", "ipykernel"]


def test_the_connection_file_is_bound_read_only_once_it_exists(box):
    found, _ = built(box)
    assert not [o for o in found if box.connection_file in o]
    Path(box.connection_file).write_text("{}")
    found, _ = built(box)
    assert ("--ro-bind", box.connection_file, box.connection_file) in found
    assert found.index(("--ro-bind", box.connection_file, box.connection_file)) < found.index(("--remount-ro", "/"))


def test_the_seccomp_filter_is_passed_when_given(box):
    assert not [o for o in built(box)[0] if o[0] == "--seccomp"]
    assert [o for o in built(box, seccomp_fd=9)[0] if o[0] == "--seccomp"] == [("--seccomp", "9")]


def test_the_kernel_gets_exactly_the_environment_given(box):
    env = {"PATH": "/usr/bin", "LANG": "C.UTF-8", "HOME": sandbox.HOME}
    found, _ = built(box, env=env)
    assert [o for o in found if o[0] == "--setenv"] == [("--setenv", k, v) for k, v in env.items()]
    assert ("--clearenv",) in found


@pytest.fixture
def nvidia_gpu(monkeypatch):
    """A machine with NVIDIA device files, whatever this one has: /dev/nvidiactl among them exists."""
    in_dev = ["/dev/null", "/dev/nvidia-caps", "/dev/nvidiactl", "/dev/tty"]
    existing = {"/dev/nvidiactl"}  # the second of the two: any of them counts, not only the first
    real, exists = sandbox.Path, os.path.exists

    class Dev:
        def glob(self, pattern):
            return [real(d) for d in in_dev if fnmatch.fnmatchcase(os.path.basename(d), pattern)]

    monkeypatch.setattr(sandbox, "Path", lambda p: Dev() if p == "/dev" else real(p))
    monkeypatch.setattr(os.path, "exists", lambda p: p in existing or (not p.startswith("/dev/nvidia") and exists(p)))


@pytest.mark.parametrize("machine", ["no_gpu", "nvidia_gpu"])
def test_by_default_the_kernel_sees_no_gpu_and_only_the_cpus_of_sys(box, machine, request):
    """Sandbox.gpus off (the default): a GPU grader's sandbox is a CPU grader's, so that a notebook cannot tell
    them apart (attacks-machines.toml, pick-device-answers-wrong-on-a-grader-with-a-gpu) and no kernel holds GPU
    memory that no cgroup bounds."""
    request.getfixturevalue(machine)
    found, _ = built(box)
    assert ("--ro-bind-try", "/sys/devices/system/cpu", "/sys/devices/system/cpu") in found
    assert ("--ro-bind-try", "/sys", "/sys") not in found
    assert [o for o in found if o[0] == "--dev-bind-try"] == []


def test_with_gpus_asked_for_and_nvidia_devices_they_and_sys_are_bound_for_cuda(box, nvidia_gpu):
    """Every /dev/nvidia* name is bound if there (--dev-bind-try); one that exists, whichever, opens /sys."""
    box.settings.gpus = True
    found, _ = built(box)
    assert [o for o in found if o[0] == "--dev-bind-try"] == [
        ("--dev-bind-try", d, d) for d in ("/dev/nvidia-caps", "/dev/nvidiactl", "/dev/dri")]
    assert ("--ro-bind-try", "/sys", "/sys") in found
    assert ("--ro-bind-try", "/sys/devices/system/cpu", "/sys/devices/system/cpu") not in found


def test_with_gpus_asked_for_on_a_machine_without_nvidia_devices_only_the_cpus_of_sys(box, no_gpu):
    box.settings.gpus = True
    found, _ = built(box)
    assert ("--ro-bind-try", "/sys", "/sys") not in found
    assert [o for o in found if o[0] == "--dev-bind-try"] == [("--dev-bind-try", "/dev/dri", "/dev/dri")]


GRADERS = {"COURSE_REQUIRE_CUDA": "2", "CUDA_VISIBLE_DEVICES": "1", "LANG": "C.UTF-8", "SECRET": "grader's"}


@pytest.mark.parametrize("gpus, cuda", [(False, {"CUDA_VISIBLE_DEVICES": ""}),
                                        (True, {"COURSE_REQUIRE_CUDA": "2", "CUDA_VISIBLE_DEVICES": "1"})])
def test_a_kernel_without_the_gpus_is_shown_no_cuda_device_and_asked_for_none(gpus, cuda):
    """Without the GPUs bound, the GPU job's COURSE_REQUIRE_CUDA would fail every kernel's checks, and PyTorch would
    try the driver, which finds no device file; with them, the grader's choice of GPU and requirement pass."""
    env = sandbox.environment(GRADERS, gpus=gpus)
    assert {k: v for k, v in env.items() if "CUDA" in k} == cuda
    assert "SECRET" not in env and env["LANG"] == "C.UTF-8"
