"""What runs first in every grading kernel, before any student code.

Kept free of nbgrader imports: it runs inside each kernel, where every import costs start-up time.
"""


def kernel_arguments(memory_bytes, cpu_seconds) -> list[str]:
    """Arguments for `Execute.extra_arguments`: every grading kernel runs `start_kernel` first."""
    setup = (f"import autograder.kernel as _course; "
             f"_course.start_kernel(memory_bytes={int(memory_bytes)}, cpu_seconds={int(cpu_seconds)})")
    return [f"--IPKernelApp.exec_lines=[{setup!r}]"]


def start_kernel(memory_bytes=None, cpu_seconds=None):
    """Run first in every grading kernel (`Execute.extra_arguments`): remember the real functions,
    then cap the kernel's memory and CPU time so one submission cannot take the machine down."""
    from . import integrity

    own_session_keyring()
    integrity.start_grading()
    limit_resources(memory_bytes, cpu_seconds)


KEYCTL = {"x86_64": 250, "aarch64": 219, "ppc64le": 311, "s390x": 280}  # the keyctl system call's number
KEYCTL_JOIN_SESSION_KEYRING = 1


def own_session_keyring():
    """Leave the grader's session keyring for a new, empty one. The grader's (an ssh or sudo login's, a
    systemd service's, a container's) may hold keys: inherited, the submission could read and revoke them;
    left, it keeps at most the right to see that the keyring exists."""
    import ctypes
    import platform

    number = KEYCTL.get(platform.machine())
    if number is not None:
        ctypes.CDLL(None, use_errno=True).syscall(number, KEYCTL_JOIN_SESSION_KEYRING, None)


def limit_resources(memory_bytes=None, cpu_seconds=None):
    """Cap this process's CPU time and memory (its forked children inherit the caps)."""
    import resource

    if cpu_seconds:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds))
    if memory_bytes:
        # RLIMIT_DATA counts the memory a process writes to (heap and private writable mappings), not
        # address space: CUDA's huge PROT_NONE reservations and the mapped libraries of the CUDA build
        # do not count, so the same limit holds with and without CUDA (RLIMIT_AS would break CUDA).
        resource.setrlimit(resource.RLIMIT_DATA, (memory_bytes, memory_bytes))
