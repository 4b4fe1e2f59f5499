"""A sandbox bounded as a whole: all its processes in one cgroup, with one memory limit and one process count.

`RLIMIT_DATA` and `RLIMIT_CPU` bound each process of a kernel alone: three forked children, a shared
anonymous mapping (which `RLIMIT_DATA` does not count) or 3,000 threads each pass them, and one student
can push the machine into the OOM killer while others are graded. Linux bounds a group of processes with
a cgroup: each sandbox (course/kernels/sandbox.py) gets one of its own, made under the grader's own cgroup,
with `memory.max` (shared mappings, tmpfs pages and children included) and `pids.max` (threads count too).

Where it can, in this order:
1. cgroup v2, the grader's own group delegated to it with `memory` and `pids` (`systemd-run --scope -p
   Delegate=yes`, a service with `Delegate=yes`): its processes move to a leaf, the groups go beside it;
2. cgroup v2, a subtree the grader creates (`course-sandboxes`) under the nearest group above its own that
   already hands `memory` and `pids` to its children and that it may write: as root, the hierarchy's root
   when the grader's own group is given fewer controllers (a container runtime's or a service's group);
3. cgroup v1's `memory` and `pids` hierarchies writable by the grader (root on a v1 or hybrid machine).
Elsewhere there are no groups, `problem()` says why, and every per-process limit still holds. `said()` is
the one line the grader logs, once, either way (README, "A kernel bounded as a whole").

The sandbox's first process joins its group before it becomes bwrap (`wrap`), so everything the sandbox
starts is inside from its first instruction; a kernel forked into a sandbox joins it from the fork
server's middle process, before it enters the sandbox's namespaces (course/kernels/forkserver.py).
"""
import functools
import os
import signal
import time
from pathlib import Path

CONTROLLERS = ("memory", "pids")
PREFIX = "course-sandbox-"


class Group:
    """One sandbox's cgroup: a folder per hierarchy (one under cgroup v2, one per controller under v1)."""

    def __init__(self, folders, version):
        self.folders, self.version = folders, version

    @property
    def procs_files(self) -> list[str]:
        """The files a process writes its pid to in order to join the group."""
        return [str(folder / "cgroup.procs") for folder in self.folders]

    def pids(self) -> set[int]:
        found = set()
        for procs in self.procs_files:
            try:
                found |= {int(line) for line in Path(procs).read_text().split()}
            except OSError:
                pass
        return found

    def remove(self, timeout=10):
        """Kill what is left in the group, then remove it (a cgroup with processes cannot be removed)."""
        deadline = time.monotonic() + timeout
        while self.pids() and time.monotonic() < deadline:
            kill = self.folders[0] / "cgroup.kill"
            if self.version == 2 and kill.exists():
                kill.write_text("1")
            else:
                for pid in self.pids():
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            time.sleep(0.01)
        for folder in self.folders:
            try:
                folder.rmdir()
            except OSError:
                pass


def wrap(command, group) -> list[str]:
    """`command`, run by a shell that first moves itself into `group`: what it then execs, and every
    process started from there, is in the group from the start."""
    if group is None:
        return list(command)
    join = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'
    return ["/bin/sh", "-c", join, "sh", *group.procs_files, "--", *command]


def join(procs_files):
    """Move this process into a group (its children then start there)."""
    for procs in procs_files:
        with open(procs, "w") as file:
            file.write(str(os.getpid()))


_count = 0


def create(memory_bytes, max_processes) -> Group | None:
    """A new group under the grader's own, with its limits; None where groups are not available."""
    global _count
    places = _places()
    if isinstance(places, str):
        return None
    version, parents = places
    _count += 1
    name = f"{PREFIX}{os.getpid()}-{_count}"
    folders = []
    try:
        for parent in parents:
            folder = parent / name
            folder.mkdir()
            folders.append(folder)
        # (file, value, whether the machine must have it): no swapping past the memory limit either
        limits = [("memory.max", memory_bytes, True), ("memory.swap.max", 0, False)] if version == 2 else [
            ("memory.limit_in_bytes", memory_bytes, True), ("memory.memsw.limit_in_bytes", memory_bytes, False)]
        for file, value, required in [*limits, ("pids.max", max_processes, True)]:
            target = next((f / file for f in folders if (f / file).exists()), None)
            if target is not None:
                target.write_text(str(int(value)))
            elif required:
                raise OSError(f"no {file}")
        return Group(folders, version)
    except OSError:
        Group(folders, version).remove()
        return None


def problem() -> str | None:
    """Why sandboxes get no group of their own here, or None when they do."""
    places = _places()
    return places if isinstance(places, str) else None


def said(memory_bytes, max_processes) -> tuple[bool, str]:
    """(whether sandboxes are bounded as a whole here, the line that says which bound holds and why)."""
    from autograder.messages import message

    places = _places()
    if isinstance(places, str):
        return False, message("sandbox_no_group", reason=places)
    version, parents = places
    return True, message("sandbox_group", version=version, where=", ".join(map(str, parents)),
                         memory=f"{memory_bytes / 2**30:g}", processes=max_processes)


