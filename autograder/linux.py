"""Process hygiene on Linux shared by the verdict (autograder/verdict.py), the grading kernel's hardening
(autograder/kernel.py) and the fork server (course/kernels/forkserver.py), before any of them runs code a
student wrote."""
import os
import resource

# prctl(2) options (linux/prctl.h), and seccomp's filter mode (linux/seccomp.h)
PR_SET_DUMPABLE = 4
PR_CAP_AMBIENT_CLEAR_ALL = 4  # an argument of PR_CAP_AMBIENT
PR_SET_SECCOMP = 22
PR_CAPBSET_DROP = 24
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
SECCOMP_MODE_FILTER = 2


def close_all_but(kept=()):
    """Close every descriptor of this process but 0, 1, 2 and `kept`. Exact: the descriptors are those
    /proc/self/fd lists (without /proc, every number below the hard limit of open files), so none stays
    open because of its number (a fixed bound of 65,536 left any above it open)."""
    kept = {0, 1, 2, *kept}
    try:
        found = sorted(int(name) for name in os.listdir("/proc/self/fd"))
    except OSError:  # no /proc: every number a descriptor can have
        found = None
    if found is None:
        bounds = sorted(fd for fd in kept if fd > 2)
        for low, high in zip([2, *bounds], [*bounds, resource.getrlimit(resource.RLIMIT_NOFILE)[1]]):
            os.closerange(low + 1, high)
        return
    for fd in found:
        if fd not in kept:
            try:
                os.close(fd)
            except OSError:  # the listing's own descriptor, closed already
                pass
