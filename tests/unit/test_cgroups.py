"""The cgroup v2 path of course/kernels/cgroups.py, against a cgroup file system kept in a temporary folder.

This machine (and CI) has cgroup v1 with v2 beside it without controllers, so tests/system/test_sandbox.py can
only run the v1 path for real. Here `/proc/self/cgroup` and the mount table name a v2 hierarchy in a
folder, and the folder acts as cgroupfs does: a new group gets its interface files; a write to a
`cgroup.procs` moves that process (it leaves every other group's file); a group without processes or
children can be removed, interface files and all; the controllers a group hands
down are those its parent hands down, and only from a group that holds no process ("no internal
processes"). What is checked is the protocol: the grader's own delegated group gives its processes to
a leaf, enables `memory` and `pids` for its children, and every sandbox's group gets its limits.
"""
import os
import shutil
import time
from pathlib import Path

import pytest

from course.kernels import cgroups


CONTROLLER_FILES = {"memory": ["memory.max", "memory.swap.max"], "pids": ["pids.max"]}


class FakeCgroupFs:
    def __init__(self, root: Path, scope: str, pids):
        self.root, self.scope = root, root / scope
        self.scope.mkdir(parents=True)
        for group in [self.root, *self.scope.relative_to(root).parents[:-1][::-1], self.scope]:
            group = root / group if group != self.root else group
            (group / "cgroup.controllers").write_bytes(b"cpu memory pids\n")
            (group / "cgroup.subtree_control").write_bytes(b"" if group == self.scope else b"cpu memory pids")
            (group / "cgroup.procs").write_bytes(b"")
        (self.scope / "cgroup.procs").write_bytes("".join(f"{pid}\n" for pid in pids).encode())

    def hand_down(self, group: Path, controllers: str):
        """What `group` gives its children, and so what each child has (set up by the machine, not the grader)."""
        (group / "cgroup.subtree_control").write_bytes(controllers.encode())
        for child in (p for p in group.iterdir() if p.is_dir()):
            (child / "cgroup.controllers").write_bytes(controllers.encode())

    def inside(self, path) -> bool:
        return Path(path).is_relative_to(self.root)

    def made(self, folder: Path):
        """What the kernel puts in a new group: the files of the controllers its parent hands down."""
        handed_down = (folder.parent / "cgroup.subtree_control").read_text().split()
        (folder / "cgroup.controllers").write_bytes(" ".join(handed_down).encode())
        (folder / "cgroup.subtree_control").write_bytes(b"")
        (folder / "cgroup.procs").write_bytes(b"")
        for controller in handed_down:
            for name in CONTROLLER_FILES.get(controller, []):
                (folder / name).write_bytes(b"max")

    def removed(self, folder: Path):
        """A group without processes or children goes, with its interface files."""
        if any(p.is_dir() for p in folder.iterdir()) or (folder / "cgroup.procs").read_text().strip():
            raise OSError(16, "Device or resource busy")
        shutil.rmtree(folder)

    def written(self, path: Path, text: str):
        if path.name == "cgroup.procs":  # moving a process: it leaves the group it was in
            for procs in self.root.rglob("cgroup.procs"):
                kept = [pid for pid in procs.read_text().split() if pid != text.strip()]
                procs.write_bytes("".join(f"{pid}\n" for pid in kept).encode())
            path.write_bytes((path.read_text() + text.strip() + "\n").encode())
        elif path.name == "cgroup.subtree_control":
            if path.parent != self.root and path.parent.joinpath("cgroup.procs").read_text().strip():
                raise OSError(16, "Device or resource busy")  # no internal processes (the root is exempt)
            available = path.parent.joinpath("cgroup.controllers").read_text().split()
            enabled = [word[1:] for word in text.split() if word.startswith("+")]
            if not all(c in available for c in enabled):
                raise OSError(2, "No such file or directory")
            path.write_bytes(" ".join(enabled).encode())
        else:
            path.write_bytes(text.encode())


@pytest.fixture
def cgroup_v2(tmp_path, monkeypatch):
    fs = FakeCgroupFs(tmp_path / "cgroup", "user.slice/grader.scope", pids=[os.getpid(), 4242])
    mkdir, rmdir, write_text = Path.mkdir, Path.rmdir, Path.write_text

    def fake_mkdir(self, *args, **kwargs):
        existed = self.exists()
        mkdir(self, *args, **kwargs)
        if fs.inside(self) and not existed:
            fs.made(self)

    def fake_write_text(self, text, *args, **kwargs):
        return fs.written(self, text) if fs.inside(self) else write_text(self, text, *args, **kwargs)

    def fake_rmdir(self):
        return fs.removed(self) if fs.inside(self) else rmdir(self)

    monkeypatch.setattr(Path, "mkdir", fake_mkdir)
    monkeypatch.setattr(Path, "rmdir", fake_rmdir)
    monkeypatch.setattr(Path, "write_text", fake_write_text)
    monkeypatch.setattr(cgroups, "_own_cgroups", lambda: {"": "/user.slice/grader.scope"})
    monkeypatch.setattr(cgroups, "_mounts", lambda: {"cgroup2": str(fs.root)})
    cgroups._places.cache_clear()
    yield fs
    cgroups._places.cache_clear()


