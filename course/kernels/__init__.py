"""How a grading kernel starts: in its own bubblewrap sandbox (sandbox.py), bounded as a whole (cgroups.py),
as a new process or forked from a warm server (forkserver.py), chosen by the kernel manager (manager.py)."""
