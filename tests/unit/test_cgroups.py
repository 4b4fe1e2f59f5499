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
from pathlib import Path

import pytest

from course.kernels import cgroups


CONTROLLER_FILES = {"memory": ["memory.max", "memory.swap.max"], "pids": ["pids.max"]}


class FakeCgroupFs:
    def __init__(self, root: Path, scope: str, pids):
        self.root, self.scope = root, root / scope
        self.scope.mkdir(parents=True)
        (self.scope / "cgroup.controllers").write_bytes(b"cpu memory pids\n")
        (self.scope / "cgroup.subtree_control").write_bytes(b"")
        (self.scope / "cgroup.procs").write_bytes("".join(f"{pid}\n" for pid in pids).encode())

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
            if path.parent.joinpath("cgroup.procs").read_text().strip():
                raise OSError(16, "Device or resource busy")  # no internal processes
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
    (cgroup_v2.scope / "cgroup.controllers").write_bytes(b"cpu io")  # memory and pids not delegated
    cgroups._places.cache_clear()
    assert "has no memory/pids controller" in cgroups.problem()
    assert cgroups.create(memory_bytes=2**30, max_processes=64) is None