def test_a_delegated_group_hands_its_processes_to_a_leaf_and_its_controllers_to_the_sandboxes(cgroup_v2):
    assert cgroups.problem() is None
    scope = cgroup_v2.scope
    assert (scope / "course-grader" / "cgroup.procs").read_text().split() == [str(os.getpid()), "4242"]
    assert (scope / "cgroup.procs").read_text().strip() == ""
    assert (scope / "cgroup.subtree_control").read_text().split() == ["memory", "pids"]
    assert (scope / "course-sandboxes" / "cgroup.subtree_control").read_text().split() == ["memory", "pids"]


def test_each_sandbox_group_gets_its_limits_and_is_removed(cgroup_v2):
    group = cgroups.create(memory_bytes=1536 * 2**20, max_processes=256)
    assert group is not None and group.version == 2
    (folder,) = group.folders
    assert folder.parent == cgroup_v2.scope / "course-sandboxes" and folder.name.startswith(cgroups.PREFIX)
    assert (folder / "memory.max").read_text() == str(1536 * 2**20)
    assert (folder / "memory.swap.max").read_text() == "0"
    assert (folder / "pids.max").read_text() == "256"
    assert group.procs_files == [str(folder / "cgroup.procs")]
    group.remove(timeout=1)
    assert not folder.exists()


def test_a_group_without_the_controllers_is_no_place_for_sandboxes(cgroup_v2):
    for group in [cgroup_v2.root, cgroup_v2.scope.parent]:
        cgroup_v2.hand_down(group, "cpu io")  # memory and pids given to no group on the way down
    cgroups._places.cache_clear()
    assert "has no memory/pids controller" in cgroups.problem()
    assert "no group above it hands down memory/pids" in cgroups.problem()
    assert cgroups.create(memory_bytes=2**30, max_processes=64) is None


def test_as_root_a_subtree_goes_where_the_controllers_are_not_only_under_the_own_groups_parent(cgroup_v2):
    """The GPU machine of issue 42: the grader's own group is given only `memory` by its parent, the root hands
    down both. The grader makes its own subtree under the root, and moves no process."""
    cgroup_v2.hand_down(cgroup_v2.scope.parent, "memory")
    cgroups._places.cache_clear()
    assert cgroups.problem() is None
    group = cgroups.create(memory_bytes=2**30, max_processes=64)
    (folder,) = group.folders
    assert folder.parent == cgroup_v2.root / "course-sandboxes"
    assert (folder / "memory.max").read_text() == str(2**30) and (folder / "pids.max").read_text() == "64"
    assert (cgroup_v2.scope / "cgroup.procs").read_text().split() == [str(os.getpid()), "4242"]  # nobody moved
    assert not (cgroup_v2.scope / "course-grader").exists()
    holds, line = cgroups.said(2**30, 64)
    assert holds and f"cgroup v2 group of its own under {cgroup_v2.root / 'course-sandboxes'}" in line


def test_a_subtree_above_that_this_user_may_not_write_is_said(cgroup_v2, monkeypatch):
    cgroup_v2.hand_down(cgroup_v2.scope.parent, "memory")
    writable = os.access
    monkeypatch.setattr(cgroups.os, "access", lambda path, mode: writable(path, mode) and Path(path) != cgroup_v2.root)
    cgroups._places.cache_clear()
    assert f"{cgroup_v2.root} hands down memory/pids but is not writable by this user" in cgroups.problem()
    holds, line = cgroups.said(2**30, 64)
    assert not holds and "has no pids controller" in line


REAL_V2 = next((line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()
                if line.split(" - ")[1].startswith("cgroup2 ")), None)


def real_v2_reason() -> str | None:
    """Why the test on a real cgroup v2 hierarchy cannot run here, or None when it can."""
    if REAL_V2 is None:
        return "this machine has no cgroup v2 hierarchy"
    handed_down = (Path(REAL_V2) / "cgroup.subtree_control").read_text().split()
    if not all(c in handed_down for c in cgroups.CONTROLLERS):
        return (f"the cgroup v2 hierarchy at {REAL_V2} has no memory/pids controllers (a hybrid machine: they are "
                f"cgroup v1's here, tested by tests/system/test_sandbox.py)")
    if cgroups.problem():
        return f"no group can be made on it: {cgroups.problem()}"
    return None


@pytest.mark.skipif(real_v2_reason() is not None, reason=str(real_v2_reason()))
def test_on_a_real_cgroup_v2_hierarchy_a_group_bounds_what_joins_it(tmp_path):
    """Where the machine has a cgroup v2 hierarchy with the controllers (a container or VM with cgroup v2, graded as
    root or in a delegated scope): a real group, its limits, a real process in it, removed after."""
    import subprocess

    version, _ = cgroups._places()
    group = cgroups.create(memory_bytes=256 * 2**20, max_processes=16)
    try:
        assert version == 2 and group is not None
        (folder,) = group.folders
        assert (folder / "memory.max").read_text().strip() == str(256 * 2**20)
        assert (folder / "pids.max").read_text().strip() == "16"
        child = subprocess.Popen(cgroups.wrap(["/bin/sh", "-c", "for i in $(seq 40); do sleep 30 & done; wait"], group),
                                 stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while len(group.pids()) < 16 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(group.pids()) <= 16  # fork fails past pids.max
    finally:
        group.remove()
    assert not folder.exists()
    child.wait(10)