@functools.cache
def _places():
    """(version, the parent folder of new groups per hierarchy), or why there is none."""
    own = _own_cgroups()
    mounts = _mounts()
    if "" in own and "cgroup2" in mounts:
        found = _v2_place(Path(mounts["cgroup2"]), own[""])
        if isinstance(found, Path):
            return 2, [found]
        v2_problem = found
    else:
        v2_problem = "no cgroup v2"
    parents = []
    for controller in CONTROLLERS:
        if controller not in mounts or controller not in own:
            return f"{v2_problem}; no cgroup v1 {controller} hierarchy"
        parent = Path(mounts[controller]) / own[controller].lstrip("/")
        if not os.access(parent, os.W_OK):
            return f"{v2_problem}; cgroup v1 {controller} at {parent} is not writable"
        parents.append(parent)
    return 1, parents


def _v2_place(mount: Path, own: str) -> Path | str:
    """Where new groups go under cgroup v2 (see the module's note, 1 and 2), or why nowhere."""
    group = mount / own.lstrip("/")
    controllers = _read(group / "cgroup.controllers").split()
    missing = "/".join(c for c in CONTROLLERS if c not in controllers)
    reasons = [_v2_delegate(group) if not missing else f"cgroup v2 at {group} has no {missing} controller"]
    if reasons[0] is None:
        return group / "course-sandboxes"
    for above in [*group.parents[:len(group.relative_to(mount).parts)]]:  # the nearest first, up to the mount
        handed_down = _read(above / "cgroup.subtree_control").split()
        if not all(c in handed_down for c in CONTROLLERS):
            continue
        if not os.access(above, os.W_OK):
            reasons.append(f"{above} hands down {'/'.join(CONTROLLERS)} but is not writable by this user")
            break
        holder = above / "course-sandboxes"
        try:
            holder.mkdir(exist_ok=True)
            (holder / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in CONTROLLERS))
        except OSError as error:
            reasons.append(f"cgroup v2 at {holder}: {error.strerror}")
            break
        return holder
    else:
        reasons.append(f"no group above it hands down {'/'.join(CONTROLLERS)}")
    return "; ".join(reasons)


def _v2_delegate(parent) -> str | None:
    """Under v2 a cgroup that holds processes cannot hand controllers to its children ("no internal
    processes"). So, in the grader's own delegated cgroup (a `systemd-run --scope -p Delegate=yes`
    scope, say), its processes move to a leaf `course-grader`, the controllers are enabled, and new
    groups go under `course-sandboxes` beside it. None when that worked, else why not."""
    if not os.access(parent, os.W_OK) or not os.access(parent / "cgroup.subtree_control", os.W_OK):
        return f"cgroup v2 at {parent} is not delegated to this user"
    enable = " ".join(f"+{c}" for c in CONTROLLERS)
    try:
        if not all(c in _read(parent / "cgroup.subtree_control").split() for c in CONTROLLERS):
            leaf = parent / "course-grader"
            leaf.mkdir(exist_ok=True)
            for pid in _read(parent / "cgroup.procs").split():
                try:
                    (leaf / "cgroup.procs").write_text(pid)
                except ProcessLookupError:
                    pass
            (parent / "cgroup.subtree_control").write_text(enable)
        holder = parent / "course-sandboxes"
        holder.mkdir(exist_ok=True)
        (holder / "cgroup.subtree_control").write_text(enable)
    except OSError as error:
        return f"cgroup v2 at {parent}: cannot enable {'/'.join(CONTROLLERS)} for child groups ({error.strerror})"
    return None


def _own_cgroups() -> dict[str, str]:
    """controller → this process's cgroup path in that hierarchy ("" for cgroup v2)."""
    own = {}
    for line in _read(Path("/proc/self/cgroup")).splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            own[controller] = path
    return own


def _mounts() -> dict[str, str]:
    """"cgroup2" or a v1 controller → where its hierarchy is mounted."""
    mounts = {}
    for line in _read(Path("/proc/self/mountinfo")).splitlines():
        fields = line.split()
        separator = fields.index("-")
        kind, options, point = fields[separator + 1], fields[separator + 3], fields[4]
        if kind == "cgroup2":
            mounts.setdefault("cgroup2", point)
        elif kind == "cgroup":
            for option in options.split(","):
                if option in CONTROLLERS:
                    mounts.setdefault(option, point)
    return mounts


def _read(path) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def remove_stale_groups():
    """Remove the groups of graders that are gone (killed before they could remove theirs)."""
    places = _places()
    if isinstance(places, str):
        return
    for parent in places[1]:
        for folder in parent.glob(f"{PREFIX}*"):
            pid = folder.name.removeprefix(PREFIX).split("-")[0]
            if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                Group([folder], places[0]).remove(timeout=1)
